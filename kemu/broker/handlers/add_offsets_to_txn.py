"""AddOffsetsToTxn (key 25), v0-v4.

Adds the group's ``__consumer_offsets`` partition (``abs(hashCode(groupId)) %
offsets.topic.num.partitions``) to the producer's transaction, so that the offsets it then sends
with TxnOffsetCommit are committed or dropped with it. Errors as AddPartitionsToTxn
(PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2).
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import group_read, refused, txn_write
from kemu.broker.handlers import handler
from kemu.broker.handlers._transactions import for_version
from kemu.cluster.context import RequestContext
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.add_offsets_to_txn import AddOffsetsToTxnRequestView

API_KEY = 25
FIRST_FENCED_VERSION = 2


@handler(API_KEY, 0, 4)
def handle(ctx: RequestContext, request: AddOffsetsToTxnRequestView) -> Any:
    denied = refused(
        ctx, request, txn_write(request.transactional_id), group_read(request.group_id)
    )
    if denied is not None:
        return denied
    if not request.group_id:
        return ctx.respond(error_code=ErrorCode.invalid_group_id)
    outcome = transaction_coordinator(ctx.runtime).add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
    )
    return ctx.respond(error_code=for_version(outcome.error, ctx.version, FIRST_FENCED_VERSION))
