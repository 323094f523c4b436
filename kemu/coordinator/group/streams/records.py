"""KIP-1071 streams-group records in ``__consumer_offsets``, byte for byte as Kafka 4.4 writes
them, the records that bring the log up to date with a group (``diff``) and the groups rebuilt
from replayed records (``StreamsImageBuilder``).

Keys: int16 record type + int16-length strings; values: int16 version 0 + a flexible body
(compact strings and arrays, a tagged-field section after every struct).

====  ==========================================  ==========================================
type  key                                         value v0
====  ==========================================  ==========================================
17    StreamsGroupMetadata: group                 Epoch int32, MetadataHash int64;
                                                  tag 0 ValidatedTopologyEpoch int32,
                                                  tag 1 LastAssignmentConfigs [] {Key, Value}
19    StreamsGroupMemberMetadata: group, member   InstanceId?, RackId?, ClientId, ClientHost,
                                                  RebalanceTimeoutMs, TopologyEpoch, ProcessId,
                                                  UserEndpoint? {Host, Port uint16},
                                                  ClientTags [] {Key, Value}
20    StreamsGroupTargetAssignmentMetadata: group AssignmentEpoch int32;
                                                  tag 0 AssignmentTimestamp int64 (KIP-1263)
21    StreamsGroupTargetAssignmentMember:         ActiveTasks, StandbyTasks, WarmupTasks:
      group, member                               [] {SubtopologyId, Partitions []int32}
22    StreamsGroupCurrentMemberAssignment:        MemberEpoch, PreviousMemberEpoch, State int8
      group, member                               (0 stable, 1 unrevoked, 2 unreleased), the
                                                  three task lists, the three pending revocation;
                                                  active ones with tag 0 AssignmentEpochs []int32
                                                  (KIP-1251, one per partition)
23    StreamsGroupTopology: group                 Epoch, Subtopologies [] (as the heartbeat's)
====  ==========================================  ==========================================

Tagged fields kemu does not use (topology description epochs) are skipped when read and not
written, as Kafka's defaults. An active task list without AssignmentEpochs (or with as many as
it has partitions) is read without: its tasks then get the member epoch, as Kafka's
``TasksTupleWithEpochs.fromCurrentAssignmentRecord``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

from kemu.coordinator.group.consumer.records import read_target_metadata, target_metadata_tags
from kemu.coordinator.group.record_keys import decode_group_key, encode_group_key
from kemu.coordinator.group.streams.assignor import EMPTY, Task, Tasks, TaskTuple
from kemu.coordinator.group.streams.model import (
    STABLE,
    UNRELEASED,
    UNREVOKED,
    StreamsGroup,
    StreamsMember,
)
from kemu.coordinator.group.streams.topology import (
    CopartitionGroup,
    Subtopology,
    TopicInfo,
    Topology,
)
from kemu.protocol.coordinator_records import (
    RecordDecodeError,
    RecordReader,
    encode_compact_string,
    encode_tags,
)
from kemu.protocol.records import uvarint

GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, TOPOLOGY = (
    17,
    19,
    20,
    21,
    22,
    23,
)
RECORD_TYPES = (
    GROUP_METADATA,
    MEMBER_METADATA,
    TARGET_METADATA,
    TARGET_MEMBER,
    CURRENT_ASSIGNMENT,
    TOPOLOGY,
)
PER_MEMBER = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)
STATE_CODES = {STABLE: 0, UNREVOKED: 1, UNRELEASED: 2}
STATE_NAMES = {code: name for name, code in STATE_CODES.items()}

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class StreamsRecordKey:
    record_type: int
    group: str
    member: str | None = None


@dataclass(frozen=True, slots=True)
class StreamsGroupValue:
    epoch: int
    validated_topology_epoch: int = -1
    assignment_configs: tuple[tuple[str, str], ...] = ()
    metadata_hash: int = 0  # Kafka's, KIP-1101 (``metadata_hash``)


@dataclass(frozen=True, slots=True)
class StreamsMemberValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topology_epoch: int
    process_id: str
    user_endpoint: tuple[str, int] | None
    client_tags: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class StreamsTargetEpochValue:
    assignment_epoch: int
    assignment_timestamp_ms: int = 0  # 0: Kafka's default, not written


@dataclass(frozen=True, slots=True)
class StreamsTargetMemberValue:
    tasks: TaskTuple


@dataclass(frozen=True, slots=True)
class StreamsCurrentValue:
    member_epoch: int
    previous_member_epoch: int
    state: str
    assigned: TaskTuple
    pending_revocation: TaskTuple
    # KIP-1251: the epoch each active task was assigned at (those of the lists carrying them).
    active_epochs: dict[Task, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StreamsTopologyValue:
    topology: Topology


StreamsRecordValue = (
    StreamsGroupValue
    | StreamsMemberValue
    | StreamsTargetEpochValue
    | StreamsTargetMemberValue
    | StreamsCurrentValue
    | StreamsTopologyValue
)
StreamsRecord = tuple[StreamsRecordKey, StreamsRecordValue | None]


# --- encoding ---------------------------------------------------------------------------------


_cs = encode_compact_string  # short, for the dense layouts below


def _array(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def _tasks(tasks: Tasks, epochs: Mapping[Task, int] | None = None) -> bytes:
    by_sub: dict[str, list[int]] = {}
    for sub, partition in sorted(tasks):
        by_sub.setdefault(sub, []).append(partition)
    return _array(
        [
            _cs(sub) + _array([_INT32.pack(p) for p in parts]) + _epochs_tag(sub, parts, epochs)
            for sub, parts in by_sub.items()
        ]
    )


def _epochs_tag(sub: str, parts: list[int], epochs: Mapping[Task, int] | None) -> bytes:
    """A TaskIds struct's tagged fields: tag 0 AssignmentEpochs when every task has one."""
    known = [epochs[(sub, p)] for p in parts if (sub, p) in epochs] if epochs else []
    if not known or len(known) != len(parts):
        return uvarint(0)
    return encode_tags([(0, _array([_INT32.pack(epoch) for epoch in known]))])


def _triple(tasks: TaskTuple, epochs: Mapping[Task, int] | None = None) -> bytes:
    return _tasks(tasks.active, epochs) + _tasks(tasks.standby) + _tasks(tasks.warmup)


def _topic_info(info: TopicInfo) -> bytes:
    return (
        _cs(info.name)
        + _INT32.pack(info.partitions)
        + _INT16.pack(info.replication_factor)
        + _array([_cs(k) + _cs(v) + uvarint(0) for k, v in info.configs])
        + uvarint(0)
    )


def _subtopology(sub: Subtopology) -> bytes:
    return (
        _cs(sub.subtopology_id)
        + _array([_cs(t) for t in sub.source_topics])
        + _array([_cs(t) for t in sub.source_topic_regex])
        + _array([_topic_info(t) for t in sub.state_changelog_topics])
        + _array([_cs(t) for t in sub.repartition_sink_topics])
        + _array([_topic_info(t) for t in sub.repartition_source_topics])
        + _array(
            [
                _array([_INT16.pack(i) for i in group.source_topics])
                + _array([_INT16.pack(i) for i in group.source_topic_regex])
                + _array([_INT16.pack(i) for i in group.repartition_source_topics])
                + uvarint(0)
                for group in sub.copartition_groups
            ]
        )
        + uvarint(0)
    )


def encode_key(key: StreamsRecordKey) -> bytes:
    return encode_group_key(key.record_type, key.group, key.member, PER_MEMBER)


def encode_value(value: StreamsRecordValue) -> bytes:
    tags = b"\x00"
    if isinstance(value, StreamsGroupValue):
        body = _INT32.pack(value.epoch) + _INT64.pack(value.metadata_hash)
        tagged: list[tuple[int, bytes]] = []
        if value.validated_topology_epoch != -1:
            tagged.append((0, _INT32.pack(value.validated_topology_epoch)))
        if value.assignment_configs:
            configs = [_cs(k) + _cs(v) + uvarint(0) for k, v in value.assignment_configs]
            tagged.append((1, _array(configs)))
        if tagged:
            tags = encode_tags(tagged)
    elif isinstance(value, StreamsTargetEpochValue):
        body = _INT32.pack(value.assignment_epoch)
        tags = target_metadata_tags(value.assignment_timestamp_ms)
    elif isinstance(value, StreamsMemberValue):
        endpoint = value.user_endpoint
        body = (
            _cs(value.instance_id)
            + _cs(value.rack_id)
            + _cs(value.client_id)
            + _cs(value.client_host)
            + _INT32.pack(value.rebalance_timeout_ms)
            + _INT32.pack(value.topology_epoch)
            + _cs(value.process_id)
            + (
                b"\xff"
                if endpoint is None
                else b"\x01" + _cs(endpoint[0]) + struct.pack(">H", endpoint[1]) + uvarint(0)
            )
            + _array([_cs(k) + _cs(v) + uvarint(0) for k, v in value.client_tags])
        )
    elif isinstance(value, StreamsTargetMemberValue):
        body = _triple(value.tasks)
    elif isinstance(value, StreamsCurrentValue):
        body = (
            _INT32.pack(value.member_epoch)
            + _INT32.pack(value.previous_member_epoch)
            + struct.pack(">b", STATE_CODES.get(value.state, 0))
            + _triple(value.assigned, value.active_epochs)
            + _triple(value.pending_revocation, value.active_epochs)
        )
    else:
        topology = value.topology
        body = _INT32.pack(topology.epoch) + _array(
            [_subtopology(sub) for sub in topology.subtopologies]
        )
    return _INT16.pack(0) + body + tags


# --- decoding ---------------------------------------------------------------------------------


def _read_array(reader: RecordReader) -> range:
    return range(max(reader.uvarint() - 1, 0))


def _read_strings(reader: RecordReader) -> tuple[str, ...]:
    return tuple(reader.compact_string() or "" for _ in _read_array(reader))


def _read_tasks(reader: RecordReader, epochs: dict[Task, int] | None = None) -> Tasks:
    """A TaskIds array; with ``epochs``, its AssignmentEpochs are added to them."""
    found: set[Task] = set()
    for _ in _read_array(reader):
        sub = reader.compact_string() or ""
        tasks = [(sub, reader.int32()) for _ in _read_array(reader)]
        found.update(tasks)
        tagged = reader.tags().get(0)
        if epochs is not None and tagged is not None:
            array = RecordReader(tagged)
            values = [array.int32() for _ in _read_array(array)]
            array.done()
            if len(values) == len(tasks):
                epochs.update(zip(tasks, values, strict=True))
    return frozenset(found)


def _read_triple(reader: RecordReader, epochs: dict[Task, int] | None = None) -> TaskTuple:
    return TaskTuple(_read_tasks(reader, epochs), _read_tasks(reader), _read_tasks(reader))


def _read_kv(reader: RecordReader) -> tuple[tuple[str, str], ...]:
    pairs = []
    for _ in _read_array(reader):
        pairs.append((reader.compact_string() or "", reader.compact_string() or ""))
        reader.tags()
    return tuple(pairs)


def _read_topic_info(reader: RecordReader) -> TopicInfo:
    name = reader.compact_string() or ""
    partitions = reader.int32()
    replication = reader.int16()
    configs = _read_kv(reader)
    reader.tags()
    return TopicInfo(name, partitions, replication, configs)


def _read_int16s(reader: RecordReader) -> tuple[int, ...]:
    return tuple(reader.int16() for _ in _read_array(reader))


def _read_subtopology(reader: RecordReader) -> Subtopology:
    sub_id = reader.compact_string() or ""
    sources = _read_strings(reader)
    regex = _read_strings(reader)
    changelogs = tuple(_read_topic_info(reader) for _ in _read_array(reader))
    sinks = _read_strings(reader)
    repartition = tuple(_read_topic_info(reader) for _ in _read_array(reader))
    groups = []
    for _ in _read_array(reader):
        groups.append(
            CopartitionGroup(_read_int16s(reader), _read_int16s(reader), _read_int16s(reader))
        )
        reader.tags()
    reader.tags()
    return Subtopology(sub_id, sources, regex, changelogs, sinks, repartition, tuple(groups))


def decode_key(data: bytes) -> StreamsRecordKey:
    return StreamsRecordKey(*decode_group_key(data, RECORD_TYPES, PER_MEMBER, "streams"))


def decode_value(key: StreamsRecordKey, data: bytes | None) -> StreamsRecordValue | None:
    if data is None:
        return None
    reader = RecordReader(data)
    version = reader.int16()
    if version != 0:
        raise RecordDecodeError(f"value version {version} is not 0")
    value: StreamsRecordValue
    try:
        if key.record_type == GROUP_METADATA:
            epoch = reader.int32()
            metadata_hash = reader.int64()
            validated = -1
            configs: tuple[tuple[str, str], ...] = ()
            for tag, payload in reader.tags().items():
                if tag == 0 and len(payload) == 4:
                    (validated,) = _INT32.unpack(payload)
                elif tag == 1:
                    configs = _read_kv(RecordReader(payload))
            reader.done()
            return StreamsGroupValue(epoch, validated, configs, metadata_hash)
        if key.record_type == TARGET_METADATA:
            return StreamsTargetEpochValue(*read_target_metadata(reader))
        elif key.record_type == MEMBER_METADATA:
            instance_id, rack_id = reader.compact_string(), reader.compact_string()
            client_id, client_host = reader.compact_string() or "", reader.compact_string() or ""
            rebalance, topology_epoch = reader.int32(), reader.int32()
            process_id = reader.compact_string() or ""
            (marker,) = struct.unpack(">b", reader.take(1))
            endpoint = None
            if marker >= 0:
                host = reader.compact_string() or ""
                (port,) = struct.unpack(">H", reader.take(2))
                reader.tags()
                endpoint = (host, port)
            value = StreamsMemberValue(
                instance_id or None,
                rack_id or None,
                client_id,
                client_host,
                rebalance,
                topology_epoch,
                process_id,
                endpoint,
                _read_kv(reader),
            )
        elif key.record_type == TARGET_MEMBER:
            value = StreamsTargetMemberValue(_read_triple(reader))
        elif key.record_type == CURRENT_ASSIGNMENT:
            epoch, previous = reader.int32(), reader.int32()
            (state,) = struct.unpack(">b", reader.take(1))
            epochs: dict[Task, int] = {}
            value = StreamsCurrentValue(
                epoch,
                previous,
                STATE_NAMES.get(state, STABLE),
                _read_triple(reader, epochs),
                _read_triple(reader, epochs),
                epochs,
            )
        else:
            epoch = reader.int32()
            subs = tuple(_read_subtopology(reader) for _ in _read_array(reader))
            value = StreamsTopologyValue(Topology(epoch, subs))
    except UnicodeDecodeError as error:
        raise RecordDecodeError(str(error)) from None
    reader.tags()
    reader.done()
    return value


# --- what the log holds of a group ------------------------------------------------------------

Image = dict[StreamsRecordKey, StreamsRecordValue]


def image_of(group: StreamsGroup) -> Image:
    gid = group.group_id
    image: Image = {
        StreamsRecordKey(GROUP_METADATA, gid): StreamsGroupValue(
            group.group_epoch,
            group.validated_topology_epoch,
            group.assignment_configs,
            group.metadata_hash,
        ),
        StreamsRecordKey(TARGET_METADATA, gid): StreamsTargetEpochValue(
            group.assignment_epoch, group.assignment_timestamp_ms
        ),
    }
    if group.topology is not None:
        image[StreamsRecordKey(TOPOLOGY, gid)] = StreamsTopologyValue(group.topology)
    for m in group.members.values():
        image[StreamsRecordKey(MEMBER_METADATA, gid, m.member_id)] = StreamsMemberValue(
            m.instance_id,
            m.rack_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.topology_epoch,
            m.process_id,
            m.user_endpoint,
            m.client_tags,
        )
        image[StreamsRecordKey(CURRENT_ASSIGNMENT, gid, m.member_id)] = StreamsCurrentValue(
            m.member_epoch,
            m.previous_member_epoch,
            m.state,
            m.assigned,
            m.pending_revocation,
            m.active_epochs_of(m.assigned.active | m.pending_revocation.active),
        )
    for member_id, tasks in group.target.items():
        if member_id in group.members:
            image[StreamsRecordKey(TARGET_MEMBER, gid, member_id)] = StreamsTargetMemberValue(tasks)
    return image


# Tombstones go member records first, the group's metadata last, as Kafka deletes a group.
_TOMBSTONE_ORDER = {
    CURRENT_ASSIGNMENT: 0,
    TARGET_MEMBER: 1,
    MEMBER_METADATA: 2,
    TARGET_METADATA: 3,
    TOPOLOGY: 4,
    GROUP_METADATA: 5,
}


def diff(old: Image | None, new: Image | None) -> list[StreamsRecord]:
    old = old or {}
    new = new or {}
    records: list[StreamsRecord] = [
        (key, value) for key, value in new.items() if old.get(key) != value
    ]
    gone = sorted(
        (key for key in old if key not in new), key=lambda k: _TOMBSTONE_ORDER[k.record_type]
    )
    records += [(key, None) for key in gone]
    return records


class StreamsImageBuilder:
    """Replays streams-group records into images, then groups."""

    def __init__(self) -> None:
        self.images: dict[str, Image] = {}

    def apply(self, key: StreamsRecordKey, value: StreamsRecordValue | None) -> None:
        image = self.images.setdefault(key.group, {})
        if value is None:
            image.pop(key, None)
            if key.record_type == GROUP_METADATA:
                self.images.pop(key.group, None)
        else:
            image[key] = value

    def groups(self, now_ms: int, session_timeout_ms: int) -> Iterator[tuple[StreamsGroup, Image]]:
        for group_id, image in self.images.items():
            group = group_from_image(group_id, image, now_ms, session_timeout_ms)
            if group is not None:
                yield group, dict(image)


def group_from_image(
    group_id: str, image: Image, now_ms: int, session_timeout_ms: int
) -> StreamsGroup | None:
    """The group the records replayed into ``image`` hold (None: no metadata record), each
    member with a fresh session: at load, and after each write."""
    meta = image.get(StreamsRecordKey(GROUP_METADATA, group_id))
    if not isinstance(meta, StreamsGroupValue):
        return None
    group = StreamsGroup(
        group_id,
        group_epoch=meta.epoch,
        validated_topology_epoch=meta.validated_topology_epoch,
        assignment_configs=meta.assignment_configs,
        metadata_hash=meta.metadata_hash,
    )
    for key, value in image.items():
        if isinstance(value, StreamsTargetEpochValue):
            group.assignment_epoch = value.assignment_epoch
            group.assignment_timestamp_ms = value.assignment_timestamp_ms
        elif isinstance(value, StreamsTopologyValue):
            group.topology = value.topology
        elif isinstance(value, StreamsTargetMemberValue) and key.member is not None:
            group.target[key.member] = value.tasks
        elif isinstance(value, StreamsMemberValue) and key.member is not None:
            current = image.get(StreamsRecordKey(CURRENT_ASSIGNMENT, group_id, key.member))
            member = StreamsMember(
                key.member,
                instance_id=value.instance_id,
                rack_id=value.rack_id,
                client_id=value.client_id,
                client_host=value.client_host,
                rebalance_timeout_ms=value.rebalance_timeout_ms,
                topology_epoch=value.topology_epoch,
                process_id=value.process_id,
                user_endpoint=value.user_endpoint,
                client_tags=value.client_tags,
                session_deadline_ms=now_ms + session_timeout_ms,
            )
            if isinstance(current, StreamsCurrentValue):
                member = replace(
                    member,
                    member_epoch=current.member_epoch,
                    previous_member_epoch=current.previous_member_epoch,
                    state=current.state,
                    assigned=current.assigned,
                    pending_revocation=current.pending_revocation,
                    # Without a recorded one, the member epoch (Kafka's default).
                    active_epochs={
                        task: current.active_epochs.get(task, current.member_epoch)
                        for task in current.assigned.active | current.pending_revocation.active
                    },
                )
            group.members[key.member] = member
    for member_id in list(group.target):
        if member_id not in group.members:
            group.target[member_id] = EMPTY
    return group
