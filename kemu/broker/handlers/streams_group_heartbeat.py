"""StreamsGroupHeartbeat (key 88), v0-v1.

KIP-1071 streams groups (``kemu.coordinator.group.streams.group``): a Kafka Streams member joins
with epoch 0, its member id, process id and the application's topology; the coordinator keeps
the group's topology, configures it against the topics and assigns tasks (active, and standby
with ``streams.num.standby.replicas``) stickily; -1 leaves. Statuses as in Kafka 4.4:
STALE_TOPOLOGY, MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS
(the missing repartition and changelog topics are created by this broker before it answers, with
the configs the topology gives, as Kafka's ``KafkaApis`` does), SHUTDOWN_APPLICATION. The interval
answered is ``streams.heartbeat.interval.ms``; sessions expire after
``streams.session.timeout.ms`` (group configs, broker synonyms ``group.streams.*``).

Errors: INVALID_REQUEST (Kafka's request checks, topology updates, source topic regexes),
STREAMS_INVALID_TOPOLOGY, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID,
FENCED_INSTANCE_ID, GROUP_ID_NOT_FOUND (no such group for a heartbeat or a leave, a join
creates it; a group of another type), GROUP_MAX_SIZE_REACHED (``group.streams.max.size``: a
join from a member id the group does not know, unless it names an instance id a member holds).

v1 (Kafka 4.4, KIP-1331) answers ``TopologyDescriptionRequired`` false: kemu has no topology
description plugin, as a Kafka without ``group.streams.topology.description.plugin.class``.

Groups are written to ``__consumer_offsets`` as Kafka's streams records (types 17, 19-23) before
the answer and read back at start, so members carry on across a restart with their ids, epochs
and tasks.

Static members (an instance id) may leave for now with -2, keeping their tasks until their
session expires; the instance id joining again under a new member id takes them over without a
rebalance (UNRELEASED_INSTANCE_ID while another member holds it, FENCED_INSTANCE_ID for a
heartbeat from another member id).

TaskOffsets / TaskEndOffsets (the changelog offsets a member reports every
``streams.task.offset.interval.ms``) are kept per member in memory, as Kafka keeps them (a null
list keeps the last one, a task named twice is INVALID_REQUEST); the assignor ranks the members
holding a task's state by them (a restarted instance gets its tasks back) and StreamsGroupDescribe
shows them. Warm-up tasks are never assigned, as Kafka 4.4.0 assigns none
(``streams_assignor``).

Authorization, as KafkaApis: READ on the group (GROUP_AUTHORIZATION_FAILED); a topology naming a
Kafka internal topic or an invalid topic name is STREAMS_INVALID_TOPOLOGY with Kafka's message;
DESCRIBE on every topic it names (TOPIC_AUTHORIZATION_FAILED); missing internal topics are
created only with CREATE on the cluster or on each of them, else none is and the
MISSING_INTERNAL_TOPICS status ends "Unauthorized to CREATE on topics ...".

Answers are shaped as Kafka 4.4.0's (compared on the wire, test_streams_assignor_kafka.py):
Status is an empty array when there is none; an error answer is a new response with the code
(and the coordinator's message), everything else at its default (member id "", v1
AcceptableRecoveryLag -1); v0 answers AcceptableRecoveryLag 0, as Kafka fills only v1's int64
field.

Omissions: StreamsGroupTopologyDescriptionUpdate (KIP-1331); rack-aware standby placement;
regex source topics; ``streams.initial.rebalance.delay.ms`` and ``streams.assignment.interval.ms``
(kemu assigns at once, on every new group epoch); the interval and recovery lag answered are the
broker's ``group.streams.task.offset.interval.ms`` / ``group.streams.acceptable.recovery.lag``,
not per-group configs.
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.authorization import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    allowed_names,
    authorize,
    enabled,
)
from kemu.broker.handlers import handler
from kemu.broker.handlers._groups import heartbeat_fields
from kemu.cluster.context import RequestContext
from kemu.cluster.model import INTERNAL_TOPICS, topic_name_problem
from kemu.coordinator.group import config_resource  # noqa: F401 - registers the GROUP resource
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.streams.assignor import Tasks, TaskTuple
from kemu.coordinator.group.streams.model import StreamsHeartbeat
from kemu.coordinator.group.streams.topology import (
    CopartitionGroup,
    Subtopology,
    TopicInfo,
    Topology,
)
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.streams_group_heartbeat import (
    StreamsGroupHeartbeatRequestView,
    TaskIdsView,
    TaskOffsetView,
    TopicInfoView,
    TopologyView,
)

API_KEY = 88


@handler(API_KEY, 0, 1)
def handle(ctx: RequestContext, request: StreamsGroupHeartbeatRequestView) -> Any:
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _error(ctx, ErrorCode.group_authorization_failed, None)
    if request.topology is not None:
        refusal = _topology_refusal(ctx, request.topology)
        if refusal is not None:
            return refusal
    owned = None
    task_lists = (request.active_tasks, request.standby_tasks, request.warmup_tasks)
    if any(tasks is not None for tasks in task_lists):
        owned = TaskTuple(
            _tasks(request.active_tasks),
            _tasks(request.standby_tasks),
            _tasks(request.warmup_tasks),
        )
    heartbeat = StreamsHeartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        endpoint_information_epoch=request.endpoint_information_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout // datetime.timedelta(milliseconds=1),
        topology=_topology(request.topology) if request.topology is not None else None,
        owned=owned,
        partial_task_lists=owned is not None and any(tasks is None for tasks in task_lists),
        process_id=request.process_id,
        user_endpoint=(
            (request.user_endpoint.host, int(request.user_endpoint.port))
            if request.user_endpoint is not None
            else None
        ),
        client_tags=(
            tuple((kv.key, kv.value) for kv in request.client_tags)
            if request.client_tags is not None
            else None
        ),
        shutdown_application=request.shutdown_application,
        client_id=ctx.header.client_id or "",
        client_host=f"/{ctx.client_host}",
        task_offsets=_task_offsets(request.task_offsets),
        task_end_offsets=_task_offsets(request.task_end_offsets),
    )
    try:
        result = group_coordinator(ctx.runtime).streams_heartbeat(
            heartbeat, lambda names: _not_creatable(ctx, names)
        )
    except GroupError as error:
        return _error(ctx, error.code, error.message)
    assignment = result.assignment
    return ctx.respond(
        throttle_time=datetime.timedelta(0),
        **heartbeat_fields(result),
        # Kafka 4.4.0 fills only v1's int64 field; v0's int32 one stays 0 on the wire.
        acceptable_recovery_lag=result.acceptable_recovery_lag if ctx.version >= 1 else 0,
        task_offset_interval=datetime.timedelta(milliseconds=result.task_offset_interval_ms),
        status=tuple(
            ctx.make("Status", status_code=code, status_detail=detail)
            for code, detail in result.status
        ),
        active_tasks=_task_ids(ctx, assignment.active) if assignment is not None else None,
        standby_tasks=_task_ids(ctx, assignment.standby) if assignment is not None else None,
        warmup_tasks=_task_ids(ctx, assignment.warmup) if assignment is not None else None,
        endpoint_information_epoch=result.endpoint_information_epoch,
        partitions_by_user_endpoint=(
            _endpoints(ctx, result.endpoints, request.group_id)
            if result.endpoints is not None
            else None
        ),
        **_v1(ctx),
    )


def _error(ctx: RequestContext, code: ErrorCode, message: str | None) -> Any:
    """An error answer as Kafka builds it: a new response with the code (and the coordinator's
    message), every other field at its default (member id "", status empty, v1's
    AcceptableRecoveryLag -1)."""
    return ctx.respond(
        throttle_time=datetime.timedelta(0),
        error_code=code,
        error_message=message,
        member_id="",
        member_epoch=0,
        heartbeat_interval=datetime.timedelta(0),
        acceptable_recovery_lag=-1 if ctx.version >= 1 else 0,
        task_offset_interval=datetime.timedelta(0),
        status=(),
        active_tasks=None,
        standby_tasks=None,
        warmup_tasks=None,
        endpoint_information_epoch=0,
        partitions_by_user_endpoint=None,
        **_v1(ctx),
    )


def _topology_refusal(ctx: RequestContext, topology: TopologyView) -> Any | None:
    """KafkaApis' checks of a topology before the coordinator sees it: no Kafka internal topic,
    only valid topic names (STREAMS_INVALID_TOPOLOGY), and DESCRIBE on every topic it names
    (TOPIC_AUTHORIZATION_FAILED)."""
    required = list(
        dict.fromkeys(
            name
            for sub in topology.subtopologies
            for name in (
                *sub.source_topics,
                *sub.repartition_sink_topics,
                *(t.name for t in sub.repartition_source_topics),
                *(t.name for t in sub.state_changelog_topics),
            )
        )
    )
    prohibited = [name for name in required if name in INTERNAL_TOPICS]
    if prohibited:
        return _error(
            ctx,
            ErrorCode.streams_invalid_topology,
            f"Use of Kafka internal topics {','.join(prohibited)} in a Kafka Streams topology "
            "is prohibited.",
        )
    invalid = [name for name in required if topic_name_problem(name) is not None]
    if invalid:
        return _error(
            ctx,
            ErrorCode.streams_invalid_topology,
            f"Topic names {','.join(invalid)} are not valid topic names.",
        )
    if required and enabled(ctx):
        described = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, required)
        if len(described) < len(required):
            return _error(ctx, ErrorCode.topic_authorization_failed, None)
    return None


def _not_creatable(ctx: RequestContext, names: list[str]) -> list[str]:
    """The internal topics the principal may not create: none with CREATE on the cluster, else
    those without CREATE on the topic (KafkaApis, before handing them to auto-creation)."""
    if not enabled(ctx) or authorize(
        ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log=False
    ):
        return []
    allowed = allowed_names(ctx, AclOperation.CREATE, ResourceType.TOPIC, names)
    return [name for name in names if name not in allowed]


def _v1(ctx: RequestContext) -> dict[str, Any]:
    return {"topology_description_required": False} if ctx.version >= 1 else {}


def _task_offsets(
    entries: tuple[TaskOffsetView, ...] | None,
) -> tuple[tuple[str, int, int], ...] | None:
    if entries is None:
        return None
    return tuple((e.subtopology_id, int(e.partition), int(e.offset)) for e in entries)


def _tasks(task_ids: tuple[TaskIdsView, ...] | None) -> Tasks:
    if task_ids is None:
        return frozenset()
    return frozenset((t.subtopology_id, int(p)) for t in task_ids for p in t.partitions)


def _topic_info(info: TopicInfoView) -> TopicInfo:
    return TopicInfo(
        name=info.name,
        partitions=int(info.partitions),
        replication_factor=int(info.replication_factor),
        configs=tuple((kv.key, kv.value) for kv in info.topic_configs),
    )


def _topology(topology: TopologyView) -> Topology:
    return Topology(
        epoch=int(topology.epoch),
        subtopologies=tuple(
            Subtopology(
                subtopology_id=sub.subtopology_id,
                source_topics=tuple(sub.source_topics),
                source_topic_regex=tuple(sub.source_topic_regex),
                state_changelog_topics=tuple(_topic_info(t) for t in sub.state_changelog_topics),
                repartition_sink_topics=tuple(sub.repartition_sink_topics),
                repartition_source_topics=tuple(
                    _topic_info(t) for t in sub.repartition_source_topics
                ),
                copartition_groups=tuple(
                    CopartitionGroup(
                        tuple(int(i) for i in group.source_topics),
                        tuple(int(i) for i in group.source_topic_regex),
                        tuple(int(i) for i in group.repartition_source_topics),
                    )
                    for group in sub.copartition_groups
                ),
            )
            for sub in topology.subtopologies
        ),
    )


def _task_ids(ctx: RequestContext, tasks: Tasks) -> tuple[Any, ...]:
    by_sub: dict[str, list[int]] = {}
    for sub, partition in sorted(tasks):
        by_sub.setdefault(sub, []).append(partition)
    return tuple(
        ctx.make("TaskIds", subtopology_id=sub, partitions=tuple(parts))
        for sub, parts in by_sub.items()
    )


def _endpoints(
    ctx: RequestContext, endpoints: dict[tuple[str, int], TaskTuple], group_id: str
) -> tuple[Any, ...]:
    topics = group_coordinator(ctx.runtime).streams_task_topics(group_id)
    answers = []
    for (host, port), tasks in sorted(endpoints.items()):
        answers.append(
            ctx.make(
                "EndpointToPartitions",
                user_endpoint=ctx.make("Endpoint", host=host, port=port),
                active_partitions=_partitions(ctx, tasks.active, topics),
                standby_partitions=_partitions(ctx, tasks.standby, topics),
            )
        )
    return tuple(answers)


def _partitions(ctx: RequestContext, tasks: Tasks, topics: dict[str, list[str]]) -> tuple[Any, ...]:
    by_topic: dict[str, list[int]] = {}
    for sub, partition in sorted(tasks):
        for topic in topics.get(sub, []):
            by_topic.setdefault(topic, []).append(partition)
    return tuple(
        ctx.make("TopicPartition", topic=topic, partitions=tuple(sorted(parts)))
        for topic, parts in sorted(by_topic.items())
    )
