"""The share-partition leader's state for one (group, topic-partition), sans IO.

``SharePartitionCore`` keeps the in-flight window [SPSO, SPEO) as spans (``spans.py``) and
applies the operations of KIP-932 and KIP-1289 to it: acquire records from log batches,
acknowledge them, expire acquisition locks, release a departed member's records, stage
acknowledgements in a producer transaction and apply its commit or abort. Time comes in as
``now_ms``; nothing here sleeps, reads the log or writes the persister.

Every operation returns ``Effects``: the persisted-state deltas (``PersistedBatch``, ACQUIRED
written as AVAILABLE with its delivery count) plus the start offset, which the caller must write
before it answers the client, and whether records became acquirable again (to wake long-polling
fetches). ``next_deadline()`` is when the caller should next call ``expire_locks``.

Deliberate choices, all following Kafka's SharePartition unless noted:
* Acquisitions are persisted too (their delivery counts survive a restart; Kafka writes them
  lazily, with the next acknowledgement).
* New records are acquired whole log batches at a time; ``max_records`` and the in-flight limit
  (``group.share.partition.max.record.locks``, the window size SPEO - SPSO) are soft limits
  aligned to batch ends, except that RECORD_LIMIT acquires exactly ``max_records`` and leaves
  the rest of the batch AVAILABLE in the window.
* A member leaving (or closing its share session) releases its records with their delivery
  count decremented, as they were never handed to the application.
* read_committed: control batches and aborted transactional batches are archived, never handed
  out; read_uncommitted hands control batches out and the client acknowledges them as gaps.
* Offsets missing from the log (compaction, retention) are archived without a transition.
* A failed persister write is not rolled back here: the caller drops this core and reloads
  the durable state.
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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum

from kemu.broker.share.spans import NO_DEADLINE, NOT_STAGED, Span, SpanList
from kemu.broker.share.states import AckType, RecordState, transition
from kemu.coordinator.share.persister import PersistedBatch, PersistedState
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import BatchHeader

MAX_BYTES = 2**31 - 1

_SpanChange = Callable[[Span], None]


class AcquireMode(IntEnum):
    """ShareFetch ``ShareAcquireMode`` (v2+)."""

    BATCH_OPTIMIZED = 0
    RECORD_LIMIT = 1


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_in_flight_records: int = 2_000
    dlq_enabled: bool = False  # KIP-1191: REJECT and exhausted records go to ARCHIVING


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AckBatch:
    """One acknowledgement batch: a single type for the range, or one type per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Effects:
    """What the caller must do after an operation."""

    batches: tuple[PersistedBatch, ...]  # deltas to write, non-overlapping, in offset order
    start_offset: int
    start_moved: bool
    available: bool  # records became acquirable: wake waiting fetches

    @property
    def durable(self) -> bool:
        """Whether there is anything to write before answering."""
        return bool(self.batches) or self.start_moved


@dataclass(frozen=True, slots=True)
class AcquireResult:
    acquired: tuple[AcquiredRange, ...]
    records: tuple[bytes, ...]  # the whole log batches that hold the acquired records
    count: int
    effects: Effects


@dataclass(frozen=True, slots=True)
class AckResult:
    error: ErrorCode
    message: str | None
    effects: Effects
    deferred: tuple[AckBatch, ...] = ()  # RELEASE runs held back (``defer_release``)


_ALL_ACKS = frozenset(int(t) for t in AckType)
_TXN_ACKS = frozenset({AckType.GAP, AckType.ACCEPT, AckType.REJECT})


class SharePartitionCore:
    """The in-flight records of one share partition and every operation on them."""

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
        self._locks: list[tuple[int, int, int]] = []  # (deadline, first, last) heap
        self._available_hint = start_offset  # no AVAILABLE offset below this
        self._log_start = 0  # records below it are gone from the log
        # per-operation scratch
        self._dirty: list[tuple[int, int]] = []
        self._made_available = False
        self._start_before = start_offset

    # --- construction -----------------------------------------------------------------------

    @classmethod
    def from_persisted(
        cls,
        state: PersistedState,
        config: SharePartitionConfig,
        *,
        reset_offset: int,
        log_start_offset: int = 0,
    ) -> tuple[SharePartitionCore, Effects]:
        """Load durable state; an uninitialised start offset (-1) becomes ``reset_offset``
        (``share.auto.offset.reset`` resolved by the caller) and is written back."""
        uninitialised = state.start_offset < 0
        start = reset_offset if uninitialised else state.start_offset
        core = cls(
            config,
            start_offset=start,
            state_epoch=state.state_epoch,
            leader_epoch=state.leader_epoch,
        )
        core._begin()
        core._load(state.batches)
        core._note_log_start(log_start_offset)
        return core, core._finish(start_changed=uninitialised)

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
                self._tx_pending += span.size
            if state.is_terminal:
                self._terminal += span.size
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

    # --- acquire ----------------------------------------------------------------------------

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
        self._begin()
        pieces: list[list[int]] = []  # [first, last, delivery count], contiguous runs
        records: list[bytes] = []
        bounds: list[int] = []  # base offsets of the batches sent
        remaining = max_records
        sent_bytes = 0
        deadline = now_ms + self.config.record_lock_duration_ms
        fetch_offset = self.next_fetch_offset()
        expected = fetch_offset
        limit_exact = mode is AcquireMode.RECORD_LIMIT
        for header, data in batches if max_records > 0 else ():
            if remaining <= 0:
                break
            base, last = header.base_offset, header.last_offset
            if last < fetch_offset or last < self.start:
                continue
            if base > expected and expected < self.end:
                self._archive_missing(expected, min(base, self.end) - 1)
            expected = last + 1
            top = last
            if last >= self.end:
                if self.end - self.start < self.config.max_in_flight_records:
                    self._extend(base, last)
                elif base >= self.end:
                    break  # at the in-flight limit: nothing new enters the window
                else:
                    top = self.end - 1
            low = max(base, fetch_offset, self.start)
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
            heapq.heappush(self._locks, (deadline, first, last))
        acquired = _split_by_batch_size(pieces, bounds, batch_size, limit_exact)
        count = sum(last - first + 1 for first, last, _ in pieces)
        return AcquireResult(tuple(acquired), tuple(records), count, self._finish())

    def _extend(self, base: int, last: int) -> None:
        """Bring a new log batch into the window as AVAILABLE records."""
        if base > self.end:  # offsets absent from the log: nothing to deliver
            gap = Span(self.end, base - 1, RecordState.ARCHIVED)
            self._spans.append(gap)
            self._terminal += gap.size
            self._mark(gap.first, gap.last)
        first = max(base, self.end)
        self._spans.append(Span(first, last, RecordState.AVAILABLE))
        self._available_hint = min(self._available_hint, first)
        self.end = last + 1

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
        spans = self._spans
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
                self._move(span, RecordState.ACQUIRED, "acquire")
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
                self._mark(span.first, span.last)
            index += 1
        spans.coalesce(start, stop)
        return taken

    @property
    def _throttle_from(self) -> int:
        """The delivery count from which Kafka throttles delivery: half the limit, at least 2."""
        return max(2, -(-self.config.delivery_count_limit // 2))

    def _most_delivered(self, low: int, high: int) -> int:
        """The highest delivery count of the AVAILABLE records in [low, high] (0: none)."""
        spans = self._spans.spans
        index = self._spans.first_index_at_or_after(low)
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
        spans = self._spans.spans
        index = self._spans.first_index_at_or_after(low)
        last_attempt = self.config.delivery_count_limit - 1
        isolate_last = self.config.delivery_count_limit > 2
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
        spans = self._spans.spans
        index = self._spans.first_index_at_or_after(low)
        while index < len(spans) and spans[index].first <= high:
            if spans[index].state is RecordState.AVAILABLE:
                return True
            index += 1
        return False

    def _archive_undeliverable(self, low: int, high: int) -> None:
        """read_committed: control and aborted records are acquired and archived at once."""
        self._update(low, high, RecordState.AVAILABLE, self._acquire_and_archive)

    def _acquire_and_archive(self, span: Span) -> None:
        self._move(span, RecordState.ACQUIRED, "acquire")
        span.delivery_count += 1
        self._move(span, RecordState.ARCHIVED, "read_committed skip")

    def _archive_missing(self, low: int, high: int) -> None:
        """Offsets the log no longer holds (compaction): archived without a transition."""
        self._update(low, high, RecordState.AVAILABLE, self._archive_unreachable)

    def _archive_unreachable(self, span: Span) -> None:
        span.state = RecordState.ARCHIVED
        self._terminal += span.size

    # --- acknowledge ------------------------------------------------------------------------

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
        self._begin()
        problem = self._check_acks(member, batches, _ALL_ACKS)
        if problem is not None:
            return AckResult(problem[0], problem[1], self._finish())
        deferred: list[AckBatch] = []
        for batch in batches:
            for low, high, ack in _runs(batch):
                low = max(low, self.start)
                if low > high:
                    continue
                if defer_release and ack == AckType.RELEASE:
                    deferred.append(AckBatch(low, high, (ack,)))
                else:
                    self._apply_ack(low, high, AckType(ack), now_ms)
        return AckResult(ErrorCode.none, None, self._finish(), tuple(deferred))

    def release_deferred(self, member: str, batches: Sequence[AckBatch]) -> Effects:
        """Apply the RELEASE runs ``acknowledge(defer_release=True)`` held back, to the records
        ``member`` still holds (a lock that expired in between released them already)."""
        self._begin()
        spans = self._spans
        for batch in batches:
            low, high = max(batch.first_offset, self.start), min(batch.last_offset, self.end - 1)
            if low > high:
                continue
            start, stop = spans.isolate(low, high)
            for span in spans.spans[start:stop]:
                if span.state is RecordState.ACQUIRED and span.member == member:
                    self._move(span, self._release_target(span), AckType.RELEASE.name)
                    _disown(span)
                    self._mark(span.first, span.last)
            spans.coalesce(start, stop)
        return self._finish()

    def _check_acks(
        self, member: str, batches: Sequence[AckBatch], allowed: frozenset[int]
    ) -> tuple[ErrorCode, str] | None:
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
        spans = self._spans.spans
        for batch in batches:
            if batch.last_offset < self.start:
                # Complete records (acknowledged, archived, or delivered to another member after
                # this one's lock expired) are no longer held by anyone; Kafka no longer caches
                # them and refuses the batch.
                return (
                    ErrorCode.invalid_record_state,
                    "Batch record not found. The request batch offsets are not found in the cache.",
                )
            if batch.last_offset >= self.end:
                if not spans:
                    return ErrorCode.invalid_record_state, "Batch record not found"
                return (
                    ErrorCode.invalid_request,
                    "The last offset in request is past acquired records",
                )
            index = self._spans.index_of(max(batch.first_offset, self.start))
            while index < len(spans) and spans[index].first <= batch.last_offset:
                span = spans[index]
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
            deadline = now_ms + self.config.record_lock_duration_ms
            # a renewal changes nothing durable
            self._update(
                low, high, RecordState.ACQUIRED, lambda span: _renew(span, deadline), durable=False
            )
            heapq.heappush(self._locks, (deadline, low, high))
            return
        if ack is AckType.ACCEPT:
            target: RecordState | None = RecordState.ACKNOWLEDGED
        elif ack is AckType.REJECT:
            target = RecordState.ARCHIVING if self.config.dlq_enabled else RecordState.ARCHIVED
        elif ack is AckType.GAP:
            target = RecordState.ARCHIVED
        else:
            target = None  # RELEASE: decided per span (delivery limit)

        def settle(span: Span) -> None:
            self._move(span, target if target is not None else self._release_target(span), ack.name)
            _disown(span)

        self._update(low, high, RecordState.ACQUIRED, settle)

    def _release_target(self, span: Span) -> RecordState:
        if span.last < self._log_start:
            return RecordState.ARCHIVED
        if span.delivery_count >= self.config.delivery_count_limit:
            return RecordState.ARCHIVING if self.config.dlq_enabled else RecordState.ARCHIVED
        return RecordState.AVAILABLE

    # --- lock expiry and member departure ---------------------------------------------------

    def expire_locks(self, now_ms: int) -> Effects:
        """Release every record whose acquisition lock has passed its deadline."""
        self._begin()
        spans = self._spans
        while self._locks and self._locks[0][0] <= now_ms:
            _, low, high = heapq.heappop(self._locks)
            low, high = max(low, self.start), min(high, self.end - 1)
            if low > high:
                continue
            start = index = spans.index_of(low)
            while index < len(spans.spans) and spans.spans[index].first <= high:
                span = spans.spans[index]
                # a span's records share one deadline, so the whole span expires together
                if span.state is RecordState.ACQUIRED and span.deadline <= now_ms:
                    self._move(span, self._release_target(span), "lock expiry")
                    _disown(span)
                    self._mark(span.first, span.last)
                index += 1
            spans.coalesce(start, index)
        return self._finish()

    def release_member(self, member: str, now_ms: int) -> Effects:
        """Release everything ``member`` holds (session closed, member left the group)."""
        del now_ms  # kept for symmetry; releases are immediate
        self._begin()
        spans = self._spans.spans
        touched = False
        for span in spans:
            if span.state is RecordState.ACQUIRED and span.member == member:
                # never handed to the application, so this delivery does not count
                span.delivery_count = max(span.delivery_count - 1, 0)
                below = span.last < self._log_start
                target = RecordState.ARCHIVED if below else RecordState.AVAILABLE
                self._move(span, target, "member release")
                _disown(span)
                self._mark(span.first, span.last)
                touched = True
        if touched:
            self._spans.coalesce(0, len(spans))
        return self._finish()

    def advance_log_start(self, log_start_offset: int) -> Effects:
        """The log's start moved (retention, DeleteRecords): archive what can no longer be read."""
        self._begin()
        self._note_log_start(log_start_offset)
        return self._finish()

    def _note_log_start(self, log_start_offset: int) -> None:
        if log_start_offset <= self._log_start:
            return
        self._log_start = log_start_offset
        high = min(log_start_offset, self.end) - 1
        if high >= self.start:
            self._archive_missing(self.start, high)

    # --- KIP-1289 staging -------------------------------------------------------------------

    def stage(
        self,
        member: str,
        producer_id: int,
        producer_epoch: int,
        batches: Sequence[AckBatch],
        now_ms: int,
    ) -> AckResult:
        """Stage ``member``'s ACCEPT/REJECT acknowledgements in a producer transaction.

        Records move ACQUIRED -> TX_PENDING, lose their lock timer and keep their owner until
        the transaction ends. Gap offsets hold no record and are archived at once.
        """
        del now_ms
        self._begin()
        problem = self._check_acks(member, batches, _TXN_ACKS)
        if problem is not None:
            code, message = problem
            if code is ErrorCode.invalid_request and message.startswith("Invalid acknowledge"):
                message = "Only ACCEPT or REJECT permitted in transaction"
            return AckResult(code, message, self._finish())
        for batch in batches:
            for low, high, ack in _runs(batch):
                low = max(low, self.start)
                if low > high:
                    continue
                if ack == AckType.GAP:
                    self._update(low, high, RecordState.ACQUIRED, self._archive_gap)
                else:
                    self._update(
                        low,
                        high,
                        RecordState.ACQUIRED,
                        _stager(self, producer_id, producer_epoch, ack),
                    )
        return AckResult(ErrorCode.none, None, self._finish())

    def _archive_gap(self, span: Span) -> None:
        self._move(span, RecordState.ARCHIVED, "staged GAP")
        _disown(span)

    def _stage_span(self, span: Span, producer_id: int, producer_epoch: int, ack: int) -> None:
        self._move(span, RecordState.TX_PENDING, "stage")
        span.deadline = NO_DEADLINE  # the transaction, not the lock, governs the hold
        span.staged_pid = producer_id
        span.staged_epoch = producer_epoch
        span.staged_ack = ack

    def apply_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, now_ms: int
    ) -> Effects:
        """A transaction ended: apply (commit) or drop (abort) what it staged here."""
        del now_ms
        self._begin()
        if self._tx_pending:
            spans = self._spans.spans
            touched = False
            for span in spans:
                if (
                    span.state is RecordState.TX_PENDING
                    and span.staged_pid == producer_id
                    and span.staged_epoch == producer_epoch
                ):
                    event = "commit" if commit else "abort"
                    self._move(span, self._marker_target(span, commit), event)
                    span.clear_stage()
                    _disown(span)
                    self._mark(span.first, span.last)
                    touched = True
            if touched:
                self._spans.coalesce(0, len(spans))
        return self._finish()

    def _marker_target(self, span: Span, commit: bool) -> RecordState:
        if not commit:
            # the delivery count is kept: the acquisition that led here counted already
            return RecordState.ARCHIVED if span.last < self._log_start else RecordState.AVAILABLE
        if span.staged_ack == AckType.ACCEPT:
            return RecordState.ACKNOWLEDGED
        return RecordState.ARCHIVING if self.config.dlq_enabled else RecordState.ARCHIVED

    # --- bookkeeping ------------------------------------------------------------------------

    def _update(
        self,
        low: int,
        high: int,
        only: RecordState,
        change: _SpanChange,
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

    def _finish(self, *, start_changed: bool = False) -> Effects:
        self._advance_start()
        batches = self._deltas()
        self._dirty = []
        return Effects(
            batches=batches,
            start_offset=self.start,
            start_moved=start_changed or self.start != self._start_before,
            available=self._made_available,
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

_LOADED_STATES = {
    0: RecordState.AVAILABLE,
    1: RecordState.AVAILABLE,  # never written, but an acquisition is a delivery offered
    2: RecordState.ACKNOWLEDGED,
    3: RecordState.ARCHIVING,
    4: RecordState.ARCHIVED,
    5: RecordState.TX_PENDING,
}


def _stager(
    core: SharePartitionCore, producer_id: int, producer_epoch: int, ack: int
) -> _SpanChange:
    return lambda span: core._stage_span(span, producer_id, producer_epoch, ack)


def _renew(span: Span, deadline: int) -> None:
    span.deadline = deadline


def _disown(span: Span) -> None:
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
    )


def _same_persisted(a: PersistedBatch, b: PersistedBatch) -> bool:
    return (
        a.delivery_state == b.delivery_state
        and a.delivery_count == b.delivery_count
        and a.staged_producer_id == b.staged_producer_id
        and a.staged_producer_epoch == b.staged_producer_epoch
        and a.staged_ack_type == b.staged_ack_type
    )


def _coalesced(pieces: Iterable[PersistedBatch]) -> tuple[PersistedBatch, ...]:
    out: list[PersistedBatch] = []
    for piece in pieces:
        if (
            out
            and out[-1].last_offset + 1 == piece.first_offset
            and _same_persisted(out[-1], piece)
        ):
            previous = out[-1]
            out[-1] = PersistedBatch(
                previous.first_offset,
                piece.last_offset,
                previous.delivery_state,
                previous.delivery_count,
                previous.staged_producer_id,
                previous.staged_producer_epoch,
                previous.staged_ack_type,
            )
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


def _runs(batch: AckBatch) -> Iterator[tuple[int, int, int]]:
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
