"""Durable partition logs: Kafka-style segment files with a sparse offset index.

A partition directory (``<data-dir>/<topic>-<partition>``) is laid out as Kafka lays it out:

- ``00000000000000000000.log``: record batches in the v2 wire format, byte for byte as appended,
  one file per segment named after its base offset (20 digits). The active segment rolls when
  the next batch would take it past ``segment.bytes``, or when that batch's timestamp is more
  than ``segment.ms`` after the segment's first batch (Kafka's rule).
- ``00000000000000000000.index``: the sparse offset index, 8-byte entries (last offset of a
  batch relative to the segment's base offset, int32; file position of the batch, int32), one
  once more than ``index.interval.bytes`` of batches went by since the previous entry. kemu
  writes it for Kafka's tools (``kafka-dump-log``) and rebuilds it on open; it never reads it.
  Entries are buffered in memory and written at flush, roll and close (one write, not one
  open-write-close per entry), so after a SIGKILL the file may lack the last second's entries
  until the next open rebuilds it.
- ``log-start-offset``: the log start offset once DeleteRecords has moved it inside a segment
  (Kafka keeps the same number in ``log-start-offset-checkpoint``).
- ``cleaner-offset``: on compacted topics, where the dirty (not yet cleaned) section starts (Kafka
  keeps it in ``cleaner-offset-checkpoint``).

Compaction (``clean``, decisions in ``kemu.storage.compaction``) rewrites runs of rolled segments
into one segment each, named after the first one's base offset. A run is written to
``<base>.log.cleaned`` and fsynced, then renamed ``<base>.<end>.swap`` (the commit point: ``end``
is the base offset of the segment after the run), then the run's segments are deleted and the
swap file renamed over ``<base>.log``. Opening a directory deletes ``.cleaned`` files (a cleaning
cut short: the old segments are whole) and completes any ``.swap`` (deletes the segments with
base offsets in [base, end), renames it), so a SIGKILL at any point leaves a readable log. A
compacted segment has gaps in its offsets, and may begin after its base offset.

Durability: ``append`` writes the batch with ``os.pwrite`` before returning, so it is in the page
cache and survives a SIGKILL of the broker; ``flush`` (once a second from housekeeping, or after
every append with ``flush_every_append``) fdatasyncs it against power loss. On open every segment
is scanned and validated (``kemu.storage.recovery``); a torn or corrupt tail is cut at the last
whole valid batch, with a warning saying how many bytes went, and later segments are removed.

Reads use an in-memory sparse index (``_SparseIndex``: the first batch of each segment, then a
batch each ``index.interval.bytes``, as Kafka's offset and time indexes): a bisection gives the
entry at or before the offset wanted, one ``pread`` from there reads the batches, and their
headers are walked to where the read starts and stops. Memory grows with the bytes on disk over
the interval (24 bytes per 4 KiB by default), not with the number of batches.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
from array import array
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import structlog

from kemu.protocol.records import LOG_OVERHEAD, TRANSACTIONAL_FLAG, BatchHeader, read_header
from kemu.storage.compaction import (
    AbortedIndex,
    BatchFilter,
    CleanResult,
    CompactionPolicy,
    OffsetMap,
    ProducerLast,
    SegmentSummary,
    group_segments,
    plan_cleaning,
    track_producer,
)
from kemu.storage.log import PartitionLog, RecoveredProducer, TimestampMatch
from kemu.storage.recovery import NotedBatch, ProducerTracker, scan_batches

log = structlog.get_logger("kemu.storage")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
START_CHECKPOINT = "log-start-offset"
CLEANER_CHECKPOINT = "cleaner-offset"
CLEANED_SUFFIX = ".log.cleaned"
SWAP_SUFFIX = ".swap"
CLEANER_WRITE_CHUNK = 1 << 20
CLEANER_STEP_BYTES = 256 << 10  # read between two yields of a cleaning
CHECKPOINT_VERSION = 0
INDEX_ENTRY = struct.Struct(">ii")
MAX_RELATIVE_OFFSET = 2**31 - 1

DEFAULT_SEGMENT_BYTES = 1 << 30
DEFAULT_SEGMENT_MS = 7 * 24 * 3600 * 1000
DEFAULT_INDEX_INTERVAL_BYTES = 4096
OPEN_READERS = 4  # descriptors kept open per log for reading rolled segments
BATCHES_READ_CHUNK = 1 << 20
BATCHES_FIRST_READ = 64 << 10
BATCH_STARTS_KEPT = 32  # per log: the batches most recently appended or read up to
SCAN_SLACK = 4096  # read past a sparse entry's interval: the batch that crossed it
# what a scan reads of a batch header: base offset, batch length, last offset delta, max timestamp
_PEEK = struct.Struct(">qi11xi8xq")

_datasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    return f"{base_offset:020d}{suffix}"


def _swap_range(name: str) -> tuple[int, int] | None:
    """(base, end) of a ``<base>.<end>.swap`` file name."""
    parts = name.split(".")
    if (
        len(parts) == 3
        and "." + parts[2] == SWAP_SUFFIX
        and all(len(part) == 20 and part.isdigit() for part in parts[:2])
    ):
        return int(parts[0]), int(parts[1])
    return None


def _segment_base(name: str) -> int | None:
    stem, dot, suffix = name.partition(".")
    if dot and "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


class _SparseIndex:
    """Where a scan of one segment starts: the first batch, then one batch each time more than
    ``index.interval.bytes`` went by (Kafka's offset and time indexes, in memory).

    Reads bisect it for the last entry at or before an offset and walk the batch headers from
    there, so memory grows with the bytes on disk divided by the interval (24 bytes per 4 KiB by
    default), not with the number of batches.
    """

    __slots__ = ("base_offsets", "max_timestamps_before", "positions")

    def __init__(self) -> None:
        self.base_offsets: array[int] = array("q")  # of the batch at the entry
        self.positions: array[int] = array("q")
        # the max timestamp of every batch before the entry, in file order: non-decreasing
        self.max_timestamps_before: array[int] = array("q")

    def __len__(self) -> int:
        return len(self.positions)

    def add(self, base_offset: int, position: int, max_timestamp_before: int) -> None:
        self.base_offsets.append(base_offset)
        self.positions.append(position)
        self.max_timestamps_before.append(max_timestamp_before)

    def entry_for_offset(self, offset: int) -> int:
        """The last entry whose batch begins at or before ``offset`` (0 when none does)."""
        return max(bisect.bisect_right(self.base_offsets, offset) - 1, 0)

    def entry_for_timestamp(self, timestamp_ms: int) -> int:
        """The last entry before which every batch is older than ``timestamp_ms``."""
        return max(bisect.bisect_left(self.max_timestamps_before, timestamp_ms) - 1, 0)

    def drop_from(self, position: int) -> None:
        """Forget the entries at or past ``position`` (the file was cut there)."""
        keep = bisect.bisect_left(self.positions, position)
        del self.base_offsets[keep:]
        del self.positions[keep:]
        del self.max_timestamps_before[keep:]


class _Segment:
    """One ``.log`` file: its sparse index and totals. Batches below the log start offset are
    still counted in ``size``, ``next_offset`` and ``max_timestamp``; reads skip them.
    """

    __slots__ = (
        "base_offset",
        "created_ms",
        "first_timestamp",
        "last_modified_ms",
        "max_timestamp",
        "max_timestamp_offset",
        "next_offset",
        "path",
        "pending_index",
        "since_index_entry",
        "size",
        "sparse",
    )

    def __init__(self, directory: Path, base_offset: int) -> None:
        self.base_offset = base_offset
        self.path = directory / segment_file_name(base_offset)
        self.sparse = _SparseIndex()
        self.size = 0
        self.next_offset = base_offset
        self.first_timestamp = -1  # max timestamp of the first batch: Kafka's roll clock
        self.max_timestamp = -1
        self.max_timestamp_offset = -1  # the last offset of the first batch holding it
        self.last_modified_ms = -1  # retention falls back on this without batch timestamps
        self.created_ms = -1  # and rolling on this
        self.since_index_entry = 0
        self.pending_index = bytearray()  # sparse index entries not yet in the .index file

    @property
    def index_path(self) -> Path:
        return self.path.with_suffix(INDEX_SUFFIX)

    def note_batch(self, header: BatchHeader, position: int, interval_bytes: int) -> None:
        """Record a batch written at ``position``, buffering the sparse index entry it earns."""
        size = header.batch_length + LOG_OVERHEAD  # header.size, once
        if not self.sparse.positions:
            self.sparse.add(header.base_offset, position, self.max_timestamp)
        elif self.since_index_entry > interval_bytes:
            self.pending_index += INDEX_ENTRY.pack(header.last_offset - self.base_offset, position)
            self.sparse.add(header.base_offset, position, self.max_timestamp)
            self.since_index_entry = 0
        self.since_index_entry += size
        if self.size == 0:
            self.first_timestamp = header.max_timestamp
        self.size = position + size
        self.next_offset = header.base_offset + header.last_offset_delta + 1
        if header.max_timestamp > self.max_timestamp or self.max_timestamp_offset < 0:
            self.max_timestamp = max(header.max_timestamp, self.max_timestamp)
            self.max_timestamp_offset = self.next_offset - 1

    def write_pending_index(self) -> None:
        if self.pending_index:
            _append_index_entries(self.index_path, self.pending_index)
            self.pending_index.clear()

    def retention_timestamp(self) -> int:
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms


class SegmentLog(PartitionLog):
    """A partition log in segment files under ``directory``; reopening it recovers it."""

    def __init__(
        self,
        directory: Path,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        segment_ms: int = DEFAULT_SEGMENT_MS,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        flush_every_append: bool = False,
        crash_point: Callable[[str], None] | None = None,
    ) -> None:
        self.directory = Path(directory)
        # crash tests: called at each step of a cleaning (kemu.cluster.crash_points)
        self._crash_point = crash_point or _no_crash
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.index_interval_bytes = index_interval_bytes
        self.flush_every_append = flush_every_append
        self.log_start_offset = 0
        self._segments: list[_Segment] = []
        self._bases: list[int] = []
        self._size = 0
        self._active_fd = -1
        self._readers: OrderedDict[int, int] = OrderedDict()  # base offset -> descriptor
        self._unsynced: list[int] = []  # descriptors of rolled segments awaiting fdatasync
        self._dirty = False
        self._directory_dirty = False
        self._recovered: dict[int, RecoveredProducer] = {}
        # where recent batches begin, so that a consumer at the tail starts its read without a
        # walk from the sparse entry: base offset -> (segment, position); forgotten whenever a
        # segment is cut, cleaned or deleted
        self._batch_starts: dict[int, tuple[_Segment, int]] = {}
        # transactional batches seen when the log was opened
        self._recovered_transactions: list[NotedBatch] = []
        self._producers: dict[int, ProducerLast] = {}  # what compaction must keep of each
        self._first_dirty = 0  # the cleaner checkpoint
        self._cleaning_aborted = False
        self.directory.mkdir(parents=True, exist_ok=True)
        self._open()

    # --- the PartitionLog contract ---------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return self._size

    def append(self, header: BatchHeader, batch: bytes, *, now_ms: int) -> None:
        if header.base_offset != self.log_end_offset or len(batch) != header.size:
            raise ValueError(
                f"batch at offset {header.base_offset} of {len(batch)} bytes cannot follow "
                f"log end offset {self.log_end_offset} (header says {header.size} bytes)"
            )
        segment = self._segments[-1]
        if self._should_roll(segment, header, now_ms):
            segment = self._roll(header.base_offset)
        position = segment.size
        if position == 0:
            segment.created_ms = now_ms
        _write_fully(self._active_fd, batch, position)
        segment.note_batch(header, position, self.index_interval_bytes)
        self._remember_start(header.base_offset, segment, position)
        segment.last_modified_ms = now_ms
        self._size += len(batch)
        if header.producer_id >= 0:
            track_producer(self._producers, header)
        if self.flush_every_append:
            segment.write_pending_index()
            _datasync(self._active_fd)
        else:
            self._dirty = True

    def read(self, offset: int, max_bytes: int, *, upper: int, min_one: bool = True) -> bytes:
        target = max(offset, self.log_start_offset)
        if target >= self.log_end_offset:
            return b""
        chunks: list[bytes] = []
        budget = max_bytes
        number = self._segment_number(target)
        while number < len(self._segments):
            data, stopped = self._take(
                self._segments[number], target, budget, upper, min_one=min_one and not chunks
            )
            if data:
                chunks.append(data)
                budget -= len(data)
            if stopped:
                break  # out of budget, or reached ``upper``
            number += 1
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def batches(self, offset: int, upper: int) -> Iterator[tuple[BatchHeader, bytes]]:
        target = max(offset, self.log_start_offset)
        number = self._segment_number(target)
        while number < len(self._segments):
            if (yield from self._walk(self._segments[number], target, upper)):
                return
            number += 1

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampMatch | None:
        start = self.log_start_offset
        for segment in self._segments:
            sparse = segment.sparse
            if segment.max_timestamp < timestamp_ms or segment.next_offset <= start or not sparse:
                continue  # nothing in it can match
            entry = max(sparse.entry_for_timestamp(timestamp_ms), sparse.entry_for_offset(start))
            for _, _, base, last, max_timestamp in self._headers(segment, sparse.positions[entry]):
                if last >= start and max_timestamp >= timestamp_ms:
                    return TimestampMatch(max(base, start), max_timestamp)
        return None

    def max_timestamp(self) -> TimestampMatch | None:
        best: TimestampMatch | None = None
        for number, segment in enumerate(self._segments):
            if not segment.sparse:
                continue
            if number == 0 and self.log_start_offset > segment.sparse.base_offsets[0]:
                found = self._max_timestamp_from(segment, self.log_start_offset)
            else:
                found = TimestampMatch(segment.max_timestamp_offset, segment.max_timestamp)
            if found is not None and (best is None or found.timestamp > best.timestamp):
                best = found
        return best

    def advance_start(self, new_start: int) -> None:
        if new_start <= self.log_start_offset:
            return
        self._abort_cleaning()
        self.log_start_offset = min(new_start, self.log_end_offset)
        self._write_start_checkpoint()
        self._forget_below_start()

    def truncate_to(self, end_offset: int) -> None:
        target = max(end_offset, self.log_start_offset)
        if target >= self.log_end_offset:
            return
        self._abort_cleaning()
        self._batch_starts.clear()
        if target <= self._segments[0].base_offset:
            self._restart_at(target)
            return
        if self._segments[-1].base_offset >= target:
            while self._segments[-1].base_offset >= target:
                self._delete_segment(self._segments[-1])
            self._activate(self._segments[-1])
        segment = self._segments[-1]
        cut = -1
        if segment.sparse:
            first = segment.sparse.positions[segment.sparse.entry_for_offset(target)]
            for position, _, base, _, _ in self._headers(segment, first):
                if base >= target:
                    cut, segment.next_offset = position, base
                    break
        if cut < 0:
            return  # ``target`` is inside the last batch, which stays whole
        segment.write_pending_index()  # so that the entries past the cut are filtered with the rest
        segment.sparse.drop_from(cut)
        os.ftruncate(self._active_fd, cut)
        self._size -= segment.size - cut
        segment.size = cut
        segment.since_index_entry = 0
        segment.max_timestamp = segment.max_timestamp_offset = -1
        for _, _, _, last, max_timestamp in self._headers(segment, 0):
            if max_timestamp > segment.max_timestamp or segment.max_timestamp_offset < 0:
                segment.max_timestamp = max(max_timestamp, segment.max_timestamp)
                segment.max_timestamp_offset = last
        if cut == 0:
            segment.first_timestamp = -1
        self._rewrite_index(segment, _index_entries_before(segment.index_path, cut))
        self._dirty = True

    def enforce_retention(self, *, now_ms: int, retention_ms: int, retention_bytes: int) -> None:
        doomed = 0
        size = self._size
        # Whole segments only, oldest first, never the active one (as Kafka deletes).
        for segment in self._segments[:-1]:
            too_old = retention_ms >= 0 and now_ms - segment.retention_timestamp() > retention_ms
            too_big = retention_bytes >= 0 and size - segment.size >= retention_bytes
            if not (too_old or too_big):
                break
            size -= segment.size
            doomed += 1
        if not doomed:
            return
        self._abort_cleaning()
        for segment in self._segments[:doomed]:
            self._delete_segment(segment)
        if self._segments[0].base_offset > self.log_start_offset:
            self.log_start_offset = self._segments[0].base_offset
            # the first segment's name records it; no checkpoint needed
        log.info(
            "segments_deleted_by_retention",
            directory=str(self.directory),
            segments=doomed,
            log_start_offset=self.log_start_offset,
        )

    def recovered_producers(self) -> dict[int, RecoveredProducer]:
        return self._recovered

    def take_recovered_transactions(self) -> list[NotedBatch]:
        # the batches ``batches(log start, log end)`` would give: a batch the log start cuts
        # through is still read
        found, self._recovered_transactions = self._recovered_transactions, []
        start, end = self.log_start_offset, self.log_end_offset
        return [entry for entry in found if entry[1] >= start and entry[0] < end]

    # --- compaction -------------------------------------------------------------------------

    def cleaning(
        self,
        *,
        now_ms: int,
        policy: CompactionPolicy,
        last_stable_offset: int,
        aborted: list[tuple[int, int, int]],
    ) -> Generator[None, None, CleanResult | None]:
        """``clean`` in steps: it yields after every ``CLEANER_STEP_BYTES`` read so that an event
        loop can serve requests in between. Appends may go on meanwhile; retention, DeleteRecords,
        truncation or closing abort it (as they abort a cleaning in Kafka): the runs already
        swapped in stay, the rest is left for the next cleaning."""
        summaries = [
            SegmentSummary(
                segment.base_offset,
                segment.next_offset,
                segment.size,
                segment.first_timestamp,
                segment.retention_timestamp(),
            )
            for segment in self._segments
        ]
        first_dirty = self._first_dirty
        if not self.log_start_offset <= first_dirty <= self.log_end_offset:
            first_dirty = self.log_start_offset  # Kafka resets an invalid checkpoint so too
        plan = plan_cleaning(
            summaries,
            first_dirty_offset=first_dirty,
            last_stable_offset=last_stable_offset,
            now_ms=now_ms,
            policy=policy,
        )
        if plan is None:
            return None
        self._cleaning_aborted = False
        index = AbortedIndex(aborted)
        offset_map = OffsetMap()
        uncleanable = plan.first_uncleanable
        budget = CLEANER_STEP_BYTES
        for number in range(plan.first_dirty, plan.first_uncleanable):
            if number > plan.first_dirty and len(offset_map.latest) >= policy.max_map_keys:
                uncleanable = number  # the map is full: the rest waits for the next round
                break
            for header, batch in self._segment_batches(self._segments[number]):
                offset_map.add_batch(header, batch, index)
                budget -= header.size
                if budget <= 0:
                    yield
                    budget = CLEANER_STEP_BYTES
                    if self._cleaning_aborted:
                        return None
        last_cleaned = self._segments[uncleanable - 1]
        checkpoint = self._segments[uncleanable].base_offset
        batch_filter = BatchFilter(
            offset_map=offset_map,
            aborted=index,
            producers=self._producers,
            round_end=last_cleaned.next_offset,
            now_ms=now_ms,
            policy=policy,
        )
        groups = [
            (
                [self._segments[number] for number in group],
                self._segments[group[-1] + 1].base_offset,
            )
            for group in group_segments(summaries, uncleanable, policy.segment_bytes)
        ]
        bytes_before = sum(summary.size for summary in summaries[:uncleanable])
        completed = True
        for group, end in groups:
            removed_so_far = len(batch_filter.removed_abort_markers)
            written = yield from self._write_cleaned(group, batch_filter)
            if written is None:
                del batch_filter.removed_abort_markers[removed_so_far:]  # not swapped in
                completed = False
                break
            self._swap_in(group, end, *written)
        if completed:
            self._first_dirty = checkpoint
            self._write_checkpoint(CLEANER_CHECKPOINT, checkpoint)
        number = self._bases.index(checkpoint)
        result = CleanResult(
            segments_before=uncleanable,
            segments_after=number,
            bytes_before=bytes_before,
            bytes_after=sum(segment.size for segment in self._segments[:number]),
            dirty_ratio=plan.dirty_ratio,
            first_uncleanable_offset=checkpoint if completed else self._first_dirty,
            removed_abort_markers=tuple(batch_filter.removed_abort_markers),
            stats=batch_filter.stats,
            completed=completed,
        )
        log.info(
            "log_cleaned" if completed else "log_cleaning_aborted",
            directory=str(self.directory),
            dirty_ratio=round(plan.dirty_ratio, 3),
            overdue=plan.must_clean,
            segments=f"{result.segments_before}->{result.segments_after}",
            bytes=f"{result.bytes_before}->{result.bytes_after}",
            records=f"{batch_filter.stats.records_read}->{batch_filter.stats.records_kept}",
            cleaned_up_to=result.first_uncleanable_offset,
        )
        return result

    def _abort_cleaning(self) -> None:
        """The log changed under a cleaning in progress (see ``cleaning``)."""
        self._cleaning_aborted = True

    def _segment_batches(self, segment: _Segment) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch of a rolled segment at or past the log start."""
        yield from self._walk(segment, self.log_start_offset, 2**63 - 1)

    def _write_cleaned(
        self, group: list[_Segment], batch_filter: BatchFilter
    ) -> Generator[None, None, tuple[_Segment, Path] | None]:
        """Write what ``group`` keeps to ``<base>.log.cleaned`` and sync it: the replacement
        segment and the file, or None when the cleaning was aborted meanwhile (file removed)."""
        base = group[0].base_offset
        cleaned_path = self.directory / (f"{base:020d}" + CLEANED_SUFFIX)
        replacement = _Segment(self.directory, base)
        descriptor = os.open(cleaned_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            pending = bytearray()
            written = 0
            budget = CLEANER_STEP_BYTES
            for segment in group:
                for header, batch in self._segment_batches(segment):
                    kept = batch_filter.filter(header, batch)
                    budget -= header.size
                    if kept is not None:
                        kept_header = header if kept is batch else read_header(kept)
                        replacement.note_batch(
                            kept_header, written + len(pending), self.index_interval_bytes
                        )
                        pending += kept
                        if len(pending) >= CLEANER_WRITE_CHUNK:
                            _write_fully(descriptor, bytes(pending), written)
                            written += len(pending)
                            pending.clear()
                    if budget <= 0:
                        yield
                        budget = CLEANER_STEP_BYTES
                        if self._cleaning_aborted:
                            os.close(descriptor)
                            descriptor = -1
                            cleaned_path.unlink(missing_ok=True)
                            return None
            if pending:
                _write_fully(descriptor, bytes(pending), written)
            _datasync(descriptor)
        except BaseException:
            if descriptor >= 0:
                os.close(descriptor)
            cleaned_path.unlink(missing_ok=True)
            raise
        os.close(descriptor)
        self._crash_point("clean.cleaned_written")
        return replacement, cleaned_path

    def _swap_in(
        self, group: list[_Segment], end: int, replacement: _Segment, cleaned_path: Path
    ) -> None:
        """Replace ``group`` by its cleaned segment, on disk (crash-safe) and in memory."""
        base = replacement.base_offset
        modified = group[-1].last_modified_ms
        if modified >= 0:  # the cleaned segment keeps the age of what it replaces, as in Kafka
            os.utime(cleaned_path, ns=(modified * 1_000_000, modified * 1_000_000))
        swap_path = self.directory / f"{base:020d}.{end:020d}{SWAP_SUFFIX}"
        os.replace(cleaned_path, swap_path)
        _fsync_directory(self.directory)  # the commit point: from here on the swap wins
        self._crash_point("clean.swap_committed")
        for segment in group:
            reader = self._readers.pop(segment.base_offset, None)
            if reader is not None:
                os.close(reader)
        for segment in group[1:]:
            segment.path.unlink(missing_ok=True)
            segment.index_path.unlink(missing_ok=True)
        self._crash_point("clean.old_segments_deleted")
        os.replace(swap_path, replacement.path)
        self._rewrite_index(replacement, bytes(replacement.pending_index))
        replacement.pending_index.clear()
        _fsync_directory(self.directory)
        replacement.last_modified_ms = replacement.created_ms = modified
        first = self._segments.index(group[0])
        self._batch_starts.clear()
        self._segments[first : first + len(group)] = [replacement]
        self._bases[first : first + len(group)] = [base]
        self._size += replacement.size - sum(segment.size for segment in group)

    def _finish_interrupted_cleaning(self) -> None:
        """Undo a cleaning cut short before its commit point, complete one cut short after it."""
        touched = False
        for path in self.directory.glob("*" + CLEANED_SUFFIX):
            path.unlink()
            touched = True
        for path in sorted(self.directory.glob("*" + SWAP_SUFFIX)):
            span = _swap_range(path.name)
            touched = True
            if span is None:
                path.unlink()
                continue
            base, end = span
            for other in list(self.directory.iterdir()):
                other_base = _segment_base(other.name)
                if other_base is not None and base <= other_base < end:
                    other.unlink()
                    other.with_suffix(INDEX_SUFFIX).unlink(missing_ok=True)
            os.replace(path, self.directory / segment_file_name(base))
            log.warning("log_cleaning_completed_at_open", directory=str(self.directory), base=base)
        if touched:
            _fsync_directory(self.directory)

    def flush(self) -> None:
        if self._segments:
            self._segments[-1].write_pending_index()  # rolled segments wrote theirs at the roll
        if self._dirty and self._active_fd >= 0:
            _datasync(self._active_fd)
            self._dirty = False
        while self._unsynced:
            descriptor = self._unsynced.pop()
            _datasync(descriptor)
            os.close(descriptor)
        if self._directory_dirty:
            _fsync_directory(self.directory)
            self._directory_dirty = False

    def close(self) -> None:
        self._abort_cleaning()
        if self._active_fd < 0:
            return
        self.flush()
        for descriptor in (self._active_fd, *self._readers.values()):
            os.close(descriptor)
        self._readers.clear()
        self._active_fd = -1

    def configure(self, *, segment_bytes: int, segment_ms: int, index_interval_bytes: int) -> None:
        # takes effect from the next append, as a changed segment.bytes does in Kafka
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.index_interval_bytes = index_interval_bytes

    @property
    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    # --- segments ---------------------------------------------------------------------------

    def _should_roll(self, segment: _Segment, header: BatchHeader, now_ms: int) -> bool:
        if segment.size == 0:
            return False
        if segment.size + header.size > self.segment_bytes:
            return True
        if header.last_offset - segment.base_offset > MAX_RELATIVE_OFFSET:
            return True
        if segment.first_timestamp >= 0 and header.max_timestamp >= 0:
            waited = header.max_timestamp - segment.first_timestamp
        else:
            waited = now_ms - segment.created_ms if segment.created_ms >= 0 else 0
        return waited > self.segment_ms

    def _roll(self, base_offset: int) -> _Segment:
        if self._segments:
            self._segments[-1].write_pending_index()
        segment = _Segment(self.directory, base_offset)
        segment.path.write_bytes(b"")
        segment.index_path.write_bytes(b"")
        self._segments.append(segment)
        self._bases.append(base_offset)
        self._directory_dirty = True
        self._activate(segment)
        return segment

    def _activate(self, segment: _Segment) -> None:
        """Point the write descriptors at ``segment``, keeping the old one for a last sync."""
        if self._active_fd >= 0:
            if self._dirty:
                self._unsynced.append(self._active_fd)
                self._dirty = False
            else:
                os.close(self._active_fd)
        self._active_fd = os.open(segment.path, os.O_RDWR | os.O_CREAT, 0o644)

    def _delete_segment(self, segment: _Segment) -> None:
        self._batch_starts.clear()
        number = self._segments.index(segment)
        del self._segments[number]
        del self._bases[number]
        reader = self._readers.pop(segment.base_offset, None)
        if reader is not None:
            os.close(reader)
        segment.path.unlink(missing_ok=True)
        segment.index_path.unlink(missing_ok=True)
        self._size -= segment.size
        self._directory_dirty = True

    def _restart_at(self, offset: int) -> None:
        """Drop every segment and start empty at ``offset``."""
        for segment in list(self._segments):
            self._delete_segment(segment)
        self.log_start_offset = offset
        self._roll(offset)

    def _forget_below_start(self) -> None:
        while len(self._segments) > 1 and self._segments[1].base_offset <= self.log_start_offset:
            self._delete_segment(self._segments[0])

    # --- reading: from a sparse index entry, along the batch headers --------------------------

    def _segment_number(self, offset: int) -> int:
        """The segment a search for ``offset`` starts in (a later one may hold it: gaps)."""
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def _take(
        self, segment: _Segment, target: int, budget: int, upper: int, *, min_one: bool
    ) -> tuple[bytes, bool]:
        """The bytes of ``segment``'s batches from the one holding ``target`` on, as many as fit
        ``budget`` (the first one regardless with ``min_one``) and begin before ``upper``; and
        whether the budget or ``upper`` stopped it before the end of the segment."""
        sparse = segment.sparse
        if not sparse:
            return b"", False
        position = self._scan_start(segment, target)
        buffer = b""
        buffer_start = position
        first = -1
        total = 0
        stopped = False
        end = segment.size
        while position < end:
            relative = position - buffer_start
            if relative + _PEEK.size > len(buffer):
                want = max(budget - total, 0) + self.index_interval_bytes + SCAN_SLACK
                buffer = self._pread(segment, position, min(end - position, want))
                buffer_start, relative = position, 0
            base, length, last_delta, _ = _PEEK.unpack_from(buffer, relative)
            size = length + LOG_OVERHEAD
            if first < 0 and base + last_delta < target:
                position += size  # before the batch holding ``target``
                continue
            if base >= upper or (total + size > budget and (total or not min_one)):
                stopped = True
                self._remember_start(base, segment, position)  # where the next read starts
                break
            if first < 0:
                first = position
                # Jump over whole index intervals: the last entry within the budget whose batch
                # begins at or before ``upper`` ends a run of batches that all fit.
                entry = min(
                    bisect.bisect_right(sparse.positions, first + budget) - 1,
                    bisect.bisect_right(sparse.base_offsets, upper) - 1,
                )
                if entry >= 0 and sparse.positions[entry] > first + size:
                    position = sparse.positions[entry]
                    total = position - first
                    continue
            total += size
            position += size
        if not total:
            return b"", stopped
        relative = first - buffer_start
        if relative >= 0 and relative + total <= len(buffer):
            if relative == 0 and total == len(buffer):
                return buffer, stopped
            return buffer[relative : relative + total], stopped
        return self._pread(segment, first, total), stopped

    def _scan_start(self, segment: _Segment, target: int) -> int:
        """A batch boundary of ``segment`` at or before the batch holding ``target``."""
        known = self._batch_starts.get(target)
        if known is not None and known[0] is segment:
            return known[1]
        return segment.sparse.positions[segment.sparse.entry_for_offset(target)]

    def _remember_start(self, base_offset: int, segment: _Segment, position: int) -> None:
        starts = self._batch_starts
        starts[base_offset] = (segment, position)
        if len(starts) > BATCH_STARTS_KEPT:
            del starts[next(iter(starts))]  # the oldest

    def _walk(
        self, segment: _Segment, target: int, upper: int
    ) -> Generator[tuple[BatchHeader, bytes], None, bool]:
        """``segment``'s batches from the one holding ``target``; True when one at or past
        ``upper`` ended the walk. Callers often stop after a few batches (a share fetch
        acquiring 100 records): the first read is small and each next one doubles."""
        if not segment.sparse:
            return False
        position = self._scan_start(segment, target)
        chunk = BATCHES_FIRST_READ
        buffer = b""
        buffer_start = position
        while position < segment.size:
            relative = position - buffer_start
            if relative + _PEEK.size > len(buffer):
                buffer = self._pread(segment, position, min(segment.size - position, chunk))
                buffer_start, relative = position, 0
                chunk = min(chunk * 2, BATCHES_READ_CHUNK)
            base, length, last_delta, _ = _PEEK.unpack_from(buffer, relative)
            size = length + LOG_OVERHEAD
            if base + last_delta >= target:
                if base >= upper:
                    return True
                if relative + size > len(buffer):
                    want = min(segment.size - position, max(chunk, size))
                    buffer = self._pread(segment, position, want)
                    buffer_start, relative = position, 0
                yield read_header(buffer, relative), buffer[relative : relative + size]
            position += size
        return False

    def _headers(
        self, segment: _Segment, position: int
    ) -> Iterator[tuple[int, int, int, int, int]]:
        """(position, size, base offset, last offset, max timestamp) of each batch of
        ``segment`` from ``position`` (a batch boundary) to its end."""
        buffer = b""
        buffer_start = position
        while position < segment.size:
            relative = position - buffer_start
            if relative + _PEEK.size > len(buffer):
                want = min(segment.size - position, BATCHES_FIRST_READ)
                buffer = self._pread(segment, position, want)
                buffer_start, relative = position, 0
            base, length, last_delta, max_timestamp = _PEEK.unpack_from(buffer, relative)
            size = length + LOG_OVERHEAD
            yield position, size, base, base + last_delta, max_timestamp
            position += size

    def _max_timestamp_from(self, segment: _Segment, start: int) -> TimestampMatch | None:
        """The greatest timestamp of ``segment``'s batches holding offsets at or past ``start``,
        with the last offset of the first batch that has it."""
        found: TimestampMatch | None = None
        first = segment.sparse.positions[segment.sparse.entry_for_offset(start)]
        for _, _, _, last, max_timestamp in self._headers(segment, first):
            if last >= start and (found is None or max_timestamp > found.timestamp):
                found = TimestampMatch(last, max_timestamp)
        return found

    def _pread(self, segment: _Segment, position: int, length: int) -> bytes:
        if segment is self._segments[-1]:
            descriptor = self._active_fd
        else:
            found = self._readers.get(segment.base_offset)
            if found is None:
                found = os.open(segment.path, os.O_RDONLY)
                self._readers[segment.base_offset] = found
                if len(self._readers) > OPEN_READERS:
                    os.close(self._readers.popitem(last=False)[1])
            else:
                self._readers.move_to_end(segment.base_offset)
            descriptor = found
        data = os.pread(descriptor, length, position)
        while len(data) < length:  # pread may return short; the bytes are there
            more = os.pread(descriptor, length - len(data), position + len(data))
            if not more:
                raise OSError(f"{segment.path} ends before position {position + length}")
            data += more
        return data

    # --- opening and recovery ---------------------------------------------------------------

    def _open(self) -> None:
        # One listing decides what needs touching: a broker opens every partition at start,
        # most of them holding one segment and nothing else.
        names = set(os.listdir(self.directory))
        if any(name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for name in names):
            self._finish_interrupted_cleaning()
            names = set(os.listdir(self.directory))
        bases = sorted(base for name in names if (base := _segment_base(name)) is not None)
        known = set(bases)
        for name in names:
            stem = name[: -len(INDEX_SUFFIX)]
            if name.endswith(INDEX_SUFFIX) and _segment_base(stem + LOG_SUFFIX) not in known:
                (self.directory / name).unlink()
        for checkpoint_name in (START_CHECKPOINT, CLEANER_CHECKPOINT):
            if checkpoint_name + ".tmp" in names:
                (self.directory / (checkpoint_name + ".tmp")).unlink()
        tracker = ProducerTracker()
        for number, base in enumerate(bases):
            if number and base < self._segments[-1].next_offset:
                self._drop_files_from(
                    bases[number:],
                    f"segment starts at {base}, the log ends at {self._segments[-1].next_offset}",
                )
                break
            segment, whole = self._recover_segment(base, tracker, rolled=number + 1 < len(bases))
            self._segments.append(segment)
            self._bases.append(base)
            self._size += segment.size
            if not whole:
                self._drop_files_from(bases[number + 1 :], "an earlier segment was cut")
                break
        self._recovered = tracker.producers
        self._recovered_transactions = tracker.transactions
        self._first_dirty = (
            self._read_checkpoint(CLEANER_CHECKPOINT) if CLEANER_CHECKPOINT in names else 0
        )
        checkpoint = self._read_start_checkpoint() if START_CHECKPOINT in names else 0
        if not self._segments:
            self.log_start_offset = checkpoint
            self._roll(checkpoint)
            _fsync_directory(self.directory)
            self._directory_dirty = False
            return
        self.log_start_offset = max(checkpoint, self._segments[0].base_offset)
        if self.log_start_offset > self.log_end_offset:
            log.warning(
                "log_shorter_than_start_offset",
                directory=str(self.directory),
                log_start_offset=self.log_start_offset,
                log_end_offset=self.log_end_offset,
            )
            self._restart_at(self.log_start_offset)
            return
        self._activate(self._segments[-1])
        self._forget_below_start()

    def _recover_segment(
        self, base: int, tracker: ProducerTracker, *, rolled: bool
    ) -> tuple[_Segment, bool]:
        """Load one segment file, cutting any invalid tail; True when nothing was cut. Only a
        rolled segment may have gaps between its batches (compaction removed some)."""
        segment = _Segment(self.directory, base)
        stat = segment.path.stat()
        segment.last_modified_ms = segment.created_ms = stat.st_mtime_ns // 1_000_000

        scanned: list[memoryview] = []  # the segment's bytes, while they are being scanned

        def on_batch(header: BatchHeader, position: int) -> None:
            segment.note_batch(header, position, self.index_interval_bytes)
            if header.producer_id >= 0:  # what the two trackers look at
                tracker.observe(header)
                track_producer(self._producers, header)
                if header.attributes & TRANSACTIONAL_FLAG:
                    tracker.observe_transactional(
                        header, scanned[0][position : position + header.size]
                    )

        if stat.st_size:
            with (
                open(segment.path, "rb") as handle,
                mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
                memoryview(mapped) as view,
            ):
                scanned.append(view)
                try:
                    outcome = scan_batches(view, base, on_batch, gaps=rolled)
                finally:
                    scanned.clear()
        else:
            outcome = scan_batches(b"", base, on_batch)
        cut = stat.st_size - outcome.valid_bytes
        if cut:
            log.warning(
                "log_tail_truncated",
                segment=str(segment.path),
                reason=outcome.problem,
                valid_bytes=outcome.valid_bytes,
                bytes_truncated=cut,
                log_end_offset=outcome.next_offset,
            )
            os.truncate(segment.path, outcome.valid_bytes)
        self._rewrite_index(segment, bytes(segment.pending_index))
        segment.pending_index.clear()
        return segment, cut == 0

    def _drop_files_from(self, bases: list[int], reason: str) -> None:
        for base in bases:
            path = self.directory / segment_file_name(base)
            log.warning(
                "log_segment_removed",
                segment=str(path),
                reason=reason,
                bytes_truncated=path.stat().st_size,
            )
            path.unlink()
            path.with_suffix(INDEX_SUFFIX).unlink(missing_ok=True)

    def _rewrite_index(self, segment: _Segment, entries: bytes) -> None:
        path = segment.index_path
        try:
            # the size first: an empty segment's empty index is not read
            if os.stat(path).st_size == len(entries) and (
                not entries or path.read_bytes() == entries
            ):
                return
        except FileNotFoundError:
            pass
        path.write_bytes(entries)

    # --- the log start offset checkpoint ----------------------------------------------------

    def _read_start_checkpoint(self) -> int:
        return self._read_checkpoint(START_CHECKPOINT)

    def _read_checkpoint(self, name: str) -> int:
        path = self.directory / name
        try:
            lines = path.read_text().split()
        except FileNotFoundError:
            return 0
        if len(lines) == 2 and lines[0] == str(CHECKPOINT_VERSION) and lines[1].isdigit():
            return int(lines[1])
        log.warning("log_start_checkpoint_unreadable", path=str(path))
        return 0

    def _write_start_checkpoint(self) -> None:
        self._write_checkpoint(START_CHECKPOINT, self.log_start_offset)

    def _write_checkpoint(self, name: str, offset: int) -> None:
        path = self.directory / name
        temporary = path.with_name(name + ".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_fully(descriptor, f"{CHECKPOINT_VERSION}\n{offset}\n".encode(), 0)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, path)
        _fsync_directory(self.directory)


def _no_crash(point: str) -> None:
    del point


def _write_fully(descriptor: int, data: bytes, position: int) -> None:
    view = memoryview(data)
    written = 0
    try:
        while written < len(view):
            written += os.pwrite(descriptor, view[written:], position + written)
    except OSError:
        if written:
            os.ftruncate(descriptor, position)  # leave no torn batch behind
        raise


def _append_index_entries(path: Path, entries: bytearray) -> None:
    # Opened per write (at most once a flush interval) so that an idle partition holds a single
    # descriptor: brokers with thousands of partitions stay under ulimit -n.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    data = bytes(entries)
    try:
        while data:
            data = data[os.write(descriptor, data) :]
    finally:
        os.close(descriptor)


def _index_entries_before(path: Path, cut: int) -> bytes:
    data = path.read_bytes()
    kept = bytearray()
    for start in range(0, len(data) - len(data) % INDEX_ENTRY.size, INDEX_ENTRY.size):
        if INDEX_ENTRY.unpack_from(data, start)[1] < cut:
            kept.extend(data[start : start + INDEX_ENTRY.size])
    return bytes(kept)


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
