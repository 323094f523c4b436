"""Reading records inside v2 batches, every codec, checked against batches written by
independent encoders: aiokafka's (C) and kafka-python's (pure Python) record builders, and
python-snappy's raw format as librdkafka writes it."""

from __future__ import annotations

import gzip
import struct
from collections.abc import Callable, Iterable

import crc32c
import pytest
import snappy

from kemu.protocol.record_reader import (
    XERIAL_MAGIC,
    Record,
    decompress,
    iter_records,
    record_timestamps,
)
from kemu.protocol.records import (
    BATCH_HEADER_SIZE,
    CRC_START,
    CorruptBatch,
    build_batch,
    read_header,
    with_log_append_time,
    with_offset,
)
from tests.unit.batch_builders import BUILDERS, client_batch

TS = 1_700_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def sample_records(count: int) -> list[Record]:
    """Awkward records: null key and value, empty value, large values, non-monotonic timestamps
    (the largest in the middle), repeated and null-valued headers."""
    out = []
    for i in range(count):
        key = None if i == 3 else f"key-{i}".encode()
        value = None if i == 4 else b"" if i == 5 else f"value-{i}-".encode() * (1 + 40 * i)
        headers: tuple[tuple[str, bytes | None], ...] = (("trace", f"id-{i}".encode()),)
        if i % 2:
            headers += (("multi", b"a"), ("multi", b"b"), ("null", None))
        timestamp = TS + (5_000 if i == count // 2 else i * 10 - (25 if i % 3 == 2 else 0))
        out.append(Record(i, timestamp, key, value, headers))
    return out


def recompressed(batch: bytes, codec: int, compress: Callable[[bytes], bytes]) -> bytes:
    """``batch`` (uncompressed) with its records compressed by ``compress`` as ``codec``."""
    header = read_header(batch)
    body = compress(batch[BATCH_HEADER_SIZE : header.size])
    after_crc = bytearray(batch[CRC_START:BATCH_HEADER_SIZE] + body)
    attributes = struct.unpack_from(">h", after_crc, 0)[0]
    struct.pack_into(">h", after_crc, 0, (attributes & ~0x07) | codec)
    front = struct.pack(
        ">qiibI",
        header.base_offset,
        len(after_crc) + 9,  # leader epoch, magic and CRC are counted in batchLength
        header.partition_leader_epoch,
        2,
        crc32c.crc32c(bytes(after_crc)),
    )
    return front + bytes(after_crc)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("builder_name", BUILDERS)
def test_every_codec_reads_back_what_the_client_wrote(builder_name: str, codec: str) -> None:
    records = sample_records(60)
    batch = client_batch(records, CODECS[codec], builder_name)
    assert read_header(batch).compression == CODECS[codec]
    assert list(iter_records(batch)) == records
    assert list(record_timestamps(batch)) == [(r.offset, r.timestamp) for r in records]


def test_client_snappy_is_xerial_framed_in_several_chunks() -> None:
    """Java and the Python clients write xerial's framing, 32 KiB of input per chunk."""
    records = sample_records(60)
    batch = client_batch(records, CODECS["snappy"], "kafka-python")
    body = batch[BATCH_HEADER_SIZE:]
    assert body.startswith(XERIAL_MAGIC)
    assert len(decompress(2, body)) > 3 * 32 * 1024
    assert list(iter_records(batch)) == records


def test_raw_snappy_as_librdkafka_writes_it() -> None:
    records = sample_records(20)
    plain = client_batch(records, 0, "aiokafka")
    batch = recompressed(plain, CODECS["snappy"], snappy.compress)
    assert not batch[BATCH_HEADER_SIZE:].startswith(XERIAL_MAGIC)
    assert list(iter_records(batch)) == records


def test_concatenated_xerial_streams() -> None:
    records = sample_records(10)
    plain = client_batch(records, 0, "aiokafka")
    body = plain[BATCH_HEADER_SIZE:]
    half = len(body) // 2

    def xerial_twice(data: bytes) -> bytes:
        def stream(part: bytes) -> bytes:
            chunk = snappy.compress(part)
            header = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
            return header + struct.pack(">i", len(chunk)) + chunk

        return stream(data[:half]) + stream(data[half:])

    batch = recompressed(plain, CODECS["snappy"], xerial_twice)
    assert list(iter_records(batch)) == records


def test_offsets_follow_the_assigned_base_offset_and_log_append_time() -> None:
    records = sample_records(8)
    batch = with_offset(client_batch(records, CODECS["lz4"], "aiokafka"), 1000, 3)
    assert [offset for offset, _ in record_timestamps(batch)] == list(range(1000, 1008))
    stamped = with_log_append_time(batch, TS + 99)
    assert list(record_timestamps(stamped)) == [(1000 + i, TS + 99) for i in range(8)]


def test_kemu_built_batches() -> None:
    batch = build_batch([(b"k", b"v"), (None, None)], base_offset=7, timestamp_ms=TS)
    assert list(iter_records(batch)) == [
        Record(7, TS, b"k", b"v", ()),
        Record(8, TS, None, None, ()),
    ]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_undecodable_compressed_body_is_corrupt(codec: str) -> None:
    plain = client_batch(sample_records(5), 0, "aiokafka")
    batch = recompressed(plain, CODECS[codec], lambda body: b"\x00not compressed at all\xff" * 3)
    with pytest.raises(CorruptBatch):
        list(iter_records(batch))


def test_truncated_gzip_is_corrupt() -> None:
    plain = client_batch(sample_records(5), 0, "aiokafka")
    batch = recompressed(plain, CODECS["gzip"], lambda body: gzip.compress(body)[:-12])
    with pytest.raises(CorruptBatch):
        list(iter_records(batch))


def test_unknown_codec_is_corrupt() -> None:
    plain = client_batch(sample_records(2), 0, "aiokafka")
    batch = recompressed(plain, 5, lambda body: body)
    with pytest.raises(CorruptBatch, match="codec 5"):
        list(iter_records(batch))


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda body: body[:-3], "runs past"),  # the last record is cut short
        (lambda body: b"\xfe\x7f" + body[1:], "runs past"),  # first record claims 8 KiB
        (lambda body: b"\xff" * 11 + body, "varint"),
    ],
)
@pytest.mark.parametrize("reader", [iter_records, record_timestamps])
def test_malformed_records_are_corrupt(
    change: Callable[[bytes], bytes], problem: str, reader: Callable[[bytes], Iterable[object]]
) -> None:
    plain = client_batch(sample_records(3), 0, "aiokafka")
    batch = recompressed(plain, 0, change)
    with pytest.raises(CorruptBatch, match=problem):
        list(reader(batch))


def test_record_length_must_match_its_fields() -> None:
    plain = build_batch([(b"k", b"v")], timestamp_ms=TS)
    body = bytearray(plain[BATCH_HEADER_SIZE:])
    body[0] += 2  # zigzag: the record now claims one byte more than its fields use
    batch = recompressed(plain, 0, lambda _: bytes(body) + b"\x00")
    with pytest.raises(CorruptBatch, match="declares"):
        list(iter_records(batch))
