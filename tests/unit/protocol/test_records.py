"""Record batches: header parsing, validation of produced batches, offset assignment, and the
batches kemu writes itself, checked with aiokafka's (C) and kafka-python's (pure Python) record
decoders, which share no code with kemu's."""

from __future__ import annotations

import contextlib
import struct

import crc32c
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch

from kemu.protocol import records
from kemu.protocol.records import (
    BATCH_HEADER_SIZE,
    CRC_START,
    CorruptBatch,
    InvalidBatch,
    build_batch,
    control_batch,
    read_header,
    split_batches,
    with_log_append_time,
    with_offset,
)

TS = 1_700_000_000_000
MAGIC_OFFSET = 16


def client_batch(
    count: int = 3,
    *,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """A batch the way a client writes it (aiokafka's builder), offsets from 0."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=int(transactional),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for i in range(count):
        builder.append(
            i,
            timestamp=TS + i,
            key=f"k{i}".encode(),
            value=f"value-{i}".encode() * 10,
            headers=[("h", str(i).encode())],
        )
    return bytes(builder.build())


def decode_all(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) for every record, via aiokafka; asserts the CRCs."""
    found = []
    reader = MemoryRecords(data)
    while reader.has_next():
        batch = reader.next_batch()
        assert batch.validate_crc()
        found.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)
    return found


def recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[CRC_START:])))
    return bytes(batch)


# --- header ------------------------------------------------------------------------------------


def test_header_fields() -> None:
    data = client_batch(
        4, compression=1, producer_id=77, producer_epoch=3, base_sequence=10, transactional=True
    )
    header = read_header(data)
    assert BATCH_HEADER_SIZE == 61
    assert header.base_offset == 0
    assert header.size == len(data)
    assert header.magic == 2
    assert header.compression == 1
    assert header.is_transactional
    assert not header.is_control
    assert header.last_offset_delta == 3
    assert header.record_count == 4
    assert (header.base_timestamp, header.max_timestamp) == (TS, TS + 3)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 10)
    assert header.partition_leader_epoch == -1
    moved = read_header(with_offset(data, 100, 5))
    assert (moved.last_offset, moved.next_offset) == (103, 104)


def test_header_at_a_position() -> None:
    first, second = client_batch(2), client_batch(5)
    assert read_header(first + second, len(first)).record_count == 5


def test_short_header_is_corrupt() -> None:
    with pytest.raises(CorruptBatch):
        read_header(client_batch()[:60])


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_crc_of_client_batches(compression: int) -> None:
    data = client_batch(compression=compression)
    assert records.batch_crc_ok(data)
    assert records.COMPRESSION_NAMES[read_header(data).compression]
    flipped = bytearray(data)
    flipped[-1] ^= 0x01
    assert not records.batch_crc_ok(bytes(flipped))


# --- validating a produce request's records ----------------------------------------------------


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_split_one_valid_batch(compression: int) -> None:
    data = client_batch(compression=compression)
    ((header, batch),) = split_batches(data)
    assert batch == data
    assert header.record_count == 3


def test_crc_mismatch_is_corrupt_and_not_invalid() -> None:
    data = bytearray(client_batch())
    data[BATCH_HEADER_SIZE + 3] ^= 0xFF  # inside the first record
    with pytest.raises(CorruptBatch, match="CRC") as raised:
        split_batches(bytes(data))
    assert not isinstance(raised.value, InvalidBatch)
    assert split_batches(bytes(data), verify_crc=False)[0][1] == bytes(data)


def test_crc_covers_the_attributes() -> None:
    data = bytearray(client_batch())
    data[CRC_START + 1] ^= 0x01  # compression bits
    with pytest.raises(CorruptBatch, match="CRC"):
        split_batches(bytes(data))


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_invalid_record(magic: int) -> None:
    # Kafka refuses message format v0/v1 in Produce v3+ with INVALID_RECORD.
    data = bytearray(client_batch())
    data[MAGIC_OFFSET] = magic  # magic sits before the CRC's range: the CRC still matches
    with pytest.raises(InvalidBatch, match="magic"):
        split_batches(bytes(data))


@pytest.mark.parametrize("magic", [3, 7, -1])
def test_unknown_magic_is_corrupt(magic: int) -> None:
    data = bytearray(client_batch())
    struct.pack_into(">b", data, MAGIC_OFFSET, magic)
    with pytest.raises(CorruptBatch, match="magic") as raised:
        split_batches(bytes(data))
    assert not isinstance(raised.value, InvalidBatch)


def test_legacy_message_set_is_invalid_record() -> None:
    # A real magic-1 message: offset, size, crc, magic=1, attributes, timestamp, key, value.
    body = struct.pack(">bbqi", 1, 0, TS, -1) + struct.pack(">i", 5) + b"hello"
    message = struct.pack(">I", crc32c.crc32c(body)) + body  # the CRC kind does not matter
    data = struct.pack(">qi", 0, len(message)) + message
    with pytest.raises(InvalidBatch):
        split_batches(data)


@pytest.mark.parametrize("cut", [1, 10, 60])
def test_truncated_batch_is_invalid_record(cut: int) -> None:
    # Kafka finds no complete batch, so "at least one record batch" fails: INVALID_RECORD.
    data = client_batch()
    with pytest.raises(InvalidBatch):
        split_batches(data[: len(data) - cut])


@pytest.mark.parametrize("length", [2**31 - 1, 10_000])
def test_length_past_the_end_is_invalid_record(length: int) -> None:
    data = bytearray(client_batch())
    struct.pack_into(">i", data, 8, length)
    with pytest.raises(InvalidBatch):
        split_batches(bytes(data))


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 13, 48])
def test_length_below_a_batch_header_is_corrupt(length: int) -> None:
    data = bytearray(client_batch())
    struct.pack_into(">i", data, 8, length)
    with pytest.raises(CorruptBatch) as raised:
        split_batches(bytes(data))
    assert not isinstance(raised.value, InvalidBatch)


def test_negative_counts_are_corrupt() -> None:
    data = bytearray(client_batch())
    struct.pack_into(">i", data, 23, -5)  # lastOffsetDelta
    with pytest.raises(CorruptBatch):
        split_batches(recrc(data))
    data = bytearray(client_batch())
    struct.pack_into(">i", data, 57, -1)  # recordCount
    with pytest.raises(CorruptBatch):
        split_batches(recrc(data))


def test_no_records_is_invalid_record() -> None:
    with pytest.raises(InvalidBatch):
        split_batches(b"")


def test_more_than_one_batch_is_invalid_record() -> None:
    # Produce v3+ carries exactly one batch per partition.
    with pytest.raises(InvalidBatch, match="exactly one"):
        split_batches(client_batch(2) + client_batch(3))


def test_trailing_bytes_after_the_batch_are_rejected() -> None:
    with pytest.raises(CorruptBatch):
        split_batches(client_batch() + b"\x00" * 5)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_only_ever_raise_corrupt_batch(data: bytes) -> None:
    with contextlib.suppress(CorruptBatch):
        split_batches(data)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_batches_only_ever_raise_corrupt_batch(data: st.DataObject) -> None:
    batch = bytearray(client_batch(data.draw(st.integers(1, 4))))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(batch) - 1))
        batch[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(batch)))
    with contextlib.suppress(CorruptBatch):
        split_batches(bytes(batch[:cut]))


# --- offsets and append time -------------------------------------------------------------------


@pytest.mark.parametrize("compression", [0, 1, 4])
def test_with_offset_keeps_the_crc_valid(compression: int) -> None:
    data = client_batch(3, compression=compression)
    moved = with_offset(data, 1_000_000, 7)
    assert len(moved) == len(data)
    assert records.batch_crc_ok(moved)
    header = read_header(moved)
    assert (header.base_offset, header.partition_leader_epoch) == (1_000_000, 7)
    assert header.crc == read_header(data).crc
    assert [offset for offset, *_ in decode_all(moved)] == [1_000_000, 1_000_001, 1_000_002]
    assert [value for *_, value in decode_all(moved)] == [v for *_, v in decode_all(data)]
    assert split_batches(moved)[0][1] == moved


def test_log_append_time_rewrites_timestamps_with_a_fresh_crc() -> None:
    data = with_log_append_time(with_offset(client_batch(3), 5, 0), TS + 999)
    header = read_header(data)
    assert header.attributes & records.TIMESTAMP_TYPE_LOG_APPEND
    assert header.max_timestamp == TS + 999
    reader = MemoryRecords(data)
    batch = reader.next_batch()
    assert batch.validate_crc()
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch] == [TS + 999] * 3


# --- batches kemu writes -----------------------------------------------------------------------


def test_build_batch_round_trips_through_aiokafka_and_kafka_python() -> None:
    pairs: list[tuple[bytes | None, bytes | None]] = [
        (b"k", b"v"),
        (None, b"no key"),
        (b"no value", None),
        (b"", b""),
        (b"big", b"x" * 70_000),
    ]
    data = build_batch(
        pairs,
        base_offset=42,
        timestamp_ms=TS,
        producer_id=9,
        producer_epoch=2,
        base_sequence=17,
        leader_epoch=4,
    )
    assert split_batches(data)[0][1] == data
    assert decode_all(data) == [(42 + i, TS, k, v) for i, (k, v) in enumerate(pairs)]
    theirs = KafkaPythonBatch(data)
    assert theirs.validate_crc()
    assert (theirs.base_offset, theirs.producer_id, theirs.producer_epoch) == (42, 9, 2)
    assert theirs.base_sequence == 17
    assert not theirs.is_transactional
    assert not theirs.is_control_batch
    assert [(r.offset, r.key, r.value, list(r.headers)) for r in theirs] == [
        (42 + i, k, v, []) for i, (k, v) in enumerate(pairs)
    ]


@given(
    st.lists(
        st.tuples(st.none() | st.binary(max_size=200), st.none() | st.binary(max_size=200)),
        min_size=1,
        max_size=20,
    ),
    st.integers(0, 2**40),
    st.integers(0, 2**42),
)
@settings(max_examples=200, deadline=None)
def test_build_batch_round_trip_property(
    pairs: list[tuple[bytes | None, bytes | None]], base_offset: int, timestamp: int
) -> None:
    data = build_batch(pairs, base_offset=base_offset, timestamp_ms=timestamp)
    ((header, _),) = split_batches(data)
    assert header.record_count == len(pairs)
    assert decode_all(data) == [
        (base_offset + i, timestamp, k, v) for i, (k, v) in enumerate(pairs)
    ]


@pytest.mark.parametrize(
    ("marker", "name"), [(records.CONTROL_COMMIT, "COMMIT"), (records.CONTROL_ABORT, "ABORT")]
)
def test_control_batch_is_a_transaction_marker(marker: int, name: str) -> None:
    data = with_offset(
        control_batch(
            marker, producer_id=1234, producer_epoch=5, coordinator_epoch=8, timestamp_ms=TS
        ),
        99,
        3,
    )
    header = read_header(data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch) == (1234, 5)
    assert split_batches(data)[0][1] == data

    batch = MemoryRecords(data).next_batch()
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    (record,) = list(batch)
    assert record.offset == 99
    # ControlRecordType key: version 0, type; EndTxnMarker value: version 0, coordinator epoch
    assert struct.unpack(">hh", record.key) == (0, marker)
    assert struct.unpack(">hi", record.value) == (0, 8)

    theirs = KafkaPythonBatch(data)
    assert theirs.is_control_batch and theirs.validate_crc()
    (their_record,) = list(theirs)
    assert their_record.offset == 99
    assert their_record.type == marker
    assert their_record.commit == (name == "COMMIT")
    assert their_record.abort == (name == "ABORT")
