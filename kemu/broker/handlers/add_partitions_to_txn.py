"""AddPartitionsToTxn (key 24), v0-v3 (the client form).

Adds the partitions to the producer's transaction, which becomes Ongoing (its timeout starts
with the first partition). Unknown topics or partitions fail the whole request: those get
UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as in Kafka. A producer id that
is not the transactional id's is INVALID_PRODUCER_ID_MAPPING, a stale epoch PRODUCER_FENCED
(INVALID_PRODUCER_EPOCH before v2), a transaction being completed CONCURRENT_TRANSACTIONS.

Omissions: v4-v5 (the broker-to-coordinator batched/verify-only form) are not served: kemu's
partition leaders reach the coordinator in process, and with transaction version 2 clients add
partitions by producing (``produce``).
"""

from __future__ import annotations

from typing import Any

from kemu.broker.context import RequestContext
from kemu.broker.handlers import handler
from kemu.broker.handlers._transactions import for_version
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode

API_KEY = 24
FIRST_FENCED_VERSION = 2


@handler(API_KEY, 0, 3)
def handle(ctx: RequestContext, request: Any) -> Any:
    requested = [
        (topic.name, index) for topic in request.v3_and_below_topics for index in topic.partitions
    ]
    unknown = {
        (name, index) for name, index in requested if ctx.cluster.partition(name, index) is None
    }
    if unknown:
        errors = {
            tp: ErrorCode.unknown_topic_or_partition
            if tp in unknown
            else ErrorCode.operation_not_attempted
            for tp in requested
        }
    else:
        outcome = transaction_coordinator(ctx.runtime).add_partitions(
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            requested,
        )
        error = for_version(outcome.error, ctx.version, FIRST_FENCED_VERSION)
        errors = dict.fromkeys(requested, error)
    return ctx.respond(
        results_by_topic_v3_and_below=tuple(
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
            for topic in request.v3_and_below_topics
        )
    )
