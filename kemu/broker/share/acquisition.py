"""Acquisition: handing records out of the log to a share-group member, sans IO.

``Acquisition.acquire`` brings new log batches into the window and moves AVAILABLE records to
ACQUIRED under a lock with a deadline, within ``max_records``, ``max_bytes`` and the in-flight
limit, and cuts what it took into ranges of about ``batch_size`` records.

Deliberate choices, all following Kafka's SharePartition unless noted:
* Acquisitions are persisted too (their delivery counts survive a restart; Kafka writes them
  lazily, with the next acknowledgement).
* New records are acquired whole log batches at a time; ``max_records`` and the in-flight limit
  (``group.share.partition.max.record.locks``, the window size SPEO - SPSO) are soft limits
  aligned to batch ends, except that RECORD_LIMIT acquires exactly ``max_records`` and leaves
  the rest of the batch AVAILABLE in the window.
* read_committed: control batches and aborted transactional batches are archived, never handed
  out; read_uncommitted hands control batches out and the client acknowledges them as gaps.
* Throttled delivery (Kafka's SharePartition): once an AVAILABLE record of a log batch has been
  delivered ``max(2, ceil(limit / 2))`` times, that batch goes out on its own (a fetch that
  already acquired something stops before it, and stops after it), and from its first such
  record only the batch's record count halved once per delivery past the threshold; a record on
  its last attempt goes alone. So a burst of short-lived consumers releasing what they were
  given exhausts one record at a time, not whole batches.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from kemu.broker.share.spans import Span
from kemu.broker.share.states import RecordState
from kemu.broker.share.window import Effects, RecordWindow
from kemu.protocol.records import BatchHeader

MAX_BYTES = 2**31 - 1


class AcquireMode(IntEnum):
    """ShareFetch ``ShareAcquireMode`` (v2+)."""

    BATCH_OPTIMIZED = 0
    RECORD_LIMIT = 1


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcquireResult:
    acquired: tuple[AcquiredRange, ...]
    records: tuple[bytes, ...]  # the whole log batches that hold the acquired records
    count: int
    effects: Effects


class Acquisition:
    """Acquiring records for members, on top of the window's bookkeeping."""

    def __init__(self, window: RecordWindow) -> None:
        self.window = window

    def acquire(
        self,
        member: str,
        batches: Iterable[tuple[BatchHeader, bytes]],
        *,
        max_records: int,
        batch_size: int,
        mode: AcquireMode,
        now_ms: int,
        max_bytes: int = MAX_BYTES,
        min_one: bool = True,
        read_committed: bool = False,
        aborted: Sequence[tuple[int, int, int]] = (),
    ) -> AcquireResult:
        """Acquire for ``member`` from ``batches`` read from the log at ``next_fetch_offset()``.

        ``aborted`` are (producer id, first, last) of aborted transactions (read_committed
        only); a transactional batch is aborted when its producer's range covers it.
        Returns the acquired ranges, the whole batches to send and the effects.
        """
        self.window._begin()
        pieces: list[list[int]] = []  # [first, last, delivery count], contiguous runs
        records: list[bytes] = []
        bounds: list[int] = []  # base offsets of the batches sent
        remaining = max_records
        sent_bytes = 0
        deadline = now_ms + self.window.config.record_lock_duration_ms
        fetch_offset = self.window.next_fetch_offset()
        expected = fetch_offset
        limit_exact = mode is AcquireMode.RECORD_LIMIT
        for header, data in batches if max_records > 0 else ():
            if remaining <= 0:
                break
            base, last = header.base_offset, header.last_offset
            if last < fetch_offset or last < self.window.start:
                continue
            if base > expected and expected < self.window.end:
                self.window._archive_missing(expected, min(base, self.window.end) - 1)
            expected = last + 1
            top = last
            if last >= self.window.end:
                if self.window.end - self.window.start < self.window.config.max_in_flight_records:
                    self._extend(base, last)
                elif base >= self.window.end:
                    break  # at the in-flight limit: nothing new enters the window
                else:
                    top = self.window.end - 1
            low = max(base, fetch_offset, self.window.start)
            if low > top:
                continue
            if read_committed and (
                header.is_control or (header.is_transactional and _aborted(header, aborted))
            ):
                self._archive_undeliverable(low, top)
                continue
            if (
                (records or not min_one)
                and sent_bytes + len(data) > max_bytes
                and self._any_available(low, top)
            ):
                break
            limit = remaining if limit_exact else None
            throttled = self._most_delivered(low, top) >= self._throttle_from
            if throttled:
                if pieces:
                    break  # often-delivered records go out in a fetch of their own
                allowed = self._throttled_count(low, top, last - base + 1)
                limit = allowed if limit is None else min(limit, allowed)
            taken = self._acquire_range(member, low, top, limit, deadline, pieces)
            if taken:
                records.append(data)
                bounds.append(base)
                sent_bytes += len(data)
                remaining -= taken
                if throttled:
                    break
        for first, last, _ in pieces:
            heapq.heappush(self.window._locks, (deadline, first, last))
        acquired = _split_by_batch_size(pieces, bounds, batch_size, limit_exact)
        count = sum(last - first + 1 for first, last, _ in pieces)
        return AcquireResult(tuple(acquired), tuple(records), count, self.window._finish())

    def _extend(self, base: int, last: int) -> None:
        """Bring a new log batch into the window as AVAILABLE records."""
        if base > self.window.end:  # offsets absent from the log: nothing to deliver
            gap = Span(self.window.end, base - 1, RecordState.ARCHIVED)
            self.window._spans.append(gap)
            self.window._terminal += gap.size
            self.window._mark(gap.first, gap.last)
        first = max(base, self.window.end)
        self.window._spans.append(Span(first, last, RecordState.AVAILABLE))
        self.window._available_hint = min(self.window._available_hint, first)
        self.window.end = last + 1

    def _acquire_range(
        self,
        member: str,
        low: int,
        high: int,
        limit: int | None,
        deadline: int,
        pieces: list[list[int]],
    ) -> int:
        if not self._any_available(low, high):
            return 0
        spans = self.window._spans
        start, stop = spans.isolate(low, high)
        taken = 0
        index = start
        while index < stop:
            span = spans.spans[index]
            if span.state is RecordState.AVAILABLE:
                if limit is not None:
                    if taken >= limit:
                        break
                    if span.size > limit - taken:
                        spans.split_at(span.first + limit - taken)
                        stop += 1
                self.window._move(span, RecordState.ACQUIRED, "acquire")
                span.delivery_count += 1
                span.member = member
                span.deadline = deadline
                taken += span.size
                if (
                    pieces
                    and pieces[-1][1] + 1 == span.first
                    and pieces[-1][2] == span.delivery_count
                ):
                    pieces[-1][1] = span.last
                else:
                    pieces.append([span.first, span.last, span.delivery_count])
                self.window._mark(span.first, span.last)
            index += 1
        spans.coalesce(start, stop)
        return taken

    @property
    def _throttle_from(self) -> int:
        """The delivery count from which Kafka throttles delivery: half the limit, at least 2."""
        return max(2, -(-self.window.config.delivery_count_limit // 2))

    def _most_delivered(self, low: int, high: int) -> int:
        """The highest delivery count of the AVAILABLE records in [low, high] (0: none)."""
        spans = self.window._spans.spans
        index = self.window._spans.first_index_at_or_after(low)
        most = 0
        while index < len(spans) and spans[index].first <= high:
            span = spans[index]
            if span.state is RecordState.AVAILABLE:
                most = max(most, span.delivery_count)
            index += 1
        return most

    def _throttled_count(self, low: int, high: int, batch_records: int) -> int:
        """How many of the AVAILABLE records in [low, high] (in offset order) one fetch may take
        from a throttled batch of ``batch_records`` records: all up to the first record at the
        throttle threshold, then up to the batch's count halved once per delivery past the
        threshold (at least that record); a record on its last attempt goes alone."""
        spans = self.window._spans.spans
        index = self.window._spans.first_index_at_or_after(low)
        last_attempt = self.window.config.delivery_count_limit - 1
        isolate_last = self.window.config.delivery_count_limit > 2
        taken = 0
        cap: int | None = None
        while index < len(spans) and spans[index].first <= high:
            span = spans[index]
            index += 1
            if span.state is not RecordState.AVAILABLE:
                continue
            size = min(span.last, high) - max(span.first, low) + 1
            count = span.delivery_count
            if isolate_last and count == last_attempt:
                return taken or 1
            if cap is None and count >= self._throttle_from:
                cap = max(1, batch_records >> (count - self._throttle_from + 1))
                size = max(1, min(size, cap - taken))
            elif cap is not None:
                size = min(size, cap - taken)
            taken += size
            if cap is not None and taken >= cap:
                break
        return taken

    def _any_available(self, low: int, high: int) -> bool:
        spans = self.window._spans.spans
        index = self.window._spans.first_index_at_or_after(low)
        while index < len(spans) and spans[index].first <= high:
            if spans[index].state is RecordState.AVAILABLE:
                return True
            index += 1
        return False

    def _archive_undeliverable(self, low: int, high: int) -> None:
        """read_committed: control and aborted records are acquired and archived at once."""
        self.window._update(low, high, RecordState.AVAILABLE, self._acquire_and_archive)

    def _acquire_and_archive(self, span: Span) -> None:
        self.window._move(span, RecordState.ACQUIRED, "acquire")
        span.delivery_count += 1
        self.window._move(span, RecordState.ARCHIVED, "read_committed skip")


def _aborted(header: BatchHeader, ranges: Sequence[tuple[int, int, int]]) -> bool:
    return any(
        producer_id == header.producer_id and first <= header.base_offset <= last
        for producer_id, first, last in ranges
    )


def _split_by_batch_size(
    pieces: list[list[int]], bounds: list[int], batch_size: int, record_limit: bool
) -> list[AcquiredRange]:
    """Acquired runs cut at log batch boundaries into ranges of about ``batch_size`` records
    (BATCH_OPTIMIZED only), so that clients acknowledge in batches of that size."""
    out: list[AcquiredRange] = []
    for first, last, count in pieces:
        current = first
        if not record_limit and batch_size > 0:
            index = bisect.bisect_right(bounds, first)
            while index < len(bounds) and bounds[index] <= last:
                boundary = bounds[index]
                if boundary - current >= batch_size:
                    out.append(AcquiredRange(current, boundary - 1, count))
                    current = boundary
                index += 1
        out.append(AcquiredRange(current, last, count))
    return out
