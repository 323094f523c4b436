"""A KIP-848 consumer group's preferred server assignor (``consumer.preferred_assignor``): the
most used ServerAssignor, ties broken as Kafka 4.4.0's Java maps iterate, and the heartbeat that
changes it bumping the group epoch and computing the target with it. The expected picks were
taken from Kafka's own TimelineHashMap and a java.util.HashMap copy (jshell, JDK 17) and from a
Kafka 4.4.0 broker (``groups/test_group_server_assignor_kafka.py``)."""

from __future__ import annotations

import pytest

from kemu.coordinator.group.consumer.preferred_assignor import (
    java_string_hash,
    preferred,
    preferred_with,
)
from kemu.coordinator.group.errors import GroupError
from kemu.protocol.errors import ErrorCode
from tests.unit.coordinator.group.consumer.test_consumer_group import T2, Harness, parts


@pytest.fixture
def harness() -> Harness:
    return Harness()


def test_java_string_hash() -> None:
    assert java_string_hash("range") == 108280125
    assert java_string_hash("uniform") == -286926412 + (1 << 32)
    assert java_string_hash("") == 0


@pytest.mark.parametrize(
    ("named", "expected"),
    [
        ([], "uniform"),  # no member names one: the default
        ([None, None], "uniform"),
        (["range"], "range"),
        (["range", None, "uniform", "range"], "range"),
        (["range", "uniform"], "uniform"),  # a tie: the timeline's first slot
        (["uniform", "range"], "uniform"),
        (["range", "sticky", None], "sticky"),  # one slot: the name added last first
    ],
)
def test_the_groups_preferred_assignor(named: list[str | None], expected: str) -> None:
    assert preferred(named) == expected


@pytest.mark.parametrize(
    ("named", "before", "after", "expected"),
    [
        (["uniform"], None, "range", "range"),  # a new key goes to its bucket's head
        (["range"], None, "uniform", "uniform"),
        (["uniform", "range"], "range", "range", "range"),  # taken off and put back first
        (["uniform", "range"], "uniform", "uniform", "uniform"),
        (["uniform", "range"], None, None, "uniform"),
        (["range", "range", "uniform"], "range", "uniform", "uniform"),
        ([], None, "range", "range"),  # from an empty map: a table of 16
        (["range", "sticky", None], "range", "range", "sticky"),
    ],
)
def test_the_preferred_assignor_of_a_heartbeat(
    named: list[str | None], before: str | None, after: str | None, expected: str
) -> None:
    assert preferred_with(named, before, after) == expected


def test_a_regex_only_join_naming_range_bumps_the_epoch(harness: Harness) -> None:
    joined = harness.beat(
        "a",
        0,
        frozenset(),
        rebalance_timeout_ms=60_000,
        subscribed_topic_regex="nothing.*",
        server_assignor="range",
    )
    assert joined.member_epoch == 2
    assert (harness.group.group_epoch, harness.group.assignment_epoch) == (2, 2)
    uniform = harness.beat(
        "b",
        0,
        frozenset(),
        rebalance_timeout_ms=60_000,
        subscribed_topic_regex="nothing.*",
        server_assignor="uniform",
    )
    assert uniform.member_epoch == 3  # a tie: uniform preferred after the heartbeat


def test_naming_another_assignor_bumps_the_epoch(harness: Harness) -> None:
    assert harness.join("a").member_epoch == 2
    assert harness.group.assignor_name == "uniform"
    epochs = [harness.beat("a", 2, server_assignor="range").member_epoch]
    assert harness.group.assignor_name == "range"
    epochs.append(harness.beat("a", epochs[-1], server_assignor="range").member_epoch)
    epochs.append(harness.beat("a", epochs[-1]).member_epoch)  # the name kept
    epochs.append(harness.beat("a", epochs[-1], server_assignor="uniform").member_epoch)
    assert epochs == [3, 3, 3, 4]
    assert harness.group.assignment_epoch == 4


def test_a_tie_computes_the_target_with_range_and_each_range_heartbeat_bumps(
    harness: Harness,
) -> None:
    harness.join("a", ("t", "u"), server_assignor="uniform")
    harness.join("b", ("t", "u"), server_assignor="range")
    # range's ranges (uniform, sticky, would have left a with T1's 0-3)
    assert harness.group.target == {
        "a": parts(0, 1, 2) | parts(0, topic=T2),
        "b": parts(3, 4, 5) | parts(1, topic=T2),
    }
    assert harness.group.assignor_name == "uniform"  # what ConsumerGroupDescribe answers
    epoch = harness.group.group_epoch
    harness.beat("b", harness.group.members["b"].member_epoch)
    harness.beat("b", harness.group.members["b"].member_epoch)
    assert harness.group.group_epoch == epoch + 2
    harness.beat("a", harness.group.members["a"].member_epoch, parts(0, 1, 2, 3, 4, 5))
    harness.beat("a", harness.group.members["a"].member_epoch)
    assert harness.group.group_epoch == epoch + 2
    assert harness.group.target["b"] == parts(3, 4, 5) | parts(1, topic=T2)


@pytest.mark.parametrize(("epoch", "assignor"), [(0, ""), (0, "sticky"), (5, "sticky"), (-1, "x")])
def test_an_unknown_assignor_is_refused_before_the_group_is_looked_at(
    harness: Harness, epoch: int, assignor: str
) -> None:
    """As Kafka's request validation: the empty name too, on a leave or for a group the
    coordinator does not hold as well."""
    with pytest.raises(GroupError) as refused:
        harness.beat(
            "m",
            epoch,
            frozenset(),
            rebalance_timeout_ms=60_000,
            subscribed_topic_names=("t",),
            server_assignor=assignor,
        )
    assert (refused.value.code, str(refused.value)) == (
        ErrorCode.unsupported_assignor,
        f"ServerAssignor {assignor} is not supported. Supported assignors: uniform, range.",
    )
