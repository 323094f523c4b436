"""StreamsGroupDescribe (key 89), v0-v1.

Each KIP-1071 streams group's epoch, assignment epoch, state (Empty, NotReady, Assigning,
Reconciling, Stable), its topology (epoch; the subtopologies with their source, repartition and
changelog topics and the partition counts decided for them, null while the configuration failed
for missing or wrongly partitioned topics) and every member: id, epoch, instance and rack ids,
client id and host, topology epoch, process id, endpoint, client tags, current and target
assignment (active, standby and warm-up tasks). Unknown ids and groups of another type get
GROUP_ID_NOT_FOUND; an empty id INVALID_GROUP_ID.

v1 (Kafka 4.4) adds the assignor's name ("sticky") and the KIP-1331 topology description, which
kemu does not store (null, status 0), as a Kafka without a description plugin.

TaskOffsets / TaskEndOffsets are what each member last reported in its heartbeats (in memory,
empty after a restart until it reports again), by subtopology and partition. Warm-up tasks are
listed in the assignments, always empty as in Kafka 4.4.0, which assigns none.

Authorization, as KafkaApis: a group the principal may not DESCRIBE is GROUP_AUTHORIZATION_FAILED
(those answers first); a group whose topology names a topic the principal may not DESCRIBE is
TOPIC_AUTHORIZATION_FAILED ("The described group uses topics that the client is not authorized
to describe.") without members or topology; AuthorizedOperations from the ACLs. Error answers
carry Kafka's defaults (state "", epochs 0).
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.authorization import (
    OMITTED,
    AclOperation,
    ResourceType,
    allowed_names,
    enabled,
    operations_if,
)
from kemu.broker.handlers import handler
from kemu.broker.handlers._groups import describe_groups, registered
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.streams.assignor import EMPTY, Task, Tasks, TaskTuple
from kemu.coordinator.group.streams.model import NO_TASK_OFFSETS, MemberTaskOffsets, StreamsGroup
from kemu.coordinator.group.streams.topology import TopicInfo
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.streams_group_describe import StreamsGroupDescribeRequestView

API_KEY = 89
ASSIGNOR = "sticky"  # Kafka's default group.streams.assignors
UNDESCRIBABLE = "The described group uses topics that the client is not authorized to describe."


@handler(API_KEY, 0, 1)
def handle(ctx: RequestContext, request: StreamsGroupDescribeRequestView) -> Any:
    operations = bool(request.include_authorized_operations)
    groups = describe_groups(
        ctx,
        request.group_ids,
        find=registered(ctx, StreamsGroup, "streams"),
        describe=lambda group: _describe(ctx, group, operations),
        error=lambda group_id, code, message: _error(ctx, group_id, code, message),
    )
    if enabled(ctx):  # refused groups carry an error: left as they are
        groups = _hide_undescribable_topics(ctx, groups)
    return ctx.respond(throttle_time=datetime.timedelta(0), groups=tuple(groups))


def _hide_undescribable_topics(ctx: RequestContext, groups: list[Any]) -> list[Any]:
    """KafkaApis: a described group whose topology names a topic the principal may not DESCRIBE
    is answered TOPIC_AUTHORIZATION_FAILED, without members or topology."""
    topics_of = {
        id(group): {
            name
            for sub in group.topology.subtopologies
            for name in (
                *sub.source_topics,
                *sub.repartition_sink_topics,
                *(t.name for t in sub.repartition_source_topics),
                *(t.name for t in sub.state_changelog_topics),
            )
        }
        for group in groups
        if group.error_code == ErrorCode.none
        and group.topology is not None
        and group.topology.subtopologies is not None
    }
    wanted = set().union(*topics_of.values()) if topics_of else set()
    allowed = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, wanted)
    return [
        (
            _error(ctx, group.group_id, ErrorCode.topic_authorization_failed, UNDESCRIBABLE)
            if not topics_of.get(id(group), set()) <= allowed
            else group
        )
        for group in groups
    ]


def _error(ctx: RequestContext, group_id: str, code: ErrorCode, message: str | None) -> Any:
    # Kafka answers a new DescribedGroup with the error: every other field at its default.
    return ctx.make(
        "DescribedGroup",
        error_code=code,
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        topology=None,
        members=(),
        authorized_operations=OMITTED,
    )


def _describe(ctx: RequestContext, group: StreamsGroup, operations: bool) -> Any:
    def reported(member_id: str) -> MemberTaskOffsets:
        return group.task_offsets.get(member_id, NO_TASK_OFFSETS)

    return ctx.make(
        "DescribedGroup",
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group.group_id,
        group_state=group.state_name,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        topology=_topology(ctx, group),
        members=tuple(
            ctx.make(
                "Member",
                member_id=member.member_id,
                member_epoch=member.member_epoch,
                instance_id=member.instance_id,
                rack_id=member.rack_id,
                client_id=member.client_id,
                client_host=member.client_host,
                topology_epoch=member.topology_epoch,
                process_id=member.process_id,
                user_endpoint=(
                    ctx.make("Endpoint", host=member.user_endpoint[0], port=member.user_endpoint[1])
                    if member.user_endpoint is not None
                    else None
                ),
                client_tags=tuple(
                    ctx.make("KeyValue", key=key, value=value) for key, value in member.client_tags
                ),
                task_offsets=_task_offsets(ctx, reported(member.member_id).offsets),
                task_end_offsets=_task_offsets(ctx, reported(member.member_id).end_offsets),
                assignment=_assignment(ctx, member.assigned),
                target_assignment=_assignment(ctx, group.target.get(member.member_id, EMPTY)),
                is_classic=False,
            )
            for member in group.members.values()
        ),
        authorized_operations=operations_if(operations, ctx, ResourceType.GROUP, group.group_id),
        **({"assignor_name": ASSIGNOR} if ctx.version >= 1 else {}),
    )


def _topology(ctx: RequestContext, group: StreamsGroup) -> Any:
    topology = group.topology
    if topology is None:
        return ctx.make("Topology", epoch=-1, subtopologies=None)
    configured = group.configured
    if configured is None or not configured.has_subtopologies:
        return ctx.make("Topology", epoch=topology.epoch, subtopologies=None)
    counts = configured.partitions

    def info(topic: TopicInfo) -> Any:
        return ctx.make(
            "TopicInfo",
            name=topic.name,
            partitions=counts.get(topic.name, topic.partitions),
            replication_factor=topic.replication_factor,
            topic_configs=tuple(
                ctx.make("KeyValue", key=key, value=value) for key, value in topic.configs
            ),
        )

    return ctx.make(
        "Topology",
        epoch=topology.epoch,
        subtopologies=tuple(
            ctx.make(
                "Subtopology",
                subtopology_id=sub.subtopology_id,
                source_topics=tuple(sub.source_topics),
                repartition_sink_topics=tuple(sub.repartition_sink_topics),
                state_changelog_topics=tuple(info(t) for t in sub.state_changelog_topics),
                repartition_source_topics=tuple(info(t) for t in sub.repartition_source_topics),
            )
            for sub in topology.subtopologies
        ),
    )


def _assignment(ctx: RequestContext, tasks: TaskTuple) -> Any:
    return ctx.make(
        "Assignment",
        active_tasks=_task_ids(ctx, tasks.active),
        standby_tasks=_task_ids(ctx, tasks.standby),
        warmup_tasks=_task_ids(ctx, tasks.warmup),
    )


def _task_offsets(ctx: RequestContext, offsets: dict[Task, int]) -> tuple[Any, ...]:
    return tuple(
        ctx.make("TaskOffset", subtopology_id=sub, partition=partition, offset=offset)
        for (sub, partition), offset in sorted(offsets.items())
    )


def _task_ids(ctx: RequestContext, tasks: Tasks) -> tuple[Any, ...]:
    by_sub: dict[str, list[int]] = {}
    for sub, partition in sorted(tasks):
        by_sub.setdefault(sub, []).append(partition)
    return tuple(
        ctx.make("TaskIds", subtopology_id=sub, partitions=tuple(parts))
        for sub, parts in by_sub.items()
    )
