"""ListTransactions (key 66), v0-v2.

Every transactional id whose ``__transaction_state`` partition this broker leads (as in Kafka,
where each broker lists its own coordinator's), with its producer id and state, filtered by state
names (unknown names are echoed in ``unknown_state_filters``), producer ids, v1+ a time since
the transaction started (ms) that must be exceeded, v2+ a transactional id regular expression.
As Kafka 4.4.0's ``TransactionStateManager.listTransactionStates``, a non-empty pattern is read
with RE2/J's syntax and matched against whole ids, and one RE2/J refuses fails the request with
INVALID_REGULAR_EXPRESSION (the syntax is that of KIP-848 topic regexes, which Kafka compiles
with RE2/J too: ``consumer.topic_regex``). Any broker answers. As Kafka, only the transactional
ids the principal may DESCRIBE are listed.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.consumer.topic_regex import InvalidTopicRegex, compile_topic_regex
from kemu.coordinator.group.placement import TRANSACTION, coordinator_partition
from kemu.coordinator.transaction.coordinator import STATE_NAMES
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.list_transactions import ListTransactionsRequestView

API_KEY = 66
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID


@handler(API_KEY, 0, 2)
def handle(ctx: RequestContext, request: ListTransactionsRequestView) -> Any:
    known_names = set(STATE_NAMES.values())
    states = set(request.state_filters)
    producer_ids = set(request.producer_id_filters)
    duration = getattr(request, "duration_filter", -1)
    pattern_text = getattr(request, "transactional_id_pattern", None)
    pattern = None
    if pattern_text:
        try:
            pattern = compile_topic_regex(pattern_text)
        except InvalidTopicRegex:
            return ctx.respond(
                error_code=ErrorCode.invalid_regular_expression,
                unknown_state_filters=(),
                transaction_states=(),
            )
    now = ctx.now_ms()
    node = ctx.node.node_id
    found = []
    for transactional_id, meta in transaction_coordinator(
        ctx.runtime
    ).coordinator.transactions.items():
        name = STATE_NAMES[meta.state]
        if states and name not in states:
            continue
        if producer_ids and meta.producer_id not in producer_ids:
            continue
        if duration >= 0 and now - meta.start_ms <= duration:
            continue  # as Kafka: the time since the transaction started (start -1 when none)
        if pattern is not None and not pattern.matches(transactional_id):
            continue
        if coordinator_partition(ctx.cluster, TRANSACTION, transactional_id).leader_id != node:
            continue  # Admin asks every broker and concatenates: each lists the ids it leads
        if not authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            continue
        found.append(
            ctx.make(
                "TransactionState",
                transactional_id=transactional_id,
                producer_id=meta.producer_id,
                transaction_state=name,
            )
        )
    return ctx.respond(
        error_code=ErrorCode.none,
        unknown_state_filters=tuple(sorted(states - known_names)),
        transaction_states=tuple(found),
    )
