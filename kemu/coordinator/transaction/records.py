"""``__transaction_state`` records, byte for byte as Kafka's transaction coordinator writes them.

* key   = int16 record type 0 (TransactionLogKey) + TransactionalId as an int16-length string;
* value = int16 version + TransactionLogValue body, or a null value for a tombstone.

TransactionLogValue v0 (not flexible) / v1 (flexible: compact arrays and strings, tagged fields):
ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32, TransactionStatus int8,
TransactionPartitions []{Topic string, PartitionIds []int32} (null when Empty),
TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64; v1 tags:
0 PreviousProducerId int64, 1 NextProducerId int64 (both default -1), 2 ClientTransactionVersion
int16 (default 0), written only when not the default. kemu writes v1 and reads both.

KIP-1289 (kemu's own tag, which Kafka's reader skips as it skips any unknown tag): tag 100
ShareAcknowledgementPartitions, the share partitions AddShareAcknowledgementsToTxn enlisted in
the transaction, written only when there are some: uvarint count + 1, then per entry GroupId
(uvarint length + 1, UTF-8), TopicId (16 bytes), Partition int32. So an explicit enlistment
(``kemu.kip1289.enlist=explicit``) survives a restart like the transaction's partitions do.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from kemu.protocol.coordinator_records import RecordDecodeError as RecordDecodeError
from kemu.protocol.coordinator_records import RecordReader, encode_tags
from kemu.protocol.records import uvarint

KEY_TYPE = 0
VALUE_VERSION = 1

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_HEAD = struct.Struct(">qhib")
_TIMES = struct.Struct(">qq")

PREVIOUS_PRODUCER_ID_TAG = 0
NEXT_PRODUCER_ID_TAG = 1
CLIENT_TRANSACTION_VERSION_TAG = 2
SHARE_PARTITIONS_TAG = 100


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: tuple[tuple[str, tuple[int, ...]], ...]  # (topic, partition ids), topic order
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    # (group id, topic id, partition), sorted: KIP-1289 share partitions enlisted (tag 100)
    share_partitions: tuple[tuple[str, uuid.UUID, int], ...] = ()


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _INT16.pack(KEY_TYPE) + _INT16.pack(len(raw)) + raw


def encode_value(value: TransactionLogValue | None, *, empty: bool = False) -> bytes | None:
    """The value bytes (None for a tombstone); ``empty``: partitions written as null."""
    if value is None:
        return None
    parts = [
        _INT16.pack(VALUE_VERSION),
        _HEAD.pack(value.producer_id, value.producer_epoch, value.timeout_ms, value.status),
    ]
    if empty:
        parts.append(uvarint(0))  # null compact array
    else:
        parts.append(uvarint(len(value.partitions) + 1))
        for topic, ids in value.partitions:
            raw = topic.encode()
            parts.append(uvarint(len(raw) + 1) + raw + uvarint(len(ids) + 1))
            parts.extend(_INT32.pack(index) for index in ids)
            parts.append(uvarint(0))  # the struct's (empty) tagged fields
    parts.append(_TIMES.pack(value.last_update_ms, value.start_ms))
    tags: list[tuple[int, bytes]] = []
    if value.previous_producer_id != -1:
        tags.append((PREVIOUS_PRODUCER_ID_TAG, _INT64.pack(value.previous_producer_id)))
    if value.next_producer_id != -1:
        tags.append((NEXT_PRODUCER_ID_TAG, _INT64.pack(value.next_producer_id)))
    if value.client_transaction_version != 0:
        tags.append((CLIENT_TRANSACTION_VERSION_TAG, _INT16.pack(value.client_transaction_version)))
    if value.share_partitions:
        tags.append((SHARE_PARTITIONS_TAG, _encode_share_partitions(value.share_partitions)))
    parts.append(encode_tags(tags))
    return b"".join(parts)


def decode_key(data: bytes) -> str:
    reader = RecordReader(data)
    (record_type, length) = reader.unpack(struct.Struct(">hh"))
    if record_type != KEY_TYPE:
        raise RecordDecodeError(f"unknown transaction-log record type {record_type}")
    try:
        transactional_id = reader.take(length).decode()
    except UnicodeDecodeError as error:
        raise RecordDecodeError(f"transactional id is not UTF-8: {error}") from None
    if reader.position != len(data):
        raise RecordDecodeError("trailing bytes in a transaction-log key")
    return transactional_id


def decode_value(data: bytes | None) -> TransactionLogValue | None:
    if data is None:
        return None
    reader = RecordReader(data)
    (version,) = reader.unpack(_INT16)
    if version not in (0, 1):
        raise RecordDecodeError(f"TransactionLogValue version {version}")
    flexible = version == 1
    producer_id, epoch, timeout_ms, status = reader.unpack(_HEAD)
    partitions: list[tuple[str, tuple[int, ...]]] = []
    count = reader.uvarint() - 1 if flexible else reader.unpack(_INT32)[0]
    for _ in range(max(count, 0)):
        length = reader.uvarint() - 1 if flexible else reader.unpack(_INT16)[0]
        topic = reader.take(length).decode()
        ids = reader.uvarint() - 1 if flexible else reader.unpack(_INT32)[0]
        partitions.append((topic, tuple(reader.unpack(_INT32)[0] for _ in range(ids))))
        if flexible:
            reader.tags()
    last_update_ms, start_ms = reader.unpack(_TIMES)
    tags = reader.tags() if flexible else {}

    def tag(number: int, layout: struct.Struct, default: int) -> int:
        raw = tags.get(number)
        return int(layout.unpack(raw)[0]) if raw is not None else default

    return TransactionLogValue(
        producer_id,
        epoch,
        timeout_ms,
        status,
        tuple(partitions),
        last_update_ms,
        start_ms,
        tag(PREVIOUS_PRODUCER_ID_TAG, _INT64, -1),
        tag(NEXT_PRODUCER_ID_TAG, _INT64, -1),
        tag(CLIENT_TRANSACTION_VERSION_TAG, _INT16, 0),
        _decode_share_partitions(tags.get(SHARE_PARTITIONS_TAG)),
    )


def _encode_share_partitions(entries: tuple[tuple[str, uuid.UUID, int], ...]) -> bytes:
    parts = [uvarint(len(entries) + 1)]
    for group_id, topic_id, partition in entries:
        raw = group_id.encode()
        parts += [uvarint(len(raw) + 1), raw, topic_id.bytes, _INT32.pack(partition)]
    return b"".join(parts)


def _decode_share_partitions(data: bytes | None) -> tuple[tuple[str, uuid.UUID, int], ...]:
    if data is None:
        return ()
    reader = RecordReader(data)
    entries = []
    for _ in range(max(reader.uvarint() - 1, 0)):
        length = reader.uvarint() - 1
        if length < 0:
            raise RecordDecodeError("null group id in a share-acknowledgement partition")
        group_id = reader.take(length).decode()
        topic_id = uuid.UUID(bytes=reader.take(16))
        (partition,) = reader.unpack(_INT32)
        entries.append((group_id, topic_id, partition))
    return tuple(entries)
