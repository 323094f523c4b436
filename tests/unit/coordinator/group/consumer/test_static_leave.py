"""KIP-848 consumer groups: a static member's temporary leave (epoch -2) and its replacement by
a join with the same instance id, as Kafka 4.4.0's ``consumerGroupStaticMemberGroupLeave`` and
``getOrMaybeSubscribeStaticConsumerGroupMember`` do them (``consumer.static``; compared with
Kafka in ``tests/integration/groups/test_static_leave_kafka.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from kemu.coordinator.group.consumer.group import STABLE, STATIC_LEAVE_EPOCH, UNREVOKED
from kemu.coordinator.group.consumer.persistence import diff, group_from_image, image_of
from kemu.coordinator.group.consumer.records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    TARGET_MEMBER,
    TARGET_METADATA,
)
from kemu.coordinator.group.errors import GroupError
from kemu.protocol.errors import ErrorCode
from tests.unit.coordinator.group.consumer.test_consumer_group import (
    SESSION_MS,
    Harness,
    parts,
)

ALL = parts(0, 1, 2, 3, 4, 5)


@pytest.fixture
def harness() -> Harness:
    return Harness()


def stable_pair(harness: Harness) -> int:
    """Static member a (instance i-a) and dynamic member b, stable on topic t: the epoch."""
    harness.join("a", instance_id="i-a")
    epoch = harness.join("b").member_epoch
    harness.beat("a", epoch - 1, instance_id="i-a")  # told to revoke half
    held = harness.group.members["a"].assigned
    assert harness.beat("a", epoch - 1, held, instance_id="i-a").member_epoch == epoch
    harness.beat("b", epoch)
    assert harness.group.state_name == "Stable"
    return epoch


def written(before: Any, after: Any) -> list[tuple[int, str | None, bool]]:
    """The records turning ``before`` into ``after``: (type, member, tombstone)."""
    return [(key.record_type, key.member, value is None) for key, value in diff("g", before, after)]


def test_a_static_leave_keeps_the_member_with_its_assignment(harness: Harness) -> None:
    epoch = stable_pair(harness)
    before = harness.group.members["a"]
    image = image_of(harness.group)
    left = harness.beat("a", STATIC_LEAVE_EPOCH, instance_id="i-a")
    assert (left.member_id, left.member_epoch) == ("a", STATIC_LEAVE_EPOCH)
    assert (left.heartbeat_interval_ms, left.assignment) == (0, None)
    member = harness.group.members["a"]
    assert member.member_epoch == STATIC_LEAVE_EPOCH
    assert member.previous_member_epoch == before.previous_member_epoch
    assert member.assigned == before.assigned
    # Kafka's resetAssignedPartitionsEpochsToZero
    assert member.assignment_epochs == dict.fromkeys(before.assigned, 0)
    assert member.session_deadline_ms == before.session_deadline_ms  # not a heartbeat
    assert (harness.group.group_epoch, harness.group.assignment_epoch) == (epoch, epoch)
    assert harness.group.target["a"] == before.assigned
    assert harness.group.state_name == "Reconciling"  # a member's epoch is not the group's
    # Kafka writes the member's current assignment, nothing else.
    assert written(image, image_of(harness.group)) == [(CURRENT_ASSIGNMENT, "a", False)]


def test_the_others_are_not_rebalanced_and_the_left_id_is_fenced(harness: Harness) -> None:
    epoch = stable_pair(harness)
    harness.beat("a", STATIC_LEAVE_EPOCH, instance_id="i-a")
    b = harness.beat("b", epoch)
    assert (b.member_epoch, b.assignment) == (epoch, None)
    with pytest.raises(GroupError) as fenced:
        harness.beat("a", epoch, instance_id="i-a")
    assert fenced.value.code == ErrorCode.fenced_member_epoch  # ahead of its -2


def test_a_static_leave_drops_what_the_member_still_had_to_revoke(harness: Harness) -> None:
    harness.beat(
        "a",
        0,
        frozenset(),
        rebalance_timeout_ms=10_000,  # within its session
        subscribed_topic_names=("t",),
        instance_id="i-a",
    )
    harness.join("b")
    harness.beat("a", 2, instance_id="i-a")
    assert harness.group.members["a"].state == UNREVOKED
    assert harness.group.members["a"].revocation_deadline_ms == 10_000
    harness.beat("a", STATIC_LEAVE_EPOCH, instance_id="i-a")
    member = harness.group.members["a"]
    assert (member.pending_revocation, member.revocation_deadline_ms) == (frozenset(), None)
    assert member.assigned == parts(0, 1, 2)
    b = harness.beat("b", 3)
    assert b.member_epoch == 3 and b.assignment == parts(3, 4, 5)  # released by the leave
    # Kafka's rebalance timer no longer finds the member at the epoch it was armed for.
    harness.now = 10_001
    assert harness.coordinator.expire_group(harness.group, harness.now, harness.lookup) == []


def test_a_rejoin_under_a_new_id_takes_the_place_without_a_rebalance(harness: Harness) -> None:
    epoch = stable_pair(harness)
    held = harness.group.members["a"].assigned
    harness.now = 1_000
    harness.beat("a", STATIC_LEAVE_EPOCH, instance_id="i-a")
    image = image_of(harness.group)
    back = harness.join("a2", instance_id="i-a")
    assert (back.member_id, back.member_epoch, back.assignment) == ("a2", epoch, held)
    group = harness.group
    assert "a" not in group.members and "a" not in group.target
    assert (group.group_epoch, group.assignment_epoch) == (epoch, epoch)
    assert group.target["a2"] == held
    member = group.members["a2"]
    assert (member.instance_id, member.state, member.previous_member_epoch) == ("i-a", STABLE, 0)
    assert member.assignment_epochs == dict.fromkeys(held, 0)  # kept from the leave
    assert member.session_deadline_ms == 1_000 + SESSION_MS
    assert group.state_name == "Stable"
    # Kafka: the old member's three tombstones, then the new one's member, target and current
    # assignment records (Kafka writes the last twice: as copied, then reconciled).
    assert written(image, image_of(group)) == [
        (CURRENT_ASSIGNMENT, "a", True),
        (TARGET_MEMBER, "a", True),
        (MEMBER_METADATA, "a", True),
        (MEMBER_METADATA, "a2", False),
        (TARGET_MEMBER, "a2", False),
        (CURRENT_ASSIGNMENT, "a2", False),
    ]
    assert harness.beat("b", epoch).assignment is None
    with pytest.raises(GroupError) as fenced:
        harness.beat("a", epoch, instance_id="i-a")
    assert fenced.value.code == ErrorCode.fenced_instance_id
    assert fenced.value.message == "Static member a with instance id i-a was fenced by member a2."


def test_a_rejoin_under_the_same_id_keeps_the_assignment(harness: Harness) -> None:
    epoch = stable_pair(harness)
    held = harness.group.members["a"].assigned
    harness.beat("a", STATIC_LEAVE_EPOCH, instance_id="i-a")
    back = harness.join("a", instance_id="i-a")
    assert (back.member_epoch, back.assignment) == (epoch, held)
    assert harness.group.group_epoch == epoch


def test_a_rejoin_with_another_subscription_bumps_the_group_epoch(harness: Harness) -> None:
    epoch = stable_pair(harness)
    held = harness.group.members["a"].assigned
    harness.beat("a", STATIC_LEAVE_EPOCH, instance_id="i-a")
    image = image_of(harness.group)
    back = harness.join("a2", topics=("t", "u"), instance_id="i-a")
    assert harness.group.group_epoch == epoch + 1
    assert back.member_epoch == epoch + 1
    # sticky from the old member's target: two of the three it held kept, both of u's added
    assert back.assignment is not None
    assert len(back.assignment & held) == 2 and len(back.assignment - held) == 2
    types = [record_type for record_type, _, _ in written(image, image_of(harness.group))]
    assert GROUP_METADATA in types and TARGET_METADATA in types


def test_an_active_holder_keeps_its_instance_id(harness: Harness) -> None:
    epoch = stable_pair(harness)
    for joining in ("a2", "a"):  # Kafka: even the holder's own id, joining again with epoch 0
        with pytest.raises(GroupError) as refused:
            harness.join(joining, instance_id="i-a")
        assert refused.value.code == ErrorCode.unreleased_instance_id
    assert harness.group.members["a"].member_epoch == epoch


def test_a_leave_must_come_from_the_instance_ids_holder(harness: Harness) -> None:
    epoch = stable_pair(harness)
    with pytest.raises(GroupError) as fenced:
        harness.beat("b", STATIC_LEAVE_EPOCH, instance_id="i-a")
    assert fenced.value.code == ErrorCode.fenced_instance_id
    with pytest.raises(GroupError) as unknown:
        harness.beat("a", STATIC_LEAVE_EPOCH, instance_id="i-z")
    assert (unknown.value.code, unknown.value.message) == (
        ErrorCode.unknown_member_id,
        "Instance id i-z is unknown.",
    )
    assert harness.group.members["a"].member_epoch == epoch
    assert harness.group.group_epoch == epoch


def test_minus_two_without_an_instance_id_is_an_invalid_request(harness: Harness) -> None:
    """Only a static member leaves with -2: Kafka 4.4.0 refuses it without an instance id
    ("InstanceId can't be null.", test_consumer_heartbeat_validation_kafka.py); the member
    stays."""
    epoch = stable_pair(harness)
    with pytest.raises(GroupError) as refused:
        harness.beat("b", STATIC_LEAVE_EPOCH)
    assert (refused.value.code, refused.value.message) == (
        ErrorCode.invalid_request,
        "InstanceId can't be null.",
    )
    assert "b" in harness.group.members
    assert harness.group.group_epoch == epoch


def test_a_static_member_leaving_with_minus_one_is_removed(harness: Harness) -> None:
    epoch = stable_pair(harness)
    left = harness.beat("a", -1, instance_id="i-a")
    assert (left.member_id, left.member_epoch) == ("a", -1)
    assert "a" not in harness.group.members
    assert harness.group.group_epoch == epoch + 1
    assert harness.join("a2", instance_id="i-a").member_epoch == epoch + 2  # a new member


def test_nobody_back_in_its_session_the_member_is_removed(harness: Harness) -> None:
    epoch = stable_pair(harness)
    harness.now = 10_000
    harness.beat("a", STATIC_LEAVE_EPOCH, instance_id="i-a")
    harness.beat("b", epoch)
    deadline = harness.group.members["a"].session_deadline_ms
    assert deadline == SESSION_MS  # from a's last heartbeat, not from the leave
    harness.now = deadline
    expired = harness.coordinator.expire_group(harness.group, harness.now, harness.lookup)
    assert expired == ["a"]
    assert harness.group.group_epoch == epoch + 1
    assert harness.beat("b", epoch).assignment == ALL
    assert harness.join("a2", instance_id="i-a").assignment == frozenset()  # a new member


def test_a_full_group_spares_a_held_instance_id_the_size_check(harness: Harness) -> None:
    """Kafka 4.4.0's throwIfConsumerGroupIsFull returns at once for an instance id the group
    holds (``hasStaticMember``): a full group (3 here) answers what the instance id's checks
    say, and takes the replacement of a member that left for now."""
    stable_pair(harness)
    harness.join("c")
    for _ in range(3):  # each one revokes and takes what the new target says
        for name, instance_id in (("a", "i-a"), ("b", None), ("c", None)):
            member = harness.group.members[name]
            harness.beat(name, member.member_epoch, member.assigned, instance_id=instance_id)
    assert harness.group.state_name == "Stable"
    epoch = harness.group.group_epoch
    held = harness.group.members["a"].assigned
    with pytest.raises(GroupError) as unreleased:
        harness.join("x", instance_id="i-a")
    assert unreleased.value.code == ErrorCode.unreleased_instance_id
    with pytest.raises(GroupError) as fenced:
        harness.beat("x", epoch, instance_id="i-a")
    assert fenced.value.code == ErrorCode.fenced_instance_id
    for joining in (True, False):  # an instance id nobody holds: the group is full
        with pytest.raises(GroupError) as full:
            if joining:
                harness.join("x", instance_id="i-x")
            else:
                harness.beat("x", epoch, instance_id="i-x")
        assert full.value.code == ErrorCode.group_max_size_reached
    harness.beat("a", STATIC_LEAVE_EPOCH, instance_id="i-a")
    back = harness.join("a2", instance_id="i-a")
    assert (back.member_id, back.member_epoch, back.assignment) == ("a2", epoch, held)
    assert sorted(harness.group.members) == ["a2", "b", "c"]
    assert harness.group.group_epoch == epoch


def test_the_left_member_is_loaded_back_from_its_records(harness: Harness) -> None:
    epoch = stable_pair(harness)
    held = harness.group.members["a"].assigned
    harness.beat("a", STATIC_LEAVE_EPOCH, instance_id="i-a")
    loaded = group_from_image("g", image_of(harness.group), 0, SESSION_MS)
    member = loaded.members["a"]
    assert (member.member_epoch, member.assigned, member.instance_id) == (-2, held, "i-a")
    assert member.assignment_epochs == dict.fromkeys(held, 0)
    assert member.revocation_deadline_ms is None
    harness.registry.restore("g", loaded)
    back = harness.join("a2", instance_id="i-a")
    assert (back.member_epoch, back.assignment) == (epoch, held)
