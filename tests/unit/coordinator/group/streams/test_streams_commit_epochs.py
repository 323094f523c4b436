"""KIP-1251 for streams groups: an offset commit at an older member epoch is taken for the
partitions whose active task the member has held since that epoch, as Kafka 4.4.0's
``StreamsGroup.validateOffsetCommit``; the active tasks' assignment epochs survive a restart
through the records (tag 0 AssignmentEpochs of each active TaskIds struct)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kemu.coordinator.group.streams.assignor import TaskTuple
from kemu.coordinator.group.streams.model import StreamsGroup, StreamsMember
from kemu.coordinator.group.streams.records import (
    CURRENT_ASSIGNMENT,
    StreamsCurrentValue,
    StreamsImageBuilder,
    StreamsRecordKey,
    decode_value,
    diff,
    encode_value,
    image_of,
)
from kemu.protocol.errors import ErrorCode
from tests.unit.coordinator.group.streams.test_streams_group import COUNT, Harness

STALE, UNKNOWN = ErrorCode.stale_member_epoch, ErrorCode.unknown_member_id
TOPIC_OF = {"0": "in", "1": "app-words-repartition"}  # the topic each subtopology reads


@pytest.fixture
def rebalanced() -> tuple[StreamsGroup, frozenset[tuple[str, int]], frozenset[tuple[str, int]]]:
    """a held all four active tasks at epoch 2; b joined; a gave two up and is at epoch 3
    keeping two (assigned at 2); b has the other two, assigned at 3."""
    h = Harness()
    owned = h.beat("a", 0).assignment
    h.beat("b", 0)
    step = h.beat("a", 2, owned=owned)
    assert h.beat("a", 2, owned=step.assignment).member_epoch == 3
    got = h.beat("b", 3, owned=TaskTuple())
    group = h.coordinator.group("app")
    assert group is not None
    return group, step.assignment.active, got.assignment.active


def committed(tasks: frozenset[tuple[str, int]]) -> list[tuple[str, int]]:
    return [(TOPIC_OF[sub], partition) for sub, partition in sorted(tasks)]


def test_streams_commits_at_older_epochs(
    rebalanced: tuple[StreamsGroup, frozenset[tuple[str, int]], frozenset[tuple[str, int]]],
) -> None:
    group, kept, given = rebalanced
    a, b = group.members["a"], group.members["b"]
    assert a.active_epochs == dict.fromkeys(kept, 2)
    assert b.active_epochs == dict.fromkeys(given, 3)
    check = group.validate_offset_commit
    assert check("a", 3, committed(given)) is None  # the current epoch: anything
    assert check("a", 4, committed(kept)) == STALE  # a newer epoch
    assert check("a", 2, committed(kept)) is None  # kept since epoch 2
    assert check("a", 2, committed(given)) == STALE  # given away
    assert check("a", 2, committed(kept) + committed(given)) == STALE  # one fails them all
    assert check("a", 1, committed(kept)) == STALE  # older than the assignment epoch
    assert check("a", 2, [("app-counts-changelog", 0)]) == STALE  # no subtopology reads it
    assert check("b", 2, committed(given)) == STALE  # newly assigned at 3
    assert check("x", 3, committed(kept)) == UNKNOWN
    assert check("", -1, []) == UNKNOWN  # the group has members
    assert check("", -1, [], transactional=True) is None
    assert check("", -1, [], transactional=True, instance_id="i") == UNKNOWN


def test_a_streams_member_commits_with_offset_commit_v9_or_later() -> None:
    """As Kafka 4.4's ``StreamsGroup.validateOffsetCommit``: once the member is found, a commit
    below v9 outside a transaction gets UNSUPPORTED_VERSION."""
    group = StreamsGroup("app", members={"m": StreamsMember("m", member_epoch=5)})
    check = group.validate_offset_commit
    assert check("m", 5, api_version=9) is None
    assert check("m", 5, api_version=8) == ErrorCode.unsupported_version
    assert check("x", 5, api_version=8) == UNKNOWN
    assert check("m", 5, transactional=True, api_version=3) is None
    assert StreamsGroup("empty").validate_offset_commit("", -1, api_version=2) is None


def test_older_epochs_need_the_topology() -> None:
    member = StreamsMember("m", member_epoch=5, assigned=TaskTuple(frozenset({("0", 0)})))
    group = StreamsGroup("app", members={"m": member})
    assert group.validate_offset_commit("m", 4, [("in", 0)]) == STALE
    group.topology = COUNT
    assert group.validate_offset_commit("m", 4, [("in", 0)]) == STALE  # assigned at 5
    group.members["m"] = replace(member, active_epochs={("0", 0): 4})
    assert group.validate_offset_commit("m", 4, [("in", 0)]) is None
    pending = replace(member, assigned=TaskTuple(), pending_revocation=member.assigned)
    group.members["m"] = replace(pending, active_epochs={("0", 0): 3})
    assert group.validate_offset_commit("m", 3, [("in", 0)]) is None  # pending revocation
    assert group.validate_offset_commit("m", 2, [("in", 0)]) == STALE


def test_streams_assignment_epochs_survive_a_restart(
    rebalanced: tuple[StreamsGroup, frozenset[tuple[str, int]], frozenset[tuple[str, int]]],
) -> None:
    group, kept, given = rebalanced
    builder = StreamsImageBuilder()
    for key, value in diff(None, image_of(group)):
        builder.apply(key, None if value is None else decode_value(key, encode_value(value)))
    ((rebuilt, _),) = builder.groups(0, 45_000)
    for member_id, member in group.members.items():
        assert rebuilt.members[member_id].active_epochs == member.active_epochs
    assert rebuilt.validate_offset_commit("a", 2, committed(kept)) is None
    assert rebuilt.validate_offset_commit("a", 2, committed(given)) == STALE


def test_streams_assignment_epochs_bytes_and_default() -> None:
    key = StreamsRecordKey(CURRENT_ASSIGNMENT, "app", "m")
    active = TaskTuple(frozenset({("0", 0), ("0", 1)}), frozenset({("1", 0)}))
    value = StreamsCurrentValue(5, 4, "STABLE", active, TaskTuple(), {("0", 0): 3, ("0", 1): 5})
    data = encode_value(value)
    # active: one subtopology "0", partitions 0 and 1, tag 0 with epochs 3 and 5
    tasks = b"\x02\x020\x03\x00\x00\x00\x00\x00\x00\x00\x01"
    assert tasks + b"\x01\x00\x09\x03\x00\x00\x00\x03\x00\x00\x00\x05" in data
    assert b"\x02\x021\x02\x00\x00\x00\x00\x00" in data  # standby: no epochs
    assert decode_value(key, data) == value
    old = replace(value, active_epochs={})
    assert decode_value(key, encode_value(old)) == old
