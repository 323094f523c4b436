"""Metadata (key 3), v0-v13.

Brokers, cluster id, controller and topics by name or (v12+) topic id. A null topic list (v1+;
an empty one at v0) means every topic. Unknown topics are created on the spot when the request
allows it (v4+, always before) and ``auto.create.topics.enable`` is true, with ``num.partitions``
and ``default.replication.factor``; otherwise UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID for
ids). Every replica is reported in sync: kemu keeps one copy.

Omissions: no authorizer, so authorized operations report everything allowed.
"""

from __future__ import annotations

import uuid
from typing import Any

from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.cluster.model import INTERNAL_TOPICS, Cluster, Topic, TopicError, validate_topic_name
from kemu.protocol.errors import ErrorCode

API_KEY = 3
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
ALL_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
NULL_TOPIC_ID = uuid.UUID(int=0)


def auto_create(cluster: Cluster, name: str) -> Topic:
    partitions = cluster.config.get_int("num.partitions")
    replication = min(cluster.config.get_int("default.replication.factor"), len(cluster.nodes))
    return cluster.create_topic(name, partitions, replication)


@handler(API_KEY, 0, 13)
async def handle(ctx: RequestContext, request: Any) -> Any:
    cluster = ctx.cluster
    wanted = request.topics
    if ctx.version == 0 and not wanted:
        wanted = None
    allow_auto = getattr(request, "allow_auto_topic_creation", True)
    include_ops = getattr(request, "include_topic_authorized_operations", False)
    operations = ALL_TOPIC_OPERATIONS if include_ops else AUTHORIZED_OPERATIONS_OMITTED

    topics = []
    if wanted is None:
        topics = [_topic(ctx, t, operations) for t in list(cluster.topics.values())]
    else:
        for entry in wanted:
            topics.append(_lookup(ctx, entry, allow_auto, operations))

    brokers = tuple(
        ctx.make("MetadataResponseBroker", node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
        for n in cluster.nodes.values()
    )
    return ctx.respond(
        brokers=brokers,
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        topics=tuple(topics),
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _lookup(ctx: RequestContext, entry: Any, allow_auto: bool, operations: int) -> Any:
    cluster = ctx.cluster
    name = entry.name
    topic_id = getattr(entry, "topic_id", None)
    # Java's describeTopics by id sends an empty name rather than null.
    if not name and topic_id is not None and topic_id != NULL_TOPIC_ID:
        found = cluster.topics_by_id.get(topic_id)
        if found is None:
            return _error(ctx, None, topic_id, ErrorCode.unknown_topic_id)
        return _topic(ctx, found, operations)
    if name is None:
        return _error(ctx, None, NULL_TOPIC_ID, ErrorCode.invalid_request)
    assert isinstance(name, str)
    found = cluster.topics.get(name)
    if found is not None:
        return _topic(ctx, found, operations)
    try:
        validate_topic_name(name)
    except TopicError:
        return _error(ctx, name, NULL_TOPIC_ID, ErrorCode.invalid_topic_exception)
    if (
        allow_auto
        and cluster.config.get_bool("auto.create.topics.enable")
        and (name not in INTERNAL_TOPICS)
    ):
        try:
            return _topic(ctx, auto_create(cluster, name), operations)
        except TopicError as error:
            return _error(ctx, name, NULL_TOPIC_ID, error.code)
    return _error(ctx, name, NULL_TOPIC_ID, ErrorCode.unknown_topic_or_partition)


def _error(ctx: RequestContext, name: str | None, topic_id: uuid.UUID, code: ErrorCode) -> Any:
    return ctx.make(
        "MetadataResponseTopic",
        error_code=code,
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _topic(ctx: RequestContext, topic: Topic, operations: int) -> Any:
    partitions = tuple(
        ctx.make(
            "MetadataResponsePartition",
            error_code=ErrorCode.none,
            partition_index=p.index,
            leader_id=p.leader_id,
            leader_epoch=p.leader_epoch,
            replica_nodes=tuple(p.replicas),
            isr_nodes=tuple(p.replicas),
            offline_replicas=(),
        )
        for p in topic.partitions
    )
    return ctx.make(
        "MetadataResponseTopic",
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=partitions,
        topic_authorized_operations=operations,
    )
