"""Reading the records inside a v2 batch, decompressing it first when it is compressed.

kemu stores and serves batches opaque (``records.py``); this is for the few lookups that must
see individual records, such as ListOffsets by timestamp. Only the batch asked about is decoded.

A record is: length (varint), attributes (int8), timestamp delta (varlong), offset delta
(varint), key and value (varint length, -1 for null), then a varint count of headers, each a
key (varint length, UTF-8) and a value (varint length, -1 for null). Varints are zigzag-encoded.
Under LogAppendTime every record carries the batch's max timestamp, as Kafka reads it.

Codecs: gzip (stdlib); snappy either in the xerial framing the Java client writes or raw, as
librdkafka writes it (Kafka's reader accepts both); lz4 in the LZ4 frame format; zstd frames.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import cramjam

from kemu.protocol.records import (
    BATCH_HEADER_SIZE,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
    CorruptBatch,
    read_header,
)

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4

# xerial's SnappyOutputStream: magic, then version and compatible version (int32 each), then
# chunks of a big-endian int32 length and a raw snappy block.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = len(XERIAL_MAGIC) + 8


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def iter_records(batch: bytes | memoryview) -> Iterator[Record]:
    """The records of one whole v2 batch, in offset order.

    Raises CorruptBatch when the batch cannot be decompressed or a record runs past its end.
    """
    header, data = _records_data(batch)
    return _parse(header, data)


def control_type(batch: bytes | memoryview, header: BatchHeader | None = None) -> int | None:
    """The type in the key of a control batch's marker record (0 ABORT, 1 COMMIT): the first
    record whose key holds a version and a type (int16 each), as ``iter_records`` would find
    it, but reading the usual one-record uncompressed batch without decoding it. None when no
    record has such a key. Raises CorruptBatch as ``iter_records`` does. ``header``: the
    batch's header, when the caller has it."""
    if header is None:
        header = read_header(batch)
    if not header.compression and header.record_count > 0:
        at = BATCH_HEADER_SIZE
        if (
            len(batch) >= at + 9
            and batch[at] < 0x80
            and batch[at + 2] < 0x80
            and batch[at + 3] < 0x80
            and batch[at + 4] == _KEY_OF_FOUR_BYTES
        ):
            # one-byte record length, timestamp and offset deltas, and a 4-byte key: Kafka's
            # and kemu's markers; the type follows the key's int16 version
            return int.from_bytes(batch[at + 7 : at + 9], "big", signed=True)
        position = read_varint(batch, at)[1] + 1  # record length; attributes
        position = read_varint(batch, position)[1]  # timestamp delta
        position = read_varint(batch, position)[1]  # offset delta
        key_length, position = read_varint(batch, position)
        if key_length >= 4 and position + 4 <= min(len(batch), header.size):
            return int.from_bytes(batch[position + 2 : position + 4], "big", signed=True)
    for record in iter_records(batch):
        if record.key is not None and len(record.key) >= 4:
            return int.from_bytes(record.key[2:4], "big", signed=True)
    return None


_KEY_OF_FOUR_BYTES = 8  # the zigzag varint of a key length of 4


def record_timestamps(batch: bytes | memoryview) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of each record of the batch, in offset order.

    Keys, values and headers are stepped over by the record's length, unread: a lookup that
    scans a batch of thousands of records costs a fraction of decoding them.
    """
    header, data = _records_data(batch)
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_LOG_APPEND)
    position = 0
    for _ in range(header.record_count):
        length, start = read_varint(data, position)
        position = start + length
        if length < 0 or position > len(data):
            raise CorruptBatch(f"record of {length} bytes runs past the end of the batch")
        timestamp_delta, cursor = read_varint(data, start + 1)  # after the attributes
        offset_delta, _ = read_varint(data, cursor)
        if log_append_time:
            yield header.base_offset + offset_delta, header.max_timestamp
        else:
            yield header.base_offset + offset_delta, header.base_timestamp + timestamp_delta


def keyless_record_indexes(batch: bytes | memoryview) -> list[int]:
    """Indexes (within the batch) of the records that have a null key.

    Only each record's length, header fields and key length are read; values and headers are
    stepped over. Raises CorruptBatch as ``iter_records`` does.
    """
    header, data = _records_data(batch)
    keyless = []
    position = 0
    for index in range(header.record_count):
        length, start = read_varint(data, position)
        position = start + length
        if length < 0 or position > len(data):
            raise CorruptBatch(f"record of {length} bytes runs past the end of the batch")
        _timestamp_delta, cursor = read_varint(data, start + 1)  # after the attributes
        _offset_delta, cursor = read_varint(data, cursor)
        key_length, _ = read_varint(data, cursor)
        if key_length < 0:
            keyless.append(index)
    return keyless


def _records_data(batch: bytes | memoryview) -> tuple[BatchHeader, memoryview]:
    """The batch's header and its records' bytes, decompressed."""
    header = read_header(batch)
    if header.size > len(batch):
        raise CorruptBatch(f"batch of {header.size} bytes cut short at {len(batch)}")
    body = memoryview(batch)[BATCH_HEADER_SIZE : header.size]
    data = memoryview(decompress(header.compression, body)) if header.compression else body
    return header, data


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        if codec == GZIP:
            return gzip.decompress(data)
        if codec == SNAPPY:
            return _snappy(bytes(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except (OSError, EOFError, zlib.error, cramjam.DecompressionError) as error:
        raise CorruptBatch(f"cannot decompress the batch: {error}") from error
    raise CorruptBatch(f"unknown compression codec {codec}")


def _snappy(data: bytes) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    chunks: list[bytes] = []
    position = XERIAL_HEADER_SIZE
    while position < len(data):
        if data.startswith(XERIAL_MAGIC, position):  # concatenated streams repeat the header
            position += XERIAL_HEADER_SIZE
            continue
        length = int.from_bytes(data[position : position + 4], "big")
        start = position + 4
        if length < 0 or start + length > len(data):
            raise CorruptBatch("snappy chunk runs past the end of the batch")
        chunks.append(bytes(cramjam.snappy.decompress_raw(data[start : start + length])))
        position = start + length
    return b"".join(chunks)


def _parse(header: BatchHeader, data: memoryview) -> Iterator[Record]:
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_LOG_APPEND)
    position = 0
    for _ in range(header.record_count):
        length, start = read_varint(data, position)
        end = start + length
        if length < 0 or end > len(data):
            raise CorruptBatch(f"record of {length} bytes runs past the end of the batch")
        position = start + 1  # attributes: unused
        timestamp_delta, position = read_varint(data, position)
        offset_delta, position = read_varint(data, position)
        key, position = _bytes(data, position)
        value, position = _bytes(data, position)
        count, position = read_varint(data, position)
        if count < 0:
            raise CorruptBatch(f"record has {count} headers")
        headers = []
        for _ in range(count):
            name, position = _bytes(data, position)
            if name is None:
                raise CorruptBatch("record header has a null key")
            header_value, position = _bytes(data, position)
            headers.append((name.decode("utf-8", "replace"), header_value))
        if position != end:
            raise CorruptBatch(f"record declares {length} bytes but holds {position - start}")
        yield Record(
            offset=header.base_offset + offset_delta,
            timestamp=header.max_timestamp
            if log_append_time
            else header.base_timestamp + timestamp_delta,
            key=key,
            value=value,
            headers=tuple(headers),
        )


def read_varint(data: memoryview | bytes, position: int) -> tuple[int, int]:
    """A zigzag varint (up to 64 bits) at ``position``: (value, position after it)."""
    if position < len(data):
        first = data[position]
        if first < 0x80:  # one byte: most lengths, deltas and counts of small records
            return (first >> 1) ^ -(first & 1), position + 1
    raw = 0
    shift = 0
    while True:
        if position >= len(data):
            raise CorruptBatch("varint runs past the end of the batch")
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7
        if shift > 63:
            raise CorruptBatch("varint longer than 10 bytes")


def _bytes(data: memoryview, position: int) -> tuple[bytes | None, int]:
    length, position = read_varint(data, position)
    if length < 0:
        return None, position
    end = position + length
    if end > len(data):
        raise CorruptBatch(f"field of {length} bytes runs past the end of the batch")
    return bytes(data[position:end]), end
