"""KIP-848 consumer groups: static membership's instance-id checks and asynchronous regex
resolution, as Kafka 4.4.0's GroupMetadataManager does them (found missing by issue 15's
comparison with Kafka)."""

from __future__ import annotations

import uuid

import pytest

from kemu.coordinator.group.consumer.group import STATIC_LEAVE_EPOCH
from kemu.coordinator.group.consumer.regexes import ResolvedRegex
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.modern_group import TopicMeta
from kemu.protocol.errors import ErrorCode
from tests.unit.coordinator.group.consumer.test_consumer_group import (
    REBALANCE_MS,
    T2,
    Harness,
    parts,
)


@pytest.fixture
def harness() -> Harness:
    return Harness()


# --- static membership -------------------------------------------------------------------------


def test_a_second_member_cannot_take_an_instance_id_held_by_an_active_member(
    harness: Harness,
) -> None:
    first = harness.join("a", instance_id="i-1")
    with pytest.raises(GroupError) as refused:
        harness.join("b", instance_id="i-1")
    assert refused.value.code == ErrorCode.unreleased_instance_id
    assert refused.value.message == (
        "Static member b with instance id i-1 cannot join the group because the instance id is "
        "owned by a member."
    )
    assert set(harness.group.members) == {"a"}
    assert harness.beat("a", first.member_epoch).member_epoch == first.member_epoch
    harness.join("c", instance_id="i-2")  # another instance id is free
    assert set(harness.group.members) == {"a", "c"}


def test_the_instance_id_is_free_again_after_a_static_leave(harness: Harness) -> None:
    """Taken by a join that replaces the member that left (``test_static_leave.py``)."""
    first = harness.join("a", instance_id="i-1")
    harness.beat("a", STATIC_LEAVE_EPOCH, instance_id="i-1")
    assert harness.group.members["a"].member_epoch == STATIC_LEAVE_EPOCH
    again = harness.join("b", instance_id="i-1")
    assert again.assignment == parts(0, 1, 2, 3, 4, 5)
    assert (again.member_id, again.member_epoch) == ("b", first.member_epoch)
    assert set(harness.group.members) == {"b"}


def test_static_heartbeats_must_come_from_the_instance_ids_holder(harness: Harness) -> None:
    first = harness.join("a", instance_id="i-1")
    harness.join("b")
    with pytest.raises(GroupError) as fenced:
        harness.beat("b", first.member_epoch, instance_id="i-1")
    assert fenced.value.code == ErrorCode.fenced_instance_id
    assert fenced.value.message == "Static member b with instance id i-1 was fenced by member a."
    with pytest.raises(GroupError) as unknown:
        harness.beat("a", first.member_epoch, instance_id="i-9")
    assert unknown.value.code == ErrorCode.unknown_member_id
    assert unknown.value.message == "Instance id i-9 is unknown."
    assert (
        harness.beat(
            "a", first.member_epoch, instance_id="i-1", rebalance_timeout_ms=REBALANCE_MS
        ).member_epoch
        >= first.member_epoch
    )


# --- regular expressions: resolved after the heartbeat, assigned on a later one ----------------


def test_explicit_topics_first_then_the_regex_after_its_resolution(harness: Harness) -> None:
    joined = harness.join("a", topics=("u",), subscribed_topic_regex="t")
    assert joined.assignment == parts(0, 1, topic=T2)  # the explicit topic only
    assert harness.coordinator.pending_regexes == {"g": frozenset({"t"})}
    epoch = harness.group.group_epoch
    assert harness.coordinator.resolve_regexes("g", harness.lookup, harness.now)
    assert harness.group.group_epoch == epoch + 1
    assert harness.group.resolved_regexes == {"t": ResolvedRegex(frozenset({"t"}), 0, harness.now)}
    later = harness.beat("a", joined.member_epoch)
    assert later.member_epoch == epoch + 1
    assert later.assignment == parts(0, 1, 2, 3, 4, 5) | parts(0, 1, topic=T2)
    assert not harness.coordinator.pending_regexes


def test_a_new_regex_does_not_bump_the_epoch_until_resolved(harness: Harness) -> None:
    first = harness.join("a", topics=("u",))
    epoch = harness.group.group_epoch
    joined = harness.join("b", topics=(), subscribed_topic_regex="t")
    assert harness.group.group_epoch == epoch  # nothing to reassign yet
    assert (joined.member_epoch, joined.assignment) == (epoch, frozenset())
    assert harness.beat("a", first.member_epoch).assignment is None
    assert harness.coordinator.resolve_regexes("g", harness.lookup, harness.now)
    assert harness.beat("b", joined.member_epoch).assignment == parts(0, 1, 2, 3, 4, 5)


def test_a_regex_already_resolved_is_assigned_in_the_same_heartbeat(harness: Harness) -> None:
    first = harness.join("a", topics=(), subscribed_topic_regex="t")
    harness.coordinator.resolve_regexes("g", harness.lookup, harness.now)
    harness.beat("a", first.member_epoch)
    epoch = harness.group.group_epoch
    second = harness.join("b", topics=(), subscribed_topic_regex="t")
    assert harness.group.group_epoch == epoch + 1
    assert not harness.coordinator.pending_regexes
    assert second.member_epoch == epoch + 1
    assert len(harness.group.target["b"]) == 3  # in its target at once (a still owns them)


def test_new_topics_are_matched_at_most_every_ten_seconds(harness: Harness) -> None:
    joined = harness.join("a", topics=(), subscribed_topic_regex="t.*")
    harness.coordinator.resolve_regexes("g", harness.lookup, harness.now)
    epoch = harness.beat("a", joined.member_epoch).member_epoch
    harness.topics["t2"] = TopicMeta(uuid.UUID(int=3), 1)
    harness.now += 5_000
    harness.beat("a", epoch)
    assert not harness.coordinator.pending_regexes  # resolved less than 10 s ago
    harness.now += 5_001
    harness.beat("a", epoch)
    assert harness.coordinator.pending_regexes == {"g": frozenset({"t.*"})}
    assert harness.coordinator.resolve_regexes("g", harness.lookup, harness.now)
    assert harness.group.resolved_regexes["t.*"].topics == {"t", "t2"}


def test_the_last_member_of_a_regex_leaving_drops_its_resolution(harness: Harness) -> None:
    joined = harness.join("a", topics=("u",), subscribed_topic_regex="t")
    harness.coordinator.resolve_regexes("g", harness.lookup, harness.now)
    harness.beat("a", joined.member_epoch, subscribed_topic_regex="")
    assert harness.group.resolved_regexes == {}
    harness.join("b", topics=(), subscribed_topic_regex="u")
    harness.coordinator.resolve_regexes("g", harness.lookup, harness.now)
    harness.beat("b", -1)
    assert harness.group.resolved_regexes == {}
