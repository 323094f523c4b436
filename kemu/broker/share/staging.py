"""KIP-1289 transactional staging: acknowledgements that wait for a producer transaction, sans IO.

``stage`` moves a member's ACCEPT/REJECT acknowledgements ACQUIRED -> TX_PENDING under a
producer id and epoch (gaps are archived at once); ``apply_marker`` applies them when the
transaction commits (ACKNOWLEDGED, or ARCHIVED/ARCHIVING for REJECT) or returns them to
AVAILABLE when it aborts, their delivery count kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from kemu.broker.share.acknowledgement import AckBatch, Acknowledgement, AckResult, ack_runs
from kemu.broker.share.spans import NO_DEADLINE, Span
from kemu.broker.share.states import AckType, RecordState
from kemu.broker.share.window import Effects, SpanChange, disown
from kemu.protocol.errors import ErrorCode

_TXN_ACKS = frozenset({AckType.GAP, AckType.ACCEPT, AckType.REJECT})


class TransactionalStaging(Acknowledgement):
    """Staging acknowledgements in producer transactions and applying their markers."""

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
            for low, high, ack in ack_runs(batch):
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
        disown(span)

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
                    disown(span)
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


def _stager(
    core: TransactionalStaging, producer_id: int, producer_epoch: int, ack: int
) -> SpanChange:
    return lambda span: core._stage_span(span, producer_id, producer_epoch, ack)
