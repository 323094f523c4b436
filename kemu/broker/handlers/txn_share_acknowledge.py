"""TxnShareAcknowledge (KIP-1289 draft PR's final revision), v0.

Stages a share-group member's acknowledgements in a producer transaction, the share-group
analogue of TxnOffsetCommit. Served at api key 95 unless ``kemu.kip1289.txn.share.ack.api.key``
says otherwise, and only when the broker config ``kemu.kip1289.enable`` is true (otherwise the
key is neither advertised nor served, as an unknown key).

Order (spec §5.3): a null TransactionalId, an empty GroupId or MemberId is INVALID_REQUEST;
then, with an authorizer, WRITE on the TransactionalId (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group (else GROUP_AUTHORIZATION_FAILED),
every partition carrying the code; an unknown group is GROUP_ID_NOT_FOUND, an unknown member
UNKNOWN_MEMBER_ID and a member epoch other than the member's current one (future or stale)
STALE_MEMBER_EPOCH: the three codes the KIP author's draft client turns into an abortable
CommitFailedException (it treats ILLEGAL_GENERATION as fatal, so not even an abort works).

Enlistment (spec §2.7), ``kemu.kip1289.enlist``: ``implicit`` (default, the PR's flow) adds
every source partition's ``__share_group_state`` partition to the transaction through the
enlistment AddShareAcknowledgementsToTxn uses (``kemu.coordinator.transaction.
share_enlistment``) before anything is staged (a topic id or partition that does not exist is
not enlisted); ``explicit`` adds nothing, and a partition that no AddShareAcknowledgementsToTxn
of the same producer id and epoch enlisted is refused with INVALID_TXN_STATE, nothing staged.
Either way the transaction coordinator's error (PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING,
CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE, ...) answers the whole request. Then per
partition: UNKNOWN_TOPIC_OR_PARTITION for a topic id or partition that does not exist (as the
draft PR's share-partition manager answers a partition it has no share partition for; the
draft client retries it, where UNKNOWN_TOPIC_ID would be fatal), NOT_LEADER_OR_FOLLOWER on a
broker that does not lead the partition (also an offline one),
INVALID_TXN_STATE when not enlisted (explicit), UNKNOWN_TOPIC_OR_PARTITION when the group has
no share partition there yet, else the share partition stages the records ACQUIRED ->
TX_PENDING durably, all or nothing: INVALID_RECORD_STATE for records that member does not hold
ACQUIRED, INVALID_REQUEST for types other than ACCEPT, REJECT and gap (gap offsets are staged
too, spec Q8) or malformed batches. Staging again exactly what this producer id/epoch and
member staged (a retry after a lost response) is NONE and changes nothing (Q5). The markers of
the transaction resolve the staged records, at the share coordinator from the state log and at
a loaded leader (``share/txn_acks.py``), also after any restart. ApiVersions advertises
``share.version`` 3 while it is served.

Omissions: no legacy layouts of keys 93/94 (spec §4.2, §4.3), only the final revision, at
whatever key is configured.
"""

from __future__ import annotations

import uuid
from typing import Any

from kemu.broker.authorization import group_read, refused, txn_write
from kemu.broker.handlers import handler
from kemu.broker.share.manager import share_partitions
from kemu.broker.share.routing import Route, ack_batches, route
from kemu.broker.share.sessions import SharePartitionRef
from kemu.broker.share.settings import share_settings
from kemu.broker.share.txn_acks import txn_share_acks
from kemu.cluster.context import RequestContext
from kemu.cluster.crash_points import crash_point
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.transaction.share_enlistment import (
    TxnProducer,
    enlist_share_state,
    enlisted_share_partitions,
    explicit_enlistment,
)
from kemu.protocol.errors import ErrorCode
from kemu.protocol.kip1289 import TXN_SHARE_ACKNOWLEDGE_KEY
from kemu.protocol.topic_ids import wire_topic_id
from kemu.protocol.views.txn_share_acknowledge import TxnShareAcknowledgeRequestView

API_KEY = TXN_SHARE_ACKNOWLEDGE_KEY
NOT_ENLISTED = "Not enlisted by AddShareAcknowledgementsToTxn of this producer id and epoch"
UNKNOWN_TOPIC_ID_MESSAGE = "Unknown topic id"
RENEW_CAPABLE_VERSION = 2  # parse every ack type; the share partition refuses the wrong ones


@handler(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: TxnShareAcknowledgeRequestView) -> Any:
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    transactional_id = request.transactional_id
    if transactional_id is None or not group_id or not member_id:
        return ctx.respond(error_code=ErrorCode.invalid_request, responses=())
    denied = refused(ctx, request, txn_write(transactional_id), group_read(group_id))
    if denied is not None:
        return denied
    error = _check_member(ctx, group_id, member_id, request.member_epoch)
    if error is not ErrorCode.none:
        return ctx.respond(error_code=error, responses=())

    topic_ids = [wire_topic_id(t.topic_id) for t in request.topics]
    routes: dict[SharePartitionRef, Route] = {
        (topic_id, p.partition_index): route(ctx, topic_id, p.partition_index)
        for topic_id, t in zip(topic_ids, request.topics, strict=True)
        for p in t.partitions
    }
    # a topic id or partition that does not exist is no share partition: never enlisted
    refs = [ref for ref, where in routes.items() if where.partition is not None]
    txn = TxnProducer(transactional_id, request.producer_id, request.producer_epoch)
    not_enlisted: set[SharePartitionRef] = set()
    if explicit_enlistment(ctx.runtime):
        error, enlisted = enlisted_share_partitions(ctx.runtime, txn)
        not_enlisted = {ref for ref in refs if (group_id, *ref) not in enlisted}
    else:
        error = enlist_share_state(ctx.runtime, txn, group_id, refs)
    if error is not ErrorCode.none:
        return ctx.respond(error_code=error, responses=())
    crash_point("share.enlisted")

    txn_share_acks(ctx.runtime)  # the markers must find the staged records
    manager = share_partitions(ctx.runtime)
    settings = share_settings(ctx.runtime, group_id)
    answers: dict[SharePartitionRef, tuple[ErrorCode, str | None]] = {}
    for topic_id, topic in zip(topic_ids, request.topics, strict=True):
        for p in topic.partitions:
            ref: SharePartitionRef = (topic_id, p.partition_index)
            where = routes[ref]
            actor = manager.existing(group_id, *ref)
            if where.error is ErrorCode.unknown_topic_id:
                answers[ref] = (ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_ID_MESSAGE)
            elif where.error is not ErrorCode.none or where.partition is None:
                answers[ref] = (where.error, None)
            elif ref in not_enlisted:
                answers[ref] = (ErrorCode.invalid_txn_state, NOT_ENLISTED)
            elif actor is None:
                answers[ref] = (ErrorCode.unknown_topic_or_partition, "No share partition")
            else:
                batches = ack_batches(p.acknowledgement_batches, RENEW_CAPABLE_VERSION)
                assert batches is not None  # only None below v2
                answers[ref] = await actor.stage(
                    where.partition,
                    member_id,
                    request.producer_id,
                    request.producer_epoch,
                    batches,
                    settings,
                )
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (topic_id, index), (code, message) in answers.items():
        by_topic.setdefault(topic_id, []).append(
            ctx.make(
                "TxnShareAcknowledgePartitionResponse",
                partition_index=index,
                error_code=code,
                error_message=message,
            )
        )
    topics = tuple(
        ctx.make("TxnShareAcknowledgeTopicResponse", topic_id=topic_id, partitions=tuple(entries))
        for topic_id, entries in by_topic.items()
    )
    return ctx.respond(error_code=ErrorCode.none, responses=topics)


def _check_member(ctx: RequestContext, group_id: str, member_id: str, epoch: int) -> ErrorCode:
    from kemu.coordinator.group.service import group_coordinator

    try:
        group = group_coordinator(ctx.runtime).share.describe(group_id)
    except GroupError:
        return ErrorCode.group_id_not_found
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.unknown_member_id
    if member.member_epoch != epoch:
        return ErrorCode.stale_member_epoch  # spec Q7: strict equality, future epochs too
    return ErrorCode.none
