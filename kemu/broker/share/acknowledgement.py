"""Acknowledgement, lock expiry and member departure: how acquired records are settled, sans IO.

A member acknowledges what it holds (ACCEPT, RELEASE, REJECT, GAP, RENEW; all or nothing; what
it names below the start offset is complete and skipped, as Kafka 4.4.0 does), its locks expire,
or it leaves: each returns ACQUIRED records to AVAILABLE (or ARCHIVED/ARCHIVING
past the delivery limit) or settles them for good.

A member leaving (or closing its share session) releases its records as a RELEASE does: the
delivery count is kept, so the next delivery counts one more, and a record at
``share.delivery.count.limit`` is archived (ARCHIVING with a dead-letter queue). Kafka 4.4.0's
SharePartition.releaseAcquiredRecords does the same (DeliveryCountOps.NO_OP): the Java client
sends no RELEASE at close for records it handed out unacknowledged, it only closes the session,
so a record the application saw and a record fetched into the client's buffer both come back
with delivery count 2.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from kemu.broker.share.spans import Span
from kemu.broker.share.states import AckType, RecordState
from kemu.broker.share.window import Effects, RecordWindow, disown
from kemu.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class AckBatch:
    """One acknowledgement batch: a single type for the range, or one type per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AckResult:
    error: ErrorCode
    message: str | None
    effects: Effects
    deferred: tuple[AckBatch, ...] = ()  # RELEASE runs held back (``defer_release``)


_ALL_ACKS = frozenset(int(t) for t in AckType)


class Acknowledgement:
    """Settling acquired records: acknowledgements, lock expiry, member release."""

    def __init__(self, window: RecordWindow) -> None:
        self.window = window

    def acknowledge(
        self,
        member: str,
        batches: Sequence[AckBatch],
        now_ms: int,
        *,
        defer_release: bool = False,
    ) -> AckResult:
        """Apply ``member``'s acknowledgements, all or nothing: any invalid batch fails the lot.

        ``defer_release``: the RELEASE runs are checked but not applied; they come back in
        ``deferred`` for ``release_deferred`` once the caller's fetch has acquired.
        """
        self.window._begin()
        problem = self.check_acks(member, batches, _ALL_ACKS)
        if problem is not None:
            return AckResult(problem[0], problem[1], self.window._finish())
        deferred: list[AckBatch] = []
        for batch in batches:
            for low, high, ack in ack_runs(batch):
                low = max(low, self.window.start)
                if low > high:
                    continue
                if defer_release and ack == AckType.RELEASE:
                    deferred.append(AckBatch(low, high, (ack,)))
                else:
                    self._apply_ack(low, high, AckType(ack), now_ms)
        return AckResult(ErrorCode.none, None, self.window._finish(), tuple(deferred))

    def release_deferred(self, member: str, batches: Sequence[AckBatch]) -> Effects:
        """Apply the RELEASE runs ``acknowledge(defer_release=True)`` held back, to the records
        ``member`` still holds (a lock that expired in between released them already)."""
        self.window._begin()
        spans = self.window._spans
        for batch in batches:
            low, high = (
                max(batch.first_offset, self.window.start),
                min(batch.last_offset, self.window.end - 1),
            )
            if low > high:
                continue
            start, stop = spans.isolate(low, high)
            for span in spans.spans[start:stop]:
                if span.state is RecordState.ACQUIRED and span.member == member:
                    self.window._move(span, self._release_target(span), AckType.RELEASE.name)
                    disown(span)
                    self.window._mark(span.first, span.last)
            spans.coalesce(start, stop)
        return self.window._finish()

    def check_acks(
        self,
        member: str,
        batches: Sequence[AckBatch],
        allowed: frozenset[int],
        settled: Callable[[Span], bool] | None = None,
    ) -> tuple[ErrorCode, str] | None:
        """The first problem of ``batches``, or None. Every record from the start offset on
        must be ACQUIRED by ``member``, except spans ``settled`` says the request already
        applied (a retry); records below the start offset are complete and not checked."""
        previous_last = -1
        for batch in batches:
            if batch.first_offset < 0 or batch.first_offset > batch.last_offset:
                return ErrorCode.invalid_request, "Acknowledgement batch first offset is invalid"
            if batch.first_offset <= previous_last:
                return ErrorCode.invalid_request, "Acknowledgement batches overlap or are unordered"
            previous_last = batch.last_offset
            size = batch.last_offset - batch.first_offset + 1
            if len(batch.types) not in (1, size):
                return (
                    ErrorCode.invalid_request,
                    "Acknowledge types must be one type or one per offset",
                )
            if not allowed.issuperset(batch.types):
                return ErrorCode.invalid_request, f"Invalid acknowledge type: {list(batch.types)}"
        spans = self.window._spans.spans
        for batch in batches:
            if batch.last_offset < self.window.start:
                # Complete records (acknowledged, archived, or delivered to another member after
                # this one's lock expired): Kafka 4.4.0's SharePartition.acknowledge skips such a
                # batch ("already archived"), as it skips the part of a straddling batch below
                # the start, and the other batches apply. A transaction's stage refuses both
                # (``staging.py`` ``_complete_part``).
                continue
            if batch.last_offset >= self.window.end:
                if not spans:
                    return ErrorCode.invalid_record_state, "Batch record not found"
                return (
                    ErrorCode.invalid_request,
                    "The last offset in request is past acquired records",
                )
            index = self.window._spans.index_of(max(batch.first_offset, self.window.start))
            while index < len(spans) and spans[index].first <= batch.last_offset:
                span = spans[index]
                if settled is not None and settled(span):
                    index += 1
                    continue
                if span.state is not RecordState.ACQUIRED:
                    return (
                        ErrorCode.invalid_record_state,
                        f"The offset cannot be acknowledged: records {span.first}-{span.last} "
                        f"are {span.state.name}",
                    )
                if span.member != member:
                    return ErrorCode.invalid_record_state, "Member is not the owner of the records"
                index += 1
        return None

    def _apply_ack(self, low: int, high: int, ack: AckType, now_ms: int) -> None:
        if ack is AckType.RENEW:
            deadline = now_ms + self.window.config.record_lock_duration_ms
            # a renewal changes nothing durable
            self.window._update(
                low, high, RecordState.ACQUIRED, lambda span: _renew(span, deadline), durable=False
            )
            heapq.heappush(self.window._locks, (deadline, low, high))
            return
        if ack is AckType.ACCEPT:
            target: RecordState | None = RecordState.ACKNOWLEDGED
        elif ack is AckType.REJECT:
            target = (
                RecordState.ARCHIVING if self.window.config.dlq_enabled else RecordState.ARCHIVED
            )
        elif ack is AckType.GAP:
            target = RecordState.ARCHIVED
        else:
            target = None  # RELEASE: decided per span (delivery limit)

        def settle(span: Span) -> None:
            self.window._move(
                span, target if target is not None else self._release_target(span), ack.name
            )
            disown(span)

        self.window._update(low, high, RecordState.ACQUIRED, settle)

    def _release_target(self, span: Span) -> RecordState:
        if span.last < self.window._log_start:
            return RecordState.ARCHIVED
        if span.delivery_count >= self.window.config.delivery_count_limit:
            self.window.delivery_limit_archives += span.size  # always followed by the move
            return RecordState.ARCHIVING if self.window.config.dlq_enabled else RecordState.ARCHIVED
        return RecordState.AVAILABLE

    def end_lost_last_deliveries(self) -> None:
        """On load: a record persisted AVAILABLE at the delivery-count limit is archived
        (ARCHIVING with a dead-letter queue), never delivered again.

        Acquisitions are persisted with their delivery count (``acquisition.py``), and a record
        released at the limit is persisted archived; so such a record was acquired for its last
        delivery when the process stopped (or the leader moved), and that delivery ended
        unacknowledged, as when its lock expires. Without this it came back at one more than the
        limit. Not with ``abort_respects_delivery_limit=False``, where an aborted transaction
        leaves records AVAILABLE at the limit on purpose."""
        config = self.window.config
        if not config.abort_respects_delivery_limit:
            return
        spent = [
            (span.first, span.last)
            for span in self.window._spans.spans
            if span.state is RecordState.AVAILABLE
            and span.delivery_count >= config.delivery_count_limit
        ]
        for first, last in spent:
            self.window._update(first, last, RecordState.AVAILABLE, self._end_lost_delivery)

    def _end_lost_delivery(self, span: Span) -> None:
        self.window._move(span, RecordState.ACQUIRED, "acquisition lost")
        self.window._move(span, self._release_target(span), "acquisition lost")

    # --- dead-letter queue (KIP-1191) -------------------------------------------------------

    def complete_dead_letters(self, ranges: Sequence[tuple[int, int]]) -> Effects:
        """The dead-letter writes of ``ranges`` are done (or given up, as Kafka does): their
        ARCHIVING records become ARCHIVED and the start offset may move past them."""
        self.window._begin()
        for first, last in ranges:
            low, high = max(first, self.window.start), min(last, self.window.end - 1)
            if low <= high:
                self.window._update(low, high, RecordState.ARCHIVING, self._dead_lettered)
        return self.window._finish()

    def _dead_lettered(self, span: Span) -> None:
        self.window._move(span, RecordState.ARCHIVED, "dead-lettered")

    def archiving(self) -> list[tuple[int, int, int]]:
        """(first, last, delivery count) of the ARCHIVING spans: dead letters not yet done."""
        return [
            (s.first, s.last, s.delivery_count)
            for s in self.window._spans.spans
            if s.state is RecordState.ARCHIVING
        ]

    # --- lock expiry and member departure ---------------------------------------------------

    def expire_locks(self, now_ms: int) -> Effects:
        """Release every record whose acquisition lock has passed its deadline."""
        self.window._begin()
        spans = self.window._spans
        while self.window._locks and self.window._locks[0][0] <= now_ms:
            _, low, high = heapq.heappop(self.window._locks)
            low, high = max(low, self.window.start), min(high, self.window.end - 1)
            if low > high:
                continue
            start = index = spans.index_of(low)
            while index < len(spans.spans) and spans.spans[index].first <= high:
                span = spans.spans[index]
                # a span's records share one deadline, so the whole span expires together
                if span.state is RecordState.ACQUIRED and span.deadline <= now_ms:
                    self.window.lock_expiries += span.size
                    self.window._move(span, self._release_target(span), "lock expiry")
                    disown(span)
                    self.window._mark(span.first, span.last)
                index += 1
            spans.coalesce(start, index)
        return self.window._finish()

    def release_member(self, member: str, now_ms: int) -> Effects:
        """Release everything ``member`` holds (session closed, member left the group)."""
        del now_ms  # kept for symmetry; releases are immediate
        self.window._begin()
        spans = self.window._spans.spans
        touched = False
        for span in spans:
            if span.state is RecordState.ACQUIRED and span.member == member:
                self.window._move(span, self._release_target(span), "member release")
                disown(span)
                self.window._mark(span.first, span.last)
                touched = True
        if touched:
            self.window._spans.coalesce(0, len(spans))
        return self.window._finish()


def _renew(span: Span, deadline: int) -> None:
    span.deadline = deadline


def ack_runs(batch: AckBatch) -> Iterator[tuple[int, int, int]]:
    """(first, last, type) runs of one acknowledgement batch."""
    types = batch.types
    if len(types) == 1:
        yield batch.first_offset, batch.last_offset, types[0]
        return
    run_start = 0
    for index in range(1, len(types) + 1):
        if index == len(types) or types[index] != types[run_start]:
            yield batch.first_offset + run_start, batch.first_offset + index - 1, types[run_start]
            run_start = index
