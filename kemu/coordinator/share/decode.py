"""Reading ``__share_group_state`` back: records as JSON lines and the state they add up to.

The log is read like any topic, from a running cluster (``--bootstrap``: Metadata, then Fetch
from each partition's leader up to its high watermark) or from a data directory (``--data-dir``:
the segment files, read-only, up to the last whole valid batch). Each record is printed as
Kafka's ``ShareGroupStateMessageFormatter`` prints it (``{"key":{"type":..,"data":..},
"value":{"version":..,"data":..}}``, camelCase fields, topic ids in Kafka's base64 form), with
its partition and offset; then, per share partition, the state the records replay to, through
the same ``ShareCoordinatorShard.replay`` the coordinator uses.
"""

from __future__ import annotations

import datetime
import json
import socket
import struct
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kemu.coordinator.share.keys import kafka_uuid
from kemu.coordinator.share.persister import PersistedBatch, SharePartitionKey
from kemu.coordinator.share.records import (
    RECORD_TYPE_NAMES,
    RecordDecodeError,
    ShareSnapshotValue,
    StateRecordKey,
    StateValue,
    decode_record,
)
from kemu.coordinator.share.shard import ShareCoordinatorShard, ShareState
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.record_reader import iter_records
from kemu.protocol.records import (
    BATCH_HEADER_SIZE,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    BatchHeader,
    read_header,
)

SHARE_STATE_TOPIC = "__share_group_state"
# Printed beside the numbers Kafka's formatter prints (Kafka's RecordState and AcknowledgeType
# ids; the broker's enums sit a layer above this one).
DELIVERY_STATE_NAMES = {
    0: "AVAILABLE",
    1: "ACQUIRED",
    2: "ACKNOWLEDGED",
    3: "ARCHIVING",
    4: "ARCHIVED",
    5: "TX_PENDING",
}
ACK_TYPE_NAMES = {0: "GAP", 1: "ACCEPT", 2: "RELEASE", 3: "REJECT", 4: "RENEW"}
_CONTROL_KEY = struct.Struct(">hh")  # version, type (0 ABORT, 1 COMMIT)


@dataclass(frozen=True, slots=True)
class Marker:
    """A transaction's COMMIT or ABORT control record (KIP-1289 resolves staged records)."""

    producer_id: int
    producer_epoch: int
    commit: bool


@dataclass(frozen=True, slots=True)
class LogRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    marker: Marker | None = None


# --- record batches -----------------------------------------------------------------------------


def batch_records(
    header: BatchHeader, batch: bytes
) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record of a v2 batch; none for a control batch."""
    if header.is_control:
        return []
    return [(record.offset, record.key, record.value) for record in iter_records(batch)]


def control_marker(batch: bytes) -> bool | None:
    """A control batch's marker: True for COMMIT, False for ABORT, None for anything else."""
    for record in iter_records(batch):
        if record.key is None or len(record.key) < _CONTROL_KEY.size:
            return None
        _version, kind = _CONTROL_KEY.unpack_from(record.key)
        if kind == CONTROL_COMMIT:
            return True
        if kind == CONTROL_ABORT:
            return False
        return None
    return None


def log_records(partition: int, header: BatchHeader, batch: bytes) -> Iterator[LogRecord]:
    """The records of one batch of ``__share_group_state``, a control batch as its marker."""
    if header.is_control:
        commit = control_marker(batch)
        if commit is not None:
            marker = Marker(header.producer_id, header.producer_epoch, commit)
            yield LogRecord(partition, header.base_offset, None, None, marker)
        return
    for offset, key, value in batch_records(header, batch):
        yield LogRecord(partition, offset, key, value)


def split_fetched(data: bytes) -> Iterator[tuple[BatchHeader, bytes]]:
    """Whole batches of fetched bytes; a partial batch at the end is left out, as clients do."""
    position = 0
    while len(data) - position >= BATCH_HEADER_SIZE:
        header = read_header(data, position)
        if position + header.size > len(data):
            return
        yield header, data[position : position + header.size]
        position += header.size


# --- JSON ---------------------------------------------------------------------------------------


def _name(names: dict[int, str], number: int) -> str:
    return names.get(number, f"UNKNOWN({number})")


def _batch_json(batch: PersistedBatch) -> dict[str, Any]:
    """Kafka's fields, each state or acknowledge type followed by its name (``...Name``)."""
    found: dict[str, Any] = {
        "firstOffset": batch.first_offset,
        "lastOffset": batch.last_offset,
        "deliveryState": batch.delivery_state,
        "deliveryStateName": _name(DELIVERY_STATE_NAMES, batch.delivery_state),
        "deliveryCount": batch.delivery_count,
    }
    if batch.staged_producer_id != -1:
        found["stagedProducerId"] = batch.staged_producer_id
    if batch.staged_producer_epoch != -1:
        found["stagedProducerEpoch"] = batch.staged_producer_epoch
    if batch.staged_ack_type != -1:
        found["stagedAckType"] = batch.staged_ack_type
        found["stagedAckTypeName"] = _name(ACK_TYPE_NAMES, batch.staged_ack_type)
    if batch.staged_commit_state != -1:
        found["stagedCommitState"] = batch.staged_commit_state
        found["stagedCommitStateName"] = _name(DELIVERY_STATE_NAMES, batch.staged_commit_state)
    if batch.staged_abort_state != -1:
        found["stagedAbortState"] = batch.staged_abort_state
        found["stagedAbortStateName"] = _name(DELIVERY_STATE_NAMES, batch.staged_abort_state)
    return found


def _topic_json(topic_id: uuid.UUID, topic_names: dict[uuid.UUID, str]) -> dict[str, Any]:
    """The topic id as Kafka prints it, and its name beside it when the cluster knows it."""
    found: dict[str, Any] = {"topicId": kafka_uuid(topic_id)}
    name = topic_names.get(topic_id)
    if name is not None:
        found["topicName"] = name
    return found


def share_key_json(
    key: SharePartitionKey, topic_names: dict[uuid.UUID, str] | None = None
) -> dict[str, Any]:
    return {
        "groupId": key.group_id,
        **_topic_json(key.topic_id, topic_names or {}),
        "partition": key.partition,
    }


def key_json(
    key: StateRecordKey, topic_names: dict[uuid.UUID, str] | None = None
) -> dict[str, Any]:
    return {
        "type": key.record_type,
        "data": {
            "groupId": key.group_id,
            **_topic_json(key.topic_id, topic_names or {}),
            "partition": key.partition,
        },
    }


def value_json(value: StateValue | None) -> dict[str, Any] | None:
    if value is None:
        return None
    data: dict[str, Any] = {"snapshotEpoch": value.snapshot_epoch}
    if isinstance(value, ShareSnapshotValue):
        data["stateEpoch"] = value.state_epoch
    data["leaderEpoch"] = value.leader_epoch
    data["startOffset"] = value.start_offset
    if value.delivery_complete_count != -1:
        data["deliveryCompleteCount"] = value.delivery_complete_count
    if isinstance(value, ShareSnapshotValue):
        data["createTimestamp"] = value.create_timestamp
        data["writeTimestamp"] = value.write_timestamp
    data["stateBatches"] = [_batch_json(b) for b in value.state_batches]
    return {"version": 0, "data": data}


def state_json(
    group_id: str,
    topic_id: uuid.UUID,
    partition: int,
    state: ShareState,
    topic_names: dict[uuid.UUID, str] | None = None,
) -> Any:
    return {
        "groupId": group_id,
        **_topic_json(topic_id, topic_names or {}),
        "partition": partition,
        "snapshotEpoch": state.snapshot_epoch,
        "stateEpoch": state.state_epoch,
        "leaderEpoch": state.leader_epoch,
        "startOffset": state.start_offset,
        "deliveryCompleteCount": state.delivery_complete_count,
        "stateBatches": [_batch_json(b) for b in state.batches],
    }


class ShareStateDecoder:
    """Feed the records of ``__share_group_state`` in log order (per partition)."""

    def __init__(self, topic_names: dict[uuid.UUID, str] | None = None) -> None:
        self.shards: dict[int, ShareCoordinatorShard] = {}
        self.topic_names = topic_names or {}

    def add(self, record: LogRecord) -> dict[str, Any]:
        """Decode and replay one record; returns its JSON line."""
        line: dict[str, Any] = {"partition": record.partition, "offset": record.offset}
        shard = self.shards.get(record.partition)
        if shard is None:
            shard = self.shards[record.partition] = ShareCoordinatorShard(lambda _: None)
        if record.marker is not None:
            marker = record.marker
            resolved = shard.replay_marker(marker.producer_id, marker.producer_epoch, marker.commit)
            line["marker"] = {
                "type": "COMMIT" if marker.commit else "ABORT",
                "producerId": marker.producer_id,
                "producerEpoch": marker.producer_epoch,
                "resolved": [share_key_json(k, self.topic_names) for k in resolved],
            }
            return line
        if record.key is None:
            line["error"] = "record without a key"
            return line
        try:
            key, value = decode_record(record.key, record.value)
        except RecordDecodeError as error:
            line["error"] = str(error)
            return line
        shard.replay(key, value)
        line["recordType"] = RECORD_TYPE_NAMES[key.record_type]
        line["key"] = key_json(key, self.topic_names)
        line["value"] = value_json(value)
        return line

    def states(self) -> list[dict[str, Any]]:
        found = []
        for index in sorted(self.shards):
            for key, state in self.shards[index]:
                found.append(
                    {
                        "statePartition": index,
                        **state_json(
                            key.group_id, key.topic_id, key.partition, state, self.topic_names
                        ),
                    }
                )
        return found


def decode_all(
    records: Iterable[LogRecord],
    *,
    states_only: bool = False,
    topic_names: dict[uuid.UUID, str] | None = None,
) -> Iterator[str]:
    """JSON lines: every record (unless ``states_only``), then one ``{"state": ...}`` per key;
    ``topicName`` beside each ``topicId`` found in ``topic_names``."""
    decoder = ShareStateDecoder(topic_names)
    for record in records:
        line = decoder.add(record)
        if not states_only:
            yield json.dumps(line, separators=(",", ":"))
    for state in decoder.states():
        yield json.dumps({"state": state}, separators=(",", ":"))


# --- sources ------------------------------------------------------------------------------------


def read_data_dir(data_dir: Path) -> Iterator[LogRecord]:
    """Records of ``__share_group_state`` from segment files, without changing them."""
    from kemu.storage.recovery import scan_batches
    from kemu.storage.segment_files import LOG_SUFFIX

    directories = sorted(
        (int(path.name.rsplit("-", 1)[1]), path)
        for path in data_dir.glob(f"{SHARE_STATE_TOPIC}-*")
        if path.is_dir() and path.name.rsplit("-", 1)[1].isdigit()
    )
    for partition, directory in directories:
        # below the log start (the coordinator prunes what the latest snapshots cover) records
        # may linger in a segment's files; a reader of the log does not see them
        start = _checkpointed_start(directory)
        for segment in sorted(directory.glob(f"*{LOG_SUFFIX}")):
            data = segment.read_bytes()
            found: list[tuple[BatchHeader, int]] = []
            scan_batches(data, int(segment.stem), _collector(found))
            for header, position in found:
                if header.last_offset < start:
                    continue
                batch = data[position : position + header.size]
                for record in log_records(partition, header, batch):
                    if record.offset >= start:
                        yield record


def data_dir_topic_names(data_dir: Path) -> dict[uuid.UUID, str]:
    """Topic id -> name from a data dir's topic catalogue (empty when there is none)."""
    try:
        catalogue = json.loads((data_dir / "kemu-metadata.json").read_text())
        return {uuid.UUID(t["topic_id"]): str(t["name"]) for t in catalogue["topics"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def cluster_topic_names(bootstrap: str, timeout: float = 10.0) -> dict[uuid.UUID, str]:
    """Topic id -> name of every topic a running cluster's Metadata names."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    client = _Client(host, int(port), timeout)
    try:
        meta = wire.request_module(3, METADATA_VERSION)
        metadata = client.call(
            wire.build(meta.MetadataRequest, topics=None, allow_auto_topic_creation=False)
        )
    finally:
        client.close()
    return {
        uuid.UUID(str(t.topic_id)): str(t.name)
        for t in metadata.topics
        if t.error_code == ErrorCode.none and t.name is not None
    }


def _checkpointed_start(directory: Path) -> int:
    """The log start offset a SegmentLog checkpointed in ``directory`` (0 when none)."""
    from kemu.storage.segment_files import CHECKPOINT_VERSION, START_CHECKPOINT

    try:
        words = (directory / START_CHECKPOINT).read_text().split()
    except FileNotFoundError:
        return 0
    if len(words) == 2 and words[0] == str(CHECKPOINT_VERSION) and words[1].isdigit():
        return int(words[1])
    return 0


def _collector(into: list[tuple[BatchHeader, int]]) -> Callable[[BatchHeader, int], None]:
    def collect(header: BatchHeader, position: int) -> None:
        into.append((header, position))

    return collect


class _Client:
    """One blocking connection speaking kio-encoded requests (enough for a decoder)."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.correlation = 0

    def call(self, body: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(wire.encode_request_frame(body, self.correlation, "kemu-decode"))
        size = struct.unpack(">i", self._read(4))[0]
        _, response = wire.decode_response(body.__api_key__, body.__version__, self._read(size))
        return response

    def _read(self, size: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            chunk = self.sock.recv(size - len(chunks))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks += chunk
        return bytes(chunks)

    def close(self) -> None:
        self.sock.close()


METADATA_VERSION = 12
FETCH_VERSION = 12
LIST_OFFSETS_VERSION = 7
EARLIEST_TIMESTAMP = -2


def fetch_from_cluster(bootstrap: str, timeout: float = 10.0) -> Iterator[LogRecord]:
    """Records of ``__share_group_state`` read with Metadata and Fetch, like any consumer."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    first = _Client(host, int(port), timeout)
    clients: dict[tuple[str, int], _Client] = {(host, int(port)): first}
    try:
        meta = wire.request_module(3, METADATA_VERSION)
        metadata = first.call(
            wire.build(
                meta.MetadataRequest,
                topics=(
                    wire.build(meta.MetadataRequestTopic, name=SHARE_STATE_TOPIC, topic_id=None),
                ),
                allow_auto_topic_creation=False,
            )
        )
        brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
        for topic in metadata.topics:
            if topic.error_code != ErrorCode.none:
                return
            for partition in sorted(topic.partitions, key=lambda p: p.partition_index):
                address = brokers[partition.leader_id]
                client = clients.get(address)
                if client is None:
                    client = clients[address] = _Client(*address, timeout)
                yield from _fetch_partition(client, partition.partition_index)
    finally:
        for client in clients.values():
            client.close()


def _log_start(client: _Client, partition: int) -> int:
    """The partition's log start offset (ListOffsets EARLIEST): the share coordinator prunes
    what every key's latest snapshot covers, and a Fetch below it answers OFFSET_OUT_OF_RANGE
    without saying where the log starts, as Kafka does."""
    module = wire.request_module(2, LIST_OFFSETS_VERSION)
    request = wire.build(
        module.ListOffsetsRequest,
        replica_id=-1,
        isolation_level=0,
        topics=(
            wire.build(
                module.ListOffsetsTopic,
                name=SHARE_STATE_TOPIC,
                partitions=(
                    wire.build(
                        module.ListOffsetsPartition,
                        partition_index=partition,
                        current_leader_epoch=-1,
                        timestamp=EARLIEST_TIMESTAMP,
                    ),
                ),
            ),
        ),
    )
    data = client.call(request).topics[0].partitions[0]
    if data.error_code != ErrorCode.none:
        raise ConnectionError(f"list offsets of partition {partition}: {data.error_code.name}")
    return int(data.offset)


def _fetch_partition(client: _Client, partition: int) -> Iterator[LogRecord]:
    module = wire.request_module(1, FETCH_VERSION)
    offset = _log_start(client, partition)
    while True:
        request = wire.build(
            module.FetchRequest,
            replica_id=-1,
            max_wait=datetime.timedelta(0),
            min_bytes=0,
            max_bytes=16 << 20,
            session_epoch=-1,
            topics=(
                wire.build(
                    module.FetchTopic,
                    topic=SHARE_STATE_TOPIC,
                    partitions=(
                        wire.build(
                            module.FetchPartition,
                            partition=partition,
                            current_leader_epoch=-1,
                            fetch_offset=offset,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=8 << 20,
                        ),
                    ),
                ),
            ),
        )
        response = client.call(request)
        data = response.responses[0].partitions[0]
        if data.error_code == ErrorCode.offset_out_of_range and offset < data.log_start_offset:
            offset = data.log_start_offset
            continue
        if data.error_code != ErrorCode.none:
            raise ConnectionError(f"fetch of partition {partition}: {data.error_code.name}")
        progressed = False
        for header, batch in split_fetched(data.records or b""):
            for record in log_records(partition, header, batch):
                if record.offset >= offset:
                    yield record
            offset = max(offset, header.next_offset)
            progressed = True
        if not progressed or offset >= data.high_watermark:
            return
