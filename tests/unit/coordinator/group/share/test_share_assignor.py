"""The share-group assignor: every partition covered, loads within one, sharing when members
outnumber partitions, stickiness, per-topic assignment for different subscriptions."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kemu.coordinator.group.assignor import TopicPartition, assign

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def members(count: int) -> list[str]:
    return [f"m{i}" for i in range(count)]


def homogeneous(count: int, topics: frozenset[uuid.UUID]) -> dict[str, frozenset[uuid.UUID]]:
    return {m: topics for m in members(count)}


def holders(result: dict[str, frozenset[TopicPartition]]) -> Counter[TopicPartition]:
    return Counter(p for partitions in result.values() for p in partitions)


@pytest.mark.parametrize(
    ("count", "loads", "sharing"),
    [(1, [3], 1), (2, [1, 2], 1), (3, [1, 1, 1], 1), (5, [1, 1, 1, 1, 2], 2), (6, [1] * 6, 2)],
)
def test_spread_over_three_partitions(count: int, loads: list[int], sharing: int) -> None:
    result = assign(homogeneous(count, frozenset({T1})), {T1: 3}, {})
    assert sorted(len(p) for p in result.values()) == loads
    assert holders(result) == {(T1, i): sharing for i in range(3)}


def test_one_partition_is_given_to_every_member() -> None:
    result = assign(homogeneous(4, frozenset({T1})), {T1: 1}, {})
    assert all(p == frozenset({(T1, 0)}) for p in result.values())


def test_no_partitions_no_members() -> None:
    assert assign({}, {T1: 3}, {}) == {}
    assert assign(homogeneous(2, frozenset()), {}, {}) == {"m0": frozenset(), "m1": frozenset()}


def test_existing_assignment_is_kept_when_balanced() -> None:
    current = {"m0": frozenset({(T1, 2)}), "m1": frozenset({(T1, 0), (T1, 1)})}
    result = assign(homogeneous(2, frozenset({T1})), {T1: 3}, current)
    # m0's quota is 2, m1's 1: m0 keeps (T1, 2), m1 keeps one of its two, the other moves.
    assert (T1, 2) in result["m0"]
    assert len(result["m1"] & current["m1"]) == 1
    assert holders(result) == {(T1, i): 1 for i in range(3)}


def test_a_joining_member_takes_partitions_only_from_the_loaded() -> None:
    before = assign(homogeneous(2, frozenset({T1})), {T1: 4}, {})
    after = assign(homogeneous(3, frozenset({T1})), {T1: 4}, before)
    moved = sum(len(before[m] - after[m]) for m in before)
    assert moved == 1
    assert sorted(len(p) for p in after.values()) == [1, 1, 2]


def test_unsubscribed_topics_are_dropped() -> None:
    current = {"m0": frozenset({(T2, 0)})}
    result = assign({"m0": frozenset({T1})}, {T1: 1, T2: 1}, current)
    assert result == {"m0": frozenset({(T1, 0)})}


def test_heterogeneous_subscriptions_assign_topic_by_topic() -> None:
    subscriptions = {"a": frozenset({T1}), "b": frozenset({T1, T2}), "c": frozenset({T2})}
    result = assign(subscriptions, {T1: 2, T2: 2}, {})
    assert all(topic == T1 for topic, _ in result["a"])
    assert all(topic == T2 for topic, _ in result["c"])
    assert holders(result) == {(T1, 0): 1, (T1, 1): 1, (T2, 0): 1, (T2, 1): 1}


@given(
    member_count=st.integers(min_value=1, max_value=12),
    partition_count=st.integers(min_value=1, max_value=12),
    seed_count=st.integers(min_value=0, max_value=12),
)
def test_invariants(member_count: int, partition_count: int, seed_count: int) -> None:
    subscriptions = homogeneous(member_count, frozenset({T1}))
    previous = assign(homogeneous(seed_count, frozenset({T1})), {T1: partition_count}, {})
    result = assign(subscriptions, {T1: partition_count}, previous)
    sharing = -(-member_count // partition_count)
    counts = holders(result)
    assert set(counts) == {(T1, i) for i in range(partition_count)}
    assert all(c == sharing for c in counts.values())
    loads = [len(p) for p in result.values()]
    assert max(loads) - min(loads) <= 1
    assert assign(subscriptions, {T1: partition_count}, previous) == result  # deterministic
