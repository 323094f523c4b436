"""DescribeTopicPartitions (key 75), v0.

Topics (all of them when the list is empty) in name order with their partitions, at most
``response_partition_limit`` partitions per response (capped at 2000 as Kafka's
``max.request.partition.size.limit``, at least 1); ``next_cursor`` says where to continue, and a
request's ``cursor`` resumes there (the cursor's topic must be in a non-empty topic list and its
partition must not be negative, else every topic gets INVALID_REQUEST). Named topics that do not
exist get UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name). Every replica
is in sync; eligible leader replicas are empty.

Omissions: no authorizer, so every topic operation is reported allowed
(``kemu.broker.authorization``).
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import ResourceType, authorized_operations
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.cluster.model import INTERNAL_TOPICS, Topic, topic_name_problem
from kemu.protocol.errors import ErrorCode
from kemu.protocol.topic_ids import ZERO_UUID
from kemu.protocol.views.describe_topic_partitions import DescribeTopicPartitionsRequestView

API_KEY = 75
MAX_PARTITIONS_PER_RESPONSE = 2000  # Kafka's max.request.partition.size.limit default


@handler(API_KEY, 0, 0)
def handle(ctx: RequestContext, request: DescribeTopicPartitionsRequestView) -> Any:
    cluster = ctx.cluster
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    describe_all = not request.topics
    requested = cluster.topics if describe_all else [t.name for t in request.topics]
    names = sorted({name for name in requested if name >= cursor_topic})
    if cursor is not None and (
        (not describe_all and cursor.topic_name not in names) or cursor.partition_index < 0
    ):
        return ctx.respond(
            topics=tuple(_missing(ctx, t.name, ErrorCode.invalid_request) for t in request.topics),
            next_cursor=None,
        )
    remaining = max(min(MAX_PARTITIONS_PER_RESPONSE, request.response_partition_limit), 1)
    topics = []
    next_cursor = None
    for name in names:
        if remaining == 0:
            next_cursor = ctx.make("Cursor", topic_name=name, partition_index=0)
            break
        topic = cluster.topics.get(name)
        if topic is None:
            if not describe_all:
                code = (
                    ErrorCode.invalid_topic_exception
                    if topic_name_problem(name)
                    else ErrorCode.unknown_topic_or_partition
                )
                topics.append(_missing(ctx, name, code))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        end = min(len(topic.partitions), start + remaining)
        topics.append(_topic(ctx, topic, start, end))
        if end < len(topic.partitions):
            next_cursor = ctx.make("Cursor", topic_name=name, partition_index=end)
            break
        remaining -= max(end - start, 0)
    return ctx.respond(topics=tuple(topics), next_cursor=next_cursor)


def _topic(ctx: RequestContext, topic: Topic, start: int, end: int) -> Any:
    partitions = tuple(
        ctx.make(
            "DescribeTopicPartitionsResponsePartition",
            error_code=ErrorCode.none if p.leader_id >= 0 else ErrorCode.leader_not_available,
            partition_index=p.index,
            leader_id=p.leader_id,
            leader_epoch=p.leader_epoch,
            replica_nodes=tuple(p.replicas),
            isr_nodes=tuple(ctx.cluster.in_sync(p)),
            eligible_leader_replicas=(),
            last_known_elr=(),
            offline_replicas=tuple(r for r in p.replicas if r in ctx.cluster.stopped),
        )
        for p in topic.partitions[start:end]
    )
    return ctx.make(
        "DescribeTopicPartitionsResponseTopic",
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=partitions,
        topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, topic.name),
    )


def _missing(ctx: RequestContext, name: str, code: ErrorCode) -> Any:
    return ctx.make(
        "DescribeTopicPartitionsResponseTopic",
        error_code=code,
        name=name,
        topic_id=ZERO_UUID,
        is_internal=name in INTERNAL_TOPICS,
        partitions=(),
        # Kafka sets every listed topic's operations, known or not
        topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, name),
    )
