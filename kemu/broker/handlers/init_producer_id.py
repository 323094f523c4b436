"""InitProducerId (key 22), v0-v5.

A null transactional id (an idempotent producer) gets a fresh producer id with epoch 0, from the
process-wide allocator in ``kemu.coordinator.transaction.producer_ids`` (increasing, persisted in
blocks to the data dir so that ids never repeat after a restart). As in Kafka, a given
ProducerId/ProducerEpoch (v3+, KIP-360) is then only checked for consistency (exactly one of them
-1 is INVALID_REQUEST): a non-transactional producer that wants a new epoch simply gets a new
producer id.

A transactional id goes to the transaction coordinator (``kemu.coordinator.transaction``): a new
id gets a producer id with epoch 0; a known one gets its epoch bumped, fencing the previous
producer, whose Ongoing transaction is aborted first. A timeout above
``transaction.max.timeout.ms`` is INVALID_TRANSACTION_TIMEOUT; a given id/epoch (v3+) that is not
the current one is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4); a transaction still being
completed is CONCURRENT_TRANSACTIONS; an empty transactional id is INVALID_REQUEST. Any broker
answers (one coordinator per process).

ACLs as KafkaApis checks them: WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without one, IDEMPOTENT_WRITE on the cluster or WRITE
on some topic (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    authorize,
    authorize_by_resource_type,
    refused,
    txn_write,
)
from kemu.broker.handlers import handler
from kemu.broker.handlers._transactions import for_version, millis
from kemu.cluster.context import RequestContext
from kemu.coordinator.transaction.producer_ids import producer_ids
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.init_producer_id import InitProducerIdRequestView

API_KEY = 22
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
FIRST_FENCED_VERSION = 4


@handler(API_KEY, 0, 5)
def handle(ctx: RequestContext, request: InitProducerIdRequestView) -> Any:
    denied = refused(ctx, request, txn_write(request.transactional_id))
    if denied is not None:
        return denied
    if (
        request.transactional_id is None
        and not authorize(
            ctx, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME, log=False
        )
        and not authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC)
    ):
        # An idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
        return _error(ctx, ErrorCode.cluster_authorization_failed)
    given_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    given_epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if (given_id == NO_PRODUCER_ID) != (given_epoch == NO_PRODUCER_EPOCH):
        return _error(ctx, ErrorCode.invalid_request)
    if request.transactional_id is not None:
        if not request.transactional_id:
            return _error(ctx, ErrorCode.invalid_request)
        outcome = transaction_coordinator(ctx.runtime).init_producer_id(
            request.transactional_id,
            millis(request.transaction_timeout),
            given_id,
            given_epoch,
        )
        if outcome.error is not ErrorCode.none:
            return _error(ctx, for_version(outcome.error, ctx.version, FIRST_FENCED_VERSION))
        return ctx.respond(
            error_code=ErrorCode.none,
            producer_id=outcome.producer_id,
            producer_epoch=outcome.producer_epoch,
        )
    return ctx.respond(
        error_code=ErrorCode.none,
        producer_id=producer_ids(ctx.runtime).allocate(),
        producer_epoch=0,
    )


def _error(ctx: RequestContext, code: ErrorCode) -> Any:
    return ctx.respond(
        error_code=code, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH
    )
