"""``__consumer_offsets`` records, byte for byte as Kafka's group coordinator writes them.

Kafka's coordinator record serde frames a record as

* key   = int16 record type (the coordinator-key schema's ``apiKey``) + key body at version 0,
* value = int16 value version + value body, or a null value for a tombstone.

Record types kept here: 0 and 1 OffsetCommit (0 is the pre-2.0 key version, same layout),
2 GroupMetadata; the KIP-848 consumer-group types (3, 5-8) are in ``consumer.records``, the
KIP-1071 streams-group types (17, 19-23) in ``streams.records``, the KIP-932 share-group types
(10-15) in ``share.records``. Keys
are not flexible: strings are an int16 length and UTF-8 bytes.

OffsetCommitKey: group string, topic string, partition int32.
OffsetCommitValue: v0 offset int64, metadata string, commitTimestamp int64; v1 adds
expireTimestamp int64 after the commit timestamp; v2 is v0; v3 puts leaderEpoch int32 after the
offset; v4 is v3 flexible (compact strings, tagged fields). Kafka 4 writes v3, or v1 when the
commit carried a retention time (OffsetCommit v2-v4), and so does kemu.

GroupMetadataKey: group string.
GroupMetadataValue: protocolType string, generation int32, protocol nullable string, leader
nullable string, currentStateTimestamp int64 (v2+), members array of {memberId string,
groupInstanceId nullable string (v3+), clientId string, clientHost string, rebalanceTimeout int32
(v1+), sessionTimeout int32, subscription bytes, assignment bytes}; v4 is v3 flexible. Kafka 4
writes v3, and so does kemu.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kemu.coordinator.group.consumer import records as consumer_records
from kemu.coordinator.group.consumer.records import (
    ConsumerRecordError,
    ConsumerRecordKey,
    ConsumerRecordValue,
)
from kemu.coordinator.group.share import records as share_records
from kemu.coordinator.group.share.records import ShareRecordKey, ShareRecordValue
from kemu.coordinator.group.streams import records as streams_records
from kemu.coordinator.group.streams.records import StreamsRecordKey, StreamsRecordValue
from kemu.protocol.coordinator_records import RecordDecodeError as RecordDecodeError
from kemu.protocol.coordinator_records import RecordReader

OFFSET_COMMIT_LEGACY = 0
OFFSET_COMMIT = 1
GROUP_METADATA = 2
RECORD_TYPES = (OFFSET_COMMIT_LEGACY, OFFSET_COMMIT, GROUP_METADATA)

OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3
FLEXIBLE_VERSION = 4
NO_TIMESTAMP = -1
NO_LEADER_EPOCH = -1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = NO_LEADER_EPOCH
    expire_timestamp: int = NO_TIMESTAMP


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...] = ()


RecordKey = (
    OffsetCommitKey | GroupMetadataKey | ConsumerRecordKey | StreamsRecordKey | ShareRecordKey
)
RecordValue = (
    OffsetCommitValue
    | GroupMetadataValue
    | ConsumerRecordValue
    | StreamsRecordValue
    | ShareRecordValue
)


# --- encoding ---------------------------------------------------------------------------------


def _string(text: str) -> bytes:
    data = text.encode()
    return _INT16.pack(len(data)) + data


def _nullable_string(text: str | None) -> bytes:
    return _INT16.pack(-1) if text is None else _string(text)


def _bytes(data: bytes) -> bytes:
    return _INT32.pack(len(data)) + data


def encode_key(key: RecordKey) -> bytes:
    if isinstance(key, ConsumerRecordKey):
        return consumer_records.encode_key(key)
    if isinstance(key, StreamsRecordKey):
        return streams_records.encode_key(key)
    if isinstance(key, ShareRecordKey):
        return share_records.encode_key(key)
    if isinstance(key, OffsetCommitKey):
        return (
            _INT16.pack(OFFSET_COMMIT)
            + _string(key.group)
            + _string(key.topic)
            + _INT32.pack(key.partition)
        )
    return _INT16.pack(GROUP_METADATA) + _string(key.group)


def encode_value(value: RecordValue | None) -> bytes | None:
    """The value bytes (Kafka 4's versions), or None for a tombstone."""
    if value is None:
        return None
    if isinstance(value, StreamsRecordValue):
        return streams_records.encode_value(value)
    if isinstance(value, ShareRecordValue):
        return share_records.encode_value(value)
    if not isinstance(value, OffsetCommitValue | GroupMetadataValue):
        return consumer_records.encode_value(value)
    if isinstance(value, OffsetCommitValue):
        if value.expire_timestamp != NO_TIMESTAMP:
            return (
                _INT16.pack(OFFSET_VALUE_VERSION_WITH_EXPIRY)
                + _INT64.pack(value.offset)
                + _string(value.metadata)
                + _INT64.pack(value.commit_timestamp)
                + _INT64.pack(value.expire_timestamp)
            )
        return (
            _INT16.pack(OFFSET_VALUE_VERSION)
            + _INT64.pack(value.offset)
            + _INT32.pack(value.leader_epoch)
            + _string(value.metadata)
            + _INT64.pack(value.commit_timestamp)
        )
    parts = [
        _INT16.pack(GROUP_VALUE_VERSION),
        _string(value.protocol_type),
        _INT32.pack(value.generation),
        _nullable_string(value.protocol),
        _nullable_string(value.leader),
        _INT64.pack(value.current_state_timestamp),
        _INT32.pack(len(value.members)),
    ]
    for member in value.members:
        parts += [
            _string(member.member_id),
            _nullable_string(member.group_instance_id),
            _string(member.client_id),
            _string(member.client_host),
            _INT32.pack(member.rebalance_timeout),
            _INT32.pack(member.session_timeout),
            _bytes(member.subscription),
            _bytes(member.assignment),
        ]
    return b"".join(parts)


# --- decoding ---------------------------------------------------------------------------------


def decode_key(data: bytes) -> RecordKey:
    reader = RecordReader(data)
    record_type = reader.int16()
    if record_type in streams_records.RECORD_TYPES:
        return streams_records.decode_key(data)
    if record_type in share_records.RECORD_TYPES:
        return share_records.decode_key(data)
    if record_type in consumer_records.RECORD_TYPES:
        try:
            return consumer_records.decode_key(data)
        except ConsumerRecordError as error:
            raise RecordDecodeError(str(error)) from None
    key: RecordKey
    if record_type in (OFFSET_COMMIT_LEGACY, OFFSET_COMMIT):
        key = OffsetCommitKey(reader.string(), reader.string(), reader.int32())
    elif record_type == GROUP_METADATA:
        key = GroupMetadataKey(reader.string())
    else:
        raise RecordDecodeError(f"record type {record_type} is not a classic group record")
    reader.done()
    return key


def decode_value(key: RecordKey, data: bytes | None) -> RecordValue | None:
    """The value of the record keyed ``key``; None for a tombstone."""
    if data is None:
        return None
    if isinstance(key, OffsetCommitKey) and data[:2] == _OFFSET_V3:
        fast = _offset_value_v3(data)
        if fast is not None:
            return fast
    if isinstance(key, StreamsRecordKey):
        return streams_records.decode_value(key, data)
    if isinstance(key, ShareRecordKey):
        return share_records.decode_value(key, data)
    if isinstance(key, ConsumerRecordKey):
        try:
            return consumer_records.decode_value(key, data)
        except ConsumerRecordError as error:
            raise RecordDecodeError(str(error)) from None
    version = _INT16.unpack(data[:2])[0] if len(data) >= 2 else -1
    if not 0 <= version <= FLEXIBLE_VERSION:
        raise RecordDecodeError(f"value version {version} is not one of 0-{FLEXIBLE_VERSION}")
    reader = RecordReader(data[2:], flexible=version >= FLEXIBLE_VERSION)
    value: RecordValue
    if isinstance(key, OffsetCommitKey):
        offset = reader.int64()
        leader_epoch = reader.int32() if version >= 3 else NO_LEADER_EPOCH
        metadata = reader.string()
        commit_timestamp = reader.int64()
        expire_timestamp = reader.int64() if version == 1 else NO_TIMESTAMP
        value = OffsetCommitValue(
            offset, metadata, commit_timestamp, leader_epoch, expire_timestamp
        )
    else:
        value = _decode_group_value(reader, version)
    reader.skip_tags()
    reader.done()
    return value


_OFFSET_V3 = _INT16.pack(OFFSET_VALUE_VERSION)
_OFFSET_V3_HEAD = struct.Struct(">qih")  # offset, leader epoch, metadata length
_OFFSET_V3_SIZE = 2 + _OFFSET_V3_HEAD.size + 8  # without the metadata


def _offset_value_v3(data: bytes) -> OffsetCommitValue | None:
    """The OffsetCommit value v3 (what kemu and Kafka 4 write) read with two struct calls, as
    the group coordinator replays ``__consumer_offsets`` mostly of these; None when the bytes
    are not exactly one such value (the general reader then decides)."""
    if len(data) < _OFFSET_V3_SIZE:
        return None
    offset, leader_epoch, length = _OFFSET_V3_HEAD.unpack_from(data, 2)
    if length < 0 or len(data) != _OFFSET_V3_SIZE + length:
        return None
    end = 2 + _OFFSET_V3_HEAD.size + length
    try:
        metadata = data[2 + _OFFSET_V3_HEAD.size : end].decode()
    except UnicodeDecodeError:
        return None
    (commit_timestamp,) = _INT64.unpack_from(data, end)
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, NO_TIMESTAMP)


def _decode_group_value(reader: RecordReader, version: int) -> GroupMetadataValue:
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    timestamp = reader.int64() if version >= 2 else NO_TIMESTAMP
    members = []
    for _ in range(reader.array_length()):
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        rebalance_timeout = reader.int32() if version >= 1 else 0
        session_timeout = reader.int32()
        subscription = reader.bytes()
        assignment = reader.bytes()
        reader.skip_tags()
        members.append(
            MemberMetadata(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout or session_timeout,  # v0 had one timeout for both
                session_timeout,
                subscription,
                assignment,
            )
        )
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, timestamp, tuple(members)
    )


def decode_record(key: bytes, value: bytes | None) -> tuple[RecordKey, RecordValue | None]:
    decoded_key = decode_key(key)
    return decoded_key, decode_value(decoded_key, value)
