"""Durable partition logs: Kafka-style segment files with a sparse offset index.

A partition directory (``<data-dir>/<topic>-<partition>``) is laid out as Kafka lays it out:

- ``00000000000000000000.log``: record batches in the v2 wire format, byte for byte as appended,
  one file per segment named after its base offset (20 digits). The active segment rolls when
  the next batch would take it past ``segment.bytes``, or when that batch's timestamp is more
  than ``segment.ms`` after the segment's first batch (Kafka's rule).
- ``00000000000000000000.index``: the sparse offset index, 8-byte entries (last offset of a
  batch relative to the segment's base offset, int32; file position of the batch, int32), one
  once more than ``index.interval.bytes`` of batches went by since the previous entry. kemu
  writes it for Kafka's tools (``kafka-dump-log``) and rebuilds it when it scans the segment
  (or, for one read from its summary, when its size is not the summary's); it never reads it.
  Entries are buffered in memory and written at flush, roll and close (one write, not one
  open-write-close per entry), so after a SIGKILL the file may lack the last second's entries
  until the next open rebuilds it.
- ``00000000000000000000.scan``: once a rolled segment is synced, what a recovery scan finds
  in it (``kemu.storage.segment_summary``), so that a later open need not scan it.
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
every append with ``flush_every_append``) fdatasyncs it against power loss; after a flush every
batch below ``recovery_point`` is synced, and the rolled segments are summarized. On open, the
rolled segments (and the active one after a clean shutdown) are read from their summaries, when
those match: a summary is written only once its segment is synced. Every other segment is
scanned and validated (``kemu.storage.recovery``); a torn or corrupt tail is cut at the last
whole valid batch, with a warning saying how many bytes went, and later segments are removed.

Reads use an in-memory sparse index (``SparseIndex``: the first batch of each segment, then a
batch each ``index.interval.bytes``, as Kafka's offset and time indexes): a bisection gives the
entry at or before the offset wanted, one ``pread`` from there reads the batches, and their
headers are walked to where the read starts and stops. Memory grows with the bytes on disk over
the interval (24 bytes per 4 KiB by default), not with the number of batches.

By concern: ``segment_files`` (names, the sparse index, one segment's totals, write and sync
helpers), ``segment_reading`` (reads and header walks), ``segment_cleaning`` (compaction's writes
and swaps); this module appends, rolls, truncates, applies retention and opens (recovers) a log.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable
from operator import itemgetter
from pathlib import Path

import structlog

from kemu.protocol.records import BatchHeader
from kemu.storage.compaction import (
    ProducerLast,
    track_producer,
    track_producers,
)
from kemu.storage.durable import fsync_directory
from kemu.storage.log import PartitionLog, RecoveredProducer
from kemu.storage.recovery import NotedBatch, ProducerTracker
from kemu.storage.segment_cleaning import SegmentCleaning
from kemu.storage.segment_files import (
    CHECKPOINT_VERSION,
    CLEANED_SUFFIX,
    CLEANER_CHECKPOINT,
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_SEGMENT_BYTES,
    DEFAULT_SEGMENT_MS,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    START_CHECKPOINT,
    SWAP_SUFFIX,
    Segment,
    datasync,
    index_entries_before,
    no_crash,
    segment_base,
    segment_file_name,
    write_fully,
)
from kemu.storage.segment_reading import SegmentReading
from kemu.storage.segment_summary import (
    ScannedSegment,
    load_summary,
    scan_segment,
    summary_base,
    summary_name,
    write_summary,
)

log = structlog.get_logger("kemu.storage")
_base_offset = itemgetter(0)  # of a NotedBatch
_last_offset = itemgetter(1)


class SegmentLog(SegmentReading, SegmentCleaning, PartitionLog):
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
        recovery_point: int | None = None,
        clean_shutdown: bool = False,
    ) -> None:
        self.directory = Path(directory)
        # crash tests: called at each step of a cleaning (kemu.cluster.crash_points)
        self._crash_point = crash_point or no_crash
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.index_interval_bytes = index_interval_bytes
        self.flush_every_append = flush_every_append
        self.log_start_offset = 0
        self._segments: list[Segment] = []
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
        self._batch_starts: dict[int, tuple[Segment, int]] = {}
        # transactional batches seen when the log was opened
        self._recovered_transactions: list[NotedBatch] = []
        self._producers: dict[int, ProducerLast] = {}  # what compaction must keep of each
        self._first_dirty = 0  # the cleaner checkpoint
        self._cleaning_aborted = False
        # the offset below which every batch is synced (Kafka's recovery point): the data dir's
        # recovery-point checkpoint records it (kemu.storage.recovery_points)
        self.recovery_point = 0
        self._to_summarize: list[Segment] = []  # rolled segments whose summary is not written
        self.directory.mkdir(parents=True, exist_ok=True)
        self._open(recovery_point, clean_shutdown)

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
        write_fully(self._active_fd, batch, position)
        segment.note_batch(header, position, self.index_interval_bytes)
        self._remember_start(header.base_offset, segment, position)
        segment.last_modified_ms = now_ms
        self._size += len(batch)
        if header.producer_id >= 0:
            track_producer(self._producers, header)
        if self.flush_every_append:
            segment.write_pending_index()
            datasync(self._active_fd)
        else:
            self._dirty = True

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
            self._forget_summary(self._segments[-1].base_offset)  # it is the active one again
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
        self._rewrite_index(segment, index_entries_before(segment.index_path, cut))
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
        # in offset order (the batches', segment after segment): two bisections find the span
        first = bisect_left(found, self.log_start_offset, key=_last_offset)
        last = bisect_left(found, self.log_end_offset, key=_base_offset)
        return found[first:last]

    # --- flushing and closing ---------------------------------------------------------------

    def flush(self) -> None:
        if self._segments:
            self._segments[-1].write_pending_index()  # rolled segments wrote theirs at the roll
        if self._dirty and self._active_fd >= 0:
            datasync(self._active_fd)
            self._dirty = False
        while self._unsynced:
            descriptor = self._unsynced.pop()
            datasync(descriptor)
            os.close(descriptor)
        if self._to_summarize:
            self._write_summaries()
        if self._directory_dirty:
            fsync_directory(self.directory)
            self._directory_dirty = False
        self.recovery_point = self.log_end_offset

    def close(self) -> None:
        self._abort_cleaning()
        if self._active_fd < 0:
            return
        self.flush()
        self._summarize_active()
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

    def _should_roll(self, segment: Segment, header: BatchHeader, now_ms: int) -> bool:
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

    def _roll(self, base_offset: int) -> Segment:
        if self._segments:
            self._segments[-1].write_pending_index()
            self._to_summarize.append(self._segments[-1])  # written once it is synced
        segment = Segment(self.directory, base_offset)
        segment.path.write_bytes(b"")
        segment.index_path.write_bytes(b"")
        self._segments.append(segment)
        self._bases.append(base_offset)
        self._directory_dirty = True
        self._activate(segment)
        return segment

    def _activate(self, segment: Segment) -> None:
        """Point the write descriptors at ``segment``, keeping the old one for a last sync."""
        if self._active_fd >= 0:
            if self._dirty:
                self._unsynced.append(self._active_fd)
                self._dirty = False
            else:
                os.close(self._active_fd)
        self._active_fd = os.open(segment.path, os.O_RDWR | os.O_CREAT, 0o644)

    def _delete_segment(self, segment: Segment) -> None:
        self._batch_starts.clear()
        number = self._segments.index(segment)
        del self._segments[number]
        del self._bases[number]
        reader = self._readers.pop(segment.base_offset, None)
        if reader is not None:
            os.close(reader)
        segment.path.unlink(missing_ok=True)
        segment.index_path.unlink(missing_ok=True)
        self._forget_summary(segment.base_offset)
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

    # --- opening and recovery ---------------------------------------------------------------

    def _open(self, recovery_point: int | None, clean_shutdown: bool) -> None:
        # One listing decides what needs touching: a broker opens every partition at start,
        # most of them holding one segment and nothing else.
        names = set(os.listdir(self.directory))
        if any(name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for name in names):
            self._finish_interrupted_cleaning()
            names = set(os.listdir(self.directory))
        bases = sorted(base for name in names if (base := segment_base(name)) is not None)
        known = set(bases)
        summarized = set()
        for name in names:
            stem = name[: -len(INDEX_SUFFIX)]
            if name.endswith(INDEX_SUFFIX) and segment_base(stem + LOG_SUFFIX) not in known:
                (self.directory / name).unlink()
            elif (base := summary_base(name)) is not None:
                if base in known:
                    summarized.add(base)
                else:
                    (self.directory / name).unlink()
        for checkpoint_name in (START_CHECKPOINT, CLEANER_CHECKPOINT):
            if checkpoint_name + ".tmp" in names:
                (self.directory / (checkpoint_name + ".tmp")).unlink()
        tracker = ProducerTracker()
        # A rolled segment is read from its summary wherever the recovery point is: a summary
        # is only written once its segment is synced, so it never describes bytes a crash can
        # take. The active one is read from its summary only after a clean shutdown.
        for number, base in enumerate(bases):
            if number and base < self._segments[-1].next_offset:
                self._drop_files_from(
                    bases[number:],
                    f"segment starts at {base}, the log ends at {self._segments[-1].next_offset}",
                )
                break
            rolled = number + 1 < len(bases)
            scanned = None
            if base in summarized and (rolled or clean_shutdown):
                scanned = load_summary(self.directory, base)
            whole = True
            if scanned is not None:
                self._check_index(scanned.segment)
            else:
                scanned, whole = self._recover_segment(base, rolled=rolled)
                if rolled and whole:
                    self._to_summarize.append(scanned.segment)
            headers = [header for header, _ in scanned.producer_batches]
            tracker.observe_all(headers)
            track_producers(self._producers, headers)
            tracker.transactions.extend(scanned.transactions)
            segment = scanned.segment
            self._segments.append(segment)
            self._bases.append(base)
            self._size += segment.size
            if not whole:
                self._drop_files_from(bases[number + 1 :], "an earlier segment was cut")
                break
        if self._segments and self._segments[-1].base_offset in summarized:
            # the active segment's summary was for a clean start only: appends will change it
            self._forget_summary(self._segments[-1].base_offset)
        self._recovered = tracker.producers
        self._recovered_transactions = tracker.transactions
        self._first_dirty = (
            self._read_checkpoint(CLEANER_CHECKPOINT) if CLEANER_CHECKPOINT in names else 0
        )
        checkpoint = self._read_start_checkpoint() if START_CHECKPOINT in names else 0
        if not self._segments:
            self.log_start_offset = checkpoint
            self._roll(checkpoint)
            fsync_directory(self.directory)
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
        if clean_shutdown:
            self.recovery_point = self.log_end_offset
        else:
            # what a crash left may be in the page cache only: the first flush syncs it
            self.recovery_point = min(recovery_point or 0, self.log_end_offset)
            self._dirty = True
        self._forget_below_start()

    def _recover_segment(self, base: int, *, rolled: bool) -> tuple[ScannedSegment, bool]:
        """Scan one segment file, cutting any invalid tail; True when nothing was cut. Only a
        rolled segment may have gaps between its batches (compaction removed some)."""
        scanned = scan_segment(self.directory, base, self.index_interval_bytes, gaps=rolled)
        segment, outcome = scanned.segment, scanned.outcome
        assert outcome is not None
        cut = scanned.file_size - outcome.valid_bytes
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
        return scanned, cut == 0

    def _check_index(self, segment: Segment) -> None:
        """The ``.index`` of a segment read from its summary: rewritten when its size is not the
        one the summary gives (lost in a power loss, or never written)."""
        entries = bytes(segment.pending_index)
        segment.pending_index.clear()
        try:
            if os.stat(segment.index_path).st_size == len(entries):
                return
        except FileNotFoundError:
            pass
        segment.index_path.write_bytes(entries)

    # --- segment summaries (kemu.storage.segment_summary) -----------------------------------

    def _write_summaries(self) -> None:
        """Summarize the rolled segments waiting for it (synced first)."""
        pending, self._to_summarize = self._to_summarize, []
        rolled = {id(segment) for segment in self._segments[:-1]}
        for segment in pending:
            if id(segment) in rolled:  # not deleted, cleaned away or the active one again
                self._summarize(segment, gaps=True)

    def _summarize_active(self) -> None:
        """At close: the active segment's summary, for a start after a clean shutdown."""
        if self._segments and self._segments[-1].size:
            self._summarize(self._segments[-1], gaps=False)
            if self._directory_dirty:
                fsync_directory(self.directory)
                self._directory_dirty = False

    def _summarize(self, segment: Segment, *, gaps: bool) -> None:
        descriptor = os.open(segment.path, os.O_RDONLY)
        try:
            datasync(descriptor)
        finally:
            os.close(descriptor)
        found = scan_segment(
            self.directory, segment.base_offset, self.index_interval_bytes, gaps=gaps
        )
        if found.file_size != segment.size or found.segment.next_offset != segment.next_offset:
            log.warning("segment_summary_skipped", segment=str(segment.path))
            return
        write_summary(found)
        self._directory_dirty = True

    def _forget_summary(self, base: int) -> None:
        (self.directory / summary_name(base)).unlink(missing_ok=True)

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
            self._forget_summary(base)

    def _rewrite_index(self, segment: Segment, entries: bytes) -> None:
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
            write_fully(descriptor, f"{CHECKPOINT_VERSION}\n{offset}\n".encode(), 0)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, path)
        fsync_directory(self.directory)
