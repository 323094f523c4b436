"""AddPartitionsToTxn (key 24), v0-v5.

v0-v3 (the client form): adds the partitions to the producer's transaction, which becomes
Ongoing (its timeout starts with the first partition). Unknown topics or partitions fail the
whole request: those get UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as in
Kafka. A producer id that is not the transactional id's is INVALID_PRODUCER_ID_MAPPING, a stale
epoch PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2), a transaction being completed
CONCURRENT_TRANSACTIONS.

v4-v5 (the broker form, KIP-890): a batch of transactions, each answered on its own. With
VerifyOnly the partitions are only checked: NONE when in the Ongoing transaction, else
INVALID_TXN_STATE (or the producer's error); without it they are added as above. kemu's own
partition leaders reach the coordinator in process (``produce``), so these versions serve tools
and tests.

ACLs as KafkaApis checks them: v0-v3 need WRITE on the transactional id (every partition
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic (internal topics never pass):
refused topics get TOPIC_AUTHORIZATION_FAILED and fail the request as unknown ones do. v4+ come
from brokers and need CLUSTER_ACTION (CLUSTER_AUTHORIZATION_FAILED for the request).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kemu.broker.authorization import (
    AclOperation,
    ResourceType,
    allowed_names,
    authorize,
    cluster_check,
    enabled,
    refused,
)
from kemu.broker.handlers import handler
from kemu.broker.handlers._transactions import for_version
from kemu.cluster.context import RequestContext
from kemu.cluster.model import INTERNAL_TOPICS
from kemu.coordinator.transaction.service import TransactionService, transaction_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.add_partitions_to_txn import (
    AddPartitionsToTxnRequestView,
    AddPartitionsToTxnTopicView,
)

API_KEY = 24
FIRST_FENCED_VERSION = 2
FIRST_BATCHED_VERSION = 4

Errors = dict[tuple[str, int], ErrorCode]


@handler(API_KEY, 0, 5)
def handle(ctx: RequestContext, request: AddPartitionsToTxnRequestView) -> Any:
    service = transaction_coordinator(ctx.runtime)
    if ctx.version >= FIRST_BATCHED_VERSION:
        denied = refused(ctx, request, cluster_check(AclOperation.CLUSTER_ACTION))
        if denied is not None:
            return denied
    if ctx.version < FIRST_BATCHED_VERSION:
        errors = _add(
            ctx,
            service,
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            request.v3_and_below_topics,
            verify_only=False,
        )
        return ctx.respond(
            results_by_topic_v3_and_below=_topic_results(ctx, request.v3_and_below_topics, errors)
        )
    results = []
    for transaction in request.transactions:
        errors = _add(
            ctx,
            service,
            transaction.transactional_id,
            transaction.producer_id,
            transaction.producer_epoch,
            transaction.topics,
            verify_only=transaction.verify_only,
        )
        results.append(
            ctx.make(
                "AddPartitionsToTxnResult",
                transactional_id=transaction.transactional_id,
                topic_results=_topic_results(ctx, transaction.topics, errors),
            )
        )
    return ctx.respond(error_code=ErrorCode.none, results_by_transaction=tuple(results))


def _add(
    ctx: RequestContext,
    service: TransactionService,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    topics: Sequence[AddPartitionsToTxnTopicView],
    *,
    verify_only: bool,
) -> Errors:
    requested: list[tuple[str, int]] = [
        (topic.name, index) for topic in topics for index in topic.partitions
    ]
    failed: Errors = {}
    if ctx.version < FIRST_BATCHED_VERSION:
        if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return dict.fromkeys(requested, ErrorCode.transactional_id_authorization_failed)
        writable = allowed_names(
            ctx,
            AclOperation.WRITE,
            ResourceType.TOPIC,
            (name for name, _ in requested if name not in INTERNAL_TOPICS),
        )
        if enabled(ctx):
            failed = {
                tp: ErrorCode.topic_authorization_failed
                for tp in requested
                if tp[0] not in writable
            }
    for tp in requested:
        if tp not in failed and ctx.cluster.partition(*tp) is None:
            failed[tp] = ErrorCode.unknown_topic_or_partition
    if failed:
        return {tp: failed.get(tp, ErrorCode.operation_not_attempted) for tp in requested}
    if verify_only:
        return service.verify_partitions(transactional_id, producer_id, producer_epoch, requested)
    outcome = service.add_partitions(transactional_id, producer_id, producer_epoch, requested)
    return dict.fromkeys(requested, for_version(outcome.error, ctx.version, FIRST_FENCED_VERSION))


def _topic_results(
    ctx: RequestContext, topics: Sequence[AddPartitionsToTxnTopicView], errors: Errors
) -> tuple[Any, ...]:
    return tuple(
        ctx.make(
            "AddPartitionsToTxnTopicResult",
            name=topic.name,
            results_by_partition=tuple(
                ctx.make(
                    "AddPartitionsToTxnPartitionResult",
                    partition_index=index,
                    partition_error_code=errors[(topic.name, index)],
                )
                for index in topic.partitions
            ),
        )
        for topic in topics
    )
