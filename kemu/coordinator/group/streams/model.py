"""KIP-1071 streams groups: the group's state (members, target, topology), the settings the
coordinator reads per group, and a heartbeat's request and answer. Pure data, no transitions:
those are in ``streams.group`` (the heartbeat), ``streams.members`` (member epochs, fencing,
reconciliation) and ``streams.validation`` (what a heartbeat may carry).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kemu.coordinator.group.modern_group import (
    check_offset_commit,
    check_offset_fetch,
    group_state,
)
from kemu.coordinator.group.streams.assignor import EMPTY, Task, TaskTuple
from kemu.coordinator.group.streams.topology import ConfiguredTopology, TopicToCreate, Topology
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
    # KIP-1251: the epoch each active task it holds (assigned or pending revocation) was
    # assigned at.
    active_epochs: dict[Task, int] = field(default_factory=dict)
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None

    def active_epoch(self, task: Task) -> int | None:
        """The epoch the member was assigned active ``task`` at, None if it does not hold it;
        without a recorded one, its epoch, as Kafka reads a record without them."""
        if task not in self.assigned.active and task not in self.pending_revocation.active:
            return None
        return self.active_epochs.get(task, self.member_epoch)

    def active_epochs_of(self, tasks: Iterable[Task]) -> dict[Task, int]:
        return {t: epoch for t in tasks if (epoch := self.active_epoch(t)) is not None}


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
    # Kafka's MetadataHash (KIP-1101) of the topology's topics that exist; another one is a
    # new group epoch (also for a change while the group was not loaded).
    metadata_hash: int = 0
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
        return group_state(self.group_epoch, self.assignment_epoch, self.members.values())

    def is_empty(self) -> bool:
        return not self.members

    def active_owner(self, task: tuple[str, int]) -> str | None:
        for member in self.members.values():
            if task in member.assigned.active or task in member.pending_revocation.active:
                return member.member_id
        return None

    def validate_offset_commit(
        self,
        member_id: str,
        member_epoch: int,
        partitions: Iterable[tuple[str, int]] = (),
        *,
        transactional: bool = False,
        instance_id: str | None = None,
        api_version: int | None = None,
    ) -> ErrorCode | None:
        """Kafka 4.4's ``StreamsGroup.validateOffsetCommit`` (KIP-1251): an admin (epoch -1)
        only while the group is empty, a transactional commit naming no member, no instance and
        epoch -1; a member's OffsetCommit at v9 or later (``api_version``; None: not checked,
        else UNSUPPORTED_VERSION), at its epoch; at an older one, for each committed (topic,
        partition) the active task of the subtopology reading the topic must be the member's,
        assigned at that epoch or before (else, or at a newer epoch, STALE_MEMBER_EPOCH)."""
        checked = check_offset_commit(
            self.members,
            member_id,
            member_epoch,
            transactional=transactional,
            instance_id=instance_id,
            api_version=api_version,
        )
        if not isinstance(checked, StreamsMember):
            return checked
        member = checked
        if self.topology is None:
            return ErrorCode.stale_member_epoch
        subtopology_of = {
            topic: sub.subtopology_id
            for sub in self.topology.subtopologies
            for topic in sub.input_topics()
        }
        for topic, partition in partitions:
            sub_id = subtopology_of.get(topic)
            assigned_at = None if sub_id is None else member.active_epoch((sub_id, partition))
            if assigned_at is None or member_epoch < assigned_at:
                return ErrorCode.stale_member_epoch
        return None

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        return check_offset_fetch(self.members, member_id, member_epoch)

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


def assignment_configs(settings: StreamsSettings) -> tuple[tuple[str, str], ...]:
    """The group configs the assignor uses, as Kafka records them with the group epoch."""
    return (("num.standby.replicas", str(settings.num_standby_replicas)),)
