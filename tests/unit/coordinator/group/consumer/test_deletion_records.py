"""The tombstones a KIP-848 consumer group's deletion writes, in the order of Kafka 4.4.0's
``ConsumerGroup.createGroupTombstoneRecords`` (tests/integration/groups/
test_group_record_order_kafka.py compares a DeleteGroups with Kafka's records)."""

from __future__ import annotations

from kemu.coordinator.group import records
from kemu.coordinator.group.consumer.persistence import Image, ImageBuilder, diff
from kemu.coordinator.group.consumer.records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    SUBSCRIPTION_METADATA,
    TARGET_MEMBER,
    TARGET_METADATA,
    ConsumerRecordKey,
    CurrentAssignmentValue,
    MemberMetadataValue,
)
from kemu.coordinator.group.consumer.regexes import REGULAR_EXPRESSION, ResolvedRegex

GROUP = "deleted"


def _member() -> MemberMetadataValue:
    return MemberMetadataValue(None, None, "client", "/127.0.0.1", ("t",), "rx-.*", 1000, None)


def test_a_deletion_writes_kafkas_tombstone_order() -> None:
    old = Image(
        epoch=4,
        assignment_epoch=4,
        members={"m2": _member(), "m1": _member()},
        targets={"m1": frozenset(), "m2": frozenset()},
        current={
            m: CurrentAssignmentValue(4, 3, "STABLE", frozenset(), frozenset())
            for m in ("m1", "m2")
        },
        regexes={"rx-.*": ResolvedRegex(frozenset({"rx-1"}), 0, 5)},
        has_metadata=True,
    )
    written = [(key.record_type, key.member, value) for key, value in diff(GROUP, old, None)]
    assert written == [
        (CURRENT_ASSIGNMENT, "m1", None),
        (CURRENT_ASSIGNMENT, "m2", None),
        (TARGET_MEMBER, "m1", None),
        (TARGET_MEMBER, "m2", None),
        (TARGET_METADATA, None, None),
        (MEMBER_METADATA, "m1", None),
        (MEMBER_METADATA, "m2", None),
        (REGULAR_EXPRESSION, "rx-.*", None),
        (SUBSCRIPTION_METADATA, None, None),
        (GROUP_METADATA, None, None),
    ]


def test_a_group_the_log_does_not_hold_writes_no_tombstone() -> None:
    assert diff(GROUP, None, None) == []
    assert diff(GROUP, Image(), None) == []


def test_the_subscription_metadata_key_is_kafkas_and_read_as_nothing() -> None:
    key = ConsumerRecordKey(SUBSCRIPTION_METADATA, GROUP)
    key_bytes = b"\x00\x04" + len(GROUP).to_bytes(2, "big") + GROUP.encode()
    assert records.encode_key(key) == key_bytes
    assert records.decode_key(key_bytes) == key
    # a value Kafka 4.0 wrote (the subscribed topics' metadata) holds nothing kemu keeps
    assert records.decode_value(key, b"\x00\x00\x01\x00") is None
    builder = ImageBuilder()
    builder.apply(key, None)
    assert builder.images == {}
