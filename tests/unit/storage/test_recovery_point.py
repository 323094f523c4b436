"""A log opened from its recovery point (or after a clean shutdown) reads the segments below it
from their summaries (``<base>.scan``) instead of scanning them, and ends up exactly where a
full scan of every segment does: the same segments (sizes, offsets, timestamps, sparse index),
log start and end, idempotent-producer state, cleaner producer state and transactional batches,
for random interleavings of idempotent and transactional producers, commits, aborts, flushes,
compaction, a moved log start, a torn tail, a crash or a clean close."""

from __future__ import annotations

import os
import random
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

import kemu.storage.segments as segments_module
from kemu.cluster.partition import Partition
from kemu.protocol.records import (
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    build_batch,
    read_header,
)
from kemu.storage.compaction import CompactionPolicy, track_producer
from kemu.storage.recovery import (
    DATA_BATCH,
    NOT_TRANSACTIONAL,
    RECENT_BATCHES_PER_PRODUCER,
    ProducerTracker,
)
from kemu.storage.recovery_points import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
    RecoveryPoints,
    format_offset_checkpoint,
    parse_offset_checkpoint,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from kemu.storage.segment_summary import (
    SUMMARY_VERSION,
    decode_summary,
    essential_producer_batches,
    load_summary,
    scan_segment,
    summary_name,
)
from kemu.storage.segments import SegmentLog

TOPIC_ID = uuid.UUID(int=9)

# --- the recovery-point checkpoint ----------------------------------------------------------


def test_checkpoint_round_trip_in_kafkas_format(tmp_path: Path) -> None:
    offsets = {("orders", 0): 12, ("orders", 1): 0, ("__consumer_offsets", 49): 7_000_000_000}
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    write_offset_checkpoint(path, offsets)
    assert path.read_text().splitlines()[:3] == ["0", "3", "orders 0 12"]
    assert read_offset_checkpoint(path) == offsets
    assert not path.with_name(path.name + ".tmp").exists()
    write_offset_checkpoint(path, {})
    assert read_offset_checkpoint(path) == {}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1\n1\nt 0 5\n",  # an unknown version
        "0\n2\nt 0 5\n",  # fewer entries than announced
        "0\n1\nt 0\n",  # a short line
        "0\n1\nt x 5\n",
        "0\n1\nt 0 -5\n",
        "0\n1\nt 0 5\nt 1 6\n",  # more entries than announced
        "garbage",
    ],
)
def test_a_damaged_checkpoint_is_refused_and_read_as_empty(tmp_path: Path, text: str) -> None:
    with pytest.raises(ValueError):
        parse_offset_checkpoint(text)
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    path.write_text(text)
    assert read_offset_checkpoint(path) == {}
    path.write_bytes(b"\xff\xfe\x00")
    assert read_offset_checkpoint(path) == {}


def test_format_and_parse_agree() -> None:
    offsets = {(f"topic.{n}", n % 3): n * 1000 for n in range(50)}
    assert parse_offset_checkpoint(format_offset_checkpoint(offsets)) == offsets


def test_the_clean_shutdown_marker_is_taken_once(tmp_path: Path) -> None:
    points = RecoveryPoints(tmp_path)
    assert not points.clean_shutdown and points.loaded == {}
    points.checkpoint([("t", 0, 5)])
    points.mark_clean_shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    again = RecoveryPoints(tmp_path)
    assert again.clean_shutdown and again.for_partition("t", 0) == 5
    assert again.for_partition("t", 1) is None
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # a crash from here on is unclean
    assert not RecoveryPoints(tmp_path).clean_shutdown


# --- segment summaries ----------------------------------------------------------------------


def _filled_log(directory: Path) -> SegmentLog:
    log = SegmentLog(directory, segment_bytes=400, index_interval_bytes=100)
    partition = Partition("t", TOPIC_ID, 0, 1, [1], log)
    for number in range(30):
        batch = build_batch(
            [(b"k%d" % number, b"v" * number)],
            timestamp_ms=1000 + number,
            producer_id=number % 3,
            producer_epoch=0,
            base_sequence=number // 3,
            transactional=number % 3 == 1,
        )
        partition.append([(read_header(batch), batch)], now_ms=0)
        if number % 7 == 6:
            partition.write_marker(1, 0, number % 2 == 0, now_ms=0)
    log.flush()
    return log


def test_a_summary_describes_its_segment_as_a_scan_does(tmp_path: Path) -> None:
    log = _filled_log(tmp_path)
    rolled = log.segment_base_offsets[:-1]
    assert len(rolled) >= 3
    for base in rolled:
        loaded = load_summary(tmp_path, base)
        scanned = scan_segment(tmp_path, base, 100, gaps=True)
        assert loaded is not None
        for name in ("size", "next_offset", "first_timestamp", "max_timestamp"):
            assert getattr(loaded.segment, name) == getattr(scanned.segment, name)
        assert loaded.segment.sparse.positions == scanned.segment.sparse.positions
        assert loaded.segment.sparse.base_offsets == scanned.segment.sparse.base_offsets
        kept = essential_producer_batches(scanned.producer_batches)
        assert loaded.producer_batches == [scanned.producer_batches[n] for n in kept]
        assert loaded.transactions == scanned.transactions
        assert loaded.transactions  # the log has transactional batches in every segment
        assert loaded.segment.pending_index == scanned.segment.pending_index
    assert not (tmp_path / summary_name(log.segment_base_offsets[-1])).exists()  # active
    log.close()
    assert (tmp_path / summary_name(log.segment_base_offsets[-1])).exists()  # for a clean start


@pytest.mark.parametrize("damage", ["flip", "cut", "empty", "segment_grew", "last_batch_changed"])
def test_a_summary_that_does_not_match_is_not_used(tmp_path: Path, damage: str) -> None:
    log = _filled_log(tmp_path)
    base = log.segment_base_offsets[1]
    log.close()
    path = tmp_path / summary_name(base)
    segment = tmp_path / f"{base:020d}.log"
    data = path.read_bytes()
    if damage == "flip":
        path.write_bytes(data[:40] + bytes([data[40] ^ 1]) + data[41:])
    elif damage == "cut":
        path.write_bytes(data[:-3])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "segment_grew":
        with open(segment, "ab") as handle:
            handle.write(b"\0" * 10)
    else:
        scanned = decode_summary(tmp_path, data)
        assert scanned is not None
        with open(segment, "r+b") as handle:  # the CRC field of the last batch's header
            handle.seek(scanned.last_batch_position + 17)
            handle.write(b"\0\0\0\0")
    assert load_summary(tmp_path, base) is None


def test_a_summary_of_an_older_version_is_scanned_and_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _filled_log(tmp_path)
    bases = log.segment_base_offsets
    log.close()
    path = tmp_path / summary_name(bases[1])
    current = path.read_bytes()
    path.write_bytes(current[:4] + (SUMMARY_VERSION - 1).to_bytes(2, "little") + current[6:])
    assert load_summary(tmp_path, bases[1]) is None
    scanned = _count_scans(monkeypatch)
    reopened = SegmentLog(
        tmp_path, segment_bytes=400, index_interval_bytes=100, clean_shutdown=True
    )
    assert scanned == [bases[1]]
    reopened.flush()  # the segment is summarized again, as it was
    assert path.read_bytes() == current
    reopened.close()


def test_an_unclean_start_reads_summarized_rolled_segments_without_a_recovery_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _filled_log(tmp_path)
    bases = log.segment_base_offsets
    _kill(log)  # no clean shutdown, and no recovery point checkpointed
    reopened, _, scanned = _open_counting(tmp_path, monkeypatch)
    assert scanned == bases[-1:]  # only the active segment
    assert reopened.segment_base_offsets == bases
    reopened.close()


def test_a_missing_index_of_a_summarized_segment_is_rewritten(tmp_path: Path) -> None:
    log = _filled_log(tmp_path)
    bases = log.segment_base_offsets
    index = tmp_path / f"{bases[1]:020d}.index"
    expected = index.read_bytes()
    assert expected
    log.close()
    index.unlink()
    reopened = SegmentLog(
        tmp_path, segment_bytes=400, index_interval_bytes=100, clean_shutdown=True
    )
    assert index.read_bytes() == expected
    reopened.close()


# --- recovery from the recovery point == a full scan ----------------------------------------


def _state(log: SegmentLog) -> dict[str, Any]:
    return {
        "start": log.log_start_offset,
        "end": log.log_end_offset,
        "size": log.size_bytes,
        "segments": [
            (
                segment.base_offset,
                segment.size,
                segment.next_offset,
                segment.first_timestamp,
                segment.max_timestamp,
                segment.max_timestamp_offset,
                segment.since_index_entry,
                list(segment.sparse.base_offsets),
                list(segment.sparse.positions),
                list(segment.sparse.max_timestamps_before),
                segment.created_ms,
            )
            for segment in log._segments
        ],
        "producers": log.recovered_producers(),
        "cleaner_producers": dict(log._producers),
        "files": sorted(name for name in os.listdir(log.directory) if not name.endswith(".scan")),
        "batches": [header for header, _ in log.batches(log.log_start_offset, log.log_end_offset)],
    }


def _count_scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The base offsets of the segments scanned from now on (until the patch is undone)."""
    scanned: list[int] = []
    original = segments_module.scan_segment

    def counting(directory: Path, base: int, interval: int, *, gaps: bool) -> Any:
        scanned.append(base)
        return original(directory, base, interval, gaps=gaps)

    monkeypatch.setattr(segments_module, "scan_segment", counting)
    return scanned


def _open_counting(
    directory: Path, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> tuple[SegmentLog, Partition, list[int]]:
    with monkeypatch.context() as patch:
        scanned = _count_scans(patch)
        log = SegmentLog(directory, segment_bytes=1 << 20, index_interval_bytes=150, **options)
    partition = Partition("t", TOPIC_ID, 0, 1, [1], log)
    return log, partition, scanned


def _kill(log: SegmentLog) -> None:
    """What SIGKILL does to the process: descriptors close, nothing more is written."""
    for descriptor in (log._active_fd, *log._readers.values(), *log._unsynced):
        os.close(descriptor)
    log._active_fd = -1
    log._readers.clear()
    log._unsynced.clear()


@pytest.mark.parametrize("seed", range(40))
def test_recovery_from_the_recovery_point_matches_a_full_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    directory = tmp_path / "p"
    log = SegmentLog(
        directory, segment_bytes=rng.choice((300, 700, 2000)), index_interval_bytes=150
    )
    partition = Partition("t", TOPIC_ID, 0, 1, [1], log)
    sequences: dict[int, int] = {}
    epochs: dict[int, int] = {}
    recovery_point = None
    now = 1_000
    for _ in range(rng.randint(10, 300)):
        now += rng.randint(0, 50)
        # 1-3 transactional, 4 without a producer id, 5-7 idempotent, 8 a producer id without
        # sequences
        producer_id = rng.randint(1, 8)
        roll = rng.random()
        if roll < 0.03:
            epochs[producer_id] = epochs.get(producer_id, 0) + 1  # a new epoch: sequences restart
            sequences[producer_id] = 0
        elif roll < 0.6:
            sequence = sequences.get(producer_id, 0)
            count = rng.randint(1, 3)
            batch = build_batch(
                [(b"k%d" % rng.randint(0, 6), b"v" * rng.randint(0, 40)) for _ in range(count)],
                timestamp_ms=now,
                producer_id=producer_id if producer_id != 4 else -1,
                producer_epoch=epochs.get(producer_id, 0),
                base_sequence=sequence if producer_id not in (4, 8) else -1,
                transactional=producer_id in (1, 2, 3),
            )
            sequences[producer_id] = sequence + count
            partition.append([(read_header(batch), batch)], now_ms=now)
        elif roll < 0.8 and producer_id in (1, 2, 3):
            partition.write_marker(
                producer_id, epochs.get(producer_id, 0), rng.random() < 0.6, now_ms=now
            )
        elif roll < 0.9:
            log.flush()
            recovery_point = log.recovery_point
        elif roll < 0.95:
            log.clean(
                now_ms=now,
                policy=CompactionPolicy(
                    delete_retention_ms=0, segment_bytes=1500, min_cleanable_dirty_ratio=0.01
                ),
                last_stable_offset=partition.last_stable_offset,
                aborted=[(pid, first, last) for last, first, pid in partition.transactions.aborted],
            )
        elif rng.random() < 0.5:
            log.advance_start(rng.randint(log.log_start_offset, log.log_end_offset))
    clean = rng.random() < 0.4
    if clean:
        log.close()
        recovery_point = log.log_end_offset
    else:
        _kill(log)
        if rng.random() < 0.5:  # a torn tail: the last segment loses some bytes
            last = sorted(directory.glob("*.log"))[-1]
            size = last.stat().st_size
            if size:
                os.truncate(last, rng.randint(0, size - 1))
    copy = tmp_path / "copy"
    shutil.copytree(directory, copy)
    for summary in copy.glob("*.scan"):  # the reference scans every segment
        summary.unlink()
    on_disk = sorted(int(path.name[:20]) for path in directory.glob("*.log"))
    summarized = {int(path.name[:20]) for path in directory.glob("*.scan")}

    full, full_partition, full_scans = _open_counting(copy, monkeypatch)
    fast, fast_partition, fast_scans = _open_counting(
        directory, monkeypatch, recovery_point=recovery_point, clean_shutdown=clean
    )
    assert full_scans == on_disk[: len(full_scans)]
    assert _state(fast) == _state(full)
    assert fast_partition.transactions.ongoing == full_partition.transactions.ongoing
    assert fast_partition.transactions.aborted == full_partition.transactions.aborted
    if clean:
        assert fast_scans == []  # nothing at all is scanned after a clean close
    else:
        # every summarized rolled segment is read from its summary, wherever the recovery
        # point is; the active one and the rolled ones not summarized yet are scanned
        assert fast_scans == sorted(fast_scans)
        assert set(fast_scans) <= (set(on_disk) - summarized) | {on_disk[-1]}
    # and both go on alike
    for one in (full_partition, fast_partition):
        batch = build_batch([(b"x", b"y")], timestamp_ms=now, producer_id=9, base_sequence=0)
        one.append([(read_header(batch), batch)], now_ms=now)
        one.log.flush()
    assert _state(fast) == _state(full)
    fast.close()
    full.close()


# --- the producer batches a summary keeps ---------------------------------------------------


def _header(
    offset: int, producer_id: int, epoch: int, sequence: int, attributes: int, timestamp: int
) -> BatchHeader:
    return BatchHeader(
        offset, 60, 0, 2, 0, attributes, 1, timestamp, timestamp, producer_id, epoch, sequence, 2
    )


def _fold(
    batches: list[tuple[BatchHeader, int]], tracker: ProducerTracker, last: dict[int, Any]
) -> None:
    for header, marker in batches:
        tracker.observe(header)
        track_producer(last, header)
        tracker.note(header, marker)


@pytest.mark.parametrize("seed", range(200))
def test_the_kept_producer_batches_leave_the_trackers_as_all_of_them_do(seed: int) -> None:
    rng = random.Random(seed)
    batches: list[tuple[BatchHeader, int]] = []
    epochs = {producer_id: 0 for producer_id in range(4)}
    sequences = dict.fromkeys(range(4), 0)
    for offset in range(0, 2 * rng.randint(1, 60), 2):
        producer_id = rng.randrange(4)
        if rng.random() < 0.08:
            epochs[producer_id] += rng.choice((1, 1, 1, -1))
        transactional = producer_id < 2 and rng.random() < 0.8
        control = transactional and rng.random() < 0.2
        attributes = (TRANSACTIONAL_FLAG if transactional else 0) | (CONTROL_FLAG if control else 0)
        sequence = -1 if control or rng.random() < 0.1 else sequences[producer_id]
        sequences[producer_id] += 2
        marker = NOT_TRANSACTIONAL
        if transactional:
            marker = rng.choice((0, 1)) if control else DATA_BATCH
        header = _header(
            offset, producer_id, epochs[producer_id], sequence, attributes, 1000 + offset
        )
        batches.append((header, marker))
    split = rng.randint(0, len(batches))
    before, segment = batches[:split], batches[split:]
    kept = essential_producer_batches(segment)
    # keeping more than the essential batches changes nothing either
    more = sorted(set(kept) | set(rng.sample(range(len(segment)), len(segment) // 3)))
    results = []
    for numbers in (range(len(segment)), kept, more):
        tracker, last = ProducerTracker(), {}
        _fold(before, tracker, last)  # whatever the earlier segments left
        _fold([segment[number] for number in numbers], tracker, last)
        # the same states, with producers first seen in the same order
        results.append((tracker.producers, list(tracker.producers), last, list(last)))
    assert results[0] == results[1] == results[2]


def test_a_long_run_of_one_producer_keeps_its_first_and_last_batches() -> None:
    batches = [
        (_header(offset, 7, 0, offset, 0, offset), NOT_TRANSACTIONAL) for offset in range(100)
    ]
    assert essential_producer_batches(batches) == [0, 95, 96, 97, 98, 99]


def test_a_long_transactional_run_keeps_a_handful_of_batches() -> None:
    batches = []
    for offset in range(0, 300, 3):  # one producer: two data batches, then a COMMIT marker
        for step in range(2):
            header = _header(offset + step, 7, 0, offset + step, TRANSACTIONAL_FLAG, offset)
            batches.append((header, DATA_BATCH))
        marker = _header(offset + 2, 7, 0, -1, TRANSACTIONAL_FLAG | CONTROL_FLAG, offset)
        batches.append((marker, 1))
    kept = essential_producer_batches(batches)
    assert len(kept) <= 2 + RECENT_BATCHES_PER_PRODUCER + 2
    assert kept[0] == 0 and kept[-1] == len(batches) - 1
