"""Record batches kept opaque: only the fixed 61-byte v2 batch header is parsed on the way in
and out (``record_reader`` decodes the records of a batch for the few lookups that need them).

Produced batches are stored and served byte-for-byte, whatever their compression. Appending a
batch rewrites its base offset and partition leader epoch, which sit before the CRC's range, so
the CRC stays valid. Control batches (transaction markers) are the one thing kemu writes itself.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import NamedTuple

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = BATCH_HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted in batchLength
CRC_START = 21  # the CRC covers attributes .. end of batch
MAGIC_V2 = 2
MAGIC_OFFSET = 16  # the same place in every message format
LEGACY_MIN_MESSAGE_SIZE = 14  # a v0 message: crc, magic, attributes, null key and value


def _first_crc32c(data: bytes | bytearray | memoryview) -> int:
    # crc32c's package __init__ (importlib.metadata, argparse) is ~15 ms of kemu's start; a
    # broker with empty logs needs no CRC before its first produce. The first call swaps the C
    # function in, so later ones go straight to it.
    global crc32c_of
    from crc32c import crc32c as implementation

    crc32c_of = implementation
    return implementation(data)


# CRC-32C (Castagnoli) of a buffer. Other modules call it as ``records.crc32c_of``: a name
# imported from here would keep the first-call shim.
crc32c_of: Callable[[bytes | bytearray | memoryview], int] = _first_crc32c

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_LOG_APPEND = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

NO_PRODUCER_ID = -1


class CorruptBatch(ValueError):
    """A batch whose size, magic or CRC is wrong; Kafka answers CORRUPT_MESSAGE."""


class InvalidBatch(CorruptBatch):
    """Records Produce v3+ refuses though they may be intact; Kafka answers INVALID_RECORD."""


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of a v2 batch. A named tuple, not a frozen dataclass: one is
    built for every batch read (fetches, recovery scans, state-log loads), and a tuple is built in
    one call instead of a ``__setattr__`` per field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes on the wire and on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)


_new_header = tuple.__new__


def read_header(data: bytes | memoryview, position: int = 0) -> BatchHeader:
    if len(data) - position < BATCH_HEADER_SIZE:
        raise CorruptBatch(f"batch header needs {BATCH_HEADER_SIZE} bytes")
    return _new_header(BatchHeader, BATCH_HEADER.unpack_from(data, position))


def split_batches(data: bytes, *, verify_crc: bool = True) -> list[tuple[BatchHeader, bytes]]:
    """The one v2 batch a Produce (v3+) request carries for a partition, validated as Kafka does.

    Raises InvalidBatch (Kafka's INVALID_RECORD) when there is no complete batch, when it is in
    the legacy v0/v1 format, when a second batch follows, or when its offsets and record count
    disagree; CorruptBatch (CORRUPT_MESSAGE) for a size below any format's minimum, an unknown
    magic, a CRC mismatch, or stray bytes after the batch.
    """
    size = _next_batch_size(data, 0)
    if size is None:
        raise InvalidBatch("Produce requests must have at least one record batch per partition")
    if data[MAGIC_OFFSET] != MAGIC_V2:
        raise InvalidBatch(
            "Produce requests are only allowed to contain record batches with magic 2"
        )
    if size < len(data):
        if _next_batch_size(data, size) is not None:
            raise InvalidBatch(
                "Produce requests must contain exactly one record batch per partition"
            )
        raise CorruptBatch(f"{len(data) - size} stray bytes after the record batch")
    if size < BATCH_HEADER_SIZE:
        raise CorruptBatch(
            f"Record batch is corrupt (the size {size} is smaller than the minimum allowed "
            f"overhead {BATCH_HEADER_SIZE})"
        )
    header = read_header(data)
    if verify_crc and crc32c_of(memoryview(data)[CRC_START:size]) != header.crc:
        raise CorruptBatch(
            f"Record is corrupt (stored crc = {header.crc}): record batch CRC mismatch"
        )
    if header.record_count <= 0 or header.last_offset_delta + 1 != header.record_count:
        raise InvalidBatch(
            f"Inconsistent batch offset delta {header.last_offset_delta} and count of records "
            f"{header.record_count}"
        )
    return [(header, data)]


def _next_batch_size(data: bytes, position: int) -> int | None:
    """Size of the whole batch at ``position``, or None when it is incomplete.

    Mirrors Kafka's log input stream: a size below the smallest legacy message or a magic no
    format has is corrupt as soon as enough bytes are there to see it.
    """
    remaining = len(data) - position
    if remaining < LOG_OVERHEAD:
        return None
    batch_length = struct.unpack_from(">i", data, position + 8)[0]
    if batch_length < LEGACY_MIN_MESSAGE_SIZE:
        raise CorruptBatch(
            f"Record size {batch_length} is less than the minimum record overhead "
            f"({LEGACY_MIN_MESSAGE_SIZE})"
        )
    if remaining <= MAGIC_OFFSET:
        return None
    magic = struct.unpack_from(">b", data, position + MAGIC_OFFSET)[0]
    if not 0 <= magic <= MAGIC_V2:
        raise CorruptBatch(f"Invalid magic found in record: {magic}")
    if remaining < batch_length + LOG_OVERHEAD:
        return None
    return int(batch_length) + LOG_OVERHEAD


_OFFSET_EPOCH = struct.Struct(">qii")


def with_offset(batch: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """The batch with its base offset and partition leader epoch assigned (CRC unaffected)."""
    buffer = bytearray(batch)
    length = struct.unpack_from(">i", buffer, 8)[0]
    _OFFSET_EPOCH.pack_into(buffer, 0, base_offset, length, leader_epoch)
    return bytes(buffer)


def with_log_append_time(batch: bytes, timestamp_ms: int) -> bytes:
    """Set LogAppendTime: timestamp type bit and max timestamp, then recompute the CRC."""
    buffer = bytearray(batch)
    attributes = struct.unpack_from(">h", buffer, 21)[0] | TIMESTAMP_TYPE_LOG_APPEND
    struct.pack_into(">h", buffer, 21, attributes)
    struct.pack_into(">q", buffer, 35, timestamp_ms)
    struct.pack_into(">I", buffer, 17, crc32c_of(memoryview(buffer)[CRC_START:]))
    return bytes(buffer)


def batch_crc_ok(batch: bytes | memoryview) -> bool:
    header = read_header(batch)
    return bool(crc32c_of(memoryview(batch)[CRC_START : header.size]) == header.crc)


# --- writing batches kemu makes itself (control markers, internal topics) ---------------------


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def uvarint(value: int) -> bytes:
    """An unsigned varint: seven bits a byte, low bits first."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ONE_BYTE = tuple(bytes((value,)) for value in range(0x80))


def _varint(value: int) -> bytes:
    return uvarint(_zigzag(value))


def _varbytes(value: bytes | None) -> bytes:
    if value is None:
        return _varint(-1)
    return _varint(len(value)) + value


RecordHeaders = Sequence[tuple[str, bytes | None]]


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: RecordHeaders = (),
) -> bytes:
    encoded_headers = b"".join(
        _varbytes(name.encode()) + _varbytes(header_value) for name, header_value in headers
    )
    body = (
        b"\x00"  # attributes
        + _varint(timestamp_delta)
        + _varint(offset_delta)
        + _varbytes(key)
        + _varbytes(value)
        + _varint(len(headers))
        + encoded_headers
    )
    return _varint(len(body)) + body


def build_batch(
    records: list[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    timestamp_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    leader_epoch: int = 0,
    headers: Sequence[RecordHeaders] | None = None,
) -> bytes:
    """An uncompressed v2 batch of (key, value) records, all with one timestamp; ``headers``,
    when given, has each record's headers."""
    body = b"".join(
        encode_record(index, 0, key, value, headers[index] if headers is not None else ())
        for index, (key, value) in enumerate(records)
    )
    attributes = (TRANSACTIONAL_FLAG if transactional else 0) | (CONTROL_FLAG if control else 0)
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            len(records) - 1,
            timestamp_ms,
            timestamp_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + body
    )
    crc = crc32c_of(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch + magic + crc + rest
    return struct.pack(">qiibI", base_offset, batch_length, leader_epoch, MAGIC_V2, crc) + after_crc


CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def control_batch(
    marker: int, *, producer_id: int, producer_epoch: int, coordinator_epoch: int, timestamp_ms: int
) -> bytes:
    """A transaction marker (COMMIT=1 / ABORT=0) as Kafka writes it into a data partition."""
    key = struct.pack(">hh", 0, marker)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch(
        [(key, value)],
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )
