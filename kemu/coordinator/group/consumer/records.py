"""KIP-848 consumer-group records in ``__consumer_offsets``, byte for byte as Kafka writes them,
and the records that bring the log up to date with a group (``diff``).

Framing as for every coordinator record (``records``): key = int16 record type + key body
(not flexible: int16-length strings); value = int16 version (0) + body, flexible: compact
strings and arrays (unsigned varint length + 1, 0 for null), 16-byte uuids, and a tagged-field
section after every struct (kemu writes and reads AssignmentTimestamp, when not 0, and the
current assignment's AssignmentEpochs, as Kafka does, and skips the others).

====  ==========================================  ==========================================
type  key                                         value v0
====  ==========================================  ==========================================
3     ConsumerGroupMetadata: group                Epoch int32; tag 0 MetadataHash int64
5     ConsumerGroupMemberMetadata: group, member  InstanceId?, RackId?, ClientId, ClientHost,
                                                  SubscribedTopicNames []string,
                                                  SubscribedTopicRegex?, RebalanceTimeoutMs int32,
                                                  ServerAssignor?
6     ConsumerGroupTargetAssignmentMetadata: group  AssignmentEpoch int32; tag 0
                                                  AssignmentTimestamp int64 (KIP-1263)
7     ConsumerGroupTargetAssignmentMember:        TopicPartitions [] {TopicId uuid,
      group, member                                 Partitions []int32}
8     ConsumerGroupCurrentMemberAssignment:       MemberEpoch int32, PreviousMemberEpoch int32,
      group, member                               State int8 (0 stable, 1 unrevoked, 2
                                                  unreleased), AssignedPartitions [],
                                                  PartitionsPendingRevocation []; in each
                                                  TopicPartitions tag 0 AssignmentEpochs
                                                  []int32 (KIP-1251, one per partition)
====  ==========================================  ==========================================

Type 4 (ConsumerGroupPartitionMetadata, key: group), the subscribed topics' metadata Kafka 4.0
wrote, is no longer written (4.1 replaced it by the hash) but for its tombstone, which a group's
deletion still writes; a value found in the log is read as nothing. Type
16, what a regex subscription matched, is keyed by the group and the regex (carried as the key's
``member``): ``regexes``.

AssignmentEpochs: Kafka 4.4 writes them for every topic (and so does kemu, for a topic whose
partitions all have one); a topic without them, or with as many as it has partitions, is read
without (its partitions then get the member epoch, not below 0, as Kafka's
``Utils.assignmentFromTopicPartitions`` gives them: ``persistence``).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from kemu.coordinator.group.assignor import TopicPartition
from kemu.coordinator.group.consumer import regexes
from kemu.coordinator.group.consumer.regexes import REGULAR_EXPRESSION, ResolvedRegex
from kemu.coordinator.group.record_keys import decode_group_key, encode_group_key
from kemu.protocol.coordinator_records import (
    RecordDecodeError,
    RecordReader,
    encode_compact_string,
    encode_tags,
)
from kemu.protocol.records import uvarint

GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 3, 5, 6, 7, 8
SUBSCRIPTION_METADATA = 4
RECORD_TYPES = (
    GROUP_METADATA,
    SUBSCRIPTION_METADATA,
    MEMBER_METADATA,
    TARGET_METADATA,
    TARGET_MEMBER,
    CURRENT_ASSIGNMENT,
    REGULAR_EXPRESSION,
)
STATE_CODES = {"STABLE": 0, "UNREVOKED_PARTITIONS": 1, "UNRELEASED_PARTITIONS": 2}
STATE_NAMES = {code: name for name, code in STATE_CODES.items()}

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

Partitions = frozenset[TopicPartition]


ConsumerRecordError = RecordDecodeError  # bytes that are not a consumer-group record


@dataclass(frozen=True, slots=True)
class ConsumerRecordKey:
    record_type: int
    group: str
    # the member id of a per-member record; a regular-expression record's regex
    member: str | None = None


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    epoch: int
    metadata_hash: int = 0  # tag 0 (KIP-1101), written when not 0 as Kafka does


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True)
class TargetEpochValue:
    assignment_epoch: int
    assignment_timestamp_ms: int = 0  # 0: Kafka's default, not written


@dataclass(frozen=True, slots=True)
class TargetMemberValue:
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: str
    assigned: Partitions
    pending_revocation: Partitions
    # KIP-1251: the epoch each partition was assigned at (those of the record's topics that
    # carry them; the others are absent).
    assignment_epochs: dict[TopicPartition, int] = field(default_factory=dict)


ConsumerRecordValue = (
    GroupEpochValue
    | MemberMetadataValue
    | TargetEpochValue
    | TargetMemberValue
    | CurrentAssignmentValue
    | ResolvedRegex
)
PER_MEMBER = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)
# the record types whose key has a second string after the group id
_TWO_STRING_KEYS = (*PER_MEMBER, REGULAR_EXPRESSION)


# --- encoding ---------------------------------------------------------------------------------


def _partitions(
    partitions: Partitions, epochs: Mapping[TopicPartition, int] | None = None
) -> bytes:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, index in sorted(partitions):
        by_topic.setdefault(topic_id, []).append(index)
    parts = [uvarint(len(by_topic) + 1)]
    for topic_id, indexes in by_topic.items():
        parts.append(topic_id.bytes + uvarint(len(indexes) + 1))
        parts += [_INT32.pack(index) for index in indexes]
        known = [epochs.get((topic_id, index)) for index in indexes] if epochs else []
        topic_epochs = [epoch for epoch in known if epoch is not None]
        if topic_epochs and len(topic_epochs) == len(indexes):
            array = uvarint(len(topic_epochs) + 1) + b"".join(map(_INT32.pack, topic_epochs))
            parts.append(encode_tags([(0, array)]))  # tag 0 AssignmentEpochs (KIP-1251)
        else:
            parts.append(uvarint(0))  # the struct's tagged fields
    return b"".join(parts)


def encode_key(key: ConsumerRecordKey) -> bytes:
    return encode_group_key(key.record_type, key.group, key.member, _TWO_STRING_KEYS)


def encode_value(value: ConsumerRecordValue) -> bytes:
    if isinstance(value, ResolvedRegex):
        return regexes.encode_value(value)
    tags = uvarint(0)
    if isinstance(value, GroupEpochValue):
        body = _INT32.pack(value.epoch)
        if value.metadata_hash != 0:
            tags = encode_tags([(0, _INT64.pack(value.metadata_hash))])
    elif isinstance(value, TargetEpochValue):
        body = _INT32.pack(value.assignment_epoch)
        tags = target_metadata_tags(value.assignment_timestamp_ms)
    elif isinstance(value, MemberMetadataValue):
        names = value.subscribed_topic_names
        body = (
            encode_compact_string(value.instance_id)
            + encode_compact_string(value.rack_id)
            + encode_compact_string(value.client_id)
            + encode_compact_string(value.client_host)
            + uvarint(len(names) + 1)
            + b"".join(encode_compact_string(name) for name in names)
            + encode_compact_string(value.subscribed_topic_regex)
            + _INT32.pack(value.rebalance_timeout_ms)
            + encode_compact_string(value.server_assignor)
        )
    elif isinstance(value, TargetMemberValue):
        body = _partitions(value.partitions)
    else:
        body = (
            _INT32.pack(value.member_epoch)
            + _INT32.pack(value.previous_member_epoch)
            + struct.pack(">b", STATE_CODES[value.state])
            + _partitions(value.assigned, value.assignment_epochs)
            + _partitions(value.pending_revocation, value.assignment_epochs)
        )
    return _INT16.pack(0) + body + tags


write_partitions = _partitions  # the TopicPartitions array, shared with the share-group records


def target_metadata_tags(assignment_timestamp_ms: int) -> bytes:
    """The tagged fields of a TargetAssignmentMetadata value (this record 6, the streams
    group's 20): tag 0 AssignmentTimestamp int64 (KIP-1263) when not 0, as Kafka writes it."""
    if assignment_timestamp_ms == 0:
        return uvarint(0)
    return encode_tags([(0, _INT64.pack(assignment_timestamp_ms))])


# --- decoding ---------------------------------------------------------------------------------


def read_target_metadata(reader: RecordReader) -> tuple[int, int]:
    """A TargetAssignmentMetadata value's AssignmentEpoch and AssignmentTimestamp (0 when
    absent), to its end."""
    assignment_epoch = reader.int32()
    timestamp = 0
    for tag, payload in reader.tags().items():
        if tag == 0 and len(payload) == 8:
            (timestamp,) = _INT64.unpack(payload)
    reader.done()
    return assignment_epoch, timestamp


def _read_partitions(
    reader: RecordReader, epochs: dict[TopicPartition, int] | None = None
) -> Partitions:
    """A TopicPartitions array; with ``epochs``, its AssignmentEpochs are added to them."""
    found: set[TopicPartition] = set()
    for _ in range(max(reader.uvarint() - 1, 0)):
        topic_id = uuid.UUID(bytes=reader.take(16))
        topic = [(topic_id, reader.int32()) for _ in range(max(reader.uvarint() - 1, 0))]
        found.update(topic)
        tagged = reader.tags().get(0)
        if epochs is not None and tagged is not None:
            topic_epochs = _read_int32_array(tagged)
            if len(topic_epochs) == len(topic):
                epochs.update(zip(topic, topic_epochs, strict=True))
    return frozenset(found)


def _read_int32_array(data: bytes) -> list[int]:
    """A compact int32 array (a null one is empty)."""
    reader = RecordReader(data)
    values = [reader.int32() for _ in range(max(reader.uvarint() - 1, 0))]
    reader.done()
    return values


read_partitions = _read_partitions


def decode_key(data: bytes) -> ConsumerRecordKey:
    return ConsumerRecordKey(*decode_group_key(data, RECORD_TYPES, _TWO_STRING_KEYS, "consumer"))


def decode_value(key: ConsumerRecordKey, data: bytes | None) -> ConsumerRecordValue | None:
    if data is None or key.record_type == SUBSCRIPTION_METADATA:
        return None  # a type-4 value (Kafka 4.0's) holds nothing kemu keeps
    reader = RecordReader(data)
    (version,) = _INT16.unpack(reader.take(2))
    if version != 0:
        raise ConsumerRecordError(f"value version {version} is not 0")
    value: ConsumerRecordValue
    try:
        if key.record_type == GROUP_METADATA:
            epoch = reader.int32()
            tagged = reader.tags().get(0, b"")
            reader.done()
            return GroupEpochValue(epoch, _INT64.unpack(tagged)[0] if len(tagged) == 8 else 0)
        elif key.record_type == TARGET_METADATA:
            return TargetEpochValue(*read_target_metadata(reader))
        elif key.record_type == REGULAR_EXPRESSION:
            return regexes.decode_value(reader)
        elif key.record_type == MEMBER_METADATA:
            instance_id, rack_id = reader.compact_string(), reader.compact_string()
            client_id, client_host = reader.compact_string() or "", reader.compact_string() or ""
            names = tuple(
                reader.compact_string() or "" for _ in range(max(reader.uvarint() - 1, 0))
            )
            value = MemberMetadataValue(
                instance_id,
                rack_id,
                client_id,
                client_host,
                names,
                reader.compact_string(),
                reader.int32(),
                reader.compact_string(),
            )
        elif key.record_type == TARGET_MEMBER:
            value = TargetMemberValue(_read_partitions(reader))
        else:
            epoch, previous = reader.int32(), reader.int32()
            (state,) = struct.unpack(">b", reader.take(1))
            epochs: dict[TopicPartition, int] = {}
            value = CurrentAssignmentValue(
                epoch,
                previous,
                STATE_NAMES.get(state, "UNKNOWN"),
                _read_partitions(reader, epochs),
                _read_partitions(reader, epochs),
                epochs,
            )
    except UnicodeDecodeError as error:
        raise ConsumerRecordError(str(error)) from None
    reader.tags()
    reader.done()
    return value
