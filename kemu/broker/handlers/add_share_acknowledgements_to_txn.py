"""AddShareAcknowledgementsToTxn (KIP-1289, two-RPC form as kemu decided it, spec §2.7), v0.

The share-group analogue of AddOffsetsToTxn: enlists, in the producer's transaction, the
``__share_group_state`` partition of every (GroupId, TopicId, Partition) named, through the same
enlistment TxnShareAcknowledge uses (``kemu.coordinator.transaction.share_enlistment``). The
transaction becomes non-empty (EndTxn writes markers even when nothing was produced) and its
timeout starts if this is its first partition. Repeating it, or naming partitions already
enlisted, is NONE and writes nothing. It stages nothing: TxnShareAcknowledge does, at each source
partition's leader; with ``kemu.kip1289.enlist=explicit`` TxnShareAcknowledge accepts only
partitions enlisted here by the same producer id and epoch.

Served at api key 96 unless ``kemu.kip1289.add.api.key`` says otherwise, and only when
``kemu.kip1289.enable`` is true (otherwise neither advertised nor served: the connection closes,
as for any key kemu does not serve).

Errors, one top-level code with an ErrorMessage, in this order, and nothing changes on any of
them: with an authorizer, TRANSACTIONAL_ID_AUTHORIZATION_FAILED (no WRITE on the
TransactionalId) and GROUP_AUTHORIZATION_FAILED (no READ on the group), as AddOffsetsToTxn;
INVALID_REQUEST for a null or empty TransactionalId; NOT_COORDINATOR on a broker that does
not lead the TransactionalId's ``__transaction_state`` partition; INVALID_REQUEST for an empty
GroupId, empty Topics or a topic with no partitions; UNKNOWN_TOPIC_ID for a topic id that does
not exist, UNKNOWN_TOPIC_OR_PARTITION for a partition it does not have; GROUP_ID_NOT_FOUND
for a share group that does not exist (spec Q7: TxnShareAcknowledge's codes, of which this
request, carrying no member, can meet only that one); then the transaction
coordinator's INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS (the
transaction is completing) or COORDINATOR_NOT_AVAILABLE (``__transaction_state`` not writable).

Omissions: INVALID_TXN_STATE and COORDINATOR_LOAD_IN_PROGRESS are never answered (kemu
holds no transaction in a state Kafka refuses with it, and loads its state before it listens).
What was enlisted is written to ``__transaction_state``
(kemu's tagged field 100 of the transaction record), so explicit mode survives a restart.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import group_read, refused, txn_write
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.placement import TRANSACTION, coordinator_partition
from kemu.coordinator.transaction.share_enlistment import TxnProducer, enlist_share_state
from kemu.protocol.errors import ErrorCode, default_message
from kemu.protocol.kip1289 import ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN_KEY
from kemu.protocol.topic_ids import wire_topic_id
from kemu.protocol.views.add_share_acknowledgements_to_txn import (
    AddShareAcknowledgementsToTxnRequestView,
)

API_KEY = ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN_KEY

COORDINATOR_MESSAGES = {
    ErrorCode.invalid_producer_id_mapping: "The producer id is not the transactional id's",
    ErrorCode.producer_fenced: "A newer producer epoch of this transactional id exists",
    ErrorCode.concurrent_transactions: "The transaction is completing; retry",
    ErrorCode.coordinator_not_available: "The transaction log cannot be written",
}


@handler(API_KEY, 0, 0)
def handle(ctx: RequestContext, request: AddShareAcknowledgementsToTxnRequestView) -> Any:
    denied = refused(
        ctx, request, txn_write(request.transactional_id), group_read(request.group_id)
    )
    if denied is not None:
        return denied
    error, message = _check(ctx, request)
    if error is ErrorCode.none:
        transactional_id, group_id = request.transactional_id or "", request.group_id or ""
        refs = [
            (wire_topic_id(t.topic_id), int(index))
            for t in request.topics
            for index in t.partitions
        ]
        txn = TxnProducer(transactional_id, request.producer_id, request.producer_epoch)
        error = enlist_share_state(ctx.runtime, txn, group_id, refs)
        message = COORDINATOR_MESSAGES.get(error) or default_message(error)
    if error is ErrorCode.none:
        message = None
    return ctx.respond(error_code=error, error_message=message)


def _check(
    ctx: RequestContext, request: AddShareAcknowledgementsToTxnRequestView
) -> tuple[ErrorCode, str | None]:
    """Everything refused before the transaction coordinator is asked."""
    if not request.transactional_id:
        return ErrorCode.invalid_request, "TransactionalId must be a non-empty string"
    leader = coordinator_partition(ctx.cluster, TRANSACTION, request.transactional_id).leader_id
    if leader != ctx.node.node_id:
        return ErrorCode.not_coordinator, f"The transaction coordinator is broker {leader}"
    if not request.group_id:
        return ErrorCode.invalid_request, "GroupId must be a non-empty string"
    if not request.topics:
        return ErrorCode.invalid_request, "Topics must not be empty"
    for topic in request.topics:
        topic_id = wire_topic_id(topic.topic_id)
        found = ctx.cluster.topics_by_id.get(topic_id)
        if found is None:
            return ErrorCode.unknown_topic_id, f"Unknown topic id {topic_id}"
        if not topic.partitions:
            return ErrorCode.invalid_request, f"No partitions for topic {found.name}"
        for index in topic.partitions:
            if not 0 <= index < len(found.partitions):
                return (
                    ErrorCode.unknown_topic_or_partition,
                    f"Topic {found.name} has no partition {index}",
                )
    if not _share_group_exists(ctx, request.group_id):
        return ErrorCode.group_id_not_found, f"Share group {request.group_id} does not exist"
    return ErrorCode.none, None


def _share_group_exists(ctx: RequestContext, group_id: str) -> bool:
    from kemu.coordinator.group.service import group_coordinator

    try:
        group_coordinator(ctx.runtime).share.describe(group_id)
    except GroupError:
        return False
    return True
