"""KIP-848 consumer-group behaviours matched to Kafka 4.4.0's GroupMetadataManager (issue 15):
static membership's instance-id checks and asynchronous regex resolution."""

from __future__ import annotations

import pytest
from test_consumer_group import REBALANCE_MS, Harness, parts

from kemu.coordinator.group.consumer_group import STATIC_LEAVE_EPOCH
from kemu.coordinator.group.share_group import GroupError
from kemu.protocol.errors import ErrorCode


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
    first = harness.join("a", instance_id="i-1")
    harness.beat("a", STATIC_LEAVE_EPOCH, instance_id="i-1")
    assert not harness.group.members
    again = harness.join("b", instance_id="i-1")
    assert again.assignment == parts(0, 1, 2, 3, 4, 5)
    assert first.member_id != again.member_id


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
