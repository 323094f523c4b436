"""``__consumer_offsets`` records against hand-written bytes in Kafka's layout, and the offset
manager (commit validation, fetch, delete, expiry, group records) over them."""

from __future__ import annotations

import struct

import pytest

from kemu.coordinator.group.classic.group import (
    EMPTY,
    STABLE,
    ClassicGroup,
    ClassicGroupCoordinator,
    ClassicMember,
    ClassicSettings,
)
from kemu.coordinator.group.consumer.protocol import (
    decode_assignment,
    encode_assignment,
    encode_subscription,
    subscribed_topics,
)
from kemu.coordinator.group.offset_manager import (
    CommitPartition,
    CommitResult,
    FetchedOffset,
    OffsetManager,
    group_record,
    load_group,
)
from kemu.coordinator.group.offsets import OffsetStore
from kemu.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordDecodeError,
    decode_record,
    encode_key,
    encode_value,
)
from kemu.coordinator.group.registry import GroupRegistry
from kemu.coordinator.group.share.group import ShareGroup
from kemu.protocol.errors import ErrorCode


def kstring(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_offset_commit_record_bytes() -> None:
    key = OffsetCommitKey("group-id", "foo", 1)
    value = OffsetCommitValue(100, "metadata", 1234, leader_epoch=10)
    assert encode_key(key) == b"\x00\x01" + kstring("group-id") + kstring("foo") + b"\0\0\0\x01"
    assert encode_value(value) == (
        b"\x00\x03"
        + struct.pack(">q", 100)
        + struct.pack(">i", 10)
        + kstring("metadata")
        + struct.pack(">q", 1234)
    )
    assert decode_record(encode_key(key), encode_value(value)) == (key, value)
    assert decode_record(encode_key(key), None) == (key, None)


def test_offset_commit_with_expiry_is_version_1() -> None:
    value = OffsetCommitValue(7, "", 1000, expire_timestamp=2000)
    data = encode_value(value)
    assert data == (
        b"\x00\x01" + struct.pack(">q", 7) + kstring("") + struct.pack(">qq", 1000, 2000)
    )
    key = OffsetCommitKey("g", "t", 0)
    assert decode_record(encode_key(key), data)[1] == value


def test_older_and_flexible_offset_values_decode() -> None:
    key = encode_key(OffsetCommitKey("g", "t", 0))
    v0 = b"\x00\x00" + struct.pack(">q", 5) + kstring("m") + struct.pack(">q", 9)
    assert decode_record(key, v0)[1] == OffsetCommitValue(5, "m", 9)
    v4 = (
        b"\x00\x04"
        + struct.pack(">q", 5)
        + struct.pack(">i", 3)
        + bytes([2])
        + b"m"
        + struct.pack(">q", 9)
        + b"\x01\x05\x01\xff"  # one unknown tagged field, skipped
    )
    assert decode_record(key, v4)[1] == OffsetCommitValue(5, "m", 9, leader_epoch=3)
    legacy_key = b"\x00\x00" + kstring("g") + kstring("t") + b"\0\0\0\0"
    assert decode_record(legacy_key, v0)[0] == OffsetCommitKey("g", "t", 0)


def test_group_metadata_record_bytes() -> None:
    member = MemberMetadata("m-1", None, "client", "/127.0.0.1", 30000, 10000, b"sub", b"asg")
    value = GroupMetadataValue("consumer", 3, "range", "m-1", 555, (member,))
    key = GroupMetadataKey("g")
    assert encode_key(key) == b"\x00\x02" + kstring("g")
    assert encode_value(value) == (
        b"\x00\x03"
        + kstring("consumer")
        + struct.pack(">i", 3)
        + kstring("range")
        + kstring("m-1")
        + struct.pack(">q", 555)
        + struct.pack(">i", 1)
        + kstring("m-1")
        + b"\xff\xff"  # null group instance id
        + kstring("client")
        + kstring("/127.0.0.1")
        + struct.pack(">ii", 30000, 10000)
        + struct.pack(">i", 3)
        + b"sub"
        + struct.pack(">i", 3)
        + b"asg"
    )
    assert decode_record(encode_key(key), encode_value(value)) == (key, value)
    empty = GroupMetadataValue("", 0, None, None, -1)
    assert decode_record(encode_key(key), encode_value(empty))[1] == empty


def test_the_v3_offset_fast_path_reads_what_the_general_reader_reads() -> None:
    key = encode_key(OffsetCommitKey("g", "t", 0))
    for value in (
        OffsetCommitValue(5, "", 9, leader_epoch=-1),
        OffsetCommitValue(2**62, "métadonnée ✓", -1, leader_epoch=7),
    ):
        assert decode_record(key, encode_value(value))[1] == value
    good = encode_value(OffsetCommitValue(5, "m", 9, leader_epoch=3))
    assert good is not None
    for bad in (good[:-1], good + b"x", good[:10], b"\x00\x03" + good[2:12] + b"\xff\xff"):
        with pytest.raises(RecordDecodeError):
            decode_record(key, bad)
    bad_utf8 = b"\x00\x03" + struct.pack(">qi", 1, 0) + b"\x00\x01\xff" + struct.pack(">q", 0)
    with pytest.raises(RecordDecodeError):
        decode_record(key, bad_utf8)


def test_undecodable_records_are_refused() -> None:
    with pytest.raises(RecordDecodeError):
        decode_record(b"\x00\x05" + kstring("g"), None)  # a KIP-848 record type
    with pytest.raises(RecordDecodeError):
        decode_record(encode_key(GroupMetadataKey("g")), b"\x00\x03\x00")
    with pytest.raises(RecordDecodeError):
        decode_record(encode_key(GroupMetadataKey("g")) + b"x", None)


def test_consumer_protocol() -> None:
    assert subscribed_topics(encode_subscription(["a", "b"], b"user")) == {"a", "b"}
    assert subscribed_topics(b"\x00") is None
    assignment = {"a": [0, 2], "b": [1]}
    assert decode_assignment(encode_assignment(assignment)) == assignment


# --- the offset manager --------------------------------------------------------------------------

NOW = 1_000_000


@pytest.fixture
def manager() -> OffsetManager:
    registry = GroupRegistry()
    classic = ClassicGroupCoordinator(registry, lambda group_id: ClassicSettings())
    return OffsetManager(classic, OffsetStore(), metadata_max_bytes=10)


def stable_group(manager: OffsetManager, group_id: str = "g") -> ClassicGroup:
    group = ClassicGroup(
        group_id, state=STABLE, generation_id=4, protocol_type="consumer", protocol_name="range"
    )
    group.add(
        ClassicMember(
            "m", None, "c", "/h", 30000, 10000, "consumer", (("range", encode_subscription(["t"])),)
        )
    )
    manager.classic.registry.put(group)
    return group


def commit(
    manager: OffsetManager,
    group: str,
    generation: int,
    member: str = "",
    *,
    api_version: int = 8,
    retention_ms: int = -1,
) -> CommitResult:
    result = manager.commit(
        group,
        member,
        None,
        generation,
        [CommitPartition("t", 0, 42, 3, "meta")],
        NOW,
        api_version=api_version,
        retention_ms=retention_ms,
    )
    manager.replay(result.records)
    return result


def test_a_simple_commit_creates_an_empty_group(manager: OffsetManager) -> None:
    result = commit(manager, "simple", -1)
    assert result.error == ErrorCode.none and result.partitions == {("t", 0): ErrorCode.none}
    group = manager.classic.group("simple")
    assert group is not None and group.state == EMPTY and group.protocol_type == ""
    assert manager.fetch("simple", [("t", [0, 1])]) == (
        ErrorCode.none,
        [
            FetchedOffset("t", 0, 42, 3, "meta"),
            FetchedOffset("t", 1, -1, -1, ""),
        ],
    )
    _error, everything = manager.fetch("simple", None)
    assert [(e.topic, e.partition, e.offset) for e in everything] == [("t", 0, 42)]


def test_member_commits_are_checked(manager: OffsetManager) -> None:
    stable_group(manager)
    assert commit(manager, "g", 4, "m").error == ErrorCode.none
    assert commit(manager, "g", 3, "m").error == ErrorCode.illegal_generation
    assert commit(manager, "g", 4, "x").error == ErrorCode.unknown_member_id
    assert commit(manager, "g", -1).error == ErrorCode.unknown_member_id  # group not Empty
    assert commit(manager, "missing", 1, "m").error == ErrorCode.illegal_generation
    assert commit(manager, "missing", 1, "m", api_version=9).error == ErrorCode.group_id_not_found
    manager.classic.registry.put(ShareGroup("shared"))
    assert commit(manager, "shared", -1).error == ErrorCode.group_id_not_found
    assert manager.fetch("shared", None)[0] == ErrorCode.group_id_not_found


def test_metadata_too_large(manager: OffsetManager) -> None:
    result = manager.commit(
        "g", "", None, -1, [CommitPartition("t", 0, 1, -1, "x" * 11)], NOW, api_version=8
    )
    assert result.partitions == {("t", 0): ErrorCode.offset_metadata_too_large}
    assert not result.records


def test_offset_delete(manager: OffsetManager) -> None:
    commit(manager, "simple", -1)
    result = manager.delete("simple", [("t", [0, 1])])
    assert result.partitions == {("t", 0): ErrorCode.none, ("t", 1): ErrorCode.none}
    assert result.records == [(OffsetCommitKey("simple", "t", 0), None)]
    manager.replay(result.records)
    assert manager.store.get("simple", "t", 0) is None

    stable_group(manager)
    subscribed = manager.delete("g", [("t", [0]), ("other", [0])])
    assert subscribed.partitions == {
        ("t", 0): ErrorCode.group_subscribed_to_topic,
        ("other", 0): ErrorCode.none,
    }
    assert manager.delete("missing", []).error == ErrorCode.group_id_not_found
    connect = ClassicGroup("connect", state=STABLE, protocol_type="connect")
    manager.classic.registry.put(connect)
    assert manager.delete("connect", []).error == ErrorCode.non_empty_group


def test_offsets_expire(manager: OffsetManager) -> None:
    commit(manager, "simple", -1)
    commit(manager, "explicit", -1, retention_ms=500)
    stable_group(manager)
    commit(manager, "g", 4, "m")
    assert manager.expired_offsets(NOW + 499, 1000) == {}
    assert list(manager.expired_offsets(NOW + 500, 1000)) == ["explicit"]
    # A Stable group keeps offsets of the topics it subscribes to.
    assert sorted(manager.expired_offsets(NOW + 1000, 1000)) == ["explicit", "simple"]


def test_group_records_round_trip(manager: OffsetManager) -> None:
    group = stable_group(manager)
    group.members["m"].assignment = b"asg"
    group.leader_id = "m"
    group.state_timestamp_ms = 77
    _key, value = group_record(group)
    assert isinstance(value, GroupMetadataValue)
    assert value.members[0].subscription == encode_subscription(["t"])
    loaded = load_group("g", value, NOW)
    assert loaded.state == STABLE and loaded.generation_id == 4
    assert loaded.members["m"].assignment == b"asg"
    assert loaded.members["m"].heartbeat_deadline_ms == NOW + 10000
    assert loaded.subscribed_topics() == {"t"}
    empty = load_group("e", GroupMetadataValue("consumer", 9, None, None, -1), NOW)
    assert empty.state == EMPTY and empty.generation_id == 9
