"""Timestamp lookups resolve to the record inside a (compressed) batch, in memory and on disk,
with batches written by aiokafka's record builder."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from kemu.protocol.records import read_header, with_log_append_time, with_offset
from kemu.storage.log import MemoryLog, PartitionLog
from kemu.storage.segments import SegmentLog
from kemu.storage.timestamps import RecordMatch, first_record_at_or_after, record_with_max_timestamp
from tests.unit.batch_builders import timed_batch

TS = 1_700_000_000_000
MAX_TIMESTAMP_AT = 35  # in the v2 batch header
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def batch(timestamps: list[int], codec: int) -> bytes:
    return timed_batch([TS + t for t in timestamps], codec)


def append(log: PartitionLog, data: bytes, leader_epoch: int = 0) -> None:
    stored = with_offset(data, log.log_end_offset, leader_epoch)
    log.append(read_header(stored), stored, now_ms=TS)


LogFactory = Callable[[], PartitionLog]


@pytest.fixture(params=["memory", "segments"])
def new_log(request: pytest.FixtureRequest, tmp_path: Path) -> LogFactory:
    if request.param == "memory":
        return MemoryLog
    return lambda: SegmentLog(tmp_path / "log")


@pytest.fixture(params=CODECS.values(), ids=CODECS.keys())
def log(request: pytest.FixtureRequest, new_log: LogFactory) -> PartitionLog:
    """Offsets 0-4 stamped +20, +21, +25, +22, +23 (one batch, epoch 3), then offsets 5-7
    stamped +26, +30, +28 (epoch 4): both batches' largest timestamps sit mid-batch."""
    log = new_log()
    append(log, batch([20, 21, 25, 22, 23], request.param), leader_epoch=3)
    append(log, batch([26, 30, 28], request.param), leader_epoch=4)
    return log


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (0, RecordMatch(0, TS + 20, 3)),
        (20, RecordMatch(0, TS + 20, 3)),
        (21, RecordMatch(1, TS + 21, 3)),
        (22, RecordMatch(2, TS + 25, 3)),  # the first record at or after, not the closest
        (25, RecordMatch(2, TS + 25, 3)),
        (26, RecordMatch(5, TS + 26, 4)),
        (27, RecordMatch(6, TS + 30, 4)),
        (30, RecordMatch(6, TS + 30, 4)),
    ],
)
def test_first_record_at_or_after(log: PartitionLog, target: int, expected: RecordMatch) -> None:
    assert first_record_at_or_after(log, TS + target) == expected


def test_nothing_at_or_after_the_last_timestamp(log: PartitionLog) -> None:
    assert first_record_at_or_after(log, TS + 31) is None


def test_max_timestamp_is_the_record_that_carries_it(log: PartitionLog) -> None:
    assert record_with_max_timestamp(log) == RecordMatch(6, TS + 30, 4)


def test_max_timestamp_takes_the_first_record_and_batch_that_reach_it(
    new_log: LogFactory,
) -> None:
    log = new_log()
    append(log, batch([1, 9, 9], CODECS["zstd"]))
    append(log, batch([9], CODECS["zstd"]))
    assert record_with_max_timestamp(log) == RecordMatch(1, TS + 9, 0)


def test_records_below_the_log_start_are_skipped(new_log: LogFactory) -> None:
    log = new_log()
    append(log, batch([20, 21, 25, 22, 23], CODECS["gzip"]))
    append(log, batch([26, 30, 28], CODECS["gzip"]))
    log.advance_start(2)  # inside the first batch, which stays
    assert first_record_at_or_after(log, TS + 20) == RecordMatch(2, TS + 25, 0)
    log.advance_start(3)
    assert first_record_at_or_after(log, TS + 22) == RecordMatch(3, TS + 22, 0)
    # The first batch reaches +24 only at offset 2, below the start: the next batch answers.
    assert first_record_at_or_after(log, TS + 24) == RecordMatch(5, TS + 26, 0)


def test_log_append_time_stamps_every_record_with_the_batch_time(new_log: LogFactory) -> None:
    log = new_log()
    stored = with_log_append_time(with_offset(batch([5, 1, 3], CODECS["lz4"]), 0, 0), TS + 50)
    header = read_header(stored)
    log.append(header._replace(max_timestamp=TS + 50), stored, now_ms=TS)
    assert first_record_at_or_after(log, TS + 10) == RecordMatch(0, TS + 50, 0)
    assert record_with_max_timestamp(log) == RecordMatch(0, TS + 50, 0)


def test_empty_log(new_log: LogFactory) -> None:
    log = new_log()
    assert first_record_at_or_after(log, 0) is None
    assert record_with_max_timestamp(log) is None


def test_header_disagreeing_with_its_records_falls_back_to_the_batch(new_log: LogFactory) -> None:
    """Kafka recomputes a batch's max timestamp on append; kemu keeps what the client sent."""
    log = new_log()
    stored = bytearray(with_offset(batch([1, 2, 3], CODECS["none"]), 0, 0))
    struct.pack_into(">q", stored, MAX_TIMESTAMP_AT, TS + 7)
    append(log, bytes(stored))
    assert record_with_max_timestamp(log) == RecordMatch(2, TS + 7, 0)
