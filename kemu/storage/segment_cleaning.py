"""Compacting a segment log (``SegmentLog``'s cleaner side): decisions come from
``kemu.storage.compaction``; this writes each run of cleaned segments and swaps it in so that a
SIGKILL at any point leaves a readable log (see ``kemu.storage.segments``)."""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from kemu.protocol.records import BatchHeader, read_header
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
)
from kemu.storage.durable import fsync_directory
from kemu.storage.segment_files import (
    CLEANED_SUFFIX,
    CLEANER_CHECKPOINT,
    CLEANER_STEP_BYTES,
    CLEANER_WRITE_CHUNK,
    INDEX_SUFFIX,
    SWAP_SUFFIX,
    Segment,
    datasync,
    segment_base,
    segment_file_name,
    swap_range,
    write_fully,
)

log = structlog.get_logger("kemu.storage")


class SegmentCleaning:
    """The cleaner half of ``SegmentLog``: ``cleaning`` and finishing a cleaning cut short."""

    _bases: list[int]
    _batch_starts: dict[int, tuple[Segment, int]]
    _cleaning_aborted: bool
    _crash_point: Callable[[str], None]
    _first_dirty: int
    _producers: dict[int, ProducerLast]
    _readers: OrderedDict[int, int]
    _segments: list[Segment]
    _to_summarize: list[Segment]
    _size: int
    directory: Path
    index_interval_bytes: int
    log_start_offset: int

    if TYPE_CHECKING:

        @property
        def log_end_offset(self) -> int: ...

        def _rewrite_index(self, segment: Segment, entries: bytes) -> None: ...

        def _walk(
            self, segment: Segment, target: int, upper: int
        ) -> Generator[tuple[BatchHeader, bytes], None, bool]: ...

        def _write_checkpoint(self, name: str, offset: int) -> None: ...

        def _forget_summary(self, base: int) -> None: ...

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

    def _segment_batches(self, segment: Segment) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch of a rolled segment at or past the log start."""
        yield from self._walk(segment, self.log_start_offset, 2**63 - 1)

    def _write_cleaned(
        self, group: list[Segment], batch_filter: BatchFilter
    ) -> Generator[None, None, tuple[Segment, Path] | None]:
        """Write what ``group`` keeps to ``<base>.log.cleaned`` and sync it: the replacement
        segment and the file, or None when the cleaning was aborted meanwhile (file removed)."""
        base = group[0].base_offset
        cleaned_path = self.directory / (f"{base:020d}" + CLEANED_SUFFIX)
        replacement = Segment(self.directory, base)
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
                            write_fully(descriptor, bytes(pending), written)
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
                write_fully(descriptor, bytes(pending), written)
            datasync(descriptor)
        except BaseException:
            if descriptor >= 0:
                os.close(descriptor)
            cleaned_path.unlink(missing_ok=True)
            raise
        os.close(descriptor)
        self._crash_point("clean.cleaned_written")
        return replacement, cleaned_path

    def _swap_in(
        self, group: list[Segment], end: int, replacement: Segment, cleaned_path: Path
    ) -> None:
        """Replace ``group`` by its cleaned segment, on disk (crash-safe) and in memory."""
        base = replacement.base_offset
        modified = group[-1].last_modified_ms
        if modified >= 0:  # the cleaned segment keeps the age of what it replaces, as in Kafka
            os.utime(cleaned_path, ns=(modified * 1_000_000, modified * 1_000_000))
        swap_path = self.directory / f"{base:020d}.{end:020d}{SWAP_SUFFIX}"
        os.replace(cleaned_path, swap_path)
        fsync_directory(self.directory)  # the commit point: from here on the swap wins
        self._crash_point("clean.swap_committed")
        for segment in group:
            reader = self._readers.pop(segment.base_offset, None)
            if reader is not None:
                os.close(reader)
        for segment in group:
            self._forget_summary(segment.base_offset)
        for segment in group[1:]:
            segment.path.unlink(missing_ok=True)
            segment.index_path.unlink(missing_ok=True)
        self._crash_point("clean.old_segments_deleted")
        os.replace(swap_path, replacement.path)
        self._rewrite_index(replacement, bytes(replacement.pending_index))
        replacement.pending_index.clear()
        fsync_directory(self.directory)
        replacement.last_modified_ms = replacement.created_ms = modified
        first = self._segments.index(group[0])
        self._batch_starts.clear()
        self._segments[first : first + len(group)] = [replacement]
        self._bases[first : first + len(group)] = [base]
        self._size += replacement.size - sum(segment.size for segment in group)
        self._to_summarize.append(replacement)

    def _finish_interrupted_cleaning(self) -> None:
        """Undo a cleaning cut short before its commit point, complete one cut short after it."""
        touched = False
        for path in self.directory.glob("*" + CLEANED_SUFFIX):
            path.unlink()
            touched = True
        for path in sorted(self.directory.glob("*" + SWAP_SUFFIX)):
            span = swap_range(path.name)
            touched = True
            if span is None:
                path.unlink()
                continue
            base, end = span
            for other in list(self.directory.iterdir()):
                other_base = segment_base(other.name)
                if other_base is not None and base <= other_base < end:
                    other.unlink()
                    other.with_suffix(INDEX_SUFFIX).unlink(missing_ok=True)
                    self._forget_summary(other_base)
            os.replace(path, self.directory / segment_file_name(base))
            log.warning("log_cleaning_completed_at_open", directory=str(self.directory), base=base)
        if touched:
            fsync_directory(self.directory)
