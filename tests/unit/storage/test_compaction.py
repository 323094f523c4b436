"""Log compaction: the keep/drop decisions (sans-IO, kemu.storage.compaction) and the rewriting
of segment files by SegmentLog.clean, including a crash at every step of a swap."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch

from kemu.cluster.partition_transactions import PartitionTransactions
from kemu.protocol.record_reader import iter_records
from kemu.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    BatchHeader,
    batch_crc_ok,
    build_batch,
    control_batch,
    read_header,
    with_offset,
)
from kemu.storage import segment_cleaning
from kemu.storage import segments as segments_module
from kemu.storage.compaction import (
    DELETE_HORIZON_FLAG,
    AbortedIndex,
    BatchFilter,
    CleanResult,
    CompactionPolicy,
    OffsetMap,
    ProducerLast,
    SegmentSummary,
    group_segments,
    plan_cleaning,
    raw_records,
    track_producer,
    write_batch,
)
from kemu.storage.segments import SegmentLog
from tests.unit.batch_builders import client_batch

T0 = 1_700_000_000_000
DAY = 86_400_000
POLICY = CompactionPolicy(delete_retention_ms=1000, segment_bytes=1 << 20)
Rec = tuple[bytes | None, bytes | None]


def batch(
    offset: int,
    records: list[Rec],
    *,
    timestamp: int = T0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> tuple[BatchHeader, bytes]:
    raw = build_batch(
        records,
        base_offset=offset,
        timestamp_ms=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
    )
    return read_header(raw), raw


def marker(
    offset: int, producer_id: int, commit: bool, epoch: int = 0
) -> tuple[BatchHeader, bytes]:
    raw = with_offset(
        control_batch(
            CONTROL_COMMIT if commit else CONTROL_ABORT,
            producer_id=producer_id,
            producer_epoch=epoch,
            coordinator_epoch=0,
            timestamp_ms=T0,
        ),
        offset,
        0,
    )
    return read_header(raw), raw


def run_filter(
    batches: list[tuple[BatchHeader, bytes]],
    *,
    now: int = T0,
    aborted: list[tuple[int, int, int]] | None = None,
    producers: dict[int, ProducerLast] | None = None,
    policy: CompactionPolicy = POLICY,
) -> tuple[list[tuple[BatchHeader, bytes]], BatchFilter]:
    """One cleaning round over ``batches`` (all dirty), as SegmentLog.clean runs it."""
    index = AbortedIndex(aborted or [])
    offset_map = OffsetMap()
    for header, raw in batches:
        offset_map.add_batch(header, raw, index)
    known: dict[int, ProducerLast] = {}
    for header, _ in batches:
        track_producer(known, header)
    chosen = producers if producers is not None else known
    keep = BatchFilter(
        offset_map=offset_map,
        aborted=index,
        producers=chosen,
        round_end=batches[-1][0].next_offset,
        now_ms=now,
        policy=policy,
    )
    out = []
    for header, raw in batches:
        kept = keep.filter(header, raw)
        if kept is not None:
            assert batch_crc_ok(kept)
            out.append((read_header(kept), kept))
    return out, keep


def records_of(
    batches: list[tuple[BatchHeader, bytes]],
) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for _, raw in batches for r in iter_records(raw)]


# --- what is cleanable ---


def summaries(
    *sizes: int, records: int = 10, timestamps: list[int] | None = None
) -> list[SegmentSummary]:
    found = []
    for number, size in enumerate(sizes):
        ts = timestamps[number] if timestamps else T0
        found.append(SegmentSummary(number * records, (number + 1) * records, size, ts, ts))
    return found


def test_the_active_segment_is_never_cleaned() -> None:
    assert (
        plan_cleaning(
            summaries(100), first_dirty_offset=0, last_stable_offset=10, now_ms=T0, policy=POLICY
        )
        is None
    )
    plan = plan_cleaning(
        summaries(100, 100), first_dirty_offset=0, last_stable_offset=20, now_ms=T0, policy=POLICY
    )
    assert plan is not None and (plan.first_dirty, plan.first_uncleanable) == (0, 1)


def test_dirty_ratio_must_exceed_min_cleanable_dirty_ratio() -> None:
    segs = summaries(100, 100, 100, 100, 50)  # the last one is active
    # checkpoint at 20: 200 clean bytes, 200 dirty ones: ratio 0.5 is not above 0.5
    assert (
        plan_cleaning(segs, first_dirty_offset=20, last_stable_offset=50, now_ms=T0, policy=POLICY)
        is None
    )
    plan = plan_cleaning(
        segs,
        first_dirty_offset=30,
        last_stable_offset=50,
        now_ms=T0,
        policy=CompactionPolicy(min_cleanable_dirty_ratio=0.2),
    )
    assert plan is not None and plan.first_dirty == 3 and plan.dirty_ratio == pytest.approx(0.25)


def test_min_compaction_lag_holds_young_segments_back() -> None:
    segs = summaries(100, 100, 100, 10, timestamps=[T0, T0 + 500, T0 + 900, T0 + 950])
    lag = CompactionPolicy(min_compaction_lag_ms=300)
    plan = plan_cleaning(
        segs, first_dirty_offset=0, last_stable_offset=40, now_ms=T0 + 1000, policy=lag
    )
    assert plan is not None and plan.first_uncleanable == 2  # T0+900 is younger than 300 ms
    assert (
        plan_cleaning(
            segs, first_dirty_offset=0, last_stable_offset=40, now_ms=T0 + 100, policy=lag
        )
        is None
    )


def test_max_compaction_lag_forces_a_cleaning_below_the_ratio() -> None:
    segs = summaries(1000, 1000, 10, 10, timestamps=[T0, T0, T0 + 5000, T0 + 5000])
    lazy = CompactionPolicy(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=3000)
    # 2000 clean bytes, 10 dirty ones: only the overdue first batch of segment 2 forces it
    assert (
        plan_cleaning(
            segs, first_dirty_offset=20, last_stable_offset=40, now_ms=T0 + 6000, policy=lazy
        )
        is None
    )
    plan = plan_cleaning(
        segs, first_dirty_offset=20, last_stable_offset=40, now_ms=T0 + 9000, policy=lazy
    )
    assert plan is not None and plan.must_clean


def test_the_last_stable_offset_bounds_cleaning() -> None:
    segs = summaries(100, 100, 100, 100)
    plan = plan_cleaning(
        segs, first_dirty_offset=0, last_stable_offset=15, now_ms=T0, policy=POLICY
    )
    assert plan is not None and plan.first_uncleanable == 1  # segment 1 holds the LSO


def test_segments_are_grouped_up_to_segment_bytes() -> None:
    segs = summaries(40, 40, 40, 100, 10, 10)
    assert group_segments(segs, 5, 100) == [[0, 1], [2], [3], [4]]
    assert group_segments(segs, 5, 1000) == [[0, 1, 2, 3, 4]]


# --- what is kept ---


def test_latest_value_per_key_stays_with_its_offset() -> None:
    log = [
        batch(0, [(b"a", b"1"), (b"b", b"1")]),
        batch(2, [(b"a", b"2"), (b"c", b"1")]),
        batch(4, [(b"b", b"2")]),
        batch(5, [(b"d", b"1")]),
    ]
    out, _ = run_filter(log)
    assert records_of(out) == [(2, b"a", b"2"), (3, b"c", b"1"), (4, b"b", b"2"), (5, b"d", b"1")]
    # the batch at 0 lost every record and went; the one at 2 kept its base offset
    assert [h.base_offset for h, _ in out] == [2, 4, 5]


def test_a_rewritten_batch_keeps_offsets_producer_fields_and_last_offset() -> None:
    log = [
        batch(
            0,
            [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")],
            producer_id=7,
            producer_epoch=3,
            base_sequence=40,
        ),
        batch(3, [(b"a", b"2")], producer_id=7, producer_epoch=3, base_sequence=43),
    ]
    out, _ = run_filter(log)
    first = out[0][0]
    assert (first.base_offset, first.last_offset_delta, first.record_count) == (0, 2, 2)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 3, 40)
    assert records_of(out) == [(1, b"b", b"1"), (2, b"c", b"1"), (3, b"a", b"2")]


def test_keyless_records_are_dropped() -> None:
    out, _ = run_filter([batch(0, [(None, b"x"), (b"a", b"1")]), batch(2, [(b"b", b"1")])])
    assert records_of(out) == [(1, b"a", b"1"), (2, b"b", b"1")]


def test_a_tombstone_lives_delete_retention_ms_after_the_cleaning_that_reached_it() -> None:
    log = [
        batch(0, [(b"a", b"1")]),
        batch(1, [(b"a", None), (b"b", b"1")]),
        batch(3, [(b"c", b"1")]),
    ]
    out, _ = run_filter(log, now=T0 + 10)
    assert records_of(out) == [(1, b"a", None), (2, b"b", b"1"), (3, b"c", b"1")]
    marked = out[0][0]
    assert marked.attributes & DELETE_HORIZON_FLAG
    assert marked.base_timestamp == T0 + 10 + POLICY.delete_retention_ms
    # record timestamps survive the new base timestamp
    assert [r.timestamp for r in iter_records(out[0][1])] == [T0, T0]
    # before the horizon it stays, unchanged; at the horizon it goes
    again, _ = run_filter(out, now=T0 + 10 + POLICY.delete_retention_ms - 1)
    assert records_of(again) == records_of(out)
    assert again[0][1] == out[0][1]
    gone, _ = run_filter(out, now=T0 + 10 + POLICY.delete_retention_ms)
    assert records_of(gone) == [(2, b"b", b"1"), (3, b"c", b"1")]


def test_the_last_batch_of_a_round_stays_even_when_empty() -> None:
    out, _ = run_filter(
        [batch(0, [(b"a", b"1")]), batch(1, [(b"a", b"2")]), batch(2, [(b"a", b"3")])]
    )
    assert records_of(out) == [(2, b"a", b"3")]
    out, _ = run_filter(
        [batch(0, [(b"a", b"1")]), batch(1, [(b"b", b"1"), (b"a", b"2")]), batch(3, [(b"b", b"2")])]
    )
    assert [h.next_offset for h, _ in out][-1] == 4


def test_a_live_producers_last_batch_stays_as_an_empty_batch() -> None:
    log = [
        batch(0, [(b"a", b"1")], producer_id=9, producer_epoch=0, base_sequence=0),
        batch(1, [(b"a", b"2")]),
        batch(2, [(b"z", b"1")]),
    ]
    out, _ = run_filter(log, now=T0 + 1)
    empty = [h for h, _ in out if h.producer_id == 9]
    assert len(empty) == 1 and empty[0].record_count == 0
    assert (empty[0].base_offset, empty[0].last_offset, empty[0].base_sequence) == (0, 0, 0)
    # once the producer has expired (producer.id.expiration.ms), the batch may go
    out, _ = run_filter(log, now=T0 + POLICY.producer_expiration_ms)
    assert all(h.producer_id != 9 for h, _ in out)


def test_aborted_transactions_go_and_their_marker_after_the_horizon() -> None:
    log = [
        batch(0, [(b"a", b"committed")]),
        batch(
            1,
            [(b"a", b"aborted")],
            producer_id=5,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
        ),
        marker(2, 5, commit=False),
        batch(3, [(b"b", b"1")], producer_id=6, producer_epoch=0, base_sequence=0),
        batch(4, [(b"z", b"1")]),
    ]
    producers = {6: ProducerLast(0, 3, T0)}
    aborted = [(5, 1, 2)]
    out, keep = run_filter(log, aborted=aborted, producers=producers, now=T0)
    # the aborted value did not count in the map: "committed" is the latest value of a
    assert records_of(out)[0] == (0, b"a", b"committed")
    assert 1 not in [h.base_offset for h, _ in out]
    assert [h.base_offset for h, _ in out if h.is_control] == [2]  # a batch of it was seen
    assert keep.removed_abort_markers == []
    # next round: no batch of the transaction left, the marker gets its horizon ...
    out, keep = run_filter(out, aborted=aborted, producers=producers, now=T0 + 5)
    control = [h for h, _ in out if h.is_control]
    assert control and control[0].attributes & DELETE_HORIZON_FLAG
    # ... and goes once it passed
    out, keep = run_filter(out, aborted=aborted, producers=producers, now=T0 + 5 + 1000)
    assert not [h for h, _ in out if h.is_control]
    assert keep.removed_abort_markers == [2]


def test_a_commit_marker_stays_while_its_transaction_has_batches() -> None:
    log = [
        batch(
            0, [(b"a", b"1")], producer_id=5, producer_epoch=0, base_sequence=0, transactional=True
        ),
        marker(1, 5, commit=True),
        batch(2, [(b"a", b"2")]),
        batch(3, [(b"z", b"1")]),
    ]
    producers: dict[int, ProducerLast] = {}
    out, _ = run_filter(log, producers=producers)
    # the batch at 0 was seen (its only record is superseded): the marker stays this round
    assert [h.base_offset for h, _ in out] == [1, 2, 3]
    assert not out[0][0].attributes & DELETE_HORIZON_FLAG
    out, _ = run_filter(out, producers=producers, now=T0 + 1)
    assert out[0][0].is_control and out[0][0].attributes & DELETE_HORIZON_FLAG
    out, _ = run_filter(out, producers=producers, now=T0 + 1 + 1000)
    assert [h.base_offset for h, _ in out] == [2, 3]


def test_read_committed_state_survives_markers_removed() -> None:
    """A partition rebuilt from a compacted log agrees with the one that forgot the markers."""
    log = [
        batch(
            0, [(b"a", b"x")], producer_id=5, producer_epoch=0, base_sequence=0, transactional=True
        ),
        marker(1, 5, commit=False, epoch=0),
        batch(
            2, [(b"a", b"y")], producer_id=5, producer_epoch=1, base_sequence=0, transactional=True
        ),
        marker(3, 5, commit=True, epoch=1),
        batch(4, [(b"z", b"1")]),
    ]
    producers = {5: ProducerLast(1, -1, T0)}  # its last entry is the commit marker at epoch 1
    live = PartitionTransactions()
    live.rebuild(log)
    assert live.aborted == [(1, 0, 5)]
    out = log
    for now in (T0, T0 + 1, T0 + 2000, T0 + 4000):
        aborted = [(p, first, last) for last, first, p in live.aborted]
        out, keep = run_filter(out, aborted=aborted, producers=producers, now=now)
        live.forget_markers(keep.removed_abort_markers)
        rebuilt = PartitionTransactions()
        rebuilt.rebuild(out)  # what a restart would read back
        assert rebuilt.first_unstable_offset() is None
        for header, _ in out:  # every data batch left is aborted for both or for neither
            if header.is_transactional and not header.is_control:

                def covered(state: PartitionTransactions, h: BatchHeader = header) -> bool:
                    return any(
                        p == h.producer_id and first <= h.base_offset <= last
                        for p, first, last in state.aborted_ranges(0, 100)
                    )

                assert covered(live) == covered(rebuilt)
    assert [r for r in records_of(out) if r[1] == b"a"] == [(2, b"a", b"y")]
    assert live.aborted == []
    # the last marker of producer 5 (epoch 1) stays: it carries the epoch for fencing
    assert [(h.base_offset, h.producer_epoch) for h, _ in out if h.is_control] == [(3, 1)]


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_are_rewritten_in_their_codec(codec: int) -> None:
    from kemu.protocol.record_reader import Record

    raw = bytearray(
        client_batch(
            [
                Record(i, T0 + i, f"k{i % 3}".encode(), f"v{i}".encode(), (("h", b"1"),))
                for i in range(9)
            ],
            codec,
        )
    )
    header = read_header(bytes(raw))
    kept = raw_records(header, bytes(raw))[-3:]
    out = write_batch(header, kept, delete_horizon_ms=None)
    out_header = read_header(out)
    assert out_header.compression == codec and out_header.last_offset_delta == 8
    assert batch_crc_ok(out)
    ours = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(out)]
    assert ours == [
        (i, T0 + i, f"k{i % 3}".encode(), f"v{i}".encode(), (("h", b"1"),)) for i in (6, 7, 8)
    ]
    theirs = [(r.offset, r.timestamp, r.key, r.value) for r in KafkaPythonBatch(out)]
    assert theirs == [(o, t, k, v) for o, t, k, v, _ in ours]


# --- segment files ---


def fill(directory: Path, versions: int = 6, keys: int = 5, segment_bytes: int = 600) -> SegmentLog:
    log = SegmentLog(directory, segment_bytes=segment_bytes)
    for version in range(versions):
        for key in range(keys):
            offset = log.log_end_offset
            value = None if (version == versions - 1 and key == 0) else f"v{version}".encode()
            header, raw = batch(offset, [(f"k{key}".encode(), value)], timestamp=T0 + offset)
            log.append(header, raw, now_ms=T0 + offset)
    return log


def content(log: SegmentLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return records_of(list(log.batches(log.log_start_offset, log.log_end_offset)))


def clean(log: SegmentLog, now: int = T0 + 100) -> object:
    return log.clean(
        now_ms=now,
        policy=CompactionPolicy(delete_retention_ms=1000, segment_bytes=600),
        last_stable_offset=log.log_end_offset,
        aborted=[],
    )


def test_segment_log_clean_keeps_offsets_leaves_gaps_and_survives_reopen(tmp_path: Path) -> None:
    log = fill(tmp_path)
    end = log.log_end_offset
    active = log.segment_base_offsets[-1]
    before = content(log)
    assert clean(log) is not None
    after = content(log)
    cleanable = [r for r in before if r[0] < active]
    latest = {}
    for offset, key, value in cleanable:
        latest[key] = (offset, key, value)
    expected = sorted(latest.values()) + [r for r in before if r[0] >= active]
    # the last batch of the round stays (its record may be superseded only in the active part)
    assert [r for r in after if r[0] < active] == sorted(latest.values())
    assert after == expected
    assert log.log_end_offset == end and log.log_start_offset == 0
    assert log.segment_base_offsets[-1] == active  # the active segment is untouched
    # a read from an offset that was removed returns the next batch
    first_kept = after[0][0]
    assert first_kept > 0
    assert read_header(log.read(0, 1 << 20, upper=end)).base_offset == first_kept
    log.close()
    reopened = SegmentLog(tmp_path, segment_bytes=600)
    assert content(reopened) == after
    assert reopened.log_end_offset == end
    assert not clean(reopened)  # the checkpoint says everything cleanable is clean


def test_segment_log_second_round_merges_small_segments(tmp_path: Path) -> None:
    log = fill(tmp_path, versions=12)
    clean(log)
    segments_after_first = len(log.segment_base_offsets)
    for key in range(5):  # more versions so that the dirty part is worth cleaning again
        for _ in range(4):
            header, raw = batch(log.log_end_offset, [(f"k{key}".encode(), b"new")])
            log.append(header, raw, now_ms=T0 + 50)
    before = content(log)
    assert clean(log, now=T0 + 200) is not None
    assert len(log.segment_base_offsets) < segments_after_first + 4
    values = {key: value for _, key, value in content(log)}
    assert values == {key: value for _, key, value in before}


def test_tombstones_leave_the_files_after_delete_retention_ms(tmp_path: Path) -> None:
    log = fill(tmp_path)  # the tombstone of k0 is in the active segment: not reached yet
    eager = CompactionPolicy(
        delete_retention_ms=1000, min_cleanable_dirty_ratio=0.01, segment_bytes=600
    )

    def more_and_clean(now: int) -> None:
        for _ in range(30):
            header, raw = batch(log.log_end_offset, [(b"other", b"x")])
            log.append(header, raw, now_ms=now)
        assert (
            log.clean(now_ms=now, policy=eager, last_stable_offset=log.log_end_offset, aborted=[])
            is not None
        )

    def tombstone_horizon() -> int | None:
        for header, raw in log.batches(0, log.log_end_offset):
            if any(r.value is None for r in iter_records(raw)):
                assert header.attributes & DELETE_HORIZON_FLAG
                return header.base_timestamp
        return None

    more_and_clean(T0 + 100)  # reaches it: it stays, with its horizon
    assert tombstone_horizon() == T0 + 100 + 1000
    more_and_clean(T0 + 1099)
    assert tombstone_horizon() == T0 + 1100
    more_and_clean(T0 + 1100)
    assert tombstone_horizon() is None
    assert b"k0" not in {key for _, key, _ in content(log)}


class Crash(BaseException):
    pass


def file_steps(monkeypatch: pytest.MonkeyPatch, crash_at: int) -> list[int]:
    """Make the ``crash_at``-th file operation of segments.py raise, as a SIGKILL there would
    stop the process (every write before it is in the page cache, none after it)."""
    calls = [0]
    real = {name: getattr(os, name) for name in ("replace", "unlink", "pwrite", "utime")}
    real_unlink = Path.unlink

    def counted(function):  # type: ignore[no-untyped-def]
        def run(*args, **kwargs):  # type: ignore[no-untyped-def]
            calls[0] += 1
            if calls[0] == crash_at:
                raise Crash
            return function(*args, **kwargs)

        return run

    for name, function in real.items():
        monkeypatch.setattr(segments_module.os, name, counted(function))
    monkeypatch.setattr(Path, "unlink", counted(real_unlink))
    return calls


@pytest.mark.parametrize("crash_at", range(1, 24))
def test_a_crash_at_any_step_of_a_cleaning_leaves_a_readable_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_at: int
) -> None:
    log = fill(tmp_path, versions=10)
    before = content(log)
    end = log.log_end_offset
    with monkeypatch.context() as patch:
        calls = file_steps(patch, crash_at)
        try:
            clean(log)
            crashed = False
        except Crash:
            crashed = True
    if not crashed:  # past the cleaning's last file step (the range leaves room for more)
        assert calls[0] < crash_at
        return
    # the process is gone: no close, reopen what is on disk
    reopened = SegmentLog(tmp_path, segment_bytes=600)
    now = content(reopened)
    assert reopened.log_end_offset == end
    latest = {key: value for _, key, value in before}
    assert {key: value for _, key, value in now} == latest  # old or new, never a mix that lies
    assert set(now) <= set(before)
    assert not list(tmp_path.glob("*.cleaned")) and not list(tmp_path.glob("*.swap"))
    clean(reopened)  # and the next cleaning finishes the job
    reopened.close()
    final = content(SegmentLog(tmp_path, segment_bytes=600))
    assert {key: value for _, key, value in final} == latest


def test_a_full_offset_map_cleans_the_dirty_section_in_rounds(tmp_path: Path) -> None:
    log = fill(tmp_path, versions=10)  # five keys, five batches of ~70 bytes a segment
    active = log.segment_base_offsets[-1]
    latest = {key: value for _, key, value in content(log)}
    small = CompactionPolicy(delete_retention_ms=1000, segment_bytes=600, max_map_keys=5)
    first = log.clean(
        now_ms=T0 + 100, policy=small, last_stable_offset=log.log_end_offset, aborted=[]
    )
    assert first is not None
    # the map filled up with the first segment's five keys: only it was cleaned
    assert first.first_uncleanable_offset == log.segment_base_offsets[1] < active
    rounds = 1
    while log.clean(
        now_ms=T0 + 100, policy=small, last_stable_offset=log.log_end_offset, aborted=[]
    ):
        rounds += 1
    assert rounds > 2
    assert {key: value for _, key, value in content(log)} == latest
    keys_before_active = [key for offset, key, _ in content(log) if offset < active]
    assert len(keys_before_active) == len(set(keys_before_active))


def test_a_stepwise_cleaning_lets_appends_in_and_is_aborted_by_a_start_offset_move(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segment_cleaning, "CLEANER_STEP_BYTES", 100)  # a yield every batch or so
    log = fill(tmp_path, versions=10)
    policy = CompactionPolicy(delete_retention_ms=1000, segment_bytes=600)

    def run(steps_before_change: int, change: Callable[[], None]) -> object:
        steps = log.cleaning(
            now_ms=T0 + 100, policy=policy, last_stable_offset=log.log_end_offset, aborted=[]
        )
        for _ in range(steps_before_change):
            next(steps)
        change()
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value

    def append() -> None:
        header, raw = batch(log.log_end_offset, [(b"k1", b"during")])
        log.append(header, raw, now_ms=T0 + 100)

    result = run(5, append)
    assert isinstance(result, CleanResult) and result.completed
    assert {key: value for _, key, value in content(log)}[b"k1"] == b"during"
    for _ in range(40):
        append()
    start = log.segment_base_offsets[1]
    result = run(3, lambda: log.advance_start(start))
    assert result is None  # aborted while indexing: nothing was swapped in
    assert not list(tmp_path.glob("*.cleaned"))
    assert log.log_start_offset == start
    kept = content(log)
    log.close()
    assert content(SegmentLog(tmp_path, segment_bytes=600)) == kept


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    writes=st.lists(
        st.tuples(st.integers(0, 6), st.one_of(st.none(), st.binary(min_size=0, max_size=30))),
        min_size=1,
        max_size=120,
    ),
    per_batch=st.integers(1, 4),
    cleanings=st.lists(st.integers(0, 3000), min_size=1, max_size=4),
)
def test_any_log_reads_back_the_latest_value_per_key_after_cleanings(
    tmp_path_factory: pytest.TempPathFactory,
    writes: list[tuple[int, bytes | None]],
    per_batch: int,
    cleanings: list[int],
) -> None:
    directory = tmp_path_factory.mktemp("prop")
    log = SegmentLog(directory, segment_bytes=400)
    for start in range(0, len(writes), per_batch):
        chunk = writes[start : start + per_batch]
        header, raw = batch(
            log.log_end_offset,
            [(f"k{key}".encode(), value) for key, value in chunk],
            timestamp=T0 + start,
        )
        log.append(header, raw, now_ms=T0 + start)
    original = {offset: (key, value) for offset, key, value in content(log)}
    latest = {key: value for _, key, value in content(log)}
    eager = CompactionPolicy(
        delete_retention_ms=1000, min_cleanable_dirty_ratio=0.0, segment_bytes=400
    )
    now = T0
    for step in sorted(cleanings):
        now = T0 + step
        log.clean(now_ms=now, policy=eager, last_stable_offset=log.log_end_offset, aborted=[])
        after = content(log)
        # every record kept is the one written at that offset
        assert all(original[offset] == (key, value) for offset, key, value in after)
        seen = {key: value for _, key, value in after}
        for key, value in latest.items():
            if value is not None:
                assert seen.get(key) == value  # a live key keeps its latest value
            else:
                assert seen.get(key) is None  # a deleted key stays deleted
        assert log.log_end_offset == len(writes)
    log.close()
    assert content(SegmentLog(directory, segment_bytes=400)) == after


def test_the_cleaner_takes_topic_configs_and_their_broker_synonyms() -> None:
    from kemu.broker.housekeeping import compaction_policy
    from kemu.config.definitions import BrokerConfig, TopicConfig

    broker = BrokerConfig(
        {
            "log.cleaner.min.cleanable.ratio": "0.2",
            "log.cleaner.delete.retention.ms": "5000",
            "log.segment.bytes": "4096",
            "log.cleaner.dedupe.buffer.size": "2400",
        }
    )
    policy = compaction_policy(TopicConfig(broker, {"min.compaction.lag.ms": "700"}))
    assert policy.min_cleanable_dirty_ratio == 0.2
    assert policy.delete_retention_ms == 5000
    assert policy.min_compaction_lag_ms == 700
    assert policy.max_compaction_lag_ms == 2**63 - 1
    assert policy.segment_bytes == 4096
    assert policy.max_map_keys == 90  # 2400 / 24 * 0.9
    topic = TopicConfig(broker, {"delete.retention.ms": "1", "min.cleanable.dirty.ratio": "0.9"})
    assert (
        compaction_policy(topic).delete_retention_ms,
        compaction_policy(topic).min_cleanable_dirty_ratio,
    ) == (1, 0.9)


def test_max_compaction_lag_rolls_a_compacted_topics_active_segment(tmp_path: Path) -> None:
    from kemu.cluster.model import BrokerNode, Cluster
    from kemu.config.definitions import BrokerConfig

    def make(topic: str, index: int) -> SegmentLog:
        return SegmentLog(tmp_path / f"{topic}-{index}")

    nodes = {1: BrokerNode(1, "127.0.0.1", 9001)}
    cluster = Cluster("cluster-c", nodes, BrokerConfig(), make, data_dir=tmp_path)
    cluster.load_metadata()
    lagged = cluster.create_topic(
        "lagged", 1, 1, {"cleanup.policy": "compact", "max.compaction.lag.ms": "1000"}
    )
    plain = cluster.create_topic("plain", 1, 1, {"max.compaction.lag.ms": "1000"})
    for topic in (lagged, plain):
        partition = topic.partitions[0]
        for step in range(3):
            header, raw = batch(
                partition.log.log_end_offset, [(b"k", b"v")], timestamp=T0 + step * 800
            )
            partition.append([(header, raw)], now_ms=T0 + step * 800)
    lagged_log, plain_log = lagged.partitions[0].log, plain.partitions[0].log
    assert isinstance(lagged_log, SegmentLog) and isinstance(plain_log, SegmentLog)
    assert lagged_log.segment_base_offsets == [0, 2]  # 1600 ms after the first batch: rolled
    assert plain_log.segment_base_offsets == [0]  # segment.ms (7 days) alone
