"""Classic consumer groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup). Sans-IO.

Theory of operation, as in Kafka's ``GroupMetadataManager`` classic path, one part per module:

* ``classic/messages.py``: states, settings, requests, answers and effects (parked waiters);
* ``classic/model.py``: ``ClassicGroup`` and ``ClassicMember``, protocol selection, validation;
* ``classic/rebalance.py``: the join and sync phases and the timers (sessions, delays);
* ``classic/join.py``: JoinGroup, MEMBER_ID_REQUIRED and static membership;
* here: ``ClassicGroupCoordinator`` with SyncGroup, Heartbeat, LeaveGroup and simple groups.

SyncGroup from the leader hands out the assignment: once it is written (``StoreAssignment``,
then ``assignment_stored``) the group becomes Stable and every parked SyncGroup is answered;
when it cannot be written every parked SyncGroup gets Kafka's error for the failed append and
the group rebalances (Kafka's ``resetAndPropagateAssignmentWithError``). Followers that sync
first are parked until then. A heartbeat (or an
offset commit) keeps a member's session alive; LeaveGroup removes members (a static one by its
instance id, for an admin) and rebalances the rest.
"""

from __future__ import annotations

from collections.abc import Callable

from kemu.coordinator.group.classic.join import ClassicJoin
from kemu.coordinator.group.classic.messages import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    GROUP_TYPE,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    PREPARING_REBALANCE,
    STABLE,
    UNKNOWN_MEMBER_ID,
    ClassicSettings,
    Effect,
    JoinCompleted,
    JoinMember,
    JoinRequest,
    JoinResponse,
    LeaveResult,
    LeavingMember,
    PersistGroup,
    Protocol,
    SettingsProvider,
    StoreAssignment,
    SyncCompleted,
    SyncRequest,
    SyncResponse,
    Waiter,
)
from kemu.coordinator.group.classic.model import (
    ClassicGroup,
    ClassicMember,
    JoinTimer,
    validate_offset_commit,
)
from kemu.coordinator.group.classic.rebalance import ClassicRebalance, random_member_id
from kemu.coordinator.group.registry import GroupRegistry
from kemu.protocol.errors import ErrorCode

__all__ = [
    "COMPLETING_REBALANCE",
    "DEAD",
    "EMPTY",
    "GROUP_TYPE",
    "NEW_MEMBER_JOIN_TIMEOUT_MS",
    "PREPARING_REBALANCE",
    "STABLE",
    "UNKNOWN_MEMBER_ID",
    "ClassicGroup",
    "ClassicGroupCoordinator",
    "ClassicMember",
    "ClassicSettings",
    "Effect",
    "JoinCompleted",
    "JoinMember",
    "JoinRequest",
    "JoinResponse",
    "JoinTimer",
    "LeaveResult",
    "LeavingMember",
    "PersistGroup",
    "Protocol",
    "SettingsProvider",
    "StoreAssignment",
    "SyncCompleted",
    "SyncRequest",
    "SyncResponse",
    "Waiter",
    "validate_offset_commit",
]


class ClassicGroupCoordinator:
    """Every classic group of one coordinator: the requests of the classic protocol, the timers.

    Composed, not inherited: ``rebalance`` (the groups, their phases and timers) is the one
    stateful object; ``joins`` (JoinGroup) and the requests here act on it."""

    def __init__(
        self,
        registry: GroupRegistry,
        settings: SettingsProvider,
        new_member_id: Callable[[str], str] = random_member_id,
    ) -> None:
        self.rebalance = ClassicRebalance(registry, settings, new_member_id)
        self.joins = ClassicJoin(self.rebalance)
        self.join = self.joins.join
        self.group = self.rebalance.group
        self.groups = self.rebalance.groups
        self.next_deadline_ms = self.rebalance.next_deadline_ms
        self.tick = self.rebalance.tick

    @property
    def registry(self) -> GroupRegistry:
        return self.rebalance.registry

    @property
    def settings(self) -> SettingsProvider:
        return self.rebalance.settings

    # --- SyncGroup -----------------------------------------------------------------------------

    def sync(self, request: SyncRequest, waiter: Waiter, now_ms: int) -> list[Effect]:
        def answer(error: ErrorCode) -> list[Effect]:
            return [SyncCompleted(waiter, SyncResponse(error))]

        if not request.group_id:
            return answer(ErrorCode.invalid_group_id)
        group = self.rebalance.group(request.group_id)
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
        return [StoreAssignment(group.group_id, group.generation_id)]

    def assignment_stored(
        self, group_id: str, generation_id: int, error: ErrorCode, now_ms: int
    ) -> list[Effect]:
        """The leader's assignment for ``generation_id`` was written (``error`` none: the group
        becomes Stable and the parked SyncGroups get it) or not (they get ``error``, the
        assignment is dropped and the group rebalances), unless the group moved on meanwhile."""
        group = self.rebalance.group(group_id)
        if (
            group is None
            or group.state != COMPLETING_REBALANCE
            or group.generation_id != generation_id
        ):
            return []
        if error == ErrorCode.none:
            group.transition(STABLE, now_ms)
            return self.rebalance._propagate_assignment(group, ErrorCode.none, now_ms)
        for member in group.members.values():
            member.assignment = b""
        effects = self.rebalance._propagate_assignment(group, error, now_ms)
        return effects + self.rebalance._prepare_rebalance_or_complete_join(group, now_ms)

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
        group = self.rebalance.group(group_id)
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
        group = self.rebalance.group(group_id)
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
                    effects += self.rebalance._remove_member(group, static_id)
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
                effects += self.rebalance._remove_member(group, entry.member_id)
                answers.append((entry, ErrorCode.none))
                removed_any = True
        if removed_any:
            if group.state in (STABLE, COMPLETING_REBALANCE):
                effects += self.rebalance._prepare_rebalance_or_complete_join(group, now_ms)
            elif group.state == PREPARING_REBALANCE:
                effects += self.rebalance._maybe_complete_join_phase(group, now_ms)
        return LeaveResult(ErrorCode.none, tuple(answers), tuple(effects))

    # --- offsets and admin ---------------------------------------------------------------------

    def simple_group(self, group_id: str, now_ms: int) -> ClassicGroup:
        """The group an assign()-only consumer commits for (generation -1): created empty."""
        group = self.rebalance.group(group_id)
        if group is None:
            group = ClassicGroup(group_id, state_timestamp_ms=now_ms)
            self.rebalance.registry.put(group)
        return group


def _inconsistent(requested: str | None, actual: str | None) -> bool:
    return requested is not None and requested != actual
