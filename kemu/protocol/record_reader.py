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

import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import cramjam

from kemu.protocol.records import (
    BATCH_HEADER_SIZE,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
    CorruptBatch,
    InvalidBatch,
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


def validate_produced(
    batch: bytes, header: BatchHeader, max_record_bytes: int = 2**31 - 1, *, full: bool = True
) -> list[int]:
    """Kafka's LogValidator over a produced batch's records (decompressing the batch first);
    returns the indexes of the records with a null key (a compacted topic refuses them).

    ``full``: every record parsed as Kafka's DefaultRecord reads it (lengths of key, value and
    headers, header count, header keys). Otherwise only the records' lengths are walked (they
    must tile the batch exactly, ``header.record_count`` of them), which is several times
    cheaper in Python, and no keyless indexes are returned.

    Raises InvalidBatch (INVALID_RECORD) with Kafka 4.4's message for a record whose lengths,
    header count or header key disagree with its bytes, a record longer than
    ``max_record_bytes`` (``max.decompressed.message.bytes``), bytes left after the last
    record, records that end early, or a batch decompressing to more than
    MAX_DECOMPRESSED_BATCH_BYTES (kemu's bound); CorruptBatch (CORRUPT_MESSAGE) when the payload
    cannot be decompressed or is an LZ4 frame of dependent blocks (Kafka's reader refuses
    those). Kafka 4.4.0 answers the undecompressable cases UNKNOWN_SERVER_ERROR (a
    KafkaException out of the log append).
    """
    if header.compression == LZ4:
        flags = batch[BATCH_HEADER_SIZE + 4] if len(batch) > BATCH_HEADER_SIZE + 4 else 0
        if not flags & 0x20:
            raise CorruptBatch("cannot decompress the batch: Dependent block stream is unsupported")
    if header.size > len(batch):
        raise CorruptBatch(f"batch of {header.size} bytes cut short at {len(batch)}")
    body = memoryview(batch)[BATCH_HEADER_SIZE : header.size]
    try:
        # bytes, not a view: the walks index it (a copy of a decompressed bomb would double it)
        data = decompress(header.compression, body) if header.compression else bytes(body)
    except DecompressedTooLarge as large:
        raise InvalidBatch(str(large)) from None
    if full:
        return _validated_keyless(data, header.record_count, max_record_bytes)
    _walk_lengths(data, header.record_count, max_record_bytes)
    return []


def _walk_lengths(buffer: bytes, count: int, max_record_bytes: int) -> None:
    """The records' lengths tile the data: ``validate_produced`` without ``full``."""
    total = len(buffer)
    position = 0
    for _ in range(count):
        if position >= total:
            raise InvalidBatch("Incorrect declared batch size, premature EOF reached")
        byte = buffer[position]
        if byte < 0x80:
            length, start = (byte >> 1) ^ -(byte & 1), position + 1
        elif position + 1 < total and buffer[position + 1] < 0x80:  # two bytes: up to 8191
            raw = (byte & 0x7F) | (buffer[position + 1] << 7)
            length, start = (raw >> 1) ^ -(raw & 1), position + 2
        else:
            try:
                length, start = read_varint(buffer, position)
            except CorruptBatch:
                raise InvalidBatch("Found invalid record structure") from None
        if length <= 0 or length > max_record_bytes or start + length > total:
            _refuse_length(length, max_record_bytes, total - start)
        position = start + length
    if position != total:
        raise InvalidBatch("Incorrect declared batch size, records still remaining in file")


def _refuse_length(length: int, max_record_bytes: int, remaining: int) -> None:
    if length < 0:
        raise InvalidBatch(f"Invalid record size: {length} is negative.")
    if length == 0:
        raise InvalidBatch("Found invalid record structure")  # not even the attributes
    if length > max_record_bytes:
        raise InvalidBatch(
            f"Invalid record size: {length} exceeds the configured maximum record size of "
            f"{max_record_bytes}."
        )
    raise InvalidBatch(
        f"Invalid record size: expected {length} bytes in record payload, but instead the "
        f"buffer has only {remaining} remaining bytes."
    )


def _validated_keyless(buffer: bytes, count: int, max_record_bytes: int) -> list[int]:
    """The walk of ``validate_produced``. A hot path (every produced batch): one-byte varints
    are decoded inline, longer ones by ``read_varint``; every read stays inside its record."""
    keyless: list[int] = []
    total = len(buffer)
    position = 0
    for index in range(count):
        if position >= total:
            raise InvalidBatch("Incorrect declared batch size, premature EOF reached")
        byte = buffer[position]
        if byte < 0x80:
            length, start = (byte >> 1) ^ -(byte & 1), position + 1
        else:
            try:
                length, start = read_varint(buffer, position)
            except CorruptBatch:
                raise InvalidBatch("Found invalid record structure") from None
        if length < 0:
            raise InvalidBatch(f"Invalid record size: {length} is negative.")
        if length > max_record_bytes:
            raise InvalidBatch(
                f"Invalid record size: {length} exceeds the configured maximum record size of "
                f"{max_record_bytes}."
            )
        end = start + length
        if end > total:
            raise InvalidBatch(
                f"Invalid record size: expected {length} bytes in record payload, but instead the "
                f"buffer has only {total - start} remaining bytes."
            )
        # attributes (one byte), then timestamp delta, offset delta, key, value, header count,
        # headers: a varint read at or past ``end`` is a record read past its own bytes
        at = start + 1
        if at + 2 < end and buffer[at] < 0x80 and buffer[at + 1] < 0x80:
            at += 2  # one-byte timestamp and offset deltas: the usual record
        else:
            at = _varint_in(buffer, _varint_in(buffer, at, end)[1], end)[1]
        byte = buffer[at] if at < end else 0x80
        if byte < 0x80:
            key_length, at = (byte >> 1) ^ -(byte & 1), at + 1
        else:
            key_length, at = _varint_in(buffer, at, end)
        if key_length >= 0:
            at += key_length
        else:
            keyless.append(index)
        byte = buffer[at] if at < end else 0x80
        if byte < 0x80:
            value_length, at = (byte >> 1) ^ -(byte & 1), at + 1
        else:
            value_length, at = _varint_in(buffer, at, end)
        if value_length > 0:
            at += value_length
        byte = buffer[at] if at < end else 0x80
        if byte < 0x80:
            headers, at = (byte >> 1) ^ -(byte & 1), at + 1
        else:
            headers, at = _varint_in(buffer, at, end)
        if headers:
            if headers < 0:
                raise InvalidBatch(f"Found invalid number of record headers {headers}")
            if headers > end - at:
                raise InvalidBatch(
                    f"Found invalid number of record headers. {headers} is larger than the "
                    "remaining size of the buffer"
                )
            for _ in range(headers):
                name_length, at = _varint_in(buffer, at, end)
                if name_length < 0:
                    raise InvalidBatch(f"Invalid negative header key size {name_length}")
                header_value_length, at = _varint_in(buffer, at + name_length, end)
                if header_value_length > 0:
                    at += header_value_length
        if at != end:
            if at > end:
                raise InvalidBatch("Found invalid record structure")
            raise InvalidBatch(
                f"Invalid record size: expected to read {length} bytes in record payload, but "
                f"instead read {at - start}"
            )
        position = end
    if position != total:
        raise InvalidBatch("Incorrect declared batch size, records still remaining in file")
    return keyless


def _varint_in(buffer: bytes, at: int, end: int) -> tuple[int, int]:
    """``read_varint`` within one record (ending at ``end``); InvalidBatch past its end."""
    if at >= end:
        raise InvalidBatch("Found invalid record structure")
    try:
        value, after = read_varint(buffer, at)
    except CorruptBatch:
        raise InvalidBatch("Found invalid record structure") from None
    if after > end:
        raise InvalidBatch("Found invalid record structure")
    return value, after


def _records_data(batch: bytes | memoryview) -> tuple[BatchHeader, memoryview]:
    """The batch's header and its records' bytes, decompressed."""
    header = read_header(batch)
    if header.size > len(batch):
        raise CorruptBatch(f"batch of {header.size} bytes cut short at {len(batch)}")
    body = memoryview(batch)[BATCH_HEADER_SIZE : header.size]
    data = memoryview(decompress(header.compression, body)) if header.compression else body
    return header, data


# kemu holds a batch's records in memory decompressed (Kafka streams through them), so what one
# batch may decompress to is bounded: a compressed "bomb" (a few KB of zstd or gzip that inflate
# to gigabytes) is refused once this much came out, instead of taking the process's memory.
MAX_DECOMPRESSED_BATCH_BYTES = 128 << 20


class DecompressedTooLarge(CorruptBatch):
    """A batch that decompresses to more than ``MAX_DECOMPRESSED_BATCH_BYTES``."""


def decompress(codec: int, data: bytes | memoryview, limit: int | None = None) -> bytes:
    """``data`` decompressed as ``codec``; CorruptBatch when it cannot be, DecompressedTooLarge
    (never holding much more than ``limit`` bytes, MAX_DECOMPRESSED_BATCH_BYTES unless given)
    when it holds more than ``limit``."""
    if limit is None:
        limit = MAX_DECOMPRESSED_BATCH_BYTES
    try:
        if codec == GZIP:
            return _gzip(data, limit)
        if codec == SNAPPY:
            return _snappy(bytes(data), limit)
        if codec == LZ4:
            return _lz4(data, limit)
        if codec == ZSTD:
            return _zstd(data, limit)
    except (OSError, EOFError, zlib.error, cramjam.DecompressionError, RuntimeError) as error:
        raise CorruptBatch(f"cannot decompress the batch: {error}") from error
    raise CorruptBatch(f"unknown compression codec {codec}")


def _too_large(limit: int) -> DecompressedTooLarge:
    return DecompressedTooLarge(f"the batch decompresses to more than {limit} bytes")


def _gzip(data: bytes | memoryview, limit: int) -> bytes:
    """gzip members, at most ``limit`` bytes, read as Java's GZIPInputStream (Kafka's reader)
    reads them: members follow one another, and bytes after a member that do not start
    another one are ignored."""
    pieces: list[bytes] = []
    total = 0
    rest = bytes(data)
    if not rest.startswith(b"\x1f\x8b"):
        raise OSError("Not in GZIP format")
    while rest.startswith(b"\x1f\x8b"):
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        piece = member.decompress(rest, limit + 1 - total)
        total += len(piece)
        if total > limit:
            raise _too_large(limit)
        pieces.append(piece)
        if not member.eof:
            raise EOFError("Unexpected end of ZLIB input stream")
        rest = member.unused_data
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _snappy(data: bytes, limit: int) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        if cramjam.snappy.decompress_raw_len(data) > limit:  # the block states its size
            raise _too_large(limit)
        return bytes(cramjam.snappy.decompress_raw(data))
    chunks: list[bytes] = []
    total = 0
    position = XERIAL_HEADER_SIZE
    while position < len(data):
        if data.startswith(XERIAL_MAGIC, position):  # concatenated streams repeat the header
            position += XERIAL_HEADER_SIZE
            continue
        length = int.from_bytes(data[position : position + 4], "big")
        start = position + 4
        if length < 0 or start + length > len(data):
            raise CorruptBatch("cannot decompress the batch: snappy chunk runs past its end")
        block = data[start : start + length]
        total += cramjam.snappy.decompress_raw_len(block)
        if total > limit:
            raise _too_large(limit)
        chunks.append(bytes(cramjam.snappy.decompress_raw(block)))
        position = start + length
    return b"".join(chunks)


# The most a codec's output can exceed its input by (LZ4: a 255-byte run per extension byte;
# zstd: an RLE block of 128 KiB from 4 bytes). Input this small cannot go past the limit, so it
# takes the codecs' one-call decoders; longer input is decoded a piece at a time and counted.
LZ4_MAX_RATIO = 256
ZSTD_MAX_RATIO = 32 * 1024
ZSTD_INPUT_STEP = 1024  # at most 32 MiB of output per step


def _lz4(data: bytes | memoryview, limit: int) -> bytes:
    """The first LZ4 frame, at most ``limit`` bytes; what follows it is not read (Kafka's
    KafkaLZ4BlockInputStream stops at the frame's end mark too)."""
    import lz4.frame  # type: ignore[import-untyped]

    frame_bytes = bytes(data)
    if len(frame_bytes) * LZ4_MAX_RATIO <= limit:
        return bytes(lz4.frame.decompress(frame_bytes))
    frame = lz4.frame.LZ4FrameDecompressor()
    out = frame.decompress(frame_bytes, max_length=limit + 1)
    if len(out) > limit:
        raise _too_large(limit)
    if not frame.eof:
        raise EOFError("the LZ4 frame ends early")
    return bytes(out)


def _zstd(data: bytes | memoryview, limit: int) -> bytes:
    """zstd frames (one or more), at most ``limit`` bytes."""
    if len(data) * ZSTD_MAX_RATIO <= limit:
        return bytes(cramjam.zstd.decompress(data))
    import zstandard

    pieces: list[bytes] = []
    total = 0
    rest = bytes(data)
    try:
        while rest:
            frame = zstandard.ZstdDecompressor().decompressobj()
            at = 0
            while not frame.eof and at < len(rest):
                piece = frame.decompress(rest[at : at + ZSTD_INPUT_STEP])
                at += ZSTD_INPUT_STEP
                total += len(piece)
                if total > limit:
                    raise _too_large(limit)
                pieces.append(piece)
            if not frame.eof:
                raise EOFError("the zstd frame ends early")
            rest = frame.unused_data + rest[at:]
    except zstandard.ZstdError as error:
        raise CorruptBatch(f"cannot decompress the batch: {error}") from error
    return b"".join(pieces)


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
