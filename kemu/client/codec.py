"""Record batches on the client side: walking the batches of a fetch response, building the
batches a producer sends, and choosing a partition for a key as Kafka's default partitioner does.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from kemu.protocol import records
from kemu.protocol.record_reader import Record, iter_records
from kemu.protocol.records import BatchHeader, read_header

LENGTH_AT = struct.Struct(">i")


def whole_batches(data: bytes | None) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Each complete v2 batch in a fetched ``records`` field (a broker may cut the last one)."""
    if not data:
        return
    view = memoryview(data)
    position = 0
    while len(view) - position >= records.LOG_OVERHEAD:
        size = LENGTH_AT.unpack_from(view, position + 8)[0] + records.LOG_OVERHEAD
        if size > len(view) - position or size < records.BATCH_HEADER_SIZE:
            return
        if view[position + records.MAGIC_OFFSET] == records.MAGIC_V2:
            yield read_header(view, position), view[position : position + size]
        position += size


def batch_records(batch: memoryview) -> Iterator[Record]:
    return iter_records(batch)


def control_marker(batch: memoryview) -> int | None:
    """COMMIT (1) or ABORT (0) for a transaction marker batch, else None."""
    for record in iter_records(batch):
        if record.key is not None and len(record.key) >= 4:
            return int(struct.unpack_from(">h", record.key, 2)[0])
    return None


def producer_batch(
    entries: list[tuple[bytes | None, bytes | None]],
    *,
    timestamp_ms: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
) -> bytes:
    return records.build_batch(
        entries,
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
        leader_epoch=-1,
    )


def murmur2(data: bytes) -> int:
    """The 32-bit murmur2 hash (seed 0x9747b28c) Kafka's partitioner applies to keys, as a
    signed int32 like Java's."""
    length = len(data)
    m, r = 0x5BD1E995, 24
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = data[whole:]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner for a keyed record: positive murmur2 modulo the count."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
