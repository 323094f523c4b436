"""A classic group and its members, as the coordinator keeps them in memory. Sans-IO.

* States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and back to
  PreparingRebalance whenever membership or a member's protocols change. Dead is a deleted group.
* The group's protocol is the one every member supports that most members list first; for the
  "consumer" protocol type the members' metadata tells which topics the group subscribes to.
* ``validate_member`` and ``validate_offset_commit`` are Kafka's checks of a member id, a
  static member's instance id and a generation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kemu.coordinator.group.classic.messages import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    GROUP_TYPE,
    STABLE,
    JoinMember,
    Protocol,
    Waiter,
)
from kemu.coordinator.group.consumer.protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from kemu.coordinator.group.consumer.protocol import subscribed_topics
from kemu.protocol.errors import ErrorCode


@dataclass(eq=False, slots=True)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    join_waiter: Waiter | None = None
    sync_waiter: Waiter | None = None
    is_new: bool = False
    heartbeat_deadline_ms: int | None = None

    def metadata(self, protocol_name: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        for name in self.protocol_names():
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return False  # a new member must finish its first join in time
        return self.join_waiter is not None or self.sync_waiter is not None


@dataclass(frozen=True, slots=True)
class JoinTimer:
    deadline_ms: int
    initial: bool = False
    delay_ms: int = 0
    remaining_ms: int = 0


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    state: str = EMPTY
    previous_state: str = EMPTY
    generation_id: int = 0
    protocol_type: str = ""  # "" until a member joins (and for a simple group)
    protocol_name: str | None = None
    leader_id: str | None = None
    state_timestamp_ms: int | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> expiry
    pending_sync: set[str] = field(default_factory=set)
    new_member_added: bool = False
    join_timer: JoinTimer | None = None
    sync_deadline_ms: int | None = None

    group_type = GROUP_TYPE

    # --- the registry's Group protocol ---------------------------------------------------------

    @property
    def state_name(self) -> str:
        return self.state

    def is_empty(self) -> bool:
        return self.state == EMPTY

    # --- membership ----------------------------------------------------------------------------

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: ClassicMember) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> ClassicMember | None:
        removed = self.members.pop(member_id, None)
        instance_id = removed.group_instance_id if removed is not None else None
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        return removed

    def awaiting_join_count(self) -> int:
        return sum(1 for member in self.members.values() if member.join_waiter is not None)

    def has_all_members_joined(self) -> bool:
        return self.awaiting_join_count() == len(self.members) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        """Kafka's ``validateMember``: a static member's id must be the instance's current one."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.unknown_member_id
            if existing != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return None

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if self.state == EMPTY:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        return any(name in self._candidate_protocols() for name in names)

    def _candidate_protocols(self) -> set[str]:
        counts: dict[str, int] = {}
        for member in self.members.values():
            for name in set(member.protocol_names()):
                counts[name] = counts.get(name, 0) + 1
        return {name for name, count in counts.items() if count == len(self.members)}

    def select_protocol(self) -> str:
        candidates = self._candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes.items(), key=lambda item: item[1])[0]

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def subscribed_topics(self) -> set[str] | None:
        """The topics a "consumer" group's members subscribe to, None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            found = subscribed_topics(member.metadata(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        topics = self.subscribed_topics()
        return topic in topics if topics is not None else self.uses_consumer_protocol()

    def join_members(self) -> tuple[JoinMember, ...]:
        return tuple(
            JoinMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def transition(self, state: str, now_ms: int) -> None:
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in (STABLE, COMPLETING_REBALANCE, EMPTY)

    def next_deadline_ms(self) -> int | None:
        deadlines = [m.heartbeat_deadline_ms for m in self.members.values()]
        deadlines += list(self.pending_members.values())
        deadlines += [self.join_timer.deadline_ms if self.join_timer else None]
        deadlines += [self.sync_deadline_ms]
        present = [deadline for deadline in deadlines if deadline is not None]
        return min(present) if present else None


def validate_offset_commit(
    group: ClassicGroup, member_id: str, group_instance_id: str | None, generation_id: int
) -> ErrorCode | None:
    """Kafka's ``ClassicGroup.validateOffsetCommit`` for a non-transactional commit."""
    if group.state == DEAD:
        return ErrorCode.coordinator_not_available
    if generation_id < 0 and group.state == EMPTY:
        return None  # an admin client or a consumer without group management
    if generation_id >= 0 or member_id or group_instance_id is not None:
        error = group.validate_member(member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
    elif group.state != EMPTY:
        return ErrorCode.unknown_member_id
    if group.state == COMPLETING_REBALANCE:
        return ErrorCode.rebalance_in_progress
    return None
