"""KIP-1251: a consumer group takes an offset commit at an older member epoch for the partitions
the member has held since that epoch (``consumer.offset_commit``), as Kafka 4.4.0's
``ConsumerGroup.validateOffsetCommit``; the assignment epochs survive a restart through the
records (tag 0 AssignmentEpochs, read as Kafka reads a record without them)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kemu.coordinator.group.consumer.group import STABLE, UNREVOKED, ConsumerGroup, ConsumerMember
from kemu.coordinator.group.consumer.offset_commit import validate_offset_commit
from kemu.coordinator.group.consumer.persistence import ImageBuilder, diff, image_of
from kemu.coordinator.group.consumer.records import (
    CURRENT_ASSIGNMENT,
    MEMBER_METADATA,
    ConsumerRecordKey,
    CurrentAssignmentValue,
    MemberMetadataValue,
    decode_value,
    encode_value,
)
from kemu.protocol.errors import ErrorCode
from tests.unit.coordinator.group.consumer.test_consumer_group import (
    SESSION_MS,
    T1,
    T2,
    Harness,
    parts,
)

STALE, UNKNOWN = ErrorCode.stale_member_epoch, ErrorCode.unknown_member_id


@pytest.fixture
def rebalanced() -> Harness:
    """a held all six partitions at epoch 2; b joined (epoch 3); a gave up 3-5 and is at epoch 3
    keeping 0-2 (assigned at 2); b has 3-5, assigned at 3."""
    harness = Harness()
    harness.join("a")
    harness.join("b")
    harness.beat("a", 2)  # told to revoke 3-5
    assert harness.beat("a", 2, parts(0, 1, 2)).member_epoch == 3
    assert harness.beat("b", 3).assignment == parts(3, 4, 5)
    return harness


def test_assignment_epochs_follow_the_reconciliation(rebalanced: Harness) -> None:
    a, b = rebalanced.group.members["a"], rebalanced.group.members["b"]
    assert (a.member_epoch, a.assignment_epochs) == (3, dict.fromkeys(parts(0, 1, 2), 2))
    assert (b.member_epoch, b.assignment_epochs) == (3, dict.fromkeys(parts(3, 4, 5), 3))


@pytest.mark.parametrize(
    ("member", "epoch", "committed", "expected"),
    [
        ("a", 3, parts(0, 1, 2), None),  # the current epoch: every partition
        ("a", 3, parts(3), None),  # (even one given away: Kafka checks nothing more)
        ("a", 4, parts(0), STALE),  # a newer epoch
        ("a", 2, parts(0, 1, 2), None),  # older, partitions kept since: their epoch is 2
        ("a", 2, parts(3), STALE),  # older, a partition given away
        ("a", 2, parts(0, 3), STALE),  # one partition fails the whole request
        ("a", 1, parts(0), STALE),  # older than the partition's assignment epoch
        ("a", 2, parts(0, topic=T2), STALE),  # a topic it never had
        ("b", 2, parts(3), STALE),  # newly assigned at 3
        ("b", 3, parts(3, 4, 5), None),
        ("x", 3, parts(0), UNKNOWN),
        ("", -1, parts(0), UNKNOWN),  # the group has members
    ],
)
def test_offset_commit_epochs(
    rebalanced: Harness,
    member: str,
    epoch: int,
    committed: frozenset[tuple[object, int]],
    expected: ErrorCode | None,
) -> None:
    assert validate_offset_commit(rebalanced.group, member, epoch, sorted(committed)) == expected


def test_a_partition_of_an_unknown_topic_at_an_older_epoch_is_stale(rebalanced: Harness) -> None:
    assert validate_offset_commit(rebalanced.group, "a", 2, [None]) == STALE
    assert validate_offset_commit(rebalanced.group, "a", 3, [None]) is None


def test_partitions_pending_revocation_keep_their_assignment_epoch() -> None:
    group = ConsumerGroup("g")
    group.members["m"] = ConsumerMember(
        "m",
        member_epoch=5,
        state=UNREVOKED,
        assigned=parts(0),
        pending_revocation=parts(1),
        assignment_epochs={(T1, 0): 5, (T1, 1): 3},
    )
    assert validate_offset_commit(group, "m", 4, parts(1)) is None
    assert validate_offset_commit(group, "m", 3, parts(1)) is None
    assert validate_offset_commit(group, "m", 2, parts(1)) == STALE
    assert validate_offset_commit(group, "m", 4, parts(0)) == STALE


def test_a_revoking_member_keeps_the_epochs_of_what_it_holds(rebalanced: Harness) -> None:
    rebalanced.join("c")  # epoch 4: the target takes partitions from a and b
    told = rebalanced.beat("a", 3)
    a = rebalanced.group.members["a"]
    assert told.member_epoch == 3 and a.state == UNREVOKED
    assert a.assignment_epochs == dict.fromkeys(a.assigned | a.pending_revocation, 2)
    assert validate_offset_commit(rebalanced.group, "a", 2, sorted(a.pending_revocation)) is None


def test_a_rejoining_member_is_assigned_anew(rebalanced: Harness) -> None:
    rebalanced.join("a")  # epoch 0 again: what it held is gone, what it gets is new
    a = rebalanced.group.members["a"]
    assert a.assigned and a.assignment_epochs == dict.fromkeys(a.assigned, a.member_epoch)
    assert validate_offset_commit(rebalanced.group, "a", 2, sorted(a.assigned)) == STALE


def test_groups_without_members_and_transactional_commits() -> None:
    empty = ConsumerGroup("g")
    assert validate_offset_commit(empty, "", -1, parts(0)) is None
    group = ConsumerGroup("g", members={"m": ConsumerMember("m", member_epoch=2)})
    assert validate_offset_commit(group, "", -1, parts(0), transactional=True) is None
    assert validate_offset_commit(group, "", -1, parts(0)) == UNKNOWN
    assert (
        validate_offset_commit(group, "", -1, parts(0), transactional=True, instance_id="i")
        == UNKNOWN
    )
    assert validate_offset_commit(group, "", -2, parts(0), transactional=True) == UNKNOWN


def test_assignment_epochs_survive_a_restart(rebalanced: Harness) -> None:
    group = rebalanced.group
    builder = ImageBuilder()
    for key, value in diff("g", None, image_of(group)):
        data = None if value is None else encode_value(value)
        builder.apply(key, None if data is None else decode_value(key, data))
    ((rebuilt, _),) = builder.groups(now_ms=0, session_timeout_ms=SESSION_MS)
    for member_id, member in group.members.items():
        assert rebuilt.members[member_id].assignment_epochs == member.assignment_epochs
    assert validate_offset_commit(rebuilt, "a", 2, parts(0, 1, 2)) is None
    assert validate_offset_commit(rebuilt, "a", 2, parts(3)) == STALE
    assert validate_offset_commit(rebuilt, "b", 2, parts(3)) == STALE


def test_a_record_without_assignment_epochs_gives_the_member_epoch() -> None:
    """As Kafka's Utils.assignmentFromTopicPartitions: a record written before KIP-1251 (or a
    topic whose epochs do not match its partitions) gives each partition the member epoch."""
    key = ConsumerRecordKey(CURRENT_ASSIGNMENT, "g", "m")
    old = CurrentAssignmentValue(7, 6, STABLE, parts(0, 1), parts(2, topic=T2))
    assert decode_value(key, encode_value(old)) == old  # no epochs written, none read
    builder = ImageBuilder()
    builder.apply(
        ConsumerRecordKey(MEMBER_METADATA, "g", "m"),
        MemberMetadataValue(None, None, "c", "/h", ("t",), None, 300, None),
    )
    builder.apply(key, old)
    builder.images["g"].has_metadata = True
    ((group, _),) = builder.groups(0, SESSION_MS)
    member = group.members["m"]
    assert member.assignment_epochs == dict.fromkeys(parts(0, 1) | parts(2, topic=T2), 7)
    assert validate_offset_commit(group, "m", 6, parts(0)) == STALE
    joining = replace(old, member_epoch=-1)  # not below 0
    builder.apply(key, joining)
    ((group, _),) = builder.groups(0, SESSION_MS)
    assert set(group.members["m"].assignment_epochs.values()) == {0}


def test_assignment_epochs_bytes() -> None:
    """Tag 0 of each TopicPartitions struct: the compact int32 array, one per partition."""
    value = CurrentAssignmentValue(
        5, 4, UNREVOKED, parts(0, 2), parts(1), {(T1, 0): 3, (T1, 2): 5, (T1, 1): 4}
    )
    assert encode_value(value) == (
        b"\x00\x00"  # version 0
        + b"\x00\x00\x00\x05\x00\x00\x00\x04\x01"  # epochs, state 1 = unrevoked
        + b"\x02"
        + T1.bytes
        + b"\x03\x00\x00\x00\x00\x00\x00\x00\x02"  # assigned 0, 2
        + b"\x01\x00\x09\x03\x00\x00\x00\x03\x00\x00\x00\x05"  # tag 0: epochs 3, 5
        + b"\x02"
        + T1.bytes
        + b"\x02\x00\x00\x00\x01"  # pending revocation 1
        + b"\x01\x00\x05\x02\x00\x00\x00\x04"  # tag 0: epoch 4
        + b"\x00"  # the value's tagged fields
    )
    key = ConsumerRecordKey(CURRENT_ASSIGNMENT, "g", "m")
    assert decode_value(key, encode_value(value)) == value


def test_a_member_commits_with_offset_commit_v9_or_later() -> None:
    """As Kafka 4.4's ``ConsumerGroup.validateOffsetCommit``: the version is checked once the
    member is found, before its epoch; a transactional commit is not checked."""
    unsupported = ErrorCode.unsupported_version
    group = ConsumerGroup("g", members={"m": ConsumerMember("m", member_epoch=2)})
    assert validate_offset_commit(group, "m", 2, parts(0), api_version=9) is None
    assert validate_offset_commit(group, "m", 2, parts(0), api_version=8) == unsupported
    assert validate_offset_commit(group, "m", 7, parts(0), api_version=8) == unsupported
    assert validate_offset_commit(group, "x", 2, parts(0), api_version=8) == UNKNOWN
    assert validate_offset_commit(ConsumerGroup("e"), "", -1, parts(0), api_version=2) is None
    txn = validate_offset_commit(group, "m", 2, parts(0), transactional=True, api_version=3)
    assert txn is None
