"""What a StreamsGroupHeartbeat may carry, as Kafka 4.4.0 checks it: the request's fields
(``throwIfStreamsGroupHeartbeatRequestIsInvalid``, INVALID_REQUEST), the topology
(``throwIfInvalidTopology``, STREAMS_INVALID_TOPOLOGY), the tasks a member says it owns
(``throwIfRequestContainsInvalidTasks``) and the task offsets it reports
(``MemberTaskOffsets.update``).
"""

from __future__ import annotations

from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.streams.assignor import Task, TaskTuple
from kemu.coordinator.group.streams.model import (
    JOIN_EPOCH,
    STATIC_LEAVE_EPOCH,
    MemberTaskOffsets,
    StreamsHeartbeat,
)
from kemu.coordinator.group.streams.topology import ConfiguredTopology, invalid_topology_reason
from kemu.protocol.errors import ErrorCode


def validate(request: StreamsHeartbeat) -> None:
    """Kafka's ``throwIfStreamsGroupHeartbeatRequestIsInvalid`` (INVALID_REQUEST) and
    ``throwIfInvalidTopology`` (STREAMS_INVALID_TOPOLOGY)."""

    def invalid(message: str) -> GroupError:
        return GroupError(ErrorCode.invalid_request, message)

    if not request.member_id:
        raise invalid("MemberId can't be empty.")
    if not request.group_id:
        raise invalid("GroupId can't be empty.")
    if request.instance_id is not None and not request.instance_id:
        raise invalid("InstanceId can't be empty.")
    if request.rack_id is not None and not request.rack_id:
        raise invalid("RackId can't be empty.")
    if request.topology is not None:
        for sub in request.topology.subtopologies:
            if sub.source_topic_regex:
                raise invalid("Regular expressions for source topics are not supported yet.")
    if request.member_epoch == JOIN_EPOCH:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.owned is not None:
            for role, tasks in (
                ("ActiveTasks", request.owned.active),
                ("StandbyTasks", request.owned.standby),
                ("WarmupTasks", request.owned.warmup),
            ):
                if tasks:
                    raise invalid(f"{role} must be empty when (re-)joining.")
        if request.topology is None:
            raise invalid("Topology must be non-null when (re-)joining.")
        reason = invalid_topology_reason(request.topology)
        if reason is not None:
            raise GroupError(ErrorCode.streams_invalid_topology, reason)
    elif request.member_epoch == STATIC_LEAVE_EPOCH:
        if request.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif request.member_epoch < STATIC_LEAVE_EPOCH:
        raise invalid(
            f"MemberEpoch is {request.member_epoch}, but must be greater than or equal to -2."
        )
    if request.partial_task_lists:
        raise invalid("If one task-type is non-null, all must be non-null.")
    if request.member_epoch != JOIN_EPOCH and request.topology is not None:
        raise invalid("Topology can only be provided when (re-)joining.")


def updated_task_offsets(
    reported: MemberTaskOffsets, request: StreamsHeartbeat
) -> MemberTaskOffsets:
    """Kafka's ``MemberTaskOffsets.update``: each list replaces its map when sent (null keeps
    it); a task named twice is INVALID_REQUEST."""
    if request.task_offsets is None and request.task_end_offsets is None:
        return reported
    return MemberTaskOffsets(
        (
            reported.offsets
            if request.task_offsets is None
            else offsets_by_task(request.task_offsets)
        ),
        (
            reported.end_offsets
            if request.task_end_offsets is None
            else offsets_by_task(request.task_end_offsets)
        ),
    )


def offsets_by_task(entries: tuple[tuple[str, int, int], ...]) -> dict[Task, int]:
    by_task: dict[Task, int] = {}
    for subtopology_id, partition, offset in entries:
        if (subtopology_id, partition) in by_task:
            raise GroupError(
                ErrorCode.invalid_request,
                f"Task offsets contain a duplicate entry for subtopology {subtopology_id} "
                f"and partition {partition}.",
            )
        by_task[(subtopology_id, partition)] = offset
    return by_task


def check_tasks(configured: ConfiguredTopology, owned: TaskTuple) -> None:
    """Kafka's ``throwIfRequestContainsInvalidTasks``."""
    for sub, partition in owned.all():
        n = configured.tasks.get(sub)
        if n is None or not 0 <= partition < n:
            raise GroupError(
                ErrorCode.invalid_request,
                f"Awaiting assignment to task {sub}_{partition}, but this task does not exist.",
            )
