"""KIP-1071 streams groups (StreamsGroupHeartbeat): topology, epochs, task assignment and the
revocation handshake. Sans-IO.

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
  assignment (``streams_assignor``) is then recomputed and stamped with it.
* A member moves towards its target one heartbeat at a time: tasks it must give up are first only
  taken away (epoch kept, UNREVOKED_TASKS) until a heartbeat shows it no longer owns them; then it
  gets the new epoch and the target's active tasks that no other member still owns
  (UNRELEASED_TASKS until they are released), so no active task is ever owned twice.
* A heartbeat with an epoch other than the member's (or the one before, when the answer carrying
  the new one was lost and the member owns no more than its assignment) is FENCED_MEMBER_EPOCH; a
  non-zero epoch for a member the group does not know is UNKNOWN_MEMBER_ID; a group of another
  type is GROUP_ID_NOT_FOUND.
* A static member (instance id) leaving with -2 keeps its place and tasks; its instance id joining
  under a new member id takes them over (no new group epoch); meanwhile another member joining
  with it gets UNRELEASED_INSTANCE_ID, a heartbeat naming it from another member id
  FENCED_INSTANCE_ID.
* Members that miss ``streams.session.timeout.ms``, or do not revoke within their rebalance
  timeout, are removed. ``ShutdownApplication`` makes every member get SHUTDOWN_APPLICATION.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from kemu.coordinator.group import streams_assignor
from kemu.coordinator.group.registry import GroupRegistry
from kemu.coordinator.group.share_group import GroupError
from kemu.coordinator.group.streams_assignor import EMPTY, AssignMember, Task, Tasks, TaskTuple
from kemu.coordinator.group.streams_topology import (
    ASSIGNMENT_DELAYED,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    ConfiguredTopology,
    PartitionCount,
    TopicToCreate,
    Topology,
    configure,
    invalid_topology_reason,
)
from kemu.protocol.errors import ErrorCode

GROUP_TYPE = "streams"
PROTOCOL_TYPE = "streams"
JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2
STABLE, UNREVOKED, UNRELEASED = "STABLE", "UNREVOKED_TASKS", "UNRELEASED_TASKS"


@dataclass(frozen=True, slots=True)
class StreamsSettings:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    num_standby_replicas: int = 0
    max_size: int = 2**31 - 1
    acceptable_recovery_lag: int = 10_000
    task_offset_interval_ms: int = 60_000
    # Kafka's defaults are 3000 and 1000; 0 here (no delay) keeps the unit tests' steps short.
    initial_rebalance_delay_ms: int = 0
    assignment_interval_ms: int = 0


@dataclass(frozen=True, slots=True)
class StreamsHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    owned: TaskTuple | None = None  # None: unchanged since the last heartbeat
    # Some of ActiveTasks/StandbyTasks/WarmupTasks null and some not (Kafka refuses it).
    partial_task_lists: bool = False
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    # (subtopology id, partition, offset); None: unchanged since the last heartbeat
    task_offsets: tuple[tuple[str, int, int], ...] | None = None
    task_end_offsets: tuple[tuple[str, int, int], ...] | None = None


@dataclass(frozen=True, slots=True)
class MemberTaskOffsets:
    """The changelog offset sums (and their end offsets) a member last reported per task, Kafka's
    ``MemberTaskOffsets``: kept in memory only (KIP-1071: "not persisted, as they are constantly
    changing"), re-reported every ``streams.task.offset.interval.ms``."""

    offsets: dict[Task, int] = field(default_factory=dict)
    end_offsets: dict[Task, int] = field(default_factory=dict)


NO_TASK_OFFSETS = MemberTaskOffsets()


@dataclass(frozen=True, slots=True)
class StreamsMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    assigned: TaskTuple = EMPTY
    pending_revocation: TaskTuple = EMPTY
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None


@dataclass(eq=False)
class StreamsGroup:
    group_id: str
    # As Kafka 4.4's StreamsGroup and TargetAssignmentMetadata.INITIAL: a new group starts at
    # epoch 1, so its first member gets epoch 2.
    group_epoch: int = 1
    assignment_epoch: int = 1
    topology: Topology | None = None
    validated_topology_epoch: int = -1
    members: dict[str, StreamsMember] = field(default_factory=dict)
    target: dict[str, TaskTuple] = field(default_factory=dict)
    endpoint_information_epoch: int = 0
    shutdown_requested_by: str | None = None
    # The assignment configs of the last target assignment (Kafka's lastAssignmentConfigs).
    assignment_configs: tuple[tuple[str, str], ...] = ()
    # When the last target was computed (0: never, or the group emptied), for the interval.
    assignment_timestamp_ms: int = 0
    # Not persisted, as Kafka's timer: while set, no target is computed (the initial delay).
    initial_delay_deadline_ms: int | None = None
    # Not persisted: recomputed from the topology and the topics.
    configured: ConfiguredTopology | None = None
    metadata: tuple[tuple[str, int], ...] = ()  # (topic, partitions) the configuration saw
    # Not persisted: what each member last reported (Kafka keeps them in memory too).
    task_offsets: dict[str, MemberTaskOffsets] = field(default_factory=dict)

    group_type = GROUP_TYPE
    protocol_type = PROTOCOL_TYPE

    @property
    def state_name(self) -> str:
        if not self.members:
            return "Empty"
        if self.configured is None or not self.configured.ready:
            return "NotReady"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(
            m.member_epoch != self.assignment_epoch or m.state != STABLE
            for m in self.members.values()
        ):
            return "Reconciling"
        return "Stable"

    def is_empty(self) -> bool:
        return not self.members

    def active_owner(self, task: tuple[str, int]) -> str | None:
        for member in self.members.values():
            if task in member.assigned.active or task in member.pending_revocation.active:
                return member.member_id
        return None

    def validate_offset_commit(self, member_id: str, member_epoch: int) -> ErrorCode | None:
        """Kafka's ``StreamsGroup.validateOffsetCommit``: an admin (epoch -1) only while the
        group is empty; a member with its current epoch (or the one before, whose tasks it may
        still be committing)."""
        if member_epoch < 0 and not self.members:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch not in (member.member_epoch, member.previous_member_epoch):
            return ErrorCode.stale_member_epoch
        return None

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        if member_epoch < 0:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return None

    def input_topics(self) -> set[str]:
        if self.topology is None:
            return set()
        return {name for sub in self.topology.subtopologies for name in sub.input_topics()}


@dataclass(frozen=True, slots=True)
class StreamsHeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    acceptable_recovery_lag: int
    task_offset_interval_ms: int
    assignment: TaskTuple | None  # None: not in the response
    status: tuple[tuple[int, str], ...]
    endpoint_information_epoch: int
    # (host, port) -> (active tasks, standby tasks) of the members with an endpoint; None: unchanged
    endpoints: dict[tuple[str, int], TaskTuple] | None
    topics_to_create: tuple[TopicToCreate, ...] = ()
    changed: bool = True


SettingsProvider = Callable[[str], StreamsSettings]


class StreamsGroupCoordinator:
    def __init__(self, registry: GroupRegistry, settings: SettingsProvider) -> None:
        self.registry = registry
        self.settings = settings

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
        if (
            joining
            and request.member_id not in group.members
            and len(group.members) >= settings.max_size
        ):
            raise GroupError(
                ErrorCode.group_max_size_reached,
                f"The streams group has reached its maximum capacity of "
                f"{settings.max_size} members.",
            )
        old = group.members.get(request.member_id)
        if request.instance_id is not None:
            replaced = _check_static_member(group, request, joining)
            if replaced is not None:
                # A static member back under a new member id takes the place, epoch and tasks
                # of the one that left with epoch -2: no rebalance.
                group.members.pop(replaced.member_id)
                group.task_offsets.pop(replaced.member_id, None)
                group.target[request.member_id] = group.target.pop(replaced.member_id, EMPTY)
                old = replace(replaced, member_id=request.member_id)
                group.members[request.member_id] = old
        if joining:
            member = StreamsMember(request.member_id, instance_id=request.instance_id)
            if old is not None and old.member_epoch == STATIC_LEAVE_EPOCH:
                member = replace(old, member_epoch=0, state=STABLE)
            elif old is not None:
                member = replace(
                    old, member_epoch=0, assigned=EMPTY, pending_revocation=EMPTY, state=STABLE
                )
        else:
            if old is None:
                raise GroupError(
                    ErrorCode.unknown_member_id,
                    f"Member {request.member_id} is not a member of group {request.group_id}.",
                )
            _check_epoch(old, request)
            member = old
        bump = False
        updated = replace(
            member,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                request.rebalance_timeout_ms
                if request.rebalance_timeout_ms > 0
                else member.rebalance_timeout_ms
            ),
            topology_epoch=(
                request.topology.epoch if request.topology is not None else member.topology_epoch
            ),
            process_id=request.process_id if request.process_id is not None else member.process_id,
            user_endpoint=(
                request.user_endpoint if request.user_endpoint is not None else member.user_endpoint
            ),
            client_tags=(
                request.client_tags if request.client_tags is not None else member.client_tags
            ),
            client_id=request.client_id,
            client_host=request.client_host,
            session_deadline_ms=now_ms + settings.session_timeout_ms,
        )
        if old is None or _metadata(old) != _metadata(updated):
            bump = True
        status: list[tuple[int, str]] = []
        # The topology.
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
        if updated.topology_epoch < group.topology.epoch:
            status.append(
                (
                    STALE_TOPOLOGY,
                    f"The member's topology epoch {updated.topology_epoch} is behind the "
                    f"group's topology epoch {group.topology.epoch}.",
                )
            )
        if self._reconfigure(group, partition_count):
            bump = True
        configured = group.configured
        assert configured is not None
        validated = group.topology.epoch if configured.ready else -1
        if validated != group.validated_topology_epoch:
            group.validated_topology_epoch = validated
            bump = True
        configs = assignment_configs(settings)
        if configs != group.assignment_configs:
            # Kafka: a changed streams.num.standby.replicas triggers a rebalance.
            group.assignment_configs = configs
            bump = True
        if configured.ready and request.owned is not None:
            _check_tasks(configured, request.owned)
        reported = group.task_offsets.get(updated.member_id, NO_TASK_OFFSETS)
        reported = _updated_task_offsets(reported, request)
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
        reconciled = _reconcile(group, updated, request.owned, now_ms)
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

    def _leave(
        self, request: StreamsHeartbeat, partition_count: PartitionCount, settings: StreamsSettings
    ) -> StreamsHeartbeatResult:
        group = self._group_for(request.group_id, create=False)
        if request.member_id not in group.members:
            raise GroupError(
                ErrorCode.unknown_member_id,
                f"Member {request.member_id} is not a member of group {request.group_id}.",
            )
        self.remove_member(group, request.member_id, partition_count)
        return StreamsHeartbeatResult(
            member_id=request.member_id,
            member_epoch=LEAVE_EPOCH,
            heartbeat_interval_ms=0,
            acceptable_recovery_lag=settings.acceptable_recovery_lag,
            task_offset_interval_ms=settings.task_offset_interval_ms,
            assignment=None,
            status=(),
            endpoint_information_epoch=group.endpoint_information_epoch,
            endpoints=None,
        )

    def _static_leave(
        self, request: StreamsHeartbeat, settings: StreamsSettings
    ) -> StreamsHeartbeatResult:
        """Epoch -2: a static member leaves for now; it keeps its place and tasks until its
        session expires or its instance id joins again."""
        group = self._group_for(request.group_id, create=False)
        member = group.members.get(request.member_id)
        if member is None:
            raise GroupError(
                ErrorCode.unknown_member_id,
                f"Member {request.member_id} is not a member of group {request.group_id}.",
            )
        if member.instance_id is None:
            raise GroupError(
                ErrorCode.invalid_request,
                f"Member {request.member_id} is not a static member and cannot leave with -2.",
            )
        group.members[member.member_id] = replace(
            member, member_epoch=STATIC_LEAVE_EPOCH, revocation_deadline_ms=None
        )
        return StreamsHeartbeatResult(
            member_id=request.member_id,
            member_epoch=STATIC_LEAVE_EPOCH,
            heartbeat_interval_ms=0,
            acceptable_recovery_lag=settings.acceptable_recovery_lag,
            task_offset_interval_ms=settings.task_offset_interval_ms,
            assignment=None,
            status=(),
            endpoint_information_epoch=group.endpoint_information_epoch,
            endpoints=None,
        )

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

    def _group_for(self, group_id: str, *, create: bool) -> StreamsGroup:
        found = self.registry.get(group_id)
        if isinstance(found, StreamsGroup):
            return found
        if create and (found is None or (found.group_type == "classic" and found.is_empty())):
            # An empty classic group (e.g. offsets an admin committed) is taken over, as Kafka
            # does; its committed offsets stay.
            return StreamsGroup(group_id)
        if found is None:
            raise GroupError(ErrorCode.group_id_not_found, f"Streams group {group_id} not found.")
        raise GroupError(ErrorCode.group_id_not_found, f"Group {group_id} is not a streams group.")

    def _reconfigure(self, group: StreamsGroup, partition_count: PartitionCount) -> bool:
        """Configure the topology again if it is new or its topics changed; True when the
        partition counts it depends on changed (a new group epoch)."""
        if group.topology is None:
            return False
        metadata = self._metadata_of(group, partition_count)
        if group.configured is not None and metadata == group.metadata:
            return False
        changed = metadata != group.metadata
        group.metadata = metadata
        group.configured = configure(group.topology, partition_count)
        return changed

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
            for m in group.members.values()
            for d in (m.session_deadline_ms, m.revocation_deadline_ms)
            if d is not None
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
        removed = []
        for group in list(self.registry):
            if not isinstance(group, StreamsGroup):
                continue
            for member in list(group.members.values()):
                late = member.session_deadline_ms <= now_ms or (
                    member.revocation_deadline_ms is not None
                    and member.revocation_deadline_ms <= now_ms
                )
                if late:
                    self.remove_member(group, member.member_id, partition_count)
                    removed.append((group.group_id, member.member_id))
        return removed


def can_compute_target(assignment_timestamp_ms: int, interval_ms: int, now_ms: int) -> bool:
    """Kafka's ``canComputeNextTargetAssignment``: never computed (0), no interval, or the
    interval has passed since the last one."""
    return (
        assignment_timestamp_ms == 0
        or interval_ms == 0
        or (now_ms >= assignment_timestamp_ms + interval_ms)
    )


def assignment_configs(settings: StreamsSettings) -> tuple[tuple[str, str], ...]:
    """The group configs the assignor uses, as Kafka records them with the group epoch."""
    return (("num.standby.replicas", str(settings.num_standby_replicas)),)


def _metadata(member: StreamsMember) -> tuple[object, ...]:
    return (
        member.rack_id,
        member.process_id,
        member.user_endpoint,
        member.client_tags,
        member.topology_epoch,
        member.instance_id,
    )


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


def _check_static_member(
    group: StreamsGroup, request: StreamsHeartbeat, joining: bool
) -> StreamsMember | None:
    """Kafka's static membership checks; returns the member a rejoining static member
    replaces (it left with epoch -2 under another member id)."""
    instance_id = request.instance_id
    holder = next((m for m in group.members.values() if m.instance_id == instance_id), None)
    if joining:
        if holder is None or holder.member_id == request.member_id:
            return None
        if holder.member_epoch != STATIC_LEAVE_EPOCH:
            raise GroupError(
                ErrorCode.unreleased_instance_id,
                f"Static member {request.member_id} with instance id {instance_id} cannot join "
                f"the group because the instance id is owned by {holder.member_id} member.",
            )
        return holder
    if holder is None:
        raise GroupError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
    if holder.member_id != request.member_id:
        raise GroupError(
            ErrorCode.fenced_instance_id,
            f"Static member {request.member_id} with instance id {instance_id} was fenced by "
            f"member {holder.member_id}.",
        )
    return None


def _check_epoch(member: StreamsMember, request: StreamsHeartbeat) -> None:
    received = request.member_epoch
    if received > member.member_epoch:
        raise GroupError(
            ErrorCode.fenced_member_epoch,
            f"The streams group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )
    if received < member.member_epoch:
        owned = request.owned
        subset = owned is None or (
            owned.active <= member.assigned.active
            and owned.standby <= member.assigned.standby
            and owned.warmup <= member.assigned.warmup
        )
        if received != member.previous_member_epoch or not subset:
            raise GroupError(
                ErrorCode.fenced_member_epoch,
                f"The streams group member has a smaller member epoch ({received}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must "
                "abandon all its partitions and rejoin.",
            )


def _snapshot(group: StreamsGroup) -> dict[str, Any]:
    saved = dict(vars(group))
    for name in ("members", "target", "task_offsets"):
        saved[name] = dict(saved[name])
    return saved


def _restore(group: StreamsGroup, saved: dict[str, Any]) -> None:
    vars(group).update(saved)


def _updated_task_offsets(
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
            else _offsets_by_task(request.task_offsets)
        ),
        (
            reported.end_offsets
            if request.task_end_offsets is None
            else _offsets_by_task(request.task_end_offsets)
        ),
    )


def _offsets_by_task(entries: tuple[tuple[str, int, int], ...]) -> dict[Task, int]:
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


def _check_tasks(configured: ConfiguredTopology, owned: TaskTuple) -> None:
    """Kafka's ``throwIfRequestContainsInvalidTasks``."""
    for sub, partition in owned.all():
        n = configured.tasks.get(sub)
        if n is None or not 0 <= partition < n:
            raise GroupError(
                ErrorCode.invalid_request,
                f"Awaiting assignment to task {sub}_{partition}, but this task does not exist.",
            )


def _reconcile(
    group: StreamsGroup, member: StreamsMember, owned: TaskTuple | None, now_ms: int
) -> StreamsMember:
    """Kafka's streams ``CurrentAssignmentBuilder``: one step towards the target."""
    target_epoch = group.assignment_epoch
    target = group.target.get(member.member_id, EMPTY)
    if member.state == STABLE and member.member_epoch == target_epoch:
        return member
    if member.state == UNREVOKED:
        still_owned = owned is None or bool(owned.all() & member.pending_revocation.all())
        if still_owned:
            return member
        member = replace(member, pending_revocation=EMPTY, revocation_deadline_ms=None)
    keep = TaskTuple(
        member.assigned.active & target.active,
        member.assigned.standby & target.standby,
        member.assigned.warmup & target.warmup,
    )
    revoke = TaskTuple(
        member.assigned.active - target.active,
        member.assigned.standby - target.standby,
        member.assigned.warmup - target.warmup,
    )
    if not revoke.is_empty() and owned is not None and not (owned.all() & revoke.all()):
        revoke = EMPTY  # the member already let them go
    if not revoke.is_empty():
        return replace(
            member,
            state=UNREVOKED,
            assigned=keep,
            pending_revocation=revoke,
            revocation_deadline_ms=now_ms + member.rebalance_timeout_ms,
        )
    others_active: set[tuple[str, int]] = set()
    for other in group.members.values():
        if other.member_id != member.member_id:
            others_active |= other.assigned.active | other.pending_revocation.active
    free: Tasks = frozenset(t for t in target.active if t not in others_active)
    same_process_active = {
        t
        for other in group.members.values()
        if other.member_id != member.member_id and other.process_id == member.process_id
        for t in other.assigned.active | other.pending_revocation.active
    }
    standby = frozenset(t for t in target.standby if t not in same_process_active)
    warmup = frozenset(t for t in target.warmup if t not in same_process_active)
    unreleased = free != target.active or standby != target.standby or warmup != target.warmup
    epoch = target_epoch
    return replace(
        member,
        member_epoch=epoch,
        previous_member_epoch=(
            member.member_epoch if member.member_epoch != epoch else member.previous_member_epoch
        ),
        state=UNRELEASED if unreleased else STABLE,
        assigned=TaskTuple(free, standby, warmup),
        pending_revocation=EMPTY,
        revocation_deadline_ms=None,
    )
