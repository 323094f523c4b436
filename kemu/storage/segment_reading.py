"""Reading a segment log (``SegmentLog``'s read side): from a sparse index entry, along the
batch headers, with one ``pread`` per stretch and a few descriptors kept open per log."""

from __future__ import annotations

import bisect
import os
from collections import OrderedDict
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

from kemu.protocol.records import LOG_OVERHEAD, BatchHeader, read_header
from kemu.storage.log import TimestampMatch
from kemu.storage.segment_files import (
    BATCH_STARTS_KEPT,
    BATCHES_FIRST_READ,
    BATCHES_READ_CHUNK,
    OPEN_READERS,
    PEEK,
    SCAN_SLACK,
    Segment,
)


class SegmentReading:
    """The read half of ``SegmentLog``: the PartitionLog reads, and walking a segment's batches."""

    _active_fd: int
    _bases: list[int]
    _batch_starts: dict[int, tuple[Segment, int]]
    _readers: OrderedDict[int, int]
    _segments: list[Segment]
    index_interval_bytes: int
    log_start_offset: int

    if TYPE_CHECKING:

        @property
        def log_end_offset(self) -> int: ...

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

    def _segment_number(self, offset: int) -> int:
        """The segment a search for ``offset`` starts in (a later one may hold it: gaps)."""
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def _take(
        self, segment: Segment, target: int, budget: int, upper: int, *, min_one: bool
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
            if relative + PEEK.size > len(buffer):
                want = max(budget - total, 0) + self.index_interval_bytes + SCAN_SLACK
                buffer = self._pread(segment, position, min(end - position, want))
                buffer_start, relative = position, 0
            base, length, last_delta, _ = PEEK.unpack_from(buffer, relative)
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

    def _scan_start(self, segment: Segment, target: int) -> int:
        """A batch boundary of ``segment`` at or before the batch holding ``target``."""
        known = self._batch_starts.get(target)
        if known is not None and known[0] is segment:
            return known[1]
        return segment.sparse.positions[segment.sparse.entry_for_offset(target)]

    def _remember_start(self, base_offset: int, segment: Segment, position: int) -> None:
        starts = self._batch_starts
        starts[base_offset] = (segment, position)
        if len(starts) > BATCH_STARTS_KEPT:
            del starts[next(iter(starts))]  # the oldest

    def _walk(
        self, segment: Segment, target: int, upper: int
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
            if relative + PEEK.size > len(buffer):
                buffer = self._pread(segment, position, min(segment.size - position, chunk))
                buffer_start, relative = position, 0
                chunk = min(chunk * 2, BATCHES_READ_CHUNK)
            base, length, last_delta, _ = PEEK.unpack_from(buffer, relative)
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

    def _headers(self, segment: Segment, position: int) -> Iterator[tuple[int, int, int, int, int]]:
        """(position, size, base offset, last offset, max timestamp) of each batch of
        ``segment`` from ``position`` (a batch boundary) to its end."""
        buffer = b""
        buffer_start = position
        while position < segment.size:
            relative = position - buffer_start
            if relative + PEEK.size > len(buffer):
                want = min(segment.size - position, BATCHES_FIRST_READ)
                buffer = self._pread(segment, position, want)
                buffer_start, relative = position, 0
            base, length, last_delta, max_timestamp = PEEK.unpack_from(buffer, relative)
            size = length + LOG_OVERHEAD
            yield position, size, base, base + last_delta, max_timestamp
            position += size

    def _max_timestamp_from(self, segment: Segment, start: int) -> TimestampMatch | None:
        """The greatest timestamp of ``segment``'s batches holding offsets at or past ``start``,
        with the last offset of the first batch that has it."""
        found: TimestampMatch | None = None
        first = segment.sparse.positions[segment.sparse.entry_for_offset(start)]
        for _, _, _, last, max_timestamp in self._headers(segment, first):
            if last >= start and (found is None or max_timestamp > found.timestamp):
                found = TimestampMatch(last, max_timestamp)
        return found

    def _pread(self, segment: Segment, position: int, length: int) -> bytes:
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
