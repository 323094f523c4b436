"""``__share_group_state`` records, byte for byte as Kafka 4.4's share coordinator writes them.

Kafka's coordinator record serde frames a record as

* key   = int16 record type (the ``apiKey`` of the coordinator-key schema) + key body at version 0,
* value = int16 value version + value body, or a null value for a tombstone.

Record types: 0 ShareSnapshot (full state), 1 ShareUpdate (delta). Both keys are
``{GroupId string, TopicId uuid, Partition int32}`` and not flexible, so the string is an int16
length and UTF-8 bytes. Both values are version 0 and flexible: arrays are compact (unsigned
varint length + 1) and every struct ends with a tagged-field section (unsigned varint count, then
``tag, size, bytes`` per field).

ShareSnapshotValue v0: SnapshotEpoch int32, StateEpoch int32, LeaderEpoch int32, StartOffset int64,
CreateTimestamp int64, WriteTimestamp int64, StateBatches []StateBatch, and the tagged field 0
DeliveryCompleteCount int32 (KIP-1226, default -1, written only when not -1).
ShareUpdateValue v0: SnapshotEpoch int32, LeaderEpoch int32, StartOffset int64 (-1 = unchanged),
StateBatches []StateBatch, tagged 0 DeliveryCompleteCount as above.
StateBatch: FirstOffset int64, LastOffset int64, DeliveryState int8, DeliveryCount int16.

KIP-1289 staging (kemu's encoding; Kafka's record schema for it is not published): a StateBatch
carries its staged transaction as tagged fields, written only when not -1, so Kafka 4.4 reads
these records and ignores the tags it does not know::

    { "name": "StagedProducerId", "type": "int64", "tag": 0, "default": -1, ... }
    { "name": "StagedProducerEpoch", "type": "int16", "tag": 1, "default": -1, ... }
    { "name": "StagedAckType", "type": "int8", "tag": 2, "default": -1, ... }
    { "name": "StagedCommitState", "type": "int8", "tag": 3, "default": -1, ... }
    { "name": "StagedAbortState", "type": "int8", "tag": 4, "default": -1, ... }

(each with ``"versions": "0+", "taggedVersions": "0+"``). The last two are the delivery states
the transaction's commit and abort give these records (the draft PR's ``stagedDeliveryState``, and
its counterpart for an abort, which kemu archives at the delivery-count limit), fixed when the
records are staged so that whoever resolves a marker resolves it the same way.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from kemu.coordinator.share.persister import PersistedBatch
from kemu.protocol.coordinator_records import RecordDecodeError as RecordDecodeError
from kemu.protocol.coordinator_records import RecordReader, encode_tags
from kemu.protocol.records import uvarint

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1
RECORD_TYPE_NAMES = {SHARE_SNAPSHOT: "ShareSnapshot", SHARE_UPDATE: "ShareUpdate"}
VALUE_VERSION = 0

DELIVERY_COMPLETE_COUNT_TAG = 0
STAGED_PRODUCER_ID_TAG = 0
STAGED_PRODUCER_EPOCH_TAG = 1
STAGED_ACK_TYPE_TAG = 2
STAGED_COMMIT_STATE_TAG = 3
STAGED_ABORT_STATE_TAG = 4

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_BATCH = struct.Struct(">qqbh")
_SNAPSHOT_HEAD = struct.Struct(">iiiq")
_UPDATE_HEAD = struct.Struct(">iiq")
_TIMESTAMPS = struct.Struct(">qq")


@dataclass(frozen=True, slots=True)
class StateRecordKey:
    record_type: int
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[PersistedBatch, ...] = ()
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[PersistedBatch, ...] = ()
    delivery_complete_count: int = -1


StateValue = ShareSnapshotValue | ShareUpdateValue


# --- encoding ---------------------------------------------------------------------------------


def encode_key(key: StateRecordKey) -> bytes:
    if key.record_type not in RECORD_TYPE_NAMES:
        raise ValueError(f"unknown share-state record type {key.record_type}")
    group = key.group_id.encode()
    return (
        _INT16.pack(key.record_type)
        + _INT16.pack(len(group))
        + group
        + key.topic_id.bytes
        + _INT32.pack(key.partition)
    )


def encode_value(value: StateValue | None) -> bytes | None:
    """The value bytes, or None for a tombstone."""
    if value is None:
        return None
    if isinstance(value, ShareSnapshotValue):
        body = (
            _SNAPSHOT_HEAD.pack(
                value.snapshot_epoch, value.state_epoch, value.leader_epoch, value.start_offset
            )
            + _TIMESTAMPS.pack(value.create_timestamp, value.write_timestamp)
            + _encode_batches(value.state_batches)
        )
    else:
        body = _UPDATE_HEAD.pack(
            value.snapshot_epoch, value.leader_epoch, value.start_offset
        ) + _encode_batches(value.state_batches)
    tags = []
    if value.delivery_complete_count != -1:
        tags.append((DELIVERY_COMPLETE_COUNT_TAG, _INT32.pack(value.delivery_complete_count)))
    return _INT16.pack(VALUE_VERSION) + body + encode_tags(tags)


def _encode_batches(batches: tuple[PersistedBatch, ...]) -> bytes:
    parts = [uvarint(len(batches) + 1)]
    for batch in batches:
        parts.append(
            _BATCH.pack(
                batch.first_offset, batch.last_offset, batch.delivery_state, batch.delivery_count
            )
        )
        tags = []
        if batch.staged_producer_id != -1:
            tags.append((STAGED_PRODUCER_ID_TAG, _INT64.pack(batch.staged_producer_id)))
        if batch.staged_producer_epoch != -1:
            tags.append((STAGED_PRODUCER_EPOCH_TAG, _INT16.pack(batch.staged_producer_epoch)))
        if batch.staged_ack_type != -1:
            tags.append((STAGED_ACK_TYPE_TAG, _INT8.pack(batch.staged_ack_type)))
        if batch.staged_commit_state != -1:
            tags.append((STAGED_COMMIT_STATE_TAG, _INT8.pack(batch.staged_commit_state)))
        if batch.staged_abort_state != -1:
            tags.append((STAGED_ABORT_STATE_TAG, _INT8.pack(batch.staged_abort_state)))
        parts.append(encode_tags(tags))
    return b"".join(parts)


# --- decoding ---------------------------------------------------------------------------------


def decode_key(data: bytes) -> StateRecordKey:
    reader = RecordReader(data)
    record_type = reader.int16()
    if record_type not in RECORD_TYPE_NAMES:
        raise RecordDecodeError(f"unknown share-state record type {record_type}")
    length = reader.int16()
    if length < 0:
        raise RecordDecodeError("null group id in a share-state key")
    try:
        group_id = reader.take(length).decode()
    except UnicodeDecodeError as error:
        raise RecordDecodeError(f"group id is not UTF-8: {error}") from None
    topic_id = uuid.UUID(bytes=reader.take(16))
    (partition,) = reader.unpack(_INT32)
    reader.done()
    return StateRecordKey(record_type, group_id, topic_id, partition)


def decode_value(record_type: int, data: bytes | None) -> StateValue | None:
    """The value of a record of ``record_type``; None for a tombstone."""
    if data is None:
        return None
    reader = RecordReader(data)
    version = reader.int16()
    if version != VALUE_VERSION:
        raise RecordDecodeError(
            f"{RECORD_TYPE_NAMES.get(record_type, record_type)} value version {version} "
            f"is not {VALUE_VERSION}"
        )
    value: StateValue
    if record_type == SHARE_SNAPSHOT:
        snapshot_epoch, state_epoch, leader_epoch, start_offset = reader.unpack(_SNAPSHOT_HEAD)
        create_timestamp, write_timestamp = reader.unpack(_TIMESTAMPS)
        batches = _decode_batches(reader)
        count = _delivery_complete_count(reader.tags())
        value = ShareSnapshotValue(
            snapshot_epoch,
            state_epoch,
            leader_epoch,
            start_offset,
            create_timestamp,
            write_timestamp,
            batches,
            count,
        )
    elif record_type == SHARE_UPDATE:
        snapshot_epoch, leader_epoch, start_offset = reader.unpack(_UPDATE_HEAD)
        batches = _decode_batches(reader)
        count = _delivery_complete_count(reader.tags())
        value = ShareUpdateValue(snapshot_epoch, leader_epoch, start_offset, batches, count)
    else:
        raise RecordDecodeError(f"unknown share-state record type {record_type}")
    reader.done()
    return value


def _decode_batches(reader: RecordReader) -> tuple[PersistedBatch, ...]:
    length = reader.uvarint() - 1
    if length < 0:
        raise RecordDecodeError("null StateBatches array")
    batches = []
    for _ in range(length):
        first, last, state, count = reader.unpack(_BATCH)
        tags = reader.tags()
        if not tags:  # not staged: nearly every batch
            batches.append(PersistedBatch(first, last, state, count))
            continue
        batches.append(
            PersistedBatch(
                first,
                last,
                state,
                count,
                _tag_int(tags, STAGED_PRODUCER_ID_TAG, _INT64),
                _tag_int(tags, STAGED_PRODUCER_EPOCH_TAG, _INT16),
                _tag_int(tags, STAGED_ACK_TYPE_TAG, _INT8),
                _tag_int(tags, STAGED_COMMIT_STATE_TAG, _INT8),
                _tag_int(tags, STAGED_ABORT_STATE_TAG, _INT8),
            )
        )
    return tuple(batches)


def _delivery_complete_count(tags: dict[int, bytes]) -> int:
    return _tag_int(tags, DELIVERY_COMPLETE_COUNT_TAG, _INT32)


def _tag_int(tags: dict[int, bytes], tag: int, layout: struct.Struct) -> int:
    data = tags.get(tag)
    if data is None:
        return -1
    if len(data) != layout.size:
        raise RecordDecodeError(f"tagged field {tag} has {len(data)} bytes, not {layout.size}")
    return int(layout.unpack(data)[0])


def decode_record(key: bytes, value: bytes | None) -> tuple[StateRecordKey, StateValue | None]:
    decoded_key = decode_key(key)
    return decoded_key, decode_value(decoded_key.record_type, value)
