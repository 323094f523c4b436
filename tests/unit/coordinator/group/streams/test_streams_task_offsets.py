"""Streams groups: the members' reported task offsets, how Kafka 4.4.0's sticky assignor uses
them (and assigns no warm-up tasks), and refused heartbeats changing nothing. Sans-IO, with the
coordinator's clock as a plain number."""

from __future__ import annotations

from typing import Any

import pytest

from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.streams.assignor import AssignMember, TaskTuple, assign
from kemu.coordinator.group.streams.model import (
    NO_TASK_OFFSETS,
    MemberTaskOffsets,
    StreamsGroup,
    StreamsSettings,
)
from kemu.coordinator.group.streams.topology import Subtopology, Topology
from kemu.protocol.errors import ErrorCode
from tests.unit.coordinator.group.streams.test_streams_group import COUNT, Harness

STATEFUL = {"0": 4}


def test_fresh_members_get_tasks_round_robin_without_offsets() -> None:
    target = assign([AssignMember("a", "p1"), AssignMember("b", "p2")], STATEFUL, {"0"}, 0)
    assert target["a"].active == {("0", 0), ("0", 2)}
    assert target["b"].active == {("0", 1), ("0", 3)}


def test_a_member_reporting_offsets_for_tasks_gets_them() -> None:
    """A restarted instance (a new member id, nothing assigned) with state on disk reports its
    offsets: the assignor hands it those tasks, as Kafka 4.4.0's StickyTaskAssignor does."""
    b = AssignMember("b", "p2", task_offsets={("0", 0): 120, ("0", 1): 80})
    target = assign([AssignMember("a", "p1"), b], STATEFUL, {"0"}, 0)
    assert target["b"].active == {("0", 0), ("0", 1)}
    assert target["a"].active == {("0", 2), ("0", 3)}
    assert all(t.warmup == frozenset() for t in target.values())


def test_the_current_owner_wins_over_reported_state_and_quotas_hold() -> None:
    owner = AssignMember("a", "p1", TaskTuple(active=frozenset({("0", 0), ("0", 1)})))
    claimant = AssignMember("b", "p2", task_offsets={("0", 0): 999, ("0", 1): 999})
    target = assign([owner, claimant], STATEFUL, {"0"}, 0)
    assert target["a"].active == {("0", 0), ("0", 1)}
    assert target["b"].active == {("0", 2), ("0", 3)}


def test_standbys_rank_before_offset_holders_and_the_most_caught_up_first() -> None:
    task = ("0", 0)
    tasks = {"0": 1}
    # c holds the standby (no offset reported), b only reported a high offset: c wins.
    b = AssignMember("b", "p2", task_offsets={task: 500})
    c = AssignMember("c", "p3", TaskTuple(standby=frozenset({task})))
    target = assign([AssignMember("a", "p1"), b, c], tasks, {"0"}, 0)
    assert target["c"].active == {task}
    # Between two offset holders, the higher offset wins.
    low = AssignMember("b", "p2", task_offsets={task: 10})
    high = AssignMember("c", "p3", task_offsets={task: 20})
    target = assign([AssignMember("a", "p1"), low, high], tasks, {"0"}, 0)
    assert target["c"].active == {task}


def test_standby_copies_go_to_the_previous_owner_and_never_beside_the_active() -> None:
    previous = TaskTuple(active=frozenset({("0", 0), ("0", 1), ("0", 2), ("0", 3)}))
    members = [AssignMember("a", "p1", previous), AssignMember("b", "p2")]
    target = assign(members, STATEFUL, {"0"}, 1)
    assert target["a"].active | target["b"].active == {("0", p) for p in range(4)}
    for me, other in (("a", "b"), ("b", "a")):
        assert target[me].standby == target[other].active
    # Two copies wanted, one other process: one copy each, no duplicates on a process.
    two = assign(members, STATEFUL, {"0"}, 2)
    for tuple_ in two.values():
        assert not tuple_.active & tuple_.standby


def _stateful_harness() -> Harness:
    h = Harness()
    h.coordinator.settings = lambda _: StreamsSettings(session_timeout_ms=10_000)
    return h


def _group(h: Harness) -> StreamsGroup:
    group = h.coordinator.group("app")
    assert group is not None
    return group


def test_task_offsets_are_kept_per_member_replaced_when_sent_and_dropped_on_leave() -> None:
    h = _stateful_harness()
    a = h.beat("a", 0, task_offsets=(("1", 0, 7),), task_end_offsets=(("1", 0, 9),))
    group = _group(h)
    assert group.task_offsets["a"] == MemberTaskOffsets({("1", 0): 7}, {("1", 0): 9})
    # Null lists keep what was reported; one list alone replaces only its map.
    h.beat("a", a.member_epoch, owned=a.assignment)
    assert group.task_offsets["a"].offsets == {("1", 0): 7}
    h.beat("a", a.member_epoch, task_offsets=(("1", 0, 8), ("1", 1, 3)))
    assert group.task_offsets["a"] == MemberTaskOffsets({("1", 0): 8, ("1", 1): 3}, {("1", 0): 9})
    h.beat("a", -1)
    assert "a" not in group.task_offsets and group.task_offsets.get("a", NO_TASK_OFFSETS) is (
        NO_TASK_OFFSETS
    )


def test_a_duplicate_task_offset_is_invalid_request_and_changes_nothing() -> None:
    h = _stateful_harness()
    a = h.beat("a", 0, task_offsets=(("1", 0, 7),))
    group = _group(h)
    before = (group.group_epoch, dict(group.members), dict(group.task_offsets))
    for field in ("task_offsets", "task_end_offsets"):
        with pytest.raises(GroupError) as error:
            h.beat("a", a.member_epoch, **{field: (("1", 1, 1), ("1", 1, 2))})
        assert error.value.code == ErrorCode.invalid_request
        assert error.value.message == (
            "Task offsets contain a duplicate entry for subtopology 1 and partition 1."
        )
        assert (group.group_epoch, dict(group.members), dict(group.task_offsets)) == before
    with pytest.raises(GroupError):  # also when joining: no member is added
        h.beat("b", 0, task_offsets=(("0", 0, 1), ("0", 0, 1)))
    assert set(group.members) == {"a"} and group.group_epoch == before[0]


def test_a_restarted_instance_gets_its_tasks_back_by_its_reported_offsets() -> None:
    """Two instances; b dies (SIGKILL: no leave) and comes back under a new member id before its
    session expires, reporting the offsets of the state it kept on disk. Once the old b expires,
    the tasks it owned go to the new b, not to a, because of those offsets."""
    h = _stateful_harness()
    a = h.beat("a", 0)
    b = h.beat("b", 0)
    step = h.beat("a", a.member_epoch, owned=a.assignment)
    h.beat("a", step.member_epoch, owned=step.assignment)
    b = h.beat("b", b.member_epoch, owned=TaskTuple())
    group = _group(h)
    b_tasks = group.members["b"].assigned.active
    assert b_tasks and group.state_name == "Stable"
    h.now += 5_000
    h.beat("a", group.members["a"].member_epoch)  # a keeps its session
    offsets = tuple((sub, p, 100) for sub, p in sorted(b_tasks))
    h.beat("b-restarted", 0, process_id="process-b2", task_offsets=offsets)
    h.now += 6_000  # old b's session (10 s from its last heartbeat) has passed
    assert h.coordinator.expire(h.now, h.topics.get) == [("app", "b")]
    # As Kafka: the departure bumps the epoch; the next heartbeat computes the target.
    h.beat("b-restarted", group.members["b-restarted"].member_epoch)
    assert group.target["b-restarted"].active == b_tasks
    assert all(t.warmup == frozenset() for t in group.target.values())


def test_a_refused_heartbeat_rolls_back_a_config_driven_epoch_bump() -> None:
    """A heartbeat that notices a changed streams.num.standby.replicas but is then refused (a
    task that does not exist) must not swallow the rebalance: the next one still bumps."""
    h = _stateful_harness()
    a = h.beat("a", 0)
    h.beat("a", a.member_epoch, owned=a.assignment)
    group = _group(h)
    epoch = group.group_epoch
    h.coordinator.settings = lambda _: StreamsSettings(
        session_timeout_ms=10_000, num_standby_replicas=1
    )
    with pytest.raises(GroupError) as error:
        h.beat("a", a.member_epoch, owned=TaskTuple(active=frozenset({("1", 9)})))
    assert error.value.code == ErrorCode.invalid_request
    assert group.group_epoch == epoch and group.assignment_configs == (
        ("num.standby.replicas", "0"),
    )
    after = h.beat("a", a.member_epoch, owned=a.assignment)
    assert after.member_epoch == epoch + 1


def test_a_refused_topology_update_does_not_consume_a_static_members_place() -> None:
    h = _stateful_harness()
    a = h.beat("a", 0, instance_id="i1")
    h.beat("a", a.member_epoch, owned=a.assignment)
    h.beat("a", -2, instance_id="i1")
    group = _group(h)
    changed = Topology(COUNT.epoch, (*COUNT.subtopologies, Subtopology("2", source_topics=("in",))))
    with pytest.raises(GroupError) as error:
        h.beat("a2", 0, instance_id="i1", topology=changed)
    assert error.value.code == ErrorCode.invalid_request
    assert set(group.members) == {"a"} and group.members["a"].member_epoch == -2
    back = h.beat("a2", 0, instance_id="i1")
    assert back.assignment is not None and back.assignment.active == a.assignment.active


def test_fenced_epochs_and_unknown_members_change_nothing() -> None:
    h = _stateful_harness()
    a = h.beat("a", 0)
    group = _group(h)
    snapshot: dict[str, Any] = {
        "epoch": group.group_epoch,
        "members": dict(group.members),
        "target": dict(group.target),
    }
    for epoch in (a.member_epoch + 1, a.member_epoch + 7):
        with pytest.raises(GroupError) as error:
            h.beat("a", epoch, task_offsets=(("1", 0, 1),))
        assert error.value.code == ErrorCode.fenced_member_epoch
    with pytest.raises(GroupError) as error:
        h.beat("ghost", 3)
    assert error.value.code == ErrorCode.unknown_member_id
    assert group.task_offsets == {}
    assert snapshot == {
        "epoch": group.group_epoch,
        "members": dict(group.members),
        "target": dict(group.target),
    }
