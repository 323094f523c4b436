"""EndTxn (key 26), v0-v5.

Commits or aborts the producer's transaction: the PrepareCommit/PrepareAbort record goes to
``__transaction_state``, a COMMIT/ABORT marker to every partition of the transaction (the group
offsets sent with TxnOffsetCommit are committed with it, or dropped), then the CompleteCommit/
CompleteAbort record; the answer comes once all of that is written. Repeating a completed EndTxn
succeeds; the other outcome is INVALID_TXN_STATE, as is committing a transaction with no
partitions. A stale epoch is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2).

v5 is transaction version 2 (KIP-890 part 2): the coordinator bumps the producer epoch with every
EndTxn (markers carry the new epoch) and answers the producer id and epoch to use next; a retry
with the previous epoch gets the same answer (the retry of the EndTxn that exhausted the epoch,
old id at epoch 32766, the new id at epoch 0); aborting a transaction that never started is
allowed (partitions were added implicitly by produce, if at all).
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import refused, txn_write
from kemu.broker.handlers import handler
from kemu.broker.handlers._transactions import for_version
from kemu.cluster.context import RequestContext
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.end_txn import EndTxnRequestView

API_KEY = 26
FIRST_FENCED_VERSION = 2
FIRST_EPOCH_BUMP_VERSION = 5


@handler(API_KEY, 0, 5)
def handle(ctx: RequestContext, request: EndTxnRequestView) -> Any:
    denied = refused(ctx, request, txn_write(request.transactional_id))
    if denied is not None:
        return denied
    outcome = transaction_coordinator(ctx.runtime).end_transaction(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.committed,
        bump_epoch=ctx.version >= FIRST_EPOCH_BUMP_VERSION,
    )
    error = for_version(outcome.error, ctx.version, FIRST_FENCED_VERSION)
    return ctx.respond(
        error_code=error,
        producer_id=outcome.producer_id if error is ErrorCode.none else -1,
        producer_epoch=outcome.producer_epoch if error is ErrorCode.none else -1,
    )
