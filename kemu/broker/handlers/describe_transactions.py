"""DescribeTransactions (key 65), v0.

The coordinator's view of each transactional id: state (Kafka's names: Empty, Ongoing,
PrepareCommit, ...), timeout, start time (-1 when none is open), producer id and epoch, and the
partitions of the open transaction by topic. An unknown id gets TRANSACTIONAL_ID_NOT_FOUND. Any
broker answers (one coordinator per process). As KafkaApis checks, an id the principal may not
DESCRIBE gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and only the topics it may DESCRIBE are
listed.
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.transaction.coordinator import STATE_NAMES, TransactionMetadata
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.describe_transactions import DescribeTransactionsRequestView

API_KEY = 65


@handler(API_KEY, 0, 0)
def handle(ctx: RequestContext, request: DescribeTransactionsRequestView) -> Any:
    transactions = transaction_coordinator(ctx.runtime).coordinator.transactions
    return ctx.respond(
        transaction_states=tuple(
            _state(ctx, transactional_id, transactions.get(transactional_id))
            for transactional_id in request.transactional_ids
        )
    )


def _state(ctx: RequestContext, transactional_id: str, meta: TransactionMetadata | None) -> Any:
    allowed = authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id)
    if meta is None or not allowed:
        return ctx.make(
            "TransactionState",
            error_code=(
                ErrorCode.transactional_id_authorization_failed
                if not allowed
                else ErrorCode.transactional_id_not_found
            ),
            transactional_id=transactional_id,
            transaction_state="",
            transaction_timeout=datetime.timedelta(0),
            transaction_start_time=_timestamp(0),  # the schema default, as Kafka leaves it
            producer_id=0,  # Kafka leaves the schema defaults (0) for an unknown id
            producer_epoch=0,
            topics=(),
        )
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(index)
    by_topic = {
        topic: ids
        for topic, ids in by_topic.items()
        if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
    }
    return ctx.make(
        "TransactionState",
        error_code=ErrorCode.none,
        transactional_id=transactional_id,
        transaction_state=STATE_NAMES[meta.state],
        transaction_timeout=datetime.timedelta(milliseconds=meta.timeout_ms),
        transaction_start_time=_timestamp(meta.start_ms),
        producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch,
        topics=tuple(
            ctx.make("TopicData", topic=topic, partitions=tuple(ids))
            for topic, ids in by_topic.items()
        ),
    )


def _timestamp(millis: int) -> datetime.datetime:
    """A timestamp field; -1 (no open transaction) encodes as -1, as Kafka answers."""
    return datetime.datetime.fromtimestamp(millis / 1000, tz=datetime.UTC)
