"""InitProducerId (key 22), v0-v5, for idempotent (non-transactional) producers.

A null transactional id gets a fresh producer id with epoch 0, from the process-wide allocator
in ``kemu.broker.producer_ids`` (increasing, persisted in blocks to the data dir so that ids
never repeat after a restart). As in Kafka, a given ProducerId/ProducerEpoch (v3+, KIP-360) is
only checked for consistency (exactly one of them -1 is INVALID_REQUEST) and otherwise ignored:
a non-transactional producer that wants a new epoch simply gets a new producer id (Java's
producer bumps idempotent epochs itself and only asks for a new id). Any broker answers; an empty
transactional id is INVALID_REQUEST.

Deliberate omission until the transaction coordinator lands: a non-null transactional id is
answered with UNSUPPORTED_VERSION. It is not retriable, so Java's ``initTransactions()`` fails at
once with "Unexpected error in InitProducerIdResponse; The version of API is not supported."
(and librdkafka / kafka-python raise likewise) instead of retrying until a timeout as
COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR would make them do.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.context import RequestContext
from kemu.broker.handlers import handler
from kemu.broker.producer_ids import producer_ids
from kemu.protocol.errors import ErrorCode

API_KEY = 22
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


@handler(API_KEY, 0, 5)
async def handle(ctx: RequestContext, request: Any) -> Any:
    given_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    given_epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if (given_id == NO_PRODUCER_ID) != (given_epoch == NO_PRODUCER_EPOCH):
        return _error(ctx, ErrorCode.invalid_request)
    if request.transactional_id is not None:
        if not request.transactional_id:
            return _error(ctx, ErrorCode.invalid_request)
        return _error(ctx, ErrorCode.unsupported_version)
    return ctx.respond(
        error_code=ErrorCode.none,
        producer_id=producer_ids(ctx.runtime).allocate(),
        producer_epoch=0,
    )


def _error(ctx: RequestContext, code: ErrorCode) -> Any:
    return ctx.respond(
        error_code=code, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH
    )
