"""KIP-1289 transactional staging: acknowledgements that wait for a producer transaction, sans IO.

``stage`` moves a member's ACCEPT/REJECT acknowledgements ACQUIRED -> TX_PENDING under a
producer id and epoch; ``apply_marker`` applies them when the
transaction commits (ACKNOWLEDGED, or ARCHIVED/ARCHIVING for REJECT) or returns them to
AVAILABLE when it aborts, their delivery count kept. ``revert`` takes a stage back when the
persister refuses its write (spec §5.3 step 8, §7): the records are ACQUIRED by the member
again, under the acquisition lock they had.

Decided in the spec (§12):
* Q8: gap offsets are staged like records and archived by the commit.
* Q5: staging again what the same producer id/epoch and member already staged with the same
  type (a client retrying after a lost response) is NONE and changes nothing, also after the
  staged records were reloaded from the share state; a different owner, producer or type is
  INVALID_RECORD_STATE.
* Q6: an abort archives (ARCHIVING with a dead-letter queue) a record whose staged delivery was
  its last (delivery count at ``share.delivery.count.limit``), as a release would;
  ``abort_respects_delivery_limit=False`` (``kemu.kip1289.abort.respects.delivery.limit``)
  makes it AVAILABLE as the draft PR does.

Both outcomes are fixed when the records are staged and persisted with them
(``staged_commit``/``staged_abort``), so the share coordinator resolving the marker from the
log (``kemu.coordinator.share.txn_markers``) and this leader agree.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from kemu.broker.share.acknowledgement import AckBatch, Acknowledgement, ack_runs
from kemu.broker.share.spans import NO_DEADLINE, NOT_STAGED, Span
from kemu.broker.share.states import AckType, RecordState
from kemu.broker.share.window import Effects, RecordWindow, SpanChange, disown
from kemu.protocol.errors import ErrorCode

_TXN_ACKS = frozenset({AckType.GAP, AckType.ACCEPT, AckType.REJECT})


@dataclass(frozen=True, slots=True)
class StagedRun:
    """Offsets [first, last] one stage moved ACQUIRED -> TX_PENDING, and the deadline of the
    acquisition lock it took off them: what ``revert`` needs to take the stage back."""

    first: int
    last: int
    deadline: int


@dataclass(frozen=True, slots=True)
class StageResult:
    error: ErrorCode
    message: str | None
    effects: Effects
    staged: tuple[StagedRun, ...] = ()  # what this stage moved (a retry's done part excluded)


class TransactionalStaging:
    """Staging acknowledgements in producer transactions and applying their markers."""

    def __init__(self, window: RecordWindow, acks: Acknowledgement) -> None:
        self.window = window
        self.acks = acks  # the acknowledgement checks staging shares
        self._moved: list[StagedRun] = []  # per-stage scratch

    def stage(
        self,
        member: str,
        producer_id: int,
        producer_epoch: int,
        batches: Sequence[AckBatch],
        now_ms: int,
    ) -> StageResult:
        """Stage ``member``'s ACCEPT/REJECT acknowledgements in a producer transaction.

        Records move ACQUIRED -> TX_PENDING, lose their lock timer and keep their owner until
        the transaction ends. Gap offsets (no record there) are staged too, as part of the
        transaction's unit (spec Q8): archived by a commit, AVAILABLE again after an abort.
        """
        del now_ms
        self.window._begin()
        self._moved = []
        already = self._staged_before(member, producer_id, producer_epoch, batches)
        problem = self.acks.check_acks(member, batches, _TXN_ACKS, lambda span: id(span) in already)
        if problem is not None:
            code, message = problem
            if code is ErrorCode.invalid_request and message.startswith("Invalid acknowledge"):
                message = "Only ACCEPT or REJECT permitted in transaction"
            return StageResult(code, message, self.window._finish())
        complete = self._complete_part(batches)
        if complete is not None:
            return StageResult(ErrorCode.invalid_record_state, complete, self.window._finish())
        for batch in batches:
            for low, high, ack in ack_runs(batch):
                low = max(low, self.window.start)
                if low <= high:
                    self.window._update(
                        low,
                        high,
                        RecordState.ACQUIRED,
                        _stager(self, producer_id, producer_epoch, ack),
                    )
        moved, self._moved = tuple(self._moved), []
        return StageResult(ErrorCode.none, None, self.window._finish(), moved)

    def _complete_part(self, batches: Sequence[AckBatch]) -> str | None:
        """Why a batch that starts below the start offset cannot be staged, or None.

        Everything below the start offset is complete (acknowledged, archived). A
        ShareAcknowledge skips a batch entirely below it and that part of a straddling batch,
        as Kafka does (``check_acks`` lets both through; a second ACCEPT of an acknowledged
        record changes nothing); a transaction cannot: it would commit its output for a
        record whose processing was already committed (the simulation, seed 16 on
        b103ed9: a lock expired while the pipeline held the record, the same member acquired it
        again before its transaction staged the ACCEPT, the stage applied to that acquisition,
        and the second delivery's transaction committed the output a second time)."""
        start = self.window.start
        for batch in batches:
            if batch.first_offset < start:
                return (
                    f"The offset cannot be acknowledged in a transaction: records "
                    f"{batch.first_offset}-{min(batch.last_offset, start - 1)} are complete"
                )
        return None

    def revert(self, producer_id: int, producer_epoch: int, staged: Sequence[StagedRun]) -> None:
        """Take back a stage whose write the persister refused (the PR's
        ``revertBatchStagedTxnAcknowledge``): its records are ACQUIRED again by the member
        that still owns them, staged fields cleared, delivery count unchanged, under the lock
        deadline they had, as Kafka's SharePartition rolls back an acknowledgement whose write
        failed (a lock that ran out meanwhile expires at the caller's next timer).

        Nothing is written: the durable state never saw the stage, and ACQUIRED is persisted as
        the AVAILABLE it holds. An undo, not a transition: TX_PENDING -> ACQUIRED is no move of
        the state machine (spec §5.2)."""
        window = self.window
        for run in staged:
            low, high = max(run.first, window.start), min(run.last, window.end - 1)
            if low > high:
                continue
            unstage = _unstager(window, producer_id, producer_epoch, run.deadline)
            window._update(low, high, RecordState.TX_PENDING, unstage, durable=False)
            heapq.heappush(window._locks, (run.deadline, low, high))

    def _staged_before(
        self, member: str, producer_id: int, producer_epoch: int, batches: Sequence[AckBatch]
    ) -> set[int]:
        """The spans (by identity) a retry of this very stage finds done: TX_PENDING under the
        same producer id/epoch and member with the same type. A span loaded from the share state
        (a restart, a leader move) has no member, which is not persisted: its producer id and
        epoch, one transaction's, decide."""
        done: set[int] = set()
        differs: set[int] = set()  # a span two runs of different types cover
        spans = self.window._spans.spans
        for batch in batches:
            if batch.first_offset < 0 or batch.first_offset > batch.last_offset:
                continue  # check_acks refuses it
            for low, high, ack in ack_runs(batch):
                low, high = max(low, self.window.start), min(high, self.window.end - 1)
                if low > high:
                    continue
                index = self.window._spans.index_of(low)
                while index < len(spans) and spans[index].first <= high:
                    span = spans[index]
                    if (
                        span.state is RecordState.TX_PENDING
                        and (span.member == member or span.member is None)
                        and span.staged_pid == producer_id
                        and span.staged_epoch == producer_epoch
                        and span.staged_ack == ack
                    ):
                        done.add(id(span))
                    else:
                        differs.add(id(span))
                    index += 1
        return done - differs

    def _stage_span(self, span: Span, producer_id: int, producer_epoch: int, ack: int) -> None:
        self._moved.append(StagedRun(span.first, span.last, span.deadline))
        self.window._move(span, RecordState.TX_PENDING, "stage")
        span.deadline = NO_DEADLINE  # the transaction, not the lock, governs the hold
        span.staged_pid = producer_id
        span.staged_epoch = producer_epoch
        span.staged_ack = ack
        span.staged_commit = int(self._commit_target(ack))
        span.staged_abort = int(self._abort_target(span))

    def _commit_target(self, ack: int) -> RecordState:
        if ack == AckType.ACCEPT:
            return RecordState.ACKNOWLEDGED
        if ack == AckType.GAP:
            return RecordState.ARCHIVED  # no record: nothing for a dead-letter queue
        return RecordState.ARCHIVING if self.window.config.dlq_enabled else RecordState.ARCHIVED

    def _abort_target(self, span: Span) -> RecordState:
        """Q6: the acquisition being staged counted as a delivery; at the limit it was the last."""
        if (
            self.window.config.abort_respects_delivery_limit
            and span.delivery_count >= self.window.config.delivery_count_limit
        ):
            return RecordState.ARCHIVING if self.window.config.dlq_enabled else RecordState.ARCHIVED
        return RecordState.AVAILABLE

    def apply_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, now_ms: int
    ) -> Effects:
        """A transaction ended: apply (commit) or drop (abort) what it staged here."""
        del now_ms
        self.window._begin()
        if self.window._tx_pending:
            spans = self.window._spans.spans
            touched = False
            for span in spans:
                if (
                    span.state is RecordState.TX_PENDING
                    and span.staged_pid == producer_id
                    and span.staged_epoch == producer_epoch
                ):
                    event = "commit" if commit else "abort"
                    self.window._move(span, self._marker_target(span, commit), event)
                    span.clear_stage()
                    disown(span)
                    self.window._mark(span.first, span.last)
                    touched = True
            if touched:
                self.window._spans.coalesce(0, len(spans))
        return self.window._finish()

    def _marker_target(self, span: Span, commit: bool) -> RecordState:
        """The outcome fixed when the span was staged (records persisted by a version that did
        not record it fall back to the same rules)."""
        if commit:
            if span.staged_commit != NOT_STAGED:
                return RecordState(span.staged_commit)
            return self._commit_target(span.staged_ack)
        # the delivery count is kept: the acquisition that led here counted already
        if span.last < self.window._log_start:
            return RecordState.ARCHIVED
        if span.staged_abort != NOT_STAGED:
            return RecordState(span.staged_abort)
        return RecordState.AVAILABLE


def _stager(
    core: TransactionalStaging, producer_id: int, producer_epoch: int, ack: int
) -> SpanChange:
    return lambda span: core._stage_span(span, producer_id, producer_epoch, ack)


def _unstager(
    window: RecordWindow, producer_id: int, producer_epoch: int, deadline: int
) -> SpanChange:
    def unstage(span: Span) -> None:
        if span.staged_pid != producer_id or span.staged_epoch != producer_epoch:
            return  # another transaction's records (never the case within one operation)
        window._tx_pending -= span.size
        span.state = RecordState.ACQUIRED
        span.deadline = deadline
        span.clear_stage()

    return unstage
