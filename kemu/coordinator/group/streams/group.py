"""KIP-1071 streams groups (StreamsGroupHeartbeat): the heartbeat's state machine, target
assignments and the coordinator's timers. Sans-IO (the time is an argument).

Around it: ``streams.model`` (the group, its members, the heartbeat's request and answer),
``streams.validation`` (what a heartbeat may carry), ``streams.members`` (static membership,
fencing, the one-step reconciliation towards the target), ``streams.topology`` (the topology
against the topics) and ``streams.assignor`` (the tasks).

As in Kafka's ``GroupMetadataManager.streamsGroupHeartbeat``:

* A member joins with epoch 0, its own member id, its rebalance timeout, its process id and the
  application's topology. The first topology initializes the group's; a later join with the
  same topology (or an older epoch: status STALE_TOPOLOGY) is accepted, a different one at the
  same or a newer epoch is INVALID_REQUEST ("Topology updates are not supported yet.").
* The topology is configured against the topics (``streams_topology.configure``): missing source
  topics, missing internal topics (which the broker then creates) and wrong partition counts are
  answered as statuses; while the topology is not ready no task is assigned.
* The group epoch goes up when a member joins, leaves or changes its process/endpoint/tags, when
  the topology becomes ready or the partition counts of its topics change; the target
  assignment (``streams.assignor``) is then recomputed and stamped with it (by the next heartbeat
  after a departure).
* A member moves towards its target one heartbeat at a time: tasks it must give up are first only
  taken away (epoch kept, UNREVOKED_TASKS) until a heartbeat shows it no longer owns them; then it
  gets the new epoch and the target's active tasks that no other member still owns
  (UNRELEASED_TASKS until they are released), so no active task is ever owned twice.
* A heartbeat with an epoch other than the member's (or the one before, when the answer carrying
  the new one was lost and the member owns no more than its assignment) is FENCED_MEMBER_EPOCH; a
  non-zero epoch for a member the group does not know is UNKNOWN_MEMBER_ID; a group that does not
  exist or is of another type is GROUP_ID_NOT_FOUND (a join creates it).
* A static member (instance id) leaving with -2 keeps its place and tasks; its instance id joining
  under a new member id takes them over (no new group epoch). While its holder is active, a join
  naming it gets UNRELEASED_INSTANCE_ID (under the holder's own member id too), a heartbeat
  naming it from another member id FENCED_INSTANCE_ID.
* ``group.streams.max.size`` is checked on a join only (GROUP_MAX_SIZE_REACHED for a member id
  the group does not know), and not for a join naming an instance id a member holds (at -2
  too): the instance id's checks answer it, and a full group takes a static member's
  replacement.
* Members that miss ``streams.session.timeout.ms``, or do not revoke within their rebalance
  timeout, are removed. ``ShutdownApplication`` makes every member get SHUTDOWN_APPLICATION.
* The first member of an empty group starts ``streams.initial.rebalance.delay.ms``, during
  which no target is computed; afterwards at most one per ``streams.assignment.interval.ms``.
  Both answer ASSIGNMENT_DELAYED.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.metadata_hash import group_hash
from kemu.coordinator.group.modern_group import (
    can_compute_target,
    late_member_ids,
    member_deadlines,
    unknown_member,
)
from kemu.coordinator.group.registry import GroupRegistry
from kemu.coordinator.group.streams import assignor as streams_assignor
from kemu.coordinator.group.streams.assignor import EMPTY, AssignMember, TaskTuple
from kemu.coordinator.group.streams.members import (
    check_epoch,
    check_static_member,
    instance_id_held,
    member_metadata,
    reconcile,
    with_heartbeat,
)
from kemu.coordinator.group.streams.model import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    NO_TASK_OFFSETS,
    STABLE,
    STATIC_LEAVE_EPOCH,
    SettingsProvider,
    StreamsGroup,
    StreamsHeartbeat,
    StreamsHeartbeatResult,
    StreamsMember,
    StreamsSettings,
    assignment_configs,
)
from kemu.coordinator.group.streams.topology import (
    ASSIGNMENT_DELAYED,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    PartitionCount,
    configure,
)
from kemu.coordinator.group.streams.validation import (
    check_tasks,
    updated_task_offsets,
    validate,
)
from kemu.protocol.errors import ErrorCode


class StreamsGroupCoordinator:
    def __init__(
        self,
        registry: GroupRegistry,
        settings: SettingsProvider,
        topic_hash: Callable[[str], int] = lambda name: 0,
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.topic_hash = topic_hash  # Kafka's hash of an existing topic (``metadata_hash``)

    def group(self, group_id: str) -> StreamsGroup | None:
        found = self.registry.get(group_id)
        return found if isinstance(found, StreamsGroup) else None

    # --- heartbeat ---------------------------------------------------------------------------

    def heartbeat(
        self, request: StreamsHeartbeat, partition_count: PartitionCount, now_ms: int
    ) -> StreamsHeartbeatResult:
        """One heartbeat; a refused one (``GroupError``) leaves the group as it was, as Kafka's
        timeline data structures roll back a failed heartbeat's changes."""
        existing = self.group(request.group_id)
        saved = _snapshot(existing) if existing is not None else None
        try:
            return self._heartbeat(request, partition_count, now_ms)
        except GroupError:
            if existing is not None and saved is not None:
                _restore(existing, saved)
            raise

    def _heartbeat(
        self, request: StreamsHeartbeat, partition_count: PartitionCount, now_ms: int
    ) -> StreamsHeartbeatResult:
        validate(request)
        settings = self.settings(request.group_id)
        if request.member_epoch == LEAVE_EPOCH:
            return self._leave(request, partition_count, settings)
        if request.member_epoch == STATIC_LEAVE_EPOCH:
            return self._static_leave(request, settings)
        joining = request.member_epoch == JOIN_EPOCH
        group = self._group_for(request.group_id, create=joining)
        self._end_initial_delay(group, settings, now_ms)
        was_empty = not group.members
        old, member = self._member_for(group, request, joining, settings)
        updated = with_heartbeat(member, request, now_ms + settings.session_timeout_ms)
        bump = old is None or member_metadata(old) != member_metadata(updated)
        status = self._take_topology(group, request, updated)
        if self._epoch_inputs_changed(group, settings, partition_count):
            bump = True
        configured = group.configured
        assert configured is not None
        if configured.ready and request.owned is not None:
            check_tasks(configured, request.owned)
        reported = group.task_offsets.get(updated.member_id, NO_TASK_OFFSETS)
        reported = updated_task_offsets(reported, request)
        group.members[updated.member_id] = updated
        if reported is NO_TASK_OFFSETS:
            group.task_offsets.pop(updated.member_id, None)
        else:
            group.task_offsets[updated.member_id] = reported
        self.registry.put(group)
        if bump:
            group.group_epoch += 1
        if (
            was_empty
            and settings.initial_rebalance_delay_ms > 0
            and group.initial_delay_deadline_ms is None
        ):
            # Kafka's scheduleIfAbsent: the first member of an empty group starts the delay.
            group.initial_delay_deadline_ms = now_ms + settings.initial_rebalance_delay_ms
        delayed = self._maybe_update_target(group, settings, now_ms)
        if delayed is not None:
            status.append((ASSIGNMENT_DELAYED, delayed))
        reconciled = reconcile(group, updated, request.owned, now_ms)
        group.members[reconciled.member_id] = reconciled
        if request.shutdown_application:
            group.shutdown_requested_by = reconciled.member_id
        send_assignment = joining or reconciled.assigned != member.assigned
        if send_assignment and reconciled.user_endpoint is not None:
            group.endpoint_information_epoch += 1
        endpoints = None
        if group.endpoint_information_epoch != request.endpoint_information_epoch:
            endpoints = {
                m.user_endpoint: TaskTuple(m.assigned.active, m.assigned.standby)
                for m in group.members.values()
                if m.user_endpoint is not None
            }
        if configured.status is not None:
            status.append(configured.status)
        if group.shutdown_requested_by is not None:
            status.append(
                (
                    SHUTDOWN_APPLICATION,
                    f"Streams group member {group.shutdown_requested_by} encountered a fatal "
                    "error and requested a shutdown for the entire application.",
                )
            )
        return StreamsHeartbeatResult(
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            acceptable_recovery_lag=settings.acceptable_recovery_lag,
            task_offset_interval_ms=settings.task_offset_interval_ms,
            assignment=reconciled.assigned if send_assignment else None,
            status=tuple(status),
            endpoint_information_epoch=group.endpoint_information_epoch,
            endpoints=endpoints,
            topics_to_create=configured.to_create,
            changed=bump or reconciled != old,
        )

    def _member_for(
        self,
        group: StreamsGroup,
        request: StreamsHeartbeat,
        joining: bool,
        settings: StreamsSettings,
    ) -> tuple[StreamsMember | None, StreamsMember]:
        """The member as the group knew it (None if new) and as this heartbeat starts from: a
        join resets its epoch and tasks (a static member back after -2 keeps its tasks); any
        other heartbeat must come from a known member at a valid epoch."""
        # Kafka's throwIfStreamsGroupIsFull, on a join only: a member id the group does not
        # know finds a full group, unless its instance id is held (its checks answer then).
        if (
            joining
            and request.member_id not in group.members
            and not instance_id_held(group, request.instance_id)
            and len(group.members) >= settings.max_size
        ):
            raise GroupError(
                ErrorCode.group_max_size_reached,
                f"The streams group has reached its maximum capacity of "
                f"{settings.max_size} members.",
            )
        old = group.members.get(request.member_id)
        if request.instance_id is not None:
            replaced = check_static_member(group, request, joining)
            if replaced is not None:
                # A static member back under a new member id takes the place, epoch and tasks
                # of the one that left with epoch -2: no rebalance.
                group.members.pop(replaced.member_id)
                group.task_offsets.pop(replaced.member_id, None)
                group.target[request.member_id] = group.target.pop(replaced.member_id, EMPTY)
                old = replace(replaced, member_id=request.member_id)
                group.members[request.member_id] = old
        if not joining:
            if old is None:
                raise unknown_member(request.member_id, request.group_id)
            check_epoch(old, request)
            return old, old
        if old is None:
            return None, StreamsMember(request.member_id, instance_id=request.instance_id)
        if old.member_epoch == STATIC_LEAVE_EPOCH:
            return old, replace(old, member_epoch=0, state=STABLE)
        return old, replace(
            old,
            member_epoch=0,
            assigned=EMPTY,
            pending_revocation=EMPTY,
            active_epochs={},
            state=STABLE,
        )

    @staticmethod
    def _take_topology(
        group: StreamsGroup, request: StreamsHeartbeat, member: StreamsMember
    ) -> list[tuple[int, str]]:
        """The first topology initializes the group's; the same one again (or an older epoch)
        is accepted, another one refused. Returns the STALE_TOPOLOGY status if the member is
        behind."""
        if request.topology is not None:
            incoming = request.topology.normalized()
            if group.topology is None:
                group.topology = incoming
                group.configured = None
            elif group.topology.epoch > incoming.epoch:
                pass  # a stale member: told below
            elif group.topology != incoming:
                raise GroupError(
                    ErrorCode.invalid_request, "Topology updates are not supported yet."
                )
        if group.topology is None:
            raise GroupError(ErrorCode.unknown_member_id, "The group has no topology.")
        if member.topology_epoch >= group.topology.epoch:
            return []
        return [
            (
                STALE_TOPOLOGY,
                f"The member's topology epoch {member.topology_epoch} is behind the "
                f"group's topology epoch {group.topology.epoch}.",
            )
        ]

    def _epoch_inputs_changed(
        self, group: StreamsGroup, settings: StreamsSettings, partition_count: PartitionCount
    ) -> bool:
        """The group-wide reasons for a new group epoch, recorded as they are seen: the
        partition counts of the topology's topics, the validated topology epoch, and the
        assignment configs (Kafka: a changed streams.num.standby.replicas rebalances)."""
        assert group.topology is not None
        changed = self._reconfigure(group, partition_count)
        configured = group.configured
        assert configured is not None
        validated = group.topology.epoch if configured.ready else -1
        if validated != group.validated_topology_epoch:
            group.validated_topology_epoch = validated
            changed = True
        configs = assignment_configs(settings)
        if configs != group.assignment_configs:
            group.assignment_configs = configs
            changed = True
        return changed

    def _leave(
        self, request: StreamsHeartbeat, partition_count: PartitionCount, settings: StreamsSettings
    ) -> StreamsHeartbeatResult:
        group = self._group_for(request.group_id, create=False, kind="Group")
        if request.member_id not in group.members:
            raise unknown_member(request.member_id, request.group_id)
        self.remove_member(group, request.member_id, partition_count)
        return _departed(request, LEAVE_EPOCH, group, settings)

    def _static_leave(
        self, request: StreamsHeartbeat, settings: StreamsSettings
    ) -> StreamsHeartbeatResult:
        """Epoch -2: a static member leaves for now; it keeps its place and tasks until its
        session expires or its instance id joins again."""
        group = self._group_for(request.group_id, create=False, kind="Group")
        member = group.members.get(request.member_id)
        if member is None:
            raise unknown_member(request.member_id, request.group_id)
        if member.instance_id is None:
            raise GroupError(
                ErrorCode.invalid_request,
                f"Member {request.member_id} is not a static member and cannot leave with -2.",
            )
        group.members[member.member_id] = replace(
            member,
            member_epoch=STATIC_LEAVE_EPOCH,
            revocation_deadline_ms=None,
            # As Kafka's resetAssignedTasksEpochsToZero: a static member's temporary leave.
            active_epochs=member.active_epochs_of(member.pending_revocation.active)
            | dict.fromkeys(member.assigned.active, 0),
        )
        return _departed(request, STATIC_LEAVE_EPOCH, group, settings)

    def remove_member(
        self, group: StreamsGroup, member_id: str, partition_count: PartitionCount
    ) -> None:
        """Kafka's ``streamsGroupFenceMember``: a new group epoch whose target the next heartbeat
        computes (within the assignment interval); the last member leaving stamps the empty
        target with it and resets the assignment time."""
        group.members.pop(member_id, None)
        group.target.pop(member_id, None)
        group.task_offsets.pop(member_id, None)
        group.group_epoch += 1
        self._reconfigure(group, partition_count)
        if not group.members:
            group.shutdown_requested_by = None  # Kafka keeps it until the group is empty
            group.target = {}
            group.assignment_epoch = group.group_epoch
            group.assignment_timestamp_ms = 0

    def reload(self, group: StreamsGroup, partition_count: PartitionCount) -> None:
        """A group read back from the log: its topology configured against today's topics (a
        change since it was written bumps the epoch on the next heartbeat)."""
        if group.topology is not None:
            group.configured = configure(group.topology, partition_count)
            group.metadata = self._metadata_of(group, partition_count)
            if group.metadata_hash == 0:  # written by a kemu of before the hash
                group.metadata_hash = self._hash_of(group.metadata)

    def _group_for(
        self, group_id: str, *, create: bool, kind: str = "Streams group"
    ) -> StreamsGroup:
        """``kind`` names the group in the not-found text: Kafka 4.4.0's heartbeat looks it up
        with getStreamsGroupOrThrow ("Streams group X not found."), its leave with group()
        ("Group X not found.")."""
        found = self.registry.get(group_id)
        if isinstance(found, StreamsGroup):
            return found
        if create and (found is None or (found.group_type == "classic" and found.is_empty())):
            # An empty classic group (e.g. offsets an admin committed) is taken over, as Kafka
            # does; its committed offsets stay.
            return StreamsGroup(group_id)
        if found is None:
            raise GroupError(ErrorCode.group_id_not_found, f"{kind} {group_id} not found.")
        raise GroupError(ErrorCode.group_id_not_found, f"Group {group_id} is not a streams group.")

    def _reconfigure(self, group: StreamsGroup, partition_count: PartitionCount) -> bool:
        """Configure the topology again if it is new or its topics changed; True when the
        partition counts it depends on changed (a new group epoch)."""
        if group.topology is None:
            return False
        metadata = self._metadata_of(group, partition_count)
        new_hash = self._hash_of(metadata)
        if group.configured is not None and (metadata, new_hash) == (
            group.metadata,
            group.metadata_hash,
        ):
            return False
        changed = (metadata, new_hash) != (group.metadata, group.metadata_hash)
        group.metadata, group.metadata_hash = metadata, new_hash
        group.configured = configure(group.topology, partition_count)
        return changed

    def _hash_of(self, metadata: tuple[tuple[str, int], ...]) -> int:
        return group_hash({name: self.topic_hash(name) for name, count in metadata if count >= 0})

    @staticmethod
    def _metadata_of(
        group: StreamsGroup, partition_count: PartitionCount
    ) -> tuple[tuple[str, int], ...]:
        assert group.topology is not None
        names = sorted(
            {
                name
                for sub in group.topology.subtopologies
                for name in (*sub.input_topics(), *(t.name for t in sub.state_changelog_topics))
            }
        )
        return tuple((name, partition_count(name) or -1) for name in names)

    def _maybe_update_target(
        self, group: StreamsGroup, settings: StreamsSettings, now_ms: int
    ) -> str | None:
        """Kafka's ``maybeUpdateStreamsTargetAssignment``: a new target for a new group epoch,
        unless the initial delay runs or the last one is younger than the assignment interval;
        then the ASSIGNMENT_DELAYED detail, and members reconcile towards the last target."""
        if group.initial_delay_deadline_ms is not None:
            return "Assignment delayed due to the configured initial rebalance delay."
        if group.group_epoch <= group.assignment_epoch:
            return None
        if not can_compute_target(
            group.assignment_timestamp_ms, settings.assignment_interval_ms, now_ms
        ):
            return "Assignment delayed due to the configured assignment interval."
        self._compute_target(group, settings, now_ms)
        return None

    def _end_initial_delay(
        self, group: StreamsGroup, settings: StreamsSettings, now_ms: int
    ) -> bool:
        """Kafka's ``computeDelayedTargetAssignment`` once the initial delay is over: True when
        a target was computed."""
        deadline = group.initial_delay_deadline_ms
        if deadline is None or deadline > now_ms:
            return False
        group.initial_delay_deadline_ms = None
        if not group.members or group.group_epoch <= group.assignment_epoch:
            return False
        if group.configured is None:
            return False
        return self._maybe_update_target(group, settings, now_ms) is None

    def _compute_target(self, group: StreamsGroup, settings: StreamsSettings, now_ms: int) -> None:
        configured = group.configured
        if configured is None or not configured.ready or group.topology is None:
            group.target = {member_id: EMPTY for member_id in group.members}
        else:
            stateful = {
                sub.subtopology_id
                for sub in group.topology.subtopologies
                if sub.state_changelog_topics
            }
            # As Kafka's TargetAssignmentBuilder: each member's current tasks and the offsets
            # it reported, so the state a member holds weighs in.
            members = [
                AssignMember(
                    m.member_id,
                    m.process_id,
                    m.assigned,
                    group.task_offsets.get(m.member_id, NO_TASK_OFFSETS).offsets,
                )
                for m in sorted(group.members.values(), key=lambda m: m.member_id)
            ]
            group.target = streams_assignor.assign(
                members, configured.tasks, stateful, settings.num_standby_replicas
            )
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp_ms = now_ms

    # --- timers --------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [
            d
            for group in self.registry
            if isinstance(group, StreamsGroup)
            for d in member_deadlines(group.members.values())
        ]
        deadlines += [
            group.initial_delay_deadline_ms
            for group in self.registry
            if isinstance(group, StreamsGroup) and group.initial_delay_deadline_ms is not None
        ]
        return min(deadlines, default=None)

    def end_initial_delays(self, now_ms: int) -> list[str]:
        """The groups whose initial rebalance delay ended by ``now_ms`` and got a target."""
        return [
            group.group_id
            for group in list(self.registry)
            if isinstance(group, StreamsGroup)
            and self._end_initial_delay(group, self.settings(group.group_id), now_ms)
        ]

    def expire(self, now_ms: int, partition_count: PartitionCount) -> list[tuple[str, str]]:
        return [
            (group.group_id, member_id)
            for group in list(self.registry)
            if isinstance(group, StreamsGroup)
            for member_id in self.expire_group(group, now_ms, partition_count)
        ]

    def expire_group(
        self, group: StreamsGroup, now_ms: int, partition_count: PartitionCount
    ) -> list[str]:
        """Remove one group's late members (their ids)."""
        late = late_member_ids(group.members.values(), now_ms)
        for member_id in late:
            self.remove_member(group, member_id, partition_count)
        return late

    def fire(
        self, group: StreamsGroup, now_ms: int, partition_count: PartitionCount
    ) -> tuple[bool, list[str]]:
        """One group's timers: its initial rebalance delay (whether it ended with a target),
        then its late members (their ids, removed)."""
        assigned = self._end_initial_delay(group, self.settings(group.group_id), now_ms)
        return assigned, self.expire_group(group, now_ms, partition_count)


def _departed(
    request: StreamsHeartbeat, epoch: int, group: StreamsGroup, settings: StreamsSettings
) -> StreamsHeartbeatResult:
    """The answer to a leave (-1) or a static member's temporary leave (-2)."""
    return StreamsHeartbeatResult(
        member_id=request.member_id,
        member_epoch=epoch,
        heartbeat_interval_ms=0,
        acceptable_recovery_lag=settings.acceptable_recovery_lag,
        task_offset_interval_ms=settings.task_offset_interval_ms,
        assignment=None,
        status=(),
        endpoint_information_epoch=group.endpoint_information_epoch,
        endpoints=None,
    )


def _snapshot(group: StreamsGroup) -> dict[str, Any]:
    saved = dict(vars(group))
    for name in ("members", "target", "task_offsets"):
        saved[name] = dict(saved[name])
    return saved


def _restore(group: StreamsGroup, saved: dict[str, Any]) -> None:
    vars(group).update(saved)
