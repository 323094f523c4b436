"""JoinGroup for classic groups: new, returning and static members. Sans-IO.

A new member without an id gets one, and (JoinGroup v4+) must come back with it: until it does
it counts as joining (MEMBER_ID_REQUIRED). A returning member's join starts or joins the
rebalance, or, when nothing changed, gets the current generation again.

Static members (``group.instance.id``) survive a rebalance without rejoining, and a restarted
instance takes over its old member id's place (the old id is fenced with FENCED_INSTANCE_ID).
"""

from __future__ import annotations

from kemu.coordinator.group.classic.messages import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    PREPARING_REBALANCE,
    STABLE,
    UNKNOWN_MEMBER_ID,
    ClassicSettings,
    Effect,
    JoinCompleted,
    JoinRequest,
    JoinResponse,
    PersistGroup,
    SyncCompleted,
    SyncResponse,
    Waiter,
    join_error,
)
from kemu.coordinator.group.classic.model import ClassicGroup, ClassicMember
from kemu.coordinator.group.classic.rebalance import ClassicRebalance
from kemu.protocol.errors import ErrorCode


class ClassicJoin:
    """JoinGroup, on the rebalance state machine it is given (which holds the groups)."""

    def __init__(self, rebalance: ClassicRebalance) -> None:
        self.rebalance = rebalance

    def join(self, request: JoinRequest, waiter: Waiter, now_ms: int) -> list[Effect]:
        effects: list[Effect] = []

        def answer(response: JoinResponse) -> list[Effect]:
            effects.append(JoinCompleted(waiter, response))
            return effects

        if not request.group_id:
            return answer(join_error(ErrorCode.invalid_group_id, request.member_id))
        settings = self.rebalance.settings(request.group_id)
        if not (
            settings.min_session_timeout_ms
            <= request.session_timeout_ms
            <= settings.max_session_timeout_ms
        ):
            return answer(join_error(ErrorCode.invalid_session_timeout, request.member_id))
        found = self.rebalance.registry.get(request.group_id)
        if found is not None and not isinstance(found, ClassicGroup):
            if found.group_type != "consumer" or not found.is_empty():
                return answer(join_error(ErrorCode.inconsistent_group_protocol))
            found = None  # an empty KIP-848 group becomes a classic one, as in Kafka
        unknown = request.member_id == UNKNOWN_MEMBER_ID
        group = found
        if group is None:
            if not unknown:
                return answer(join_error(ErrorCode.unknown_member_id, request.member_id))
            group = ClassicGroup(request.group_id, state_timestamp_ms=now_ms)
            self.rebalance.registry.put(group)
            effects.append(PersistGroup(group.group_id))
        if not self._accepts(group, request.member_id, settings):
            group.remove(request.member_id)
            return answer(join_error(ErrorCode.group_max_size_reached))
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
            return [JoinCompleted(waiter, join_error(ErrorCode.coordinator_not_available))]
        names = {name for name, _ in request.protocols}
        if not group.supports_protocols(request.protocol_type, names):
            return [JoinCompleted(waiter, join_error(ErrorCode.inconsistent_group_protocol))]
        instance_id = request.group_instance_id
        new_id = self.rebalance.new_member_id(
            instance_id if instance_id is not None else request.client_id
        )
        if instance_id is not None:
            existing = group.static_members.get(instance_id)
            if existing is not None:
                return self._replace_static_member(group, request, existing, new_id, waiter, now_ms)
            return self._add_member(group, request, new_id, waiter, now_ms)
        if request.requires_known_member_id:
            # The member must come back with this id; until it does it counts as joining.
            group.pending_members[new_id] = now_ms + request.session_timeout_ms
            return [JoinCompleted(waiter, join_error(ErrorCode.member_id_required, new_id))]
        return self._add_member(group, request, new_id, waiter, now_ms)

    def _join_existing_member(
        self, group: ClassicGroup, request: JoinRequest, waiter: Waiter, now_ms: int
    ) -> list[Effect]:
        member_id = request.member_id
        if group.state == DEAD:
            return [
                JoinCompleted(waiter, join_error(ErrorCode.coordinator_not_available, member_id))
            ]
        names = {name for name, _ in request.protocols}
        if not group.supports_protocols(request.protocol_type, names):
            return [
                JoinCompleted(waiter, join_error(ErrorCode.inconsistent_group_protocol, member_id))
            ]
        if member_id in group.pending_members:
            return self._add_member(group, request, member_id, waiter, now_ms)
        error = group.validate_member(member_id, request.group_instance_id)
        if error is not None:
            return [JoinCompleted(waiter, join_error(error, member_id))]
        member = group.members[member_id]
        same_protocols = member.protocols == request.protocols
        if group.state == PREPARING_REBALANCE:
            return self._update_member(group, member, request, waiter, now_ms)
        if group.state == COMPLETING_REBALANCE:
            if same_protocols:
                # The member missed its JoinGroup answer: send the current generation again.
                return [JoinCompleted(waiter, self.rebalance._generation_answer(group, member_id))]
            return self._update_member(group, member, request, waiter, now_ms)
        if group.state == STABLE:
            if group.is_leader(member_id) or not same_protocols:
                # A leader's rejoin is how it asks for a new assignment (e.g. topics changed).
                return self._update_member(group, member, request, waiter, now_ms)
            return [
                JoinCompleted(
                    waiter, self.rebalance._generation_answer(group, member_id, members=False)
                )
            ]
        return [JoinCompleted(waiter, join_error(ErrorCode.unknown_member_id, member_id))]

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
        return self.rebalance._prepare_rebalance_or_complete_join(group, now_ms)

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
                    join_error(ErrorCode.rebalance_in_progress, member.member_id),
                )
            )
        member.protocols = request.protocols
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.join_waiter = waiter
        return effects + self.rebalance._prepare_rebalance_or_complete_join(group, now_ms)

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
                JoinCompleted(old.join_waiter, join_error(ErrorCode.fenced_instance_id, old_id))
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
                    self.rebalance._generation_answer(group, new_id, skip=leader)
                    if request.supports_skip_assignment
                    else self.rebalance._generation_answer(group, new_id, members=False)
                )
                effects += [PersistGroup(group.group_id), JoinCompleted(waiter, answer)]
                return effects
            return effects + self.rebalance._prepare_rebalance_or_complete_join(group, now_ms)
        if group.state == COMPLETING_REBALANCE:
            # The leader may already have assigned to the old id: assign again.
            return effects + self.rebalance._prepare_rebalance(group, now_ms)
        return effects + self.rebalance._maybe_complete_join_phase(group, now_ms)
