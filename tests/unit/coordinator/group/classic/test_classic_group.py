"""The classic group state machine with a virtual clock: join/sync/heartbeat/leave, expiry,
static members, and rebalances as a group grows from 1 to 3 members."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from kemu.coordinator.group.classic.group import (
    COMPLETING_REBALANCE,
    EMPTY,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroup,
    ClassicGroupCoordinator,
    ClassicSettings,
    Effect,
    JoinCompleted,
    JoinRequest,
    JoinResponse,
    LeavingMember,
    PersistGroup,
    StoreAssignment,
    SyncCompleted,
    SyncRequest,
    SyncResponse,
)
from kemu.coordinator.group.consumer.protocol import encode_subscription
from kemu.coordinator.group.registry import GroupRegistry
from kemu.coordinator.group.share.group import ShareGroup
from kemu.protocol.errors import ErrorCode

GROUP = "g"
DELAY_MS = 100
SESSION_MS = 10_000
REBALANCE_MS = 30_000
SUBSCRIPTION = encode_subscription(["t"])
PROTOCOLS = (("range", SUBSCRIPTION), ("roundrobin", SUBSCRIPTION))


class Harness:
    def __init__(self, delay_ms: int = DELAY_MS, max_size: int = 2**31 - 1) -> None:
        self.registry = GroupRegistry()
        ids = itertools.count(1)
        self.coordinator = ClassicGroupCoordinator(
            self.registry,
            lambda group_id: ClassicSettings(
                initial_rebalance_delay_ms=delay_ms, max_size=max_size
            ),
            new_member_id=lambda prefix: f"{prefix}-{next(ids)}",
        )
        self.now = 1_000
        self.waiters = itertools.count()
        self.answers: dict[Any, Any] = {}
        self.persisted: list[str] = []
        self.store_error = ErrorCode.none  # what writing the leader's assignment answers

    def _collect(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, JoinCompleted | SyncCompleted):
                assert effect.waiter not in self.answers, "a waiter is answered once"
                self.answers[effect.waiter] = effect.response
            elif isinstance(effect, PersistGroup):
                self.persisted.append(effect.group_id)
            elif isinstance(effect, StoreAssignment):
                if self.store_error == ErrorCode.none:
                    self.persisted.append(effect.group_id)
                self._collect(
                    self.coordinator.assignment_stored(
                        effect.group_id, effect.generation_id, self.store_error, self.now
                    )
                )

    def join(
        self,
        member_id: str = "",
        *,
        instance: str | None = None,
        protocols: tuple[tuple[str, bytes], ...] = PROTOCOLS,
        protocol_type: str = "consumer",
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        client: str = "client",
        v4: bool = True,
    ) -> int:
        waiter = next(self.waiters)
        request = JoinRequest(
            group_id=GROUP,
            member_id=member_id,
            protocol_type=protocol_type,
            protocols=protocols,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            group_instance_id=instance,
            client_id=client,
            requires_known_member_id=v4,
        )
        self._collect(self.coordinator.join(request, waiter, self.now))
        return waiter

    def sync(
        self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None
    ) -> int:
        waiter = next(self.waiters)
        request = SyncRequest(
            GROUP, member_id, generation, assignments=tuple((assignments or {}).items())
        )
        self._collect(self.coordinator.sync(request, waiter, self.now))
        return waiter

    def heartbeat(self, member_id: str, generation: int, instance: str | None = None) -> ErrorCode:
        return self.coordinator.heartbeat(GROUP, member_id, generation, instance, self.now)

    def advance(self, ms: int) -> None:
        self.now += ms
        self._collect(self.coordinator.tick(self.now))

    def advance_heartbeating(
        self, ms: int, generation: int, members: list[str], instances: dict[str, str] | None = None
    ) -> None:
        """Advance in half-session steps, ``members`` heartbeating (whatever the answer)."""
        step = SESSION_MS // 2
        for _ in range(ms // step):
            for member in members:
                self.heartbeat(member, generation, (instances or {}).get(member))
            self.advance(step)
        self.advance(ms % step)

    def leave(self, *members: LeavingMember) -> Any:
        result = self.coordinator.leave(GROUP, list(members), self.now)
        self._collect(list(result.effects))
        return result

    def until_answered(self, *waiters: int) -> None:
        """Let initial delays run out (each member joining during one extends it)."""
        for _ in range(100):
            if all(w in self.answers for w in waiters):
                return
            self.advance(DELAY_MS)
        raise AssertionError("the join phase never completed")

    def answer(self, waiter: int) -> Any:
        return self.answers.get(waiter)

    @property
    def group(self) -> ClassicGroup:
        group = self.coordinator.group(GROUP)
        assert group is not None
        return group

    def new_member(self) -> str:
        """The v4 first-join dance: MEMBER_ID_REQUIRED hands out the id to join with."""
        response = self.answer(self.join())
        assert response.error == ErrorCode.member_id_required
        member_id: str = response.member_id
        return member_id

    def stable_group(self, count: int) -> tuple[list[str], int]:
        """A Stable group of ``count`` members: their ids and the generation."""
        members = [self.new_member() for _ in range(count)]
        waiters = [self.join(member_id) for member_id in members]
        self.until_answered(*waiters)
        answers = [self.answer(w) for w in waiters]
        assert all(a is not None and a.error == ErrorCode.none for a in answers)
        generation = answers[0].generation_id
        leader = answers[0].leader
        self.sync(leader, generation, {m: m.encode() for m in members})
        for member_id in members:
            if member_id != leader:
                self.sync(member_id, generation)
        assert self.group.state == STABLE
        return members, generation


@pytest.fixture
def harness() -> Harness:
    return Harness()


def test_first_join_needs_a_member_id_then_waits_for_the_initial_delay(harness: Harness) -> None:
    member_id = harness.new_member()
    assert member_id.startswith("client-")
    waiter = harness.join(member_id)
    assert harness.answer(waiter) is None  # parked
    assert harness.group.state == PREPARING_REBALANCE
    harness.advance(DELAY_MS - 1)
    assert harness.answer(waiter) is None
    harness.advance(1)
    answer: JoinResponse = harness.answer(waiter)
    assert answer.error == ErrorCode.none
    assert (answer.generation_id, answer.leader, answer.member_id) == (1, member_id, member_id)
    assert answer.protocol_type == "consumer" and answer.protocol_name == "range"
    assert [m.member_id for m in answer.members] == [member_id]
    assert answer.members[0].metadata == SUBSCRIPTION
    assert harness.group.state == COMPLETING_REBALANCE

    sync = harness.sync(member_id, 1, {member_id: b"mine"})
    assert harness.answer(sync) == SyncResponse(ErrorCode.none, b"mine", "consumer", "range")
    assert harness.group.state == STABLE
    assert harness.persisted[-1] == GROUP
    assert harness.heartbeat(member_id, 1) == ErrorCode.none


def test_join_v3_adds_the_member_at_once(harness: Harness) -> None:
    waiter = harness.join(v4=False)
    harness.advance(DELAY_MS)
    answer = harness.answer(waiter)
    assert answer.error == ErrorCode.none and answer.member_id == answer.leader


def test_the_group_grows_from_one_to_three_members(harness: Harness) -> None:
    (first,), generation = harness.stable_group(1)
    assert generation == 1

    # A second member: the group prepares a rebalance; the first learns it from its heartbeat.
    second = harness.new_member()
    joining = harness.join(second)
    assert harness.group.state == PREPARING_REBALANCE
    assert harness.heartbeat(first, 1) == ErrorCode.rebalance_in_progress
    assert harness.answer(joining) is None
    rejoin = harness.join(first)  # everybody is in: no wait for the rebalance timeout
    leader_answer, follower_answer = harness.answer(rejoin), harness.answer(joining)
    assert leader_answer.generation_id == follower_answer.generation_id == 2
    assert leader_answer.leader == first == follower_answer.leader
    assert {m.member_id for m in leader_answer.members} == {first, second}
    assert follower_answer.members == ()

    # The follower's SyncGroup waits for the leader's assignment.
    follower_sync = harness.sync(second, 2)
    assert harness.answer(follower_sync) is None
    leader_sync = harness.sync(first, 2, {first: b"a", second: b"b"})
    assert harness.answer(leader_sync).assignment == b"a"
    assert harness.answer(follower_sync).assignment == b"b"
    assert harness.group.state == STABLE

    # A third member.
    third = harness.new_member()
    joining_third = harness.join(third)
    waiters = [harness.join(first), harness.join(second)]
    answers = [harness.answer(w) for w in [*waiters, joining_third]]
    assert {a.generation_id for a in answers} == {3}
    assert {m.member_id for m in answers[0].members} == {first, second, third}
    harness.sync(first, 3, {first: b"1", second: b"2", third: b"3"})
    assert harness.answer(harness.sync(third, 3)).assignment == b"3"
    assert harness.heartbeat(second, 3) == ErrorCode.none


def test_an_assignment_that_is_not_written_is_given_to_nobody(harness: Harness) -> None:
    """Kafka's SyncGroup append callback: the parked SyncGroups get the append's error, the
    assignment is dropped and the group rebalances; once written, everybody gets it."""
    (first,), _ = harness.stable_group(1)
    second = harness.new_member()
    joining = harness.join(second)
    harness.join(first)
    assert harness.answer(joining).generation_id == 2
    follower_sync = harness.sync(second, 2)
    harness.store_error = ErrorCode.not_coordinator
    leader_sync = harness.sync(first, 2, {first: b"a", second: b"b"})
    assert harness.answer(leader_sync) == SyncResponse(ErrorCode.not_coordinator, b"")
    assert harness.answer(follower_sync) == SyncResponse(ErrorCode.not_coordinator, b"")
    assert harness.group.state == PREPARING_REBALANCE
    assert {m.assignment for m in harness.group.members.values()} == {b""}
    harness.store_error = ErrorCode.none
    rejoined = [harness.join(first), harness.join(second)]
    assert {harness.answer(w).generation_id for w in rejoined} == {3}
    follower_sync = harness.sync(second, 3)
    assert harness.answer(harness.sync(first, 3, {first: b"a", second: b"b"})).assignment == b"a"
    assert harness.answer(follower_sync).assignment == b"b"
    assert harness.group.state == STABLE


def test_a_member_that_does_not_rejoin_is_dropped_after_the_rebalance_timeout(
    harness: Harness,
) -> None:
    (first, second), generation = harness.stable_group(2)
    third = harness.new_member()
    waiters = [harness.join(third), harness.join(first)]
    # second stays alive (heartbeats answered REBALANCE_IN_PROGRESS) but never rejoins.
    harness.advance_heartbeating(REBALANCE_MS - 1, generation, [second])
    assert harness.answer(waiters[0]) is None
    harness.advance(1)
    answers = [harness.answer(w) for w in waiters]
    assert {m.member_id for m in answers[1].members} == {first, third}
    assert second not in harness.group.members
    assert harness.heartbeat(second, generation) == ErrorCode.unknown_member_id


def test_heartbeat_errors(harness: Harness) -> None:
    (member,), generation = harness.stable_group(1)
    assert harness.heartbeat(member, generation + 1) == ErrorCode.illegal_generation
    assert harness.heartbeat("nobody", generation) == ErrorCode.unknown_member_id
    assert (
        harness.coordinator.heartbeat("", member, generation, None, harness.now)
        == ErrorCode.invalid_group_id
    )
    assert (
        harness.coordinator.heartbeat("other", member, generation, None, harness.now)
        == ErrorCode.unknown_member_id
    )


def test_join_errors(harness: Harness) -> None:
    assert harness.answer(harness.join(session_ms=10)).error == ErrorCode.invalid_session_timeout
    assert harness.answer(harness.join("ghost")).error == ErrorCode.unknown_member_id
    harness.stable_group(1)
    other_protocol = harness.join(protocols=(("sticky", b""),))
    assert harness.answer(other_protocol).error == ErrorCode.inconsistent_group_protocol
    other_type = harness.join(protocol_type="connect")
    assert harness.answer(other_type).error == ErrorCode.inconsistent_group_protocol

    harness.registry.put(ShareGroup("shared"))
    waiter = next(harness.waiters)
    request = JoinRequest("shared", "", "consumer", PROTOCOLS, SESSION_MS, REBALANCE_MS)
    harness._collect(harness.coordinator.join(request, waiter, harness.now))
    assert harness.answer(waiter).error == ErrorCode.inconsistent_group_protocol


def test_group_max_size() -> None:
    harness = Harness(max_size=1)
    harness.stable_group(1)
    assert harness.answer(harness.join()).error == ErrorCode.group_max_size_reached


def test_the_protocol_most_members_prefer_among_those_all_support(harness: Harness) -> None:
    first = harness.new_member()
    second = harness.new_member()
    both = (("roundrobin", b""), ("range", b""))
    waiters = [harness.join(first, protocols=both), harness.join(second, protocols=both)]
    harness.until_answered(*waiters)
    assert {harness.answer(w).protocol_name for w in waiters} == {"roundrobin"}


def test_sync_errors(harness: Harness) -> None:
    (member,), generation = harness.stable_group(1)
    assert harness.answer(harness.sync(member, generation + 5)).error == (
        ErrorCode.illegal_generation
    )
    assert harness.answer(harness.sync("nobody", generation)).error == ErrorCode.unknown_member_id
    waiter = next(harness.waiters)
    wrong = SyncRequest(GROUP, member, generation, protocol_name="roundrobin")
    harness._collect(harness.coordinator.sync(wrong, waiter, harness.now))
    assert harness.answer(waiter).error == ErrorCode.inconsistent_group_protocol
    # While a rebalance is being prepared, a SyncGroup must rejoin instead.
    harness.join(harness.new_member())
    assert harness.answer(harness.sync(member, generation)).error == (
        ErrorCode.rebalance_in_progress
    )


def test_leave_rebalances_the_rest(harness: Harness) -> None:
    (first, second), generation = harness.stable_group(2)
    result = harness.leave(LeavingMember(second))
    assert result.members == ((LeavingMember(second), ErrorCode.none),)
    assert harness.group.state == PREPARING_REBALANCE
    waiter = harness.join(first)
    answer = harness.answer(waiter)
    assert answer.generation_id == generation + 1
    assert [m.member_id for m in answer.members] == [first]

    unknown = harness.leave(LeavingMember("nobody"))
    assert unknown.members == ((LeavingMember("nobody"), ErrorCode.unknown_member_id),)
    assert harness.coordinator.leave("missing", [], harness.now).error == (
        ErrorCode.unknown_member_id
    )


def test_the_last_member_leaving_empties_the_group(harness: Harness) -> None:
    (member,), generation = harness.stable_group(1)
    harness.leave(LeavingMember(member))
    assert harness.group.state == EMPTY
    assert harness.group.generation_id == generation + 1
    assert harness.group.is_empty()
    assert harness.persisted[-1] == GROUP


def test_leaving_answers_a_parked_join(harness: Harness) -> None:
    (first, _second), _ = harness.stable_group(2)
    parked = harness.join(first)
    harness.leave(LeavingMember(first))
    assert harness.answer(parked).error == ErrorCode.unknown_member_id


def test_session_expiry_removes_a_silent_member(harness: Harness) -> None:
    (first, second), generation = harness.stable_group(2)
    harness.advance(SESSION_MS // 2)
    assert harness.heartbeat(first, generation) == ErrorCode.none
    harness.advance(SESSION_MS // 2)
    assert second not in harness.group.members
    assert harness.group.state == PREPARING_REBALANCE
    assert harness.heartbeat(first, generation) == ErrorCode.rebalance_in_progress
    answer = harness.answer(harness.join(first))
    assert answer.generation_id == generation + 1 and len(answer.members) == 1


def test_a_member_parked_in_a_join_is_not_expired(harness: Harness) -> None:
    (first, _second), _ = harness.stable_group(2)
    parked = harness.join(first)
    harness.advance(SESSION_MS + 1)  # first is parked, second silent: only second goes
    assert first in harness.group.members
    assert harness.answer(parked).members[0].member_id == first


def test_a_new_member_that_never_finishes_joining_is_removed(harness: Harness) -> None:
    (first,), generation = harness.stable_group(1)
    newcomer = harness.new_member()
    parked = harness.join(newcomer, rebalance_ms=2 * NEW_MEMBER_JOIN_TIMEOUT_MS)
    # first stays alive without rejoining, so the join phase runs to its (long) timeout.
    harness.advance_heartbeating(NEW_MEMBER_JOIN_TIMEOUT_MS - 1, generation, [first])
    assert harness.answer(parked) is None
    harness.heartbeat(first, generation)
    harness.advance(1)
    assert harness.answer(parked).error == ErrorCode.unknown_member_id
    assert newcomer not in harness.group.members


def test_a_member_id_required_that_never_comes_back_expires(harness: Harness) -> None:
    (_first,), _generation = harness.stable_group(1)
    harness.new_member()
    assert len(harness.group.pending_members) == 1
    harness.advance(SESSION_MS)
    assert not harness.group.pending_members


def test_members_that_do_not_sync_are_removed(harness: Harness) -> None:
    first = harness.new_member()
    second = harness.new_member()
    waiters = [harness.join(first), harness.join(second)]
    harness.until_answered(*waiters)
    generation = harness.answer(waiters[0]).generation_id
    harness.sync(first, generation, {first: b"x", second: b"y"})
    assert harness.group.state == STABLE and harness.group.pending_sync == {second}
    harness.advance_heartbeating(REBALANCE_MS, generation, [first])
    assert second not in harness.group.members
    assert harness.group.state == PREPARING_REBALANCE


def test_the_initial_delay_grows_while_members_keep_arriving() -> None:
    harness = Harness(delay_ms=1_000)
    first = harness.new_member()
    waiter = harness.join(first)
    harness.advance(500)
    second = harness.new_member()
    harness.join(second)
    harness.advance(500)  # the first delay ran out, but a member arrived meanwhile
    assert harness.answer(waiter) is None
    harness.advance(1_000)
    assert len(harness.answer(waiter).members) == 2


def test_static_member_restart_takes_over_without_a_rebalance(harness: Harness) -> None:
    first = harness.answer(harness.join(instance="i-1"))
    assert first is None  # static members skip MEMBER_ID_REQUIRED and wait for the delay
    harness.advance(DELAY_MS)
    member_id = harness.group.static_members["i-1"]
    assert member_id.startswith("i-1-")
    harness.sync(member_id, 1, {member_id: b"kept"})

    # The instance restarts: a join with no member id but the same instance id.
    waiter = harness.join(instance="i-1")
    answer = harness.answer(waiter)
    assert answer.error == ErrorCode.none
    assert answer.generation_id == 1 and answer.member_id != member_id
    assert answer.skip_assignment  # it is the leader: keep the assignment
    assert harness.group.state == STABLE
    assert harness.heartbeat(member_id, 1, "i-1") == ErrorCode.fenced_instance_id
    assert harness.heartbeat(answer.member_id, 1, "i-1") == ErrorCode.none
    assert harness.answer(harness.sync(answer.member_id, 1)).assignment == b"kept"


def test_a_static_member_survives_a_rebalance_it_misses(harness: Harness) -> None:
    static = harness.join(instance="i-1")
    dynamic_id = harness.new_member()
    dynamic = harness.join(dynamic_id)
    harness.until_answered(static, dynamic)
    static_id = harness.answer(static).member_id
    generation = harness.answer(dynamic).generation_id
    harness.sync(harness.group.leader_id or "", generation, {})
    harness.join(harness.new_member())  # a rebalance the static member sleeps through
    harness.join(dynamic_id)
    harness.advance_heartbeating(REBALANCE_MS, generation, [static_id], {static_id: "i-1"})
    assert static_id in harness.group.members
    assert harness.group.generation_id == generation + 1


def test_admin_removes_a_static_member_by_instance_id(harness: Harness) -> None:
    harness.join(instance="i-1")
    harness.advance(DELAY_MS)
    result = harness.leave(LeavingMember("", "i-1"))
    assert result.members[0][1] == ErrorCode.none
    assert harness.group.state == EMPTY


def test_an_empty_group_is_listed_as_such(harness: Harness) -> None:
    (member,), _ = harness.stable_group(1)
    group = harness.group
    assert (group.group_type, group.protocol_type, group.state_name) == (
        "classic",
        "consumer",
        STABLE,
    )
    assert group.subscribed_topics() == {"t"}
    harness.leave(LeavingMember(member))
    assert harness.group.subscribed_topics() == set()
