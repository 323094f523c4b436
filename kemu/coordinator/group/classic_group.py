"""Classic consumer groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup). Sans-IO.

Theory of operation, as in Kafka's ``GroupMetadataManager`` classic path:

* States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and back to
  PreparingRebalance whenever membership or a member's protocols change. Dead is a deleted group.
* JoinGroup parks the member until the join phase completes: when every known member has
  rejoined (and no member id handed out by MEMBER_ID_REQUIRED is still outstanding), or when the
  rebalance timeout (the largest of the members') runs out. A group coming out of Empty waits
  ``group.initial.rebalance.delay.ms`` first, and again (up to the rebalance timeout) each time
  another member joined meanwhile, so that a starting fleet lands in one generation.
* Completing the join phase drops dynamic members that did not rejoin, bumps the generation,
  picks the protocol every member supports that most members list first, and answers every
  parked JoinGroup; the leader's answer carries every member's metadata.
* SyncGroup from the leader hands out the assignment: the group becomes Stable and every parked
  SyncGroup is answered. Followers that sync first are parked until then.
* A member that sends nothing for its session timeout is removed; members parked in a join or
  sync phase are alive by definition, except new members, who get 5 minutes to finish their first
  join. Members that were sent a JoinGroup answer but never sync within the rebalance timeout are
  removed too.
* Static members (``group.instance.id``) survive a rebalance without rejoining, and a restarted
  instance takes over its old member id's place (the old id is fenced with FENCED_INSTANCE_ID).

Parked requests are opaque ``waiter`` objects supplied by the caller; their answers come back as
``JoinCompleted``/``SyncCompleted`` effects, possibly from a later call (another member's join,
a timer). ``PersistGroup`` asks for the group's metadata record to be written. Time comes in as
``now_ms``; ``next_deadline_ms``/``tick`` drive the timers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field

from kemu.coordinator.group.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from kemu.coordinator.group.consumer_protocol import subscribed_topics
from kemu.coordinator.group.registry import GroupRegistry
from kemu.protocol.errors import ErrorCode

GROUP_TYPE = "classic"
EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD = (
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
)
UNKNOWN_MEMBER_ID = ""
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's classicGroupNewMemberJoinTimeoutMs

Waiter = Hashable
Protocol = tuple[str, bytes]  # (name, metadata), in the member's order of preference


@dataclass(frozen=True, slots=True)
class ClassicSettings:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1


SettingsProvider = Callable[[str], ClassicSettings]


# --- requests and answers ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    requires_known_member_id: bool = True  # JoinGroup v4+
    supports_skip_assignment: bool = True  # JoinGroup v9+
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResponse:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    member_id: str
    generation_id: int
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResponse:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveResult:
    error: ErrorCode
    members: tuple[tuple[LeavingMember, ErrorCode], ...] = ()
    effects: tuple[Effect, ...] = ()


@dataclass(frozen=True, slots=True)
class JoinCompleted:
    waiter: Waiter
    response: JoinResponse


@dataclass(frozen=True, slots=True)
class SyncCompleted:
    waiter: Waiter
    response: SyncResponse


@dataclass(frozen=True, slots=True)
class PersistGroup:
    """Write the group's metadata record (its current generation, members and assignment)."""

    group_id: str


Effect = JoinCompleted | SyncCompleted | PersistGroup


# --- the group -----------------------------------------------------------------------------------


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


def _join_error(error: ErrorCode, member_id: str = UNKNOWN_MEMBER_ID) -> JoinResponse:
    return JoinResponse(error, member_id)


def _new_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


# --- the coordinator -----------------------------------------------------------------------------


class ClassicGroupCoordinator:
    def __init__(
        self,
        registry: GroupRegistry,
        settings: SettingsProvider,
        new_member_id: Callable[[str], str] = _new_member_id,
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.new_member_id = new_member_id

    def group(self, group_id: str) -> ClassicGroup | None:
        found = self.registry.get(group_id)
        return found if isinstance(found, ClassicGroup) else None

    def groups(self) -> Iterator[ClassicGroup]:
        return (g for g in self.registry if isinstance(g, ClassicGroup))

    # --- JoinGroup -----------------------------------------------------------------------------

    def join(self, request: JoinRequest, waiter: Waiter, now_ms: int) -> list[Effect]:
        effects: list[Effect] = []

        def answer(response: JoinResponse) -> list[Effect]:
            effects.append(JoinCompleted(waiter, response))
            return effects

        if not request.group_id:
            return answer(_join_error(ErrorCode.invalid_group_id, request.member_id))
        settings = self.settings(request.group_id)
        if not (
            settings.min_session_timeout_ms
            <= request.session_timeout_ms
            <= settings.max_session_timeout_ms
        ):
            return answer(_join_error(ErrorCode.invalid_session_timeout, request.member_id))
        found = self.registry.get(request.group_id)
        if found is not None and not isinstance(found, ClassicGroup):
            if found.group_type != "consumer" or not found.is_empty():
                return answer(_join_error(ErrorCode.inconsistent_group_protocol))
            found = None  # an empty KIP-848 group becomes a classic one, as in Kafka
        unknown = request.member_id == UNKNOWN_MEMBER_ID
        group = found
        if group is None:
            if not unknown:
                return answer(_join_error(ErrorCode.unknown_member_id, request.member_id))
            group = ClassicGroup(request.group_id, state_timestamp_ms=now_ms)
            self.registry.put(group)
            effects.append(PersistGroup(group.group_id))
        if not self._accepts(group, request.member_id, settings):
            group.remove(request.member_id)
            return answer(_join_error(ErrorCode.group_max_size_reached))
        if unknown:
            effects += self._join_new_member(group, request, waiter, now_ms)
        else:
            effects += self._join_existing_member(group, request, waiter, now_ms)
        return effects

    @staticmethod
    def _accepts(group: ClassicGroup, member_id: str, settings: ClassicSettings) -> bool:
        if group.state in (EMPTY, DEAD):
            return True
        member = group.members.get(member_id)
        if group.state == PREPARING_REBALANCE:
            awaiting = member is not None and member.join_waiter is not None
            return awaiting or group.awaiting_join_count() < settings.max_size
        return member is not None or len(group.members) < settings.max_size

    def _join_new_member(
        self, group: ClassicGroup, request: JoinRequest, waiter: Waiter, now_ms: int
    ) -> list[Effect]:
        if group.state == DEAD:
            return [JoinCompleted(waiter, _join_error(ErrorCode.coordinator_not_available))]
        names = {name for name, _ in request.protocols}
        if not group.supports_protocols(request.protocol_type, names):
            return [JoinCompleted(waiter, _join_error(ErrorCode.inconsistent_group_protocol))]
        instance_id = request.group_instance_id
        new_id = self.new_member_id(instance_id if instance_id is not None else request.client_id)
        if instance_id is not None:
            existing = group.static_members.get(instance_id)
            if existing is not None:
                return self._replace_static_member(group, request, existing, new_id, waiter, now_ms)
            return self._add_member(group, request, new_id, waiter, now_ms)
        if request.requires_known_member_id:
            # The member must come back with this id; until it does it counts as joining.
            group.pending_members[new_id] = now_ms + request.session_timeout_ms
            return [JoinCompleted(waiter, _join_error(ErrorCode.member_id_required, new_id))]
        return self._add_member(group, request, new_id, waiter, now_ms)

    def _join_existing_member(
        self, group: ClassicGroup, request: JoinRequest, waiter: Waiter, now_ms: int
    ) -> list[Effect]:
        member_id = request.member_id
        if group.state == DEAD:
            return [
                JoinCompleted(waiter, _join_error(ErrorCode.coordinator_not_available, member_id))
            ]
        names = {name for name, _ in request.protocols}
        if not group.supports_protocols(request.protocol_type, names):
            return [
                JoinCompleted(waiter, _join_error(ErrorCode.inconsistent_group_protocol, member_id))
            ]
        if member_id in group.pending_members:
            return self._add_member(group, request, member_id, waiter, now_ms)
        error = group.validate_member(member_id, request.group_instance_id)
        if error is not None:
            return [JoinCompleted(waiter, _join_error(error, member_id))]
        member = group.members[member_id]
        same_protocols = member.protocols == request.protocols
        if group.state == PREPARING_REBALANCE:
            return self._update_member(group, member, request, waiter, now_ms)
        if group.state == COMPLETING_REBALANCE:
            if same_protocols:
                # The member missed its JoinGroup answer: send the current generation again.
                return [JoinCompleted(waiter, self._generation_answer(group, member_id))]
            return self._update_member(group, member, request, waiter, now_ms)
        if group.state == STABLE:
            if group.is_leader(member_id) or not same_protocols:
                # A leader's rejoin is how it asks for a new assignment (e.g. topics changed).
                return self._update_member(group, member, request, waiter, now_ms)
            return [JoinCompleted(waiter, self._generation_answer(group, member_id, members=False))]
        return [JoinCompleted(waiter, _join_error(ErrorCode.unknown_member_id, member_id))]

    def _generation_answer(
        self, group: ClassicGroup, member_id: str, *, members: bool = True, skip: bool = False
    ) -> JoinResponse:
        return JoinResponse(
            ErrorCode.none,
            member_id,
            group.generation_id,
            group.protocol_type or None,
            group.protocol_name,
            group.leader_id or "",
            skip,
            group.join_members() if members and group.is_leader(member_id) else (),
        )

    def _add_member(
        self, group: ClassicGroup, request: JoinRequest, member_id: str, waiter: Waiter, now_ms: int
    ) -> list[Effect]:
        member = ClassicMember(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            join_waiter=waiter,
            is_new=True,
            heartbeat_deadline_ms=now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS,
        )
        if group.state == PREPARING_REBALANCE and group.previous_state == EMPTY:
            group.new_member_added = True  # lengthens the initial delay
        group.add(member)
        return self._prepare_rebalance_or_complete_join(group, now_ms)

    def _update_member(
        self,
        group: ClassicGroup,
        member: ClassicMember,
        request: JoinRequest,
        waiter: Waiter,
        now_ms: int,
    ) -> list[Effect]:
        effects: list[Effect] = []
        if member.join_waiter is not None and member.join_waiter != waiter:
            # A retried JoinGroup replaces a parked one; answer the old one so it does not hang.
            effects.append(
                JoinCompleted(
                    member.join_waiter,
                    _join_error(ErrorCode.rebalance_in_progress, member.member_id),
                )
            )
        member.protocols = request.protocols
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.join_waiter = waiter
        return effects + self._prepare_rebalance_or_complete_join(group, now_ms)

    def _replace_static_member(
        self,
        group: ClassicGroup,
        request: JoinRequest,
        old_id: str,
        new_id: str,
        waiter: Waiter,
        now_ms: int,
    ) -> list[Effect]:
        """A static member rejoined without its member id (a restarted instance): it takes over
        the old id's place, and whoever still uses the old id is fenced."""
        effects: list[Effect] = []
        old = group.members.pop(old_id)
        if old.join_waiter is not None:
            effects.append(
                JoinCompleted(old.join_waiter, _join_error(ErrorCode.fenced_instance_id, old_id))
            )
        if old.sync_waiter is not None:
            effects.append(
                SyncCompleted(old.sync_waiter, SyncResponse(ErrorCode.fenced_instance_id))
            )
        member = ClassicMember(
            member_id=new_id,
            group_instance_id=old.group_instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=request.protocols,
            assignment=old.assignment,
            join_waiter=waiter,
            heartbeat_deadline_ms=now_ms + request.session_timeout_ms,
        )
        group.members[new_id] = member
        if group.leader_id == old_id:
            group.leader_id = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        assert request.group_instance_id is not None
        group.static_members[request.group_instance_id] = new_id
        if group.state == STABLE:
            if group.protocol_name == group.select_protocol():
                # Nothing the assignment depends on changed: no rebalance, the restarted instance
                # gets the current generation (and, as leader on v9+, is told to skip assigning).
                member.join_waiter = None
                leader = group.is_leader(new_id)
                answer = (
                    self._generation_answer(group, new_id, skip=leader)
                    if request.supports_skip_assignment
                    else self._generation_answer(group, new_id, members=False)
                )
                effects += [PersistGroup(group.group_id), JoinCompleted(waiter, answer)]
                return effects
            return effects + self._prepare_rebalance_or_complete_join(group, now_ms)
        if group.state == COMPLETING_REBALANCE:
            # The leader may already have assigned to the old id: assign again.
            return effects + self._prepare_rebalance(group, now_ms)
        return effects + self._maybe_complete_join_phase(group, now_ms)

    # --- rebalancing ---------------------------------------------------------------------------

    def _prepare_rebalance_or_complete_join(self, group: ClassicGroup, now_ms: int) -> list[Effect]:
        if group.can_rebalance():
            return self._prepare_rebalance(group, now_ms)
        return self._maybe_complete_join_phase(group, now_ms)

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> list[Effect]:
        effects: list[Effect] = []
        if group.state == COMPLETING_REBALANCE:
            # Members parked in SyncGroup must rejoin.
            for member in group.members.values():
                member.assignment = b""
            effects += self._propagate_assignment(group, ErrorCode.rebalance_in_progress, now_ms)
        group.pending_sync.clear()
        group.sync_deadline_ms = None
        initial = group.state == EMPTY
        if initial:
            delay = self.settings(group.group_id).initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_timer = JoinTimer(
                now_ms + delay, initial=True, delay_ms=delay, remaining_ms=remaining
            )
        group.transition(PREPARING_REBALANCE, now_ms)
        if not initial:
            if group.has_all_members_joined():
                effects += self._complete_join(group, now_ms)
            else:
                group.join_timer = JoinTimer(now_ms + group.rebalance_timeout_ms())
        return effects

    def _maybe_complete_join_phase(self, group: ClassicGroup, now_ms: int) -> list[Effect]:
        if group.state != PREPARING_REBALANCE or group.previous_state == EMPTY:
            return []  # the initial rebalance always waits for its delay
        if not group.has_all_members_joined():
            return []
        return self._complete_join(group, now_ms)

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> list[Effect]:
        group.join_timer = None
        for member in list(group.members.values()):
            if member.join_waiter is None and member.group_instance_id is None:
                group.remove(member.member_id)
        if group.state == DEAD:
            return []
        if group.members and not self._elect_joined_leader(group):
            # Nobody rejoined (only static members remain): wait for them, or their expiry.
            group.join_timer = JoinTimer(now_ms + group.rebalance_timeout_ms())
            return []
        group.generation_id += 1
        group.pending_sync.clear()
        if not group.members:
            group.protocol_name = None
            group.transition(EMPTY, now_ms)
            return [PersistGroup(group.group_id)]
        group.protocol_name = group.select_protocol()
        group.transition(COMPLETING_REBALANCE, now_ms)
        effects: list[Effect] = []
        for member in group.members.values():
            if member.join_waiter is not None:
                effects.append(
                    JoinCompleted(
                        member.join_waiter, self._generation_answer(group, member.member_id)
                    )
                )
                member.join_waiter = None
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_deadline_ms = now_ms + group.rebalance_timeout_ms()
        return effects

    @staticmethod
    def _elect_joined_leader(group: ClassicGroup) -> bool:
        """Keep the leader if it rejoined, else promote a member that did; False if none did."""
        leader = group.members.get(group.leader_id or "")
        if leader is not None and leader.join_waiter is not None:
            return True
        for member in group.members.values():
            if member.join_waiter is not None:
                group.leader_id = member.member_id
                return True
        return False

    def _propagate_assignment(
        self, group: ClassicGroup, error: ErrorCode, now_ms: int
    ) -> list[Effect]:
        ok = error == ErrorCode.none
        effects: list[Effect] = []
        for member in group.members.values():
            if member.sync_waiter is None:
                continue
            response = SyncResponse(
                error,
                member.assignment,
                (group.protocol_type or None) if ok else None,
                group.protocol_name if ok else None,
            )
            effects.append(SyncCompleted(member.sync_waiter, response))
            member.sync_waiter = None
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        return effects

    # --- SyncGroup -----------------------------------------------------------------------------

    def sync(self, request: SyncRequest, waiter: Waiter, now_ms: int) -> list[Effect]:
        def answer(error: ErrorCode) -> list[Effect]:
            return [SyncCompleted(waiter, SyncResponse(error))]

        if not request.group_id:
            return answer(ErrorCode.invalid_group_id)
        group = self.group(request.group_id)
        if group is None or group.is_empty():
            return answer(ErrorCode.unknown_member_id)
        if group.state == DEAD:
            return answer(ErrorCode.coordinator_not_available)
        error = group.validate_member(request.member_id, request.group_instance_id)
        if error is not None:
            return answer(error)
        if request.generation_id != group.generation_id:
            return answer(ErrorCode.illegal_generation)
        if _inconsistent(request.protocol_type, group.protocol_type or None) or _inconsistent(
            request.protocol_name, group.protocol_name
        ):
            return answer(ErrorCode.inconsistent_group_protocol)
        if group.state == PREPARING_REBALANCE:
            return answer(ErrorCode.rebalance_in_progress)
        member = group.members[request.member_id]
        if group.state == STABLE:
            self._synced(group, request.member_id)
            response = SyncResponse(
                ErrorCode.none, member.assignment, group.protocol_type or None, group.protocol_name
            )
            return [SyncCompleted(waiter, response)]
        # CompletingRebalance: park until the leader's assignment arrives.
        member.sync_waiter = waiter
        self._synced(group, request.member_id)
        if not group.is_leader(request.member_id):
            return []
        assignments = dict(request.assignments)
        for other in group.members.values():
            other.assignment = assignments.get(other.member_id, b"")
        group.transition(STABLE, now_ms)
        propagated = self._propagate_assignment(group, ErrorCode.none, now_ms)
        return [PersistGroup(group.group_id), *propagated]

    @staticmethod
    def _synced(group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline_ms = None

    # --- Heartbeat -----------------------------------------------------------------------------

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        now_ms: int,
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self.group(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.state == DEAD:
            return ErrorCode.coordinator_not_available
        error = group.validate_member(member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.state == EMPTY:
            return ErrorCode.unknown_member_id
        member = group.members[member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state == PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def keep_alive(self, group: ClassicGroup, member_id: str, now_ms: int) -> None:
        """An offset commit from a member of a Stable or rebalancing group counts as a
        heartbeat, as in Kafka."""
        member = group.members.get(member_id)
        if member is not None and group.state in (STABLE, PREPARING_REBALANCE):
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms

    # --- LeaveGroup ----------------------------------------------------------------------------

    def leave(self, group_id: str, leaving: list[LeavingMember], now_ms: int) -> LeaveResult:
        if not group_id:
            return LeaveResult(ErrorCode.invalid_group_id)
        group = self.group(group_id)
        if group is None:
            return LeaveResult(ErrorCode.unknown_member_id)
        if group.state == DEAD:
            return LeaveResult(ErrorCode.coordinator_not_available)
        effects: list[Effect] = []
        answers: list[tuple[LeavingMember, ErrorCode]] = []
        removed_any = False
        for entry in leaving:
            if entry.member_id == UNKNOWN_MEMBER_ID:
                # An admin removing a static member by its instance id.
                static_id = group.static_members.get(entry.group_instance_id or "")
                if entry.group_instance_id is not None and static_id is not None:
                    effects += self._remove_member(group, static_id)
                    answers.append((entry, ErrorCode.none))
                    removed_any = True
                else:
                    answers.append((entry, ErrorCode.unknown_member_id))
            elif entry.member_id in group.pending_members:
                del group.pending_members[entry.member_id]
                answers.append((entry, ErrorCode.none))
                removed_any = True
            else:
                error = group.validate_member(entry.member_id, entry.group_instance_id)
                if error is not None:
                    answers.append((entry, error))
                    continue
                effects += self._remove_member(group, entry.member_id)
                answers.append((entry, ErrorCode.none))
                removed_any = True
        if removed_any:
            if group.state in (STABLE, COMPLETING_REBALANCE):
                effects += self._prepare_rebalance_or_complete_join(group, now_ms)
            elif group.state == PREPARING_REBALANCE:
                effects += self._maybe_complete_join_phase(group, now_ms)
        return LeaveResult(ErrorCode.none, tuple(answers), tuple(effects))

    @staticmethod
    def _remove_member(group: ClassicGroup, member_id: str) -> list[Effect]:
        effects: list[Effect] = []
        member = group.remove(member_id)
        if member is None:
            return effects
        if member.join_waiter is not None:
            effects.append(
                JoinCompleted(member.join_waiter, _join_error(ErrorCode.unknown_member_id))
            )
        if member.sync_waiter is not None:
            effects.append(
                SyncCompleted(member.sync_waiter, SyncResponse(ErrorCode.unknown_member_id))
            )
        return effects

    # --- timers --------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for g in self.groups() if (d := g.next_deadline_ms()) is not None]
        return min(deadlines) if deadlines else None

    def tick(self, now_ms: int) -> list[Effect]:
        """Fire every timer due at ``now_ms`` (expired sessions, join and sync deadlines)."""
        effects: list[Effect] = []
        for group in list(self.groups()):
            for _ in range(1000):  # a handled timer may schedule another one already due
                fired = self._fire_one(group, now_ms)
                if fired is None:
                    break
                effects += fired
        return effects

    def _fire_one(self, group: ClassicGroup, now_ms: int) -> list[Effect] | None:
        for member_id, deadline in list(group.pending_members.items()):
            if deadline <= now_ms:
                del group.pending_members[member_id]
                if group.state == PREPARING_REBALANCE and group.has_all_members_joined():
                    return self._complete_join(group, now_ms)
                return []
        for member in list(group.members.values()):
            if member.heartbeat_deadline_ms is not None and member.heartbeat_deadline_ms <= now_ms:
                member.heartbeat_deadline_ms = None
                if member.has_satisfied_heartbeat():
                    return []  # parked members are alive; the phase's end reschedules them
                return self._expire_member(group, member.member_id, now_ms)
        timer = group.join_timer
        if timer is not None and timer.deadline_ms <= now_ms:
            group.join_timer = None
            if timer.initial and group.new_member_added and timer.remaining_ms != 0:
                group.new_member_added = False
                delay = min(timer.delay_ms, timer.remaining_ms)
                group.join_timer = JoinTimer(
                    now_ms + delay,
                    initial=True,
                    delay_ms=delay,
                    remaining_ms=max(timer.remaining_ms - timer.delay_ms, 0),
                )
                return []
            if group.state != PREPARING_REBALANCE:
                return []
            return self._complete_join(group, now_ms)
        if group.sync_deadline_ms is not None and group.sync_deadline_ms <= now_ms:
            group.sync_deadline_ms = None
            if group.state in (COMPLETING_REBALANCE, STABLE) and group.pending_sync:
                for member_id in list(group.pending_sync):
                    group.remove(member_id)
                return self._prepare_rebalance(group, now_ms)
            return []
        return None

    def _expire_member(self, group: ClassicGroup, member_id: str, now_ms: int) -> list[Effect]:
        effects = self._remove_member(group, member_id)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            effects += self._prepare_rebalance_or_complete_join(group, now_ms)
        elif group.state == PREPARING_REBALANCE and group.has_all_members_joined():
            effects += self._complete_join(group, now_ms)
        return effects

    # --- offsets and admin ---------------------------------------------------------------------

    def simple_group(self, group_id: str, now_ms: int) -> ClassicGroup:
        """The group an assign()-only consumer commits for (generation -1): created empty."""
        group = self.group(group_id)
        if group is None:
            group = ClassicGroup(group_id, state_timestamp_ms=now_ms)
            self.registry.put(group)
        return group


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


def _inconsistent(requested: str | None, actual: str | None) -> bool:
    return requested is not None and requested != actual
