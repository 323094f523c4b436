"""CreateTopics (key 19), v2-v7.

Any broker accepts it (a KRaft broker forwards to the controller; kemu has one model). Per topic,
in Kafka's order and with its messages: a name given twice is INVALID_REQUEST, a bad name
INVALID_TOPIC_EXCEPTION (also a '.'/'_' collision with an existing topic), an existing one
TOPIC_ALREADY_EXISTS, null or invalid configs INVALID_CONFIG. ``num_partitions`` /
``replication_factor`` of -1 take the broker's ``num.partitions`` / ``default.replication.factor``;
other non-positive values are INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR, as is a factor
above the number of brokers. Manual assignments need both counts at -1 (INVALID_REQUEST
otherwise) and must name registered brokers, once each, the same number per partition, for
partitions 0..n-1 (INVALID_REPLICA_ASSIGNMENT). ``validate_only`` checks everything and creates
nothing. v5+ answers with the topic id, partition count, replication factor and every resolved
topic config (value, source, read-only, sensitive).

A request for more than 10,000 partitions in all gets POLICY_VIOLATION for every topic, as
Kafka's controller answers an excessively large operation.

Under a ``controller_mutation_rate`` quota each topic that passed every check is charged its
partitions (``validate_only`` too, as Kafka's controller does); from v6 a topic met with the
client's token bucket below zero gets THROTTLING_QUOTA_EXCEEDED, before v6 it is created and the
answer only throttled (``kemu/broker/throttling.py``).

Omissions: no create-topic policy and no authorizer; replica placement is kemu's round-robin,
not Kafka's rack-aware striping.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from kemu.broker.authorization import CLUSTER_NAME, AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.broker.throttling import controller_mutation_quota
from kemu.cluster import seeded
from kemu.cluster.config_resources import topic_config_entries, topic_config_problem
from kemu.cluster.context import RequestContext
from kemu.cluster.model import (
    EXCESSIVE_BATCH_MESSAGE,
    MAX_RECORDS_PER_USER_OP,
    Cluster,
    TopicError,
    topic_name_problem,
)
from kemu.cluster.quota_enforcement import MutationQuota
from kemu.cluster.replica_assignment import AssignmentError, check_manual_assignment
from kemu.protocol.errors import ErrorCode
from kemu.protocol.topic_ids import ZERO_UUID
from kemu.protocol.views.create_topics import CreatableTopicView, CreateTopicsRequestView

API_KEY = 19
STRICT_QUOTA_SINCE = 6  # the first version that knows THROTTLING_QUOTA_EXCEEDED
THROTTLED_MESSAGE = "The throttling quota has been exceeded."  # Errors.THROTTLING_QUOTA_EXCEEDED
CLUSTER_METADATA_TOPIC = "__cluster_metadata"


class CreateError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@handler(API_KEY, 2, 7)
def handle(ctx: RequestContext, request: CreateTopicsRequestView) -> Any:
    if _requested_partitions(ctx.cluster, request.topics) > MAX_RECORDS_PER_USER_OP:
        return ctx.respond(
            topics=tuple(
                _failure(ctx, topic.name, ErrorCode.policy_violation, EXCESSIVE_BATCH_MESSAGE)
                for topic in request.topics
            )
        )
    counts = Counter(topic.name for topic in request.topics)
    results = []
    reported: set[str] = set()
    quota = controller_mutation_quota(ctx, STRICT_QUOTA_SINCE)
    # KafkaApis: CREATE on the cluster, else on each topic.
    on_cluster = authorize(ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log=False)
    for topic in request.topics:
        if topic.name in reported:
            continue
        if not on_cluster and not authorize(
            ctx, AclOperation.CREATE, ResourceType.TOPIC, topic.name
        ):
            reported.add(topic.name)
            results.append(
                _failure(
                    ctx,
                    topic.name,
                    ErrorCode.topic_authorization_failed,
                    "Authorization failed.",
                )
            )
            continue
        if counts[topic.name] > 1:
            reported.add(topic.name)
            results.append(
                _failure(ctx, topic.name, ErrorCode.invalid_request, "Duplicate topic name.")
            )
            continue
        try:
            results.append(_create(ctx, topic, request.validate_only, quota))
        except CreateError as error:
            results.append(_failure(ctx, topic.name, error.code, error.message))
    return ctx.respond(topics=tuple(results))


def _create(
    ctx: RequestContext, topic: CreatableTopicView, validate_only: bool, quota: MutationQuota
) -> Any:
    cluster = ctx.cluster
    name = topic.name
    if name == CLUSTER_METADATA_TOPIC:
        raise CreateError(
            ErrorCode.invalid_request,
            f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.",
        )
    problem = topic_name_problem(name)
    if problem is not None:
        raise CreateError(ErrorCode.invalid_topic_exception, f"Topic name is invalid: {problem}")
    if name in cluster.topics:
        raise CreateError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    colliding = _colliding_topic(cluster, name)
    if colliding is not None:
        raise CreateError(
            ErrorCode.invalid_topic_exception,
            f"Topic '{name}' collides with existing topic: {colliding}",
        )
    configs = {config.name: config.value for config in topic.configs}
    problem = topic_config_problem(configs)
    if problem is not None:
        raise CreateError(ErrorCode.invalid_config, problem)
    explicit = {key: value for key, value in configs.items() if value is not None}
    assignments = _assignments(cluster, topic) if topic.assignments else None
    if assignments is not None:
        partitions, replication = len(assignments), len(assignments[0])
    else:
        partitions, replication = _counts(cluster, topic)
    if not quota.record(partitions, ctx.now_ms()):
        raise CreateError(ErrorCode.throttling_quota_exceeded, THROTTLED_MESSAGE)
    topic_id = seeded.new_uuid()
    if not validate_only:
        try:
            created = cluster.create_topic(
                name, partitions, replication, explicit, assignments=assignments
            )
        except TopicError as error:
            raise CreateError(error.code, error.message) from None
        topic_id = created.topic_id
    return ctx.make(
        "CreatableTopicResult",
        name=name,
        topic_id=topic_id,
        error_code=ErrorCode.none,
        error_message=None,
        topic_config_error_code=ErrorCode.none,
        num_partitions=partitions,
        replication_factor=replication,
        configs=_configs(ctx, explicit) if ctx.version >= 5 else (),
    )


def _requested_partitions(cluster: Cluster, topics: Sequence[CreatableTopicView]) -> int:
    """Partitions the request would create, checked before any work (a huge count must not
    stall the process)."""
    default = cluster.config.get_int("num.partitions")
    total = 0
    for topic in topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += default
        else:
            total += max(topic.num_partitions, 0)
    return total


def _colliding_topic(cluster: Cluster, name: str) -> str | None:
    """Kafka refuses names that differ from an existing one only by '.' versus '_' (they would
    share metric names)."""
    if "." not in name and "_" not in name:
        return None
    unified = name.replace(".", "_")
    for existing in cluster.topics:
        if existing != name and existing.replace(".", "_") == unified:
            return existing
    return None


def _counts(cluster: Cluster, topic: CreatableTopicView) -> tuple[int, int]:
    if topic.replication_factor < -1 or topic.replication_factor == 0:
        raise CreateError(
            ErrorCode.invalid_replication_factor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise CreateError(
            ErrorCode.invalid_partitions,
            "Number of partitions was set to an invalid non-positive value.",
        )
    partitions = (
        cluster.config.get_int("num.partitions")
        if topic.num_partitions == -1
        else topic.num_partitions
    )
    replication = (
        cluster.config.get_int("default.replication.factor")
        if topic.replication_factor == -1
        else topic.replication_factor
    )
    brokers = len(cluster.nodes)
    if replication > brokers:
        raise CreateError(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {replication} time(s): The target replication "
            f"factor of {replication} cannot be reached because only {brokers} broker(s) are "
            "registered or some brokers have all their log directories cordoned.",  # Kafka 4.4
        )
    return partitions, replication


def _assignments(cluster: Cluster, topic: CreatableTopicView) -> list[list[int]]:
    if topic.replication_factor != -1:
        raise CreateError(
            ErrorCode.invalid_request,
            "A manual partition assignment was specified, but replication factor was not set "
            "to -1.",
        )
    if topic.num_partitions != -1:
        raise CreateError(
            ErrorCode.invalid_request,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    by_index: dict[int, list[int]] = {}
    replication: int | None = None
    try:
        for assignment in topic.assignments:
            index = assignment.partition_index
            if index in by_index:
                raise CreateError(
                    ErrorCode.invalid_replica_assignment,
                    f"Found multiple manual partition assignments for partition {index}",
                )
            replicas: list[int] = list(assignment.broker_ids)
            check_manual_assignment(cluster, replicas, replication)
            replication = len(replicas)
            by_index[index] = replicas
    except AssignmentError as error:
        raise CreateError(ErrorCode.invalid_replica_assignment, str(error)) from None
    if sorted(by_index) != list(range(len(by_index))):
        raise CreateError(
            ErrorCode.invalid_replica_assignment,
            "partitions should be a consecutive 0-based integer sequence",
        )
    return [by_index[i] for i in range(len(by_index))]


def _configs(ctx: RequestContext, explicit: dict[str, str]) -> tuple[Any, ...]:
    return tuple(
        ctx.make(
            "CreatableTopicConfigs",
            name=entry.name,
            value=None if entry.is_sensitive else entry.value,
            read_only=entry.read_only,
            config_source=int(entry.source),
            is_sensitive=entry.is_sensitive,
        )
        for entry in topic_config_entries(ctx.cluster.config, explicit)
    )


def _failure(ctx: RequestContext, name: str, code: ErrorCode, message: str | None) -> Any:
    return ctx.make(
        "CreatableTopicResult",
        name=name,
        topic_id=ZERO_UUID,
        error_code=code,
        error_message=message,
        topic_config_error_code=ErrorCode.none,
        num_partitions=-1,
        replication_factor=-1,
        configs=(),
    )
