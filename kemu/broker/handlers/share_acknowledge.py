"""ShareAcknowledge (key 79), v1-v2.

Acknowledges records a member acquired through ShareFetch, outside a fetch. The share session
must exist (SHARE_SESSION_NOT_FOUND); epoch 0 is INVALID_SHARE_SESSION_EPOCH, -1 applies the
acknowledgements then closes the session and releases the member's remaining records in it, N
must be the session's epoch (INVALID_SHARE_SESSION_EPOCH) and advances it. Per partition the
acknowledgements apply all or nothing: INVALID_RECORD_STATE for records the member does not
hold (records below the start offset are complete and skipped, as Kafka skips them),
INVALID_REQUEST for malformed batches (type count neither 1 nor one per offset, unknown
types, overlapping batches, RENEW before v2). Every durable change is written to the share
persister before the answer. Partitions led elsewhere get NOT_LEADER_OR_FOLLOWER with
CurrentLeader and NodeEndpoints; unknown topic ids UNKNOWN_TOPIC_ID. v2 answers the
acquisition lock duration in effect (after RENEW, the renewed lock's length).

The group needs READ (GROUP_AUTHORIZATION_FAILED for the request), each topic READ
(TOPIC_AUTHORIZATION_FAILED per partition), as KafkaApis checks.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import group_read, unreadable_topics
from kemu.broker.authorization import refused as refused_by_acls
from kemu.broker.handlers import handler
from kemu.broker.share.manager import share_partitions
from kemu.broker.share.routing import (
    PartitionAnswer,
    ack_batches,
    answered,
    current_leader,
    group_by_topic,
    refused,
    route,
)
from kemu.broker.share.sessions import SharePartitionRef
from kemu.broker.share.settings import share_settings
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.topic_ids import wire_topic_id
from kemu.protocol.views.share_acknowledge import ShareAcknowledgeRequestView

API_KEY = 79


@handler(API_KEY, 1, 2)
async def handle(ctx: RequestContext, request: ShareAcknowledgeRequestView) -> Any:
    denied = refused_by_acls(ctx, request, group_read(request.group_id))
    if denied is not None:
        return denied
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    if not group_id or not member_id:
        return refused(ctx, ErrorCode.invalid_request, 0, "GroupId and MemberId are required")
    settings = share_settings(ctx.runtime, group_id)
    lock_ms = settings.partition.record_lock_duration_ms
    manager = share_partitions(ctx.runtime)
    decision = manager.sessions.for_acknowledge(
        (ctx.node.node_id, group_id, member_id), request.share_session_epoch, ctx.now_ms()
    )
    if decision.error is not ErrorCode.none or decision.session is None:
        # A session error is Kafka's getErrorResponse: no acquisition lock timeout (0).
        return refused(ctx, decision.error, 0, decision.message)

    answers: dict[SharePartitionRef, PartitionAnswer] = {}
    topic_ids = [wire_topic_id(topic.topic_id) for topic in request.topics]
    unreadable = unreadable_topics(ctx, set(topic_ids))
    for topic_id, topic in zip(topic_ids, request.topics, strict=True):
        for p in topic.partitions:
            ref: SharePartitionRef = (topic_id, p.partition_index)
            answer = answers[ref] = PartitionAnswer()
            if topic_id in unreadable:
                answer.error = ErrorCode.topic_authorization_failed
                continue
            where = route(ctx, *ref)
            if where.error is not ErrorCode.none or where.partition is None:
                answer.error = where.error
                if where.leader_id is not None:
                    answer.leader = where.partition
                continue
            batches = ack_batches(p.acknowledgement_batches, ctx.version)
            if batches is None:
                answer.error, answer.message = ErrorCode.invalid_request, "RENEW needs v2"
                continue
            actor = manager.actor(group_id, *ref)
            answer.error, answer.message = await actor.acknowledge(
                where.partition, member_id, batches, settings
            )
    if decision.final:
        await manager.close_session(decision.session)

    topics = [
        ctx.make(
            "ShareAcknowledgeTopicResponse",
            topic_id=topic_id,
            partitions=tuple(
                ctx.make(
                    "PartitionData",
                    partition_index=index,
                    error_code=answer.error,
                    error_message=answer.message,
                    current_leader=current_leader(ctx, answer),
                )
                for index, answer in entries
            ),
        )
        for topic_id, entries in group_by_topic(answers).items()
    ]
    return answered(ctx, lock_ms, topics, answers)
