"""The record-state window of a share partition, sans IO: the base of ``SharePartitionCore``.

``RecordWindow`` keeps the in-flight window [SPSO, SPEO) as spans (``spans.py``) with the
bookkeeping every operation shares: state transitions with their counts (terminal and TX_PENDING
records), the per-operation scratch that becomes ``Effects``, the start offset advancing over
terminal records, loading from persisted state, the queries and the invariants tests check.
The operations themselves live in the subclasses: ``acquisition.py``, ``acknowledgement.py``,
``staging.py``.

Every operation returns ``Effects``: the persisted-state deltas (``PersistedBatch``, ACQUIRED
written as AVAILABLE with its delivery count) plus the start offset, which the caller must write
before it answers the client, and whether records became acquirable again (to wake long-polling
fetches). ``next_deadline()`` is when the caller should next call ``expire_locks``.

Offsets missing from the log (compaction, retention) are archived without a transition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from kemu.broker.share.spans import NO_DEADLINE, NOT_STAGED, Span, SpanList
from kemu.broker.share.states import RecordState, transition
from kemu.coordinator.share.persister import PersistedBatch

SpanChange = Callable[[Span], None]


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_in_flight_records: int = 2_000
    dlq_enabled: bool = False  # KIP-1191: REJECT and exhausted records go to ARCHIVING
    # KIP-1289 (spec Q6, kemu.kip1289.abort.respects.delivery.limit): an aborted transaction
    # archives a record whose staged delivery was its last; False makes it AVAILABLE (the PR)
    abort_respects_delivery_limit: bool = True


# Why a record goes to the dead-letter queue (Kafka's ShareGroupDLQManager causes, written as
# the __dlq.errors.message header).
CAUSE_REJECTED = "Offset rejected by client."
CAUSE_DELIVERY_LIMIT = "Offset delivery count exceeded the threshold."


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """ARCHIVING records [first_offset, last_offset] to write to the group's dead-letter queue
    (KIP-1191) before ``complete_dead_letters`` makes them ARCHIVED.

    ``recovered``: found ARCHIVING in the persisted state on load, so a write may already be in
    the DLQ topic (a crash between the DLQ write and the ARCHIVED write): look before writing.
    """

    first_offset: int
    last_offset: int
    delivery_count: int
    cause: str
    recovered: bool = False


@dataclass(frozen=True, slots=True)
class Effects:
    """What the caller must do after an operation."""

    batches: tuple[PersistedBatch, ...]  # deltas to write, non-overlapping, in offset order
    # The start offset to write: as Kafka 4.4.0's SharePartition, the start as it was *before*
    # this operation moved it (the move itself is written lazily, by the next write), with the
    # records this operation completed below the new start among ``batches``.
    start_offset: int
    start_moved: bool
    available: bool  # records became acquirable: wake waiting fetches
    # once ``batches`` is durable: write these to the dead-letter queue, then complete them
    dead_letters: tuple[DeadLetter, ...] = ()
    # terminal (acknowledged, archived) records at or above ``start_offset``: what Kafka
    # persists as DeliveryCompleteCount, from which DescribeShareGroupOffsets computes the lag
    delivery_complete_count: int = 0

    @property
    def durable(self) -> bool:
        """Whether there is anything to write before answering."""
        return bool(self.batches) or self.start_moved


class RecordWindow:
    """The in-flight records of one share partition and the bookkeeping of their states."""

    def __init__(
        self,
        config: SharePartitionConfig,
        *,
        start_offset: int,
        state_epoch: int = 0,
        leader_epoch: int = 0,
    ) -> None:
        self.config = config
        self.state_epoch = state_epoch
        self.leader_epoch = leader_epoch
        self.start = start_offset
        self.end = start_offset
        self._spans = SpanList()
        self._terminal = 0  # terminal records in the window (Kafka's DeliveryCompleteCount)
        self._tx_pending = 0  # TX_PENDING records in the window
        # running totals for metrics: records released by lock expiry, and records archived
        # because their delivery count reached the limit
        self.lock_expiries = 0
        self.delivery_limit_archives = 0
        self._locks: list[tuple[int, int, int]] = []  # (deadline, first, last) heap
        self._available_hint = start_offset  # no AVAILABLE offset below this
        self._log_start = 0  # records below it are gone from the log
        # per-operation scratch
        self._dirty: list[tuple[int, int]] = []
        self._made_available = False
        self._start_before = start_offset
        self._dead_letters: list[DeadLetter] = []

    def _load(self, batches: Iterable[PersistedBatch]) -> None:
        for batch in sorted(batches, key=lambda b: b.first_offset):
            first = max(batch.first_offset, self.end)
            if batch.last_offset < first:
                continue
            if first > self.end:  # offsets the persister knows nothing of: never delivered
                self._spans.append(Span(self.end, first - 1, RecordState.AVAILABLE))
            state = _LOADED_STATES.get(batch.delivery_state, RecordState.AVAILABLE)
            span = Span(first, batch.last_offset, state, max(batch.delivery_count, 0))
            if state is RecordState.TX_PENDING:
                span.staged_pid = batch.staged_producer_id
                span.staged_epoch = batch.staged_producer_epoch
                span.staged_ack = batch.staged_ack_type
                span.staged_commit = batch.staged_commit_state
                span.staged_abort = batch.staged_abort_state
                self._tx_pending += span.size
            if state.is_terminal:
                self._terminal += span.size
            if state is RecordState.ARCHIVING:  # a dead-letter write still to do (KIP-1191)
                limit = self.config.delivery_count_limit
                cause = CAUSE_DELIVERY_LIMIT if span.delivery_count >= limit else CAUSE_REJECTED
                self._dead_letters.append(
                    DeadLetter(first, batch.last_offset, span.delivery_count, cause, True)
                )
            self._spans.append(span)
            self.end = batch.last_offset + 1
        self._available_hint = self.start

    # --- queries ----------------------------------------------------------------------------

    @property
    def delivery_complete_count(self) -> int:
        return self._terminal

    @property
    def in_flight(self) -> int:
        return self.end - self.start

    def next_fetch_offset(self) -> int:
        """The first AVAILABLE offset in the window, else the window end."""
        spans = self._spans.spans
        index = self._spans.first_index_at_or_after(max(self._available_hint, self.start))
        while index < len(spans):
            span = spans[index]
            if span.state is RecordState.AVAILABLE:
                self._available_hint = span.first
                return max(span.first, self.start)
            index += 1
        self._available_hint = self.end
        return self.end

    def can_acquire(self) -> bool:
        """Whether an acquire could hand anything out (given data in the log)."""
        return (
            self.next_fetch_offset() < self.end
            or self.end - self.start < self.config.max_in_flight_records
        )

    def next_deadline(self) -> int | None:
        """When the earliest acquisition lock may expire (a stale entry wakes harmlessly)."""
        return self._locks[0][0] if self._locks else None

    def spans(self) -> list[tuple[int, int, RecordState, int, str | None]]:
        """(first, last, state, delivery count, owner) for every span, for tests and tools."""
        return [(s.first, s.last, s.state, s.delivery_count, s.member) for s in self._spans.spans]

    def persisted_view(self) -> tuple[PersistedBatch, ...]:
        """The window as the persister should hold it (ACQUIRED written as AVAILABLE)."""
        return _coalesced(_persisted(span, span.first, span.last) for span in self._spans.spans)

    def pending_transactions(self) -> set[tuple[int, int]]:
        return {
            (s.staged_pid, s.staged_epoch)
            for s in self._spans.spans
            if s.state is RecordState.TX_PENDING
        }

    def owner_of(self, offset: int) -> str | None:
        if not self.start <= offset < self.end:
            return None
        span = self._spans.spans[self._spans.index_of(offset)]
        return span.member if span.state is RecordState.ACQUIRED else None

    def state_of(self, offset: int) -> RecordState | None:
        if not self.start <= offset < self.end:
            return None
        return self._spans.spans[self._spans.index_of(offset)].state

    def check_invariants(self) -> None:
        """Raise AssertionError when the window's bookkeeping is inconsistent (tests)."""
        spans = self._spans.spans
        assert self.start <= self.end, (self.start, self.end)
        if not spans:
            assert self.start == self.end, (self.start, self.end)
        else:
            assert spans[0].first == self.start, (spans[0], self.start)
            assert spans[-1].last + 1 == self.end, (spans[-1], self.end)
            assert not spans[0].state.is_terminal, spans[0]
        terminal = pending = 0
        for index, span in enumerate(spans):
            assert span.first <= span.last, span
            if index:
                assert spans[index - 1].last + 1 == span.first, (spans[index - 1], span)
                assert not spans[index - 1].same_as(span), (spans[index - 1], span)
            if span.state is RecordState.ACQUIRED:
                assert span.member is not None and span.deadline != NO_DEADLINE, span
            elif span.state is not RecordState.TX_PENDING:
                assert span.member is None and span.deadline == NO_DEADLINE, span
            if span.state is RecordState.TX_PENDING:
                assert span.staged_pid != NOT_STAGED, span
                pending += span.size
            if span.state.is_terminal:
                terminal += span.size
            if span.state is RecordState.AVAILABLE:
                assert span.last >= self._available_hint, (span, self._available_hint)
        assert terminal == self._terminal, (terminal, self._terminal)
        assert pending == self._tx_pending, (pending, self._tx_pending)

    # --- the log start ----------------------------------------------------------------------

    def advance_log_start(self, log_start_offset: int) -> Effects:
        """The log's start moved (retention, DeleteRecords): archive what can no longer be read."""
        if log_start_offset <= self._log_start and self._settled():
            # every acquire asks, and the start has mostly not moved: what ``_finish`` would say
            return Effects(
                (),
                self.start,
                start_moved=False,
                available=False,
                delivery_complete_count=self._terminal,
            )
        self._begin()
        self._note_log_start(log_start_offset)
        return self._finish()

    def _settled(self) -> bool:
        """Whether ``_advance_start`` has nothing to do (as after every operation)."""
        spans = self._spans.spans
        if spans:
            return not spans[0].state.is_terminal
        return self.start >= self._log_start

    def _note_log_start(self, log_start_offset: int) -> None:
        if log_start_offset <= self._log_start:
            return
        self._log_start = log_start_offset
        high = min(log_start_offset, self.end) - 1
        if high >= self.start:
            self._archive_missing(self.start, high)

    def _archive_missing(self, low: int, high: int) -> None:
        """Offsets the log no longer holds (compaction): archived without a transition."""
        self._update(low, high, RecordState.AVAILABLE, self._archive_unreachable)

    def _archive_unreachable(self, span: Span) -> None:
        span.state = RecordState.ARCHIVED
        self._terminal += span.size

    # --- bookkeeping ------------------------------------------------------------------------

    def _update(
        self,
        low: int,
        high: int,
        only: RecordState,
        change: SpanChange,
        *,
        durable: bool = True,
    ) -> None:
        """Apply ``change`` to the spans in [low, high] that are in state ``only``."""
        spans = self._spans
        start, stop = spans.isolate(low, high)
        changed = False
        for index in range(start, stop):
            span = spans.spans[index]
            if span.state is only:
                change(span)
                changed = True
        spans.coalesce(start, stop)
        if changed and durable:
            self._mark(low, high)

    def _move(self, span: Span, target: RecordState, event: str) -> None:
        current = span.state
        transition(current, target, event)
        size = span.size
        if current is RecordState.TX_PENDING:
            self._tx_pending -= size
        if target is RecordState.TX_PENDING:
            self._tx_pending += size
        if target.is_terminal:
            self._terminal += size
        elif target is RecordState.ARCHIVING:
            cause = CAUSE_REJECTED if event in _REJECT_EVENTS else CAUSE_DELIVERY_LIMIT
            self._dead_letters.append(DeadLetter(span.first, span.last, span.delivery_count, cause))
        elif target is RecordState.AVAILABLE:
            self._made_available = True
            self._available_hint = min(self._available_hint, span.first)
        span.state = target

    def _mark(self, first: int, last: int) -> None:
        self._dirty.append((first, last))

    def _begin(self) -> None:
        self._dirty = []
        self._made_available = False
        self._start_before = self.start
        self._dead_letters = []

    def _finish(self, *, start_changed: bool = False) -> Effects:
        # Kafka writes the operation's record states with the start offset it had before, and
        # moves the start once the write is done: so do the deltas (records completed below the
        # new start included) and the count before the start advances.
        persisted_start = min(self._start_before, self.start)
        batches = self._deltas()
        complete = self._terminal
        self._advance_start()
        self._dirty = []
        dead_letters = tuple(self._dead_letters)
        self._dead_letters = []
        return Effects(
            batches=batches,
            start_offset=persisted_start,
            start_moved=start_changed or self.start != self._start_before,
            available=self._made_available,
            dead_letters=dead_letters,
            delivery_complete_count=complete,
        )

    def _advance_start(self) -> None:
        spans = self._spans.spans
        count = removed = 0
        while count < len(spans) and spans[count].state.is_terminal:
            removed += spans[count].size
            count += 1
        if count:
            self.start = spans[count - 1].last + 1
            self._spans.drop_prefix(count)
            self._terminal -= removed
        if not spans and self.start < self._log_start:
            self.start = self.end = self._log_start
        self._available_hint = max(self._available_hint, self.start)

    def _deltas(self) -> tuple[PersistedBatch, ...]:
        if not self._dirty:
            return ()
        spans = self._spans.spans
        pieces: list[PersistedBatch] = []
        for low, high in _union(self._dirty):
            low, high = max(low, self.start), min(high, self.end - 1)
            if low > high:
                continue
            index = self._spans.index_of(low)
            while index < len(spans) and spans[index].first <= high:
                span = spans[index]
                pieces.append(_persisted(span, max(span.first, low), min(span.last, high)))
                index += 1
        return _coalesced(pieces)


# --- helpers ----------------------------------------------------------------------------------

# transitions to ARCHIVING a client's REJECT caused (directly, or committed in a transaction);
# every other one (release, lock expiry, abort) is the delivery-count limit
_REJECT_EVENTS = frozenset({"REJECT", "commit"})

_LOADED_STATES = {
    0: RecordState.AVAILABLE,
    1: RecordState.AVAILABLE,  # never written, but an acquisition is a delivery offered
    2: RecordState.ACKNOWLEDGED,
    3: RecordState.ARCHIVING,
    4: RecordState.ARCHIVED,
    5: RecordState.TX_PENDING,
}


def disown(span: Span) -> None:
    """The span's records leave ACQUIRED: no owner, no lock."""
    span.member = None
    span.deadline = NO_DEADLINE


def _persisted(span: Span, first: int, last: int) -> PersistedBatch:
    state = RecordState.AVAILABLE if span.state is RecordState.ACQUIRED else span.state
    return PersistedBatch(
        first,
        last,
        int(state),
        span.delivery_count,
        span.staged_pid,
        span.staged_epoch,
        span.staged_ack,
        span.staged_commit,
        span.staged_abort,
    )


def _same_persisted(a: PersistedBatch, b: PersistedBatch) -> bool:
    return (
        a.delivery_state == b.delivery_state
        and a.delivery_count == b.delivery_count
        and a.staging == b.staging
    )


def _coalesced(pieces: Iterable[PersistedBatch]) -> tuple[PersistedBatch, ...]:
    out: list[PersistedBatch] = []
    for piece in pieces:
        if (
            out
            and out[-1].last_offset + 1 == piece.first_offset
            and _same_persisted(out[-1], piece)
        ):
            out[-1] = out[-1].with_range(out[-1].first_offset, piece.last_offset)
        else:
            out.append(piece)
    return tuple(out)


def _union(ranges: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    current: tuple[int, int] | None = None
    for low, high in sorted(ranges):
        if current is not None and low <= current[1] + 1:
            current = (current[0], max(current[1], high))
            continue
        if current is not None:
            yield current
        current = (low, high)
    if current is not None:
        yield current
