"""CreatePartitions (key 37), v0-v3.

Raises a topic's partition count. Kafka's checks and messages: a topic named twice is
INVALID_REQUEST, an unknown one UNKNOWN_TOPIC_OR_PARTITION, a count that is not an increase
INVALID_PARTITIONS ("Topic already has N partition(s)." / "... would not be an increase."), and
manual assignments must cover exactly the new partitions with registered brokers, once each,
as many as the topic's replication factor (INVALID_REPLICA_ASSIGNMENT). ``validate_only``
checks and changes nothing. New partitions start empty with leader epoch 0.

A topic the caller may not ALTER gets TOPIC_AUTHORIZATION_FAILED (no message), as Kafka's
controller answers. Under a ``controller_mutation_rate`` quota a topic is charged its new
partitions once the counts are checked (before the assignments' broker ids, as Kafka's
controller; ``validate_only`` too); from v3 a topic met with the client's token bucket below zero
gets THROTTLING_QUOTA_EXCEEDED, before v3 it grows and the answer is only throttled.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, allowed_names
from kemu.broker.handlers import handler
from kemu.broker.throttling import controller_mutation_quota
from kemu.cluster.context import RequestContext
from kemu.cluster.model import EXCESSIVE_BATCH_MESSAGE, MAX_RECORDS_PER_USER_OP, Topic
from kemu.cluster.quota_enforcement import MutationQuota
from kemu.cluster.replica_assignment import AssignmentError, check_manual_assignment
from kemu.protocol.errors import ErrorCode, default_message
from kemu.protocol.views.create_partitions import (
    CreatePartitionsAssignmentView,
    CreatePartitionsRequestView,
    CreatePartitionsTopicView,
)

API_KEY = 37
STRICT_QUOTA_SINCE = 3  # the first version that knows THROTTLING_QUOTA_EXCEEDED


class PartitionsError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message or default_message(code)


@handler(API_KEY, 0, 3)
def handle(ctx: RequestContext, request: CreatePartitionsRequestView) -> Any:
    counts = Counter(topic.name for topic in request.topics)
    results = []
    reported: set[str] = set()
    quota = controller_mutation_quota(ctx, STRICT_QUOTA_SINCE)
    alterable = allowed_names(
        ctx, AclOperation.ALTER, ResourceType.TOPIC, (n for n, c in counts.items() if c == 1)
    )
    for topic in request.topics:
        name = topic.name
        if name in reported:
            continue
        code, message = ErrorCode.none, None
        if counts[name] > 1:
            reported.add(name)
            code, message = ErrorCode.invalid_request, "Duplicate topic name."
        elif name not in alterable:
            code = ErrorCode.topic_authorization_failed
        else:
            try:
                _grow(ctx, topic, request.validate_only, quota)
            except PartitionsError as error:
                code, message = error.code, error.message
        results.append(
            ctx.make(
                "CreatePartitionsTopicResult", name=name, error_code=code, error_message=message
            )
        )
    return ctx.respond(results=tuple(results))


def _grow(
    ctx: RequestContext,
    request: CreatePartitionsTopicView,
    validate_only: bool,
    quota: MutationQuota,
) -> None:
    cluster = ctx.cluster
    topic = cluster.topics.get(request.name)
    if topic is None:
        raise PartitionsError(ErrorCode.unknown_topic_or_partition)
    current = len(topic.partitions)
    if request.count == current:
        raise PartitionsError(
            ErrorCode.invalid_partitions, f"Topic already has {current} partition(s)."
        )
    if request.count - current > MAX_RECORDS_PER_USER_OP:
        raise PartitionsError(ErrorCode.policy_violation, EXCESSIVE_BATCH_MESSAGE)
    if request.count < current:
        raise PartitionsError(
            ErrorCode.invalid_partitions,
            f"The topic {topic.name} currently has {current} partition(s); {request.count} "
            "would not be an increase.",
        )
    requested = request.assignments
    if requested is not None and len(requested) != request.count - current:
        _assignments(ctx, topic, request.count, requested)  # Kafka's count mismatch, pre-quota
    if not quota.record(request.count - current, ctx.now_ms()):
        raise PartitionsError(ErrorCode.throttling_quota_exceeded)
    assignments = (
        _assignments(ctx, topic, request.count, requested) if requested is not None else None
    )
    if not validate_only:
        cluster.add_partitions(topic.name, request.count, assignments)


def _assignments(
    ctx: RequestContext,
    topic: Topic,
    count: int,
    requested: tuple[CreatePartitionsAssignmentView, ...],
) -> list[list[int]]:
    """The replicas of each partition added to ``topic`` to reach ``count``, as requested."""
    additional = count - len(topic.partitions)
    if len(requested) != additional:
        raise PartitionsError(
            ErrorCode.invalid_replica_assignment,
            f"Attempted to add {additional} additional partition(s), but only "
            f"{len(requested)} assignment(s) were specified.",
        )
    replicas: list[list[int]] = [list(assignment.broker_ids) for assignment in requested]
    replication_factor = len(topic.partitions[0].replicas)  # as Kafka: the first partition's
    try:
        for replica_ids in replicas:
            check_manual_assignment(ctx.cluster, replica_ids, replication_factor)
    except AssignmentError as error:
        raise PartitionsError(ErrorCode.invalid_replica_assignment, str(error)) from None
    return replicas
