"""KIP-932 share-group records in ``__consumer_offsets``, byte for byte as Kafka 4.4 writes them,
the records that bring the log up to date with a group (``diff``), and the groups rebuilt from
them (``ShareImageBuilder``).

Framing as for every coordinator record (``records``): key = int16 record type + key body (not
flexible), value = int16 version (0) + flexible body (compact strings and arrays, 16-byte uuids,
a tagged-field section after every struct).

====  ==========================================  ==========================================
type  key                                         value v0
====  ==========================================  ==========================================
10    ShareGroupMemberMetadata: group, member     RackId?, ClientId, ClientHost,
                                                  SubscribedTopicNames []string
11    ShareGroupMetadata: group                   Epoch int32, MetadataHash int64
12    ShareGroupTargetAssignmentMetadata: group   AssignmentEpoch int32; tag 0
                                                  AssignmentTimestamp int64 (when not 0)
13    ShareGroupTargetAssignmentMember:           TopicPartitions [] {TopicId uuid,
      group, member                                 Partitions []int32}
14    ShareGroupCurrentMemberAssignment:          MemberEpoch int32, PreviousMemberEpoch int32,
      group, member                               State int8 (0: stable), AssignedPartitions []
15    ShareGroupStatePartitionMetadata: group     InitializingTopics [], InitializedTopics []
                                                  {TopicId, TopicName, Partitions []int32},
                                                  DeletingTopics [] {TopicId, TopicName}
====  ==========================================  ==========================================

MetadataHash is Kafka's (KIP-1101, ``metadata_hash``) over the subscribed topics; a loaded
group keeps it, so its next heartbeat bumps the epoch if the topics changed meanwhile (one
written as 0, by a kemu of before the hash, takes the topics as they are at load). Partitions being
initialized are written as Kafka writes them and a loaded group keeps them, as Kafka's replay
does: a heartbeat asks for them again once they have been initializing for
``group.share.initialize.retry.interval.ms`` since the load (the state already there is kept,
``service._initialize``).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from kemu.coordinator.group.assignor import TopicPartition
from kemu.coordinator.group.consumer.records import (
    read_partitions,
    read_target_metadata,
    target_metadata_tags,
    write_partitions,
)
from kemu.coordinator.group.modern_group import ImageRecordTypes, image_records
from kemu.coordinator.group.record_keys import decode_group_key, encode_group_key
from kemu.coordinator.group.share.group import INITIAL_EPOCH, ShareGroup, ShareMember
from kemu.protocol.coordinator_records import RecordDecodeError, RecordReader, encode_compact_string
from kemu.protocol.records import uvarint

MEMBER_METADATA, GROUP_METADATA, TARGET_METADATA, TARGET_MEMBER = 10, 11, 12, 13
CURRENT_ASSIGNMENT, STATE_PARTITIONS = 14, 15
RECORD_TYPES = (
    MEMBER_METADATA,
    GROUP_METADATA,
    TARGET_METADATA,
    TARGET_MEMBER,
    CURRENT_ASSIGNMENT,
    STATE_PARTITIONS,
)
PER_MEMBER = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)
UNKNOWN_TOPIC = "<UNKNOWN>"  # Kafka's name of a deleting topic the metadata no longer has
STABLE = 0  # Kafka's MemberState.STABLE: a share member has no other

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

Partitions = frozenset[TopicPartition]
TopicNames = Callable[[uuid.UUID], str]  # a topic id's name ("" when the topic is gone)


@dataclass(frozen=True, slots=True)
class ShareRecordKey:
    record_type: int
    group: str
    member: str | None = None  # for the per-member record types


@dataclass(frozen=True, slots=True)
class ShareMemberValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareEpochValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class ShareTargetEpochValue:
    assignment_epoch: int
    assignment_timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class ShareTargetMemberValue:
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class ShareAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    assigned: Partitions
    state: int = STABLE


@dataclass(frozen=True, slots=True)
class TopicPartitionsInfo:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ShareStatePartitionsValue:
    initializing: tuple[TopicPartitionsInfo, ...] = ()
    initialized: tuple[TopicPartitionsInfo, ...] = ()
    deleting: tuple[tuple[uuid.UUID, str], ...] = ()


ShareRecordValue = (
    ShareMemberValue
    | ShareEpochValue
    | ShareTargetEpochValue
    | ShareTargetMemberValue
    | ShareAssignmentValue
    | ShareStatePartitionsValue
)


# --- encoding ---------------------------------------------------------------------------------


def _int32s(values: tuple[int, ...]) -> bytes:
    return uvarint(len(values) + 1) + b"".join(_INT32.pack(v) for v in values)


def _topics_info(topics: tuple[TopicPartitionsInfo, ...]) -> bytes:
    parts = [uvarint(len(topics) + 1)]
    for topic in topics:
        parts += [
            topic.topic_id.bytes,
            encode_compact_string(topic.topic_name),
            _int32s(topic.partitions),
            uvarint(0),
        ]
    return b"".join(parts)


def encode_key(key: ShareRecordKey) -> bytes:
    return encode_group_key(key.record_type, key.group, key.member, PER_MEMBER)


def encode_value(value: ShareRecordValue) -> bytes:
    tags = uvarint(0)
    if isinstance(value, ShareMemberValue):
        names = value.subscribed_topic_names
        body = (
            encode_compact_string(value.rack_id)
            + encode_compact_string(value.client_id)
            + encode_compact_string(value.client_host)
            + uvarint(len(names) + 1)
            + b"".join(encode_compact_string(name) for name in names)
        )
    elif isinstance(value, ShareEpochValue):
        body = _INT32.pack(value.epoch) + _INT64.pack(value.metadata_hash)
    elif isinstance(value, ShareTargetEpochValue):
        body = _INT32.pack(value.assignment_epoch)
        tags = target_metadata_tags(value.assignment_timestamp_ms)
    elif isinstance(value, ShareTargetMemberValue):
        body = write_partitions(value.partitions)
    elif isinstance(value, ShareAssignmentValue):
        body = (
            _INT32.pack(value.member_epoch)
            + _INT32.pack(value.previous_member_epoch)
            + struct.pack(">b", value.state)
            + write_partitions(value.assigned)
        )
    else:
        deleting = [uvarint(len(value.deleting) + 1)]
        for topic_id, name in value.deleting:
            deleting += [topic_id.bytes, encode_compact_string(name), uvarint(0)]
        body = (
            _topics_info(value.initializing) + _topics_info(value.initialized) + b"".join(deleting)
        )
    return _INT16.pack(0) + body + tags


# --- decoding ---------------------------------------------------------------------------------


def decode_key(data: bytes) -> ShareRecordKey:
    return ShareRecordKey(*decode_group_key(data, RECORD_TYPES, PER_MEMBER, "share"))


def _read_topics_info(reader: RecordReader) -> tuple[TopicPartitionsInfo, ...]:
    topics = []
    for _ in range(max(reader.uvarint() - 1, 0)):
        topic_id = uuid.UUID(bytes=reader.take(16))
        name = reader.compact_string() or ""
        partitions = tuple(reader.int32() for _ in range(max(reader.uvarint() - 1, 0)))
        reader.tags()
        topics.append(TopicPartitionsInfo(topic_id, name, partitions))
    return tuple(topics)


def decode_value(key: ShareRecordKey, data: bytes | None) -> ShareRecordValue | None:
    if data is None:
        return None
    reader = RecordReader(data)
    version = reader.int16()
    if version != 0:
        raise RecordDecodeError(f"value version {version} is not 0")
    value: ShareRecordValue
    try:
        if key.record_type == TARGET_METADATA:
            return ShareTargetEpochValue(*read_target_metadata(reader))
        if key.record_type == MEMBER_METADATA:
            rack_id = reader.compact_string()
            client_id, client_host = reader.compact_string() or "", reader.compact_string() or ""
            names = tuple(
                reader.compact_string() or "" for _ in range(max(reader.uvarint() - 1, 0))
            )
            value = ShareMemberValue(rack_id, client_id, client_host, names)
        elif key.record_type == GROUP_METADATA:
            value = ShareEpochValue(reader.int32(), reader.int64())
        elif key.record_type == TARGET_MEMBER:
            value = ShareTargetMemberValue(read_partitions(reader))
        elif key.record_type == CURRENT_ASSIGNMENT:
            epoch, previous = reader.int32(), reader.int32()
            (state,) = struct.unpack(">b", reader.take(1))
            value = ShareAssignmentValue(epoch, previous, read_partitions(reader), state)
        else:
            initializing, initialized = _read_topics_info(reader), _read_topics_info(reader)
            deleting = []
            for _ in range(max(reader.uvarint() - 1, 0)):
                topic_id = uuid.UUID(bytes=reader.take(16))
                deleting.append((topic_id, reader.compact_string() or ""))
                reader.tags()
            value = ShareStatePartitionsValue(initializing, initialized, tuple(deleting))
    except UnicodeDecodeError as error:
        raise RecordDecodeError(str(error)) from None
    reader.tags()
    reader.done()
    return value


# --- what the log holds of a group ------------------------------------------------------------

Record = tuple[ShareRecordKey, ShareRecordValue | None]


@dataclass
class ShareImage:
    """What the log holds of a share group. Without its epoch or target-assignment metadata
    record the group's epochs are a new group's (Kafka writes them only when they change):
    a group AlterShareGroupOffsets created is known from its state-partitions record alone."""

    epoch: int = INITIAL_EPOCH
    metadata_hash: int = 0
    assignment_epoch: int = INITIAL_EPOCH
    assignment_timestamp_ms: int = 0
    members: dict[str, ShareMemberValue] = field(default_factory=dict)
    targets: dict[str, Partitions] = field(default_factory=dict)
    current: dict[str, ShareAssignmentValue] = field(default_factory=dict)
    # None: no record (or its tombstone); an empty value still makes the group known
    state_partitions: ShareStatePartitionsValue | None = None
    has_metadata: bool = False

    @property
    def holds_group(self) -> bool:
        """Whether replaying the log gives a group (Kafka's replay of any of the group's
        records but a tombstone creates it)."""
        return self.has_metadata or self.state_partitions is not None


def _topics(
    partitions: dict[uuid.UUID, set[int]], names: TopicNames, *, keep_empty: bool = False
) -> tuple[TopicPartitionsInfo, ...]:
    return tuple(
        TopicPartitionsInfo(topic_id, names(topic_id), tuple(sorted(indexes)))
        for topic_id, indexes in sorted(partitions.items())
        if indexes or keep_empty
    )


def image_of(group: ShareGroup, names: TopicNames) -> ShareImage:
    # A topic AlterShareGroupOffsets named with no partition in range is initializing with
    # none, as Kafka lists it.
    initializing = _topics(group.initializing, names, keep_empty=True)
    initialized = _topics(group.initialized, names)
    deleting = tuple((t, names(t) or UNKNOWN_TOPIC) for t in sorted(group.deleting))
    return ShareImage(
        epoch=group.group_epoch,
        metadata_hash=group.metadata_hash,
        assignment_epoch=group.assignment_epoch,
        assignment_timestamp_ms=group.assignment_timestamp_ms,
        members={
            m.member_id: ShareMemberValue(
                m.rack_id, m.client_id, m.client_host, tuple(sorted(m.subscribed_topic_names))
            )
            for m in group.members.values()
        },
        targets=dict(group.target),
        current={
            m.member_id: ShareAssignmentValue(m.member_epoch, m.previous_member_epoch, m.assigned)
            for m in group.members.values()
        },
        state_partitions=(
            ShareStatePartitionsValue(initializing, initialized, deleting)
            if initializing or initialized or deleting
            else None
        ),
        has_metadata=True,
    )


IMAGE_RECORDS: ImageRecordTypes[ShareRecordKey, ShareRecordValue] = ImageRecordTypes(
    ShareRecordKey,
    group_metadata=GROUP_METADATA,
    member_metadata=MEMBER_METADATA,
    target_metadata=TARGET_METADATA,
    target_member=TARGET_MEMBER,
    current_assignment=CURRENT_ASSIGNMENT,
    epoch_value=ShareEpochValue,
    target_epoch_value=ShareTargetEpochValue,
    target_member_value=ShareTargetMemberValue,
)


def diff(group_id: str, old: ShareImage | None, new: ShareImage | None) -> list[Record]:
    """The records that turn what the log holds (``old``) into ``new`` (None: no group): a
    consumer group's, only those whose value differs from what the log holds or implies (a new
    group's epochs when it holds no epoch record, as Kafka writes an epoch only when it moves),
    then the state-partitions record: last, as Kafka's heartbeat adds it after the member's
    assignment records. A deleted group's tombstones are in Kafka's ShareGroup
    createGroupTombstoneRecords order: current assignments, targets, target metadata, members,
    the state-partitions record (always), the group epoch."""
    old = old or ShareImage()
    if new is not None or old.holds_group:
        old = replace(old, has_metadata=True)
    state_partitions = ShareRecordKey(STATE_PARTITIONS, group_id)
    records = image_records(IMAGE_RECORDS, group_id, old, new)
    if new is None:
        if not old.holds_group:
            return records

        def tombstones(record_type: int) -> list[Record]:
            return [record for record in records if record[0].record_type == record_type]

        return [
            *tombstones(CURRENT_ASSIGNMENT),
            *tombstones(TARGET_MEMBER),
            *tombstones(TARGET_METADATA),
            *tombstones(MEMBER_METADATA),
            (state_partitions, None),
            *tombstones(GROUP_METADATA),
        ]
    empty = ShareStatePartitionsValue()
    if (new.state_partitions or empty) != (old.state_partitions or empty):
        records.append((state_partitions, new.state_partitions or empty))
    return records


def state_partitions_rewritten(
    group_id: str, old: ShareImage | None, new: ShareImage
) -> list[Record]:
    """The group's state-partitions record as ``new`` holds it, when the log holds one and
    ``diff`` writes none (the value did not change): Kafka's DeleteGroups and
    DeleteShareGroupOffsets write it whatever it was."""
    if old is None or old.state_partitions is None:
        return []
    empty = ShareStatePartitionsValue()
    if (new.state_partitions or empty) != old.state_partitions:
        return []
    return [(ShareRecordKey(STATE_PARTITIONS, group_id), old.state_partitions)]


class ShareImageBuilder:
    """Images rebuilt from replayed records, as Kafka's replay applies them: at load, and after
    each successful append (what the log holds of each group)."""

    def __init__(self) -> None:
        self.images: dict[str, ShareImage] = {}

    def apply(self, key: ShareRecordKey, value: ShareRecordValue | None) -> None:
        if key.record_type == GROUP_METADATA and value is None:
            self.images.pop(key.group, None)
            return
        image = self.images.setdefault(key.group, ShareImage())
        member = key.member or ""
        if isinstance(value, ShareEpochValue):
            image.epoch, image.has_metadata = value.epoch, True
            image.metadata_hash = value.metadata_hash
        elif isinstance(value, ShareTargetEpochValue):
            image.assignment_epoch = value.assignment_epoch
            image.assignment_timestamp_ms = value.assignment_timestamp_ms
        elif isinstance(value, ShareMemberValue):
            image.members[member] = value
        elif isinstance(value, ShareTargetMemberValue):
            image.targets[member] = value.partitions
        elif isinstance(value, ShareAssignmentValue):
            image.current[member] = value
        elif isinstance(value, ShareStatePartitionsValue):
            image.state_partitions = value
        elif value is None:
            if key.record_type == MEMBER_METADATA:
                image.members.pop(member, None)
            elif key.record_type == TARGET_MEMBER:
                image.targets.pop(member, None)
            elif key.record_type == CURRENT_ASSIGNMENT:
                image.current.pop(member, None)
            elif key.record_type == STATE_PARTITIONS:
                image.state_partitions = None

    def groups(self, session_deadline_ms: int) -> list[ShareGroup]:
        """The groups, each member with a fresh session."""
        built = []
        for group_id, image in self.images.items():
            if image.holds_group:
                built.append(group_from_image(group_id, image, session_deadline_ms))
        return built


def group_from_image(group_id: str, image: ShareImage, session_deadline_ms: int) -> ShareGroup:
    members = {}
    for member_id, meta in image.members.items():
        member = ShareMember(
            member_id,
            rack_id=meta.rack_id,
            client_id=meta.client_id,
            client_host=meta.client_host,
            subscribed_topic_names=frozenset(meta.subscribed_topic_names),
            session_deadline_ms=session_deadline_ms,
        )
        current = image.current.get(member_id)
        if current is not None:
            member = replace(
                member,
                member_epoch=current.member_epoch,
                previous_member_epoch=current.previous_member_epoch,
                assigned=current.assigned,
            )
        members[member_id] = member
    initializing = image.state_partitions.initializing if image.state_partitions else ()
    initialized = image.state_partitions.initialized if image.state_partitions else ()
    deleting = image.state_partitions.deleting if image.state_partitions else ()
    return ShareGroup(
        group_id,
        group_epoch=image.epoch,
        assignment_epoch=image.assignment_epoch,
        assignment_timestamp_ms=image.assignment_timestamp_ms,
        metadata_hash=image.metadata_hash,
        members=members,
        target={m: p for m, p in image.targets.items() if m in members},
        initialized={t.topic_id: set(t.partitions) for t in initialized if t.partitions},
        # a topic initializing with no partition (AlterShareGroupOffsets out of range) too
        initializing={t.topic_id: set(t.partitions) for t in initializing},
        deleting={topic_id for topic_id, _ in deleting},
    )
