"""The rebalance state machine of classic groups: join phases, sync deadlines, timers. Sans-IO.

As in Kafka's ``GroupMetadataManager`` classic path:

* JoinGroup parks the member until the join phase completes: when every known member has
  rejoined (and no member id handed out by MEMBER_ID_REQUIRED is still outstanding), or when the
  rebalance timeout (the largest of the members') runs out. A group coming out of Empty waits
  ``group.initial.rebalance.delay.ms`` first, and again (up to the rebalance timeout) each time
  another member joined meanwhile, so that a starting fleet lands in one generation.
* Completing the join phase drops dynamic members that did not rejoin, bumps the generation,
  picks the protocol every member supports that most members list first, and answers every
  parked JoinGroup; the leader's answer carries every member's metadata.
* A member that sends nothing for its session timeout is removed; members parked in a join or
  sync phase are alive by definition, except new members, who get 5 minutes to finish their first
  join. Members that were sent a JoinGroup answer but never sync within the rebalance timeout are
  removed too.

Time comes in as ``now_ms``; ``next_deadline_ms``/``tick`` drive the timers. The requests that
enter the machine are in ``classic/join.py`` (JoinGroup) and ``classic/group.py`` (the rest).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kemu.cluster import seeded
from kemu.coordinator.group.classic.messages import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    Effect,
    JoinCompleted,
    JoinResponse,
    PersistGroup,
    SettingsProvider,
    SyncCompleted,
    SyncResponse,
    join_error,
)
from kemu.coordinator.group.classic.model import ClassicGroup, JoinTimer
from kemu.coordinator.group.registry import GroupRegistry
from kemu.protocol.errors import ErrorCode


def random_member_id(prefix: str) -> str:
    return f"{prefix}-{seeded.new_uuid()}"


class ClassicRebalance:
    """The classic groups of a coordinator and the phases and timers that rebalance them."""

    def __init__(
        self,
        registry: GroupRegistry,
        settings: SettingsProvider,
        new_member_id: Callable[[str], str] = random_member_id,
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.new_member_id = new_member_id

    def group(self, group_id: str) -> ClassicGroup | None:
        found = self.registry.get(group_id)
        return found if isinstance(found, ClassicGroup) else None

    def groups(self) -> Iterator[ClassicGroup]:
        return (g for g in self.registry if isinstance(g, ClassicGroup))

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

    # --- answers and removals ------------------------------------------------------------------

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

    @staticmethod
    def _remove_member(group: ClassicGroup, member_id: str) -> list[Effect]:
        effects: list[Effect] = []
        member = group.remove(member_id)
        if member is None:
            return effects
        if member.join_waiter is not None:
            effects.append(
                JoinCompleted(member.join_waiter, join_error(ErrorCode.unknown_member_id))
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
        return [e for group in list(self.groups()) for e in self.tick_group(group, now_ms)]

    def tick_group(self, group: ClassicGroup, now_ms: int) -> list[Effect]:
        """Fire one group's timers due at ``now_ms``."""
        effects: list[Effect] = []
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
