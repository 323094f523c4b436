"""``__share_group_state`` record codec: golden bytes, Kafka's own bytes, round trips.

Two kinds of golden bytes:

* hand-derived from Kafka's JSON schemas (ShareSnapshotKey/Value, ShareUpdateKey/Value of
  share-coordinator 4.4.0), with the derivation spelled out field by field;
* captured from Apache Kafka 4.4.0 itself: a throw-away Java program called
  ``ShareCoordinatorRecordSerde.serializeKey/serializeValue`` (kafka-share-coordinator,
  kafka-coordinator-common, kafka-server-common and kafka-clients 4.4.0 jars from Maven Central)
  on the records spelled out in each test and printed the hex.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kemu.coordinator.share.persister import PersistedBatch
from kemu.coordinator.share.records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    RecordDecodeError,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateRecordKey,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_value,
)

# Kafka's Uuid(0x0102030405060708, 0x090a0b0c0d0e0f10); its toString is AQIDBAUGBwgJCgsMDQ4PEA
TOPIC = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")


def test_snapshot_key_hand_derived() -> None:
    key = StateRecordKey(SHARE_SNAPSHOT, "g1", TOPIC, 3)
    expected = (
        "0000"  # int16 record type 0 = ShareSnapshot (coordinator-key apiKey 0)
        "0002"
        + b"g1".hex()  # GroupId: non-flexible string = int16 length + UTF-8
        + TOPIC.bytes.hex()  # TopicId: 16 bytes, most significant first
        + "00000003"  # Partition int32
    )
    assert encode_key(key).hex() == expected
    assert decode_key(bytes.fromhex(expected)) == key


def test_update_value_hand_derived() -> None:
    value = ShareUpdateValue(
        snapshot_epoch=4,
        leader_epoch=6,
        start_offset=-1,
        state_batches=(PersistedBatch(0, 9, 0, 2),),
        delivery_complete_count=-1,
    )
    expected = (
        "0000"  # int16 value version 0
        "00000004"  # SnapshotEpoch int32
        "00000006"  # LeaderEpoch int32
        "ffffffffffffffff"  # StartOffset int64 -1 (unchanged)
        "02"  # StateBatches: compact array, unsigned varint length + 1
        "0000000000000000"  # FirstOffset int64
        "0000000000000009"  # LastOffset int64
        "00"  # DeliveryState int8
        "0002"  # DeliveryCount int16
        "00"  # StateBatch tagged fields: none
        "00"  # value tagged fields: none (DeliveryCompleteCount -1 is the default)
    )
    assert encode_value(value).hex() == expected  # type: ignore[union-attr]
    assert decode_value(SHARE_UPDATE, bytes.fromhex(expected)) == value


def test_delivery_complete_count_is_tagged_field_zero() -> None:
    value = ShareUpdateValue(1, 0, 5, (), delivery_complete_count=300)
    encoded = encode_value(value)
    assert encoded is not None
    # ... empty batches (01), then 1 tagged field: tag 0, size 4, int32 300 (0x12c)
    assert encoded.hex().endswith("01" + "01" + "00" + "04" + "0000012c")
    assert decode_value(SHARE_UPDATE, encoded) == value


# --- bytes produced by Kafka 4.4.0's ShareCoordinatorRecordSerde ------------------------------


def test_snapshot_record_matches_kafka() -> None:
    # new ShareSnapshotKey().setGroupId("g1").setTopicId(TOPIC).setPartition(3)
    # new ShareSnapshotValue().setSnapshotEpoch(1).setStateEpoch(2).setLeaderEpoch(5)
    #   .setStartOffset(10).setDeliveryCompleteCount(7).setCreateTimestamp(1700000000000L)
    #   .setWriteTimestamp(1700000000123L).setStateBatches(List.of(StateBatch(10, 14, 2, 1)))
    kafka_key = "0000000267310102030405060708090a0b0c0d0e0f1000000003"
    kafka_value = (
        "0000000000010000000200000005000000000000000a0000018bcfe568000000018bcfe5687b02"
        "000000000000000a000000000000000e0200010001000400000007"
    )
    key = StateRecordKey(SHARE_SNAPSHOT, "g1", TOPIC, 3)
    value = ShareSnapshotValue(
        snapshot_epoch=1,
        state_epoch=2,
        leader_epoch=5,
        start_offset=10,
        create_timestamp=1_700_000_000_000,
        write_timestamp=1_700_000_000_123,
        state_batches=(PersistedBatch(10, 14, 2, 1),),
        delivery_complete_count=7,
    )
    assert encode_key(key).hex() == kafka_key
    assert encode_value(value).hex() == kafka_value  # type: ignore[union-attr]
    assert decode_record(bytes.fromhex(kafka_key), bytes.fromhex(kafka_value)) == (key, value)


def test_snapshot_with_defaults_matches_kafka() -> None:
    # ShareSnapshotValue with every field 0, StartOffset -1, DeliveryCompleteCount -1, no batches
    kafka_value = "0000000000000000000000000000ffffffffffffffff000000000000000000000000000000000100"
    value = ShareSnapshotValue(0, 0, 0, -1, 0, 0, (), -1)
    assert encode_value(value).hex() == kafka_value  # type: ignore[union-attr]
    assert decode_value(SHARE_SNAPSHOT, bytes.fromhex(kafka_value)) == value


def test_update_record_matches_kafka() -> None:
    # new ShareUpdateKey().setGroupId("grp").setTopicId(TOPIC).setPartition(0)
    # new ShareUpdateValue().setSnapshotEpoch(4).setLeaderEpoch(6).setStartOffset(-1)
    #   .setDeliveryCompleteCount(300)
    #   .setStateBatches(List.of(StateBatch(0, 9, 0, 2), StateBatch(10, 10, 4, 5)))
    kafka_key = "000100036772700102030405060708090a0b0c0d0e0f1000000000"
    kafka_value = (
        "00000000000400000006ffffffffffffffff030000000000000000000000000000000900000200"
        "000000000000000a000000000000000a040005000100040000012c"
    )
    key = StateRecordKey(SHARE_UPDATE, "grp", TOPIC, 0)
    value = ShareUpdateValue(
        4, 6, -1, (PersistedBatch(0, 9, 0, 2), PersistedBatch(10, 10, 4, 5)), 300
    )
    assert encode_key(key).hex() == kafka_key
    assert encode_value(value).hex() == kafka_value  # type: ignore[union-attr]
    assert decode_record(bytes.fromhex(kafka_key), bytes.fromhex(kafka_value)) == (key, value)


def test_tombstone_is_snapshot_key_with_null_value() -> None:
    # CoordinatorRecord.tombstone(ShareSnapshotKey("g1", TOPIC, 3)): key as above, value null
    kafka_key = "0000000267310102030405060708090a0b0c0d0e0f1000000003"
    assert encode_value(None) is None
    assert decode_record(bytes.fromhex(kafka_key), None) == (
        StateRecordKey(SHARE_SNAPSHOT, "g1", TOPIC, 3),
        None,
    )


# --- KIP-1289 staging as StateBatch tagged fields ----------------------------------------------


def test_staged_fields_are_batch_tagged_fields() -> None:
    batch = PersistedBatch(
        3, 3, 5, 1, staged_producer_id=1000, staged_producer_epoch=2, staged_ack_type=1
    )
    encoded = encode_value(ShareUpdateValue(0, 0, -1, (batch,)))
    assert encoded is not None
    batch_hex = (
        "0000000000000003"
        "0000000000000003"
        "05"
        "0001"
        "03"  # three tagged fields, ascending tags
        "00"
        "08"
        "00000000000003e8"  # tag 0 StagedProducerId int64
        "01"
        "02"
        "0002"  # tag 1 StagedProducerEpoch int16
        "02"
        "01"
        "01"  # tag 2 StagedAckType int8
    )
    assert batch_hex in encoded.hex()
    assert decode_value(SHARE_UPDATE, encoded) == ShareUpdateValue(0, 0, -1, (batch,))


def test_unknown_tagged_fields_are_skipped() -> None:
    # An update with one batch whose tagged section carries an unknown tag 7 of 3 bytes.
    data = bytes.fromhex(
        "0000000000000000000000000000000000000200000000000000000000000000000001000001010703aabbcc00"
    )
    value = decode_value(SHARE_UPDATE, data)
    assert value == ShareUpdateValue(0, 0, 0, (PersistedBatch(0, 1, 0, 1),))


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key_hex",
    [
        "0002000161" + "00" * 16 + "00000000",  # record type 2 does not exist
        "0000000561",  # truncated group id
        "0000000161" + "00" * 16 + "0000000000",  # trailing byte
        "0000ffff" + "00" * 16 + "00000000",  # null group id
    ],
)
def test_bad_keys_are_rejected(key_hex: str) -> None:
    with pytest.raises(RecordDecodeError):
        decode_key(bytes.fromhex(key_hex))


def test_bad_values_are_rejected() -> None:
    good = encode_value(ShareUpdateValue(0, 0, 0, (PersistedBatch(0, 1, 0, 1),)))
    assert good is not None
    with pytest.raises(RecordDecodeError):
        decode_value(SHARE_UPDATE, b"\x00\x01" + good[2:])  # value version 1
    with pytest.raises(RecordDecodeError):
        decode_value(SHARE_UPDATE, good[:-3])  # truncated
    with pytest.raises(RecordDecodeError):
        decode_value(SHARE_UPDATE, good + b"\x00")  # trailing
    with pytest.raises(RecordDecodeError):
        decode_value(SHARE_SNAPSHOT, good)  # an update is too short to be a snapshot


# --- round trips -------------------------------------------------------------------------------

_INT8 = st.integers(-(2**7), 2**7 - 1)
_INT16 = st.integers(-(2**15), 2**15 - 1)
_INT32 = st.integers(-(2**31), 2**31 - 1)
_INT64 = st.integers(-(2**63), 2**63 - 1)

_batches = st.lists(
    st.builds(
        PersistedBatch,
        _INT64,
        _INT64,
        _INT8,
        _INT16,
        _INT64,
        _INT16,
        _INT8,
        staged_commit_state=st.just(-1),
        staged_abort_state=st.just(-1),
    ),
    max_size=5,
).map(tuple)

_keys = st.builds(
    StateRecordKey,
    st.sampled_from([SHARE_SNAPSHOT, SHARE_UPDATE]),
    st.text(max_size=40),
    st.uuids(),
    _INT32,
)
_values: st.SearchStrategy[ShareSnapshotValue | ShareUpdateValue] = st.one_of(
    st.builds(ShareSnapshotValue, _INT32, _INT32, _INT32, _INT64, _INT64, _INT64, _batches, _INT32),
    st.builds(ShareUpdateValue, _INT32, _INT32, _INT64, _batches, _INT32),
)


@given(_keys)
def test_key_round_trip(key: StateRecordKey) -> None:
    assert decode_key(encode_key(key)) == key


@given(_values)
def test_value_round_trip(value: ShareSnapshotValue | ShareUpdateValue) -> None:
    record_type = SHARE_SNAPSHOT if isinstance(value, ShareSnapshotValue) else SHARE_UPDATE
    encoded = encode_value(value)
    assert encoded is not None
    assert decode_value(record_type, encoded) == value
