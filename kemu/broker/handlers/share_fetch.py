"""ShareFetch (key 78), v1-v2.

Share sessions per (broker, group, member): epoch 0 opens one (acknowledgements then are
INVALID_REQUEST), -1 applies the acknowledgements, closes it and releases the member's records
in it, N must be the session's epoch (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
SHARE_SESSION_LIMIT_REACHED past ``group.share.max.share.sessions``); ForgottenTopicsData
leaves the session. When the connection that opened a session closes, the session ends and
the member's records in it are released (as -1 does). Piggy-backed acknowledgements are
applied first, per partition all or nothing (AcknowledgeErrorCode: INVALID_RECORD_STATE,
INVALID_REQUEST; records below the start offset skipped, as in ShareAcknowledge), except that
their RELEASEs take effect right after the first acquisition: in Kafka the released records are
still being written to the share coordinator while the fetch acquires, so a consumer does not
get back in the same response what it just released unless there was nothing else. Then
records are acquired
from every session partition, taking turns: whole log batches, AcquiredRecords with delivery
counts, MaxRecords and MaxBytes shared by the partitions (the first batch always goes, KIP-74),
BatchSize splitting acquired ranges, ShareAcquireMode (v2: 0 batch_optimized, 1 record_limit).
An incremental request (epoch > 0) is answered only for the partitions with records, an error
(that one and the next answer), an acknowledgement result, or that joined the session since it
opened and were not answered yet, as Kafka's ShareSessionContext does; the opening request
lists every partition.
Records delivered often are throttled as in Kafka (fewer per fetch, the last attempt alone; see
``kemu.broker.share.partition``).
Long poll: up to MaxWaitMs until MinBytes look acquirable, woken by appends and by records
becoming available again (releases, lock expiry, aborts). v2 IsRenewAck: the acknowledgements
(RENEW among them) are applied and nothing is fetched. AcquisitionLockTimeoutMs is the group's
``share.record.lock.duration.ms``. Partitions led elsewhere get NOT_LEADER_OR_FOLLOWER with
CurrentLeader and NodeEndpoints; unknown topic ids UNKNOWN_TOPIC_ID. MaxBytes 0 (or less) fetches
nothing: as in Kafka, whose PartitionMaxBytesStrategy throws on it, each partition this broker
leads gets UNKNOWN_SERVER_ERROR "Requested max bytes must be greater than 0", at once
(acknowledgements are still applied).

The group needs READ (GROUP_AUTHORIZATION_FAILED for the request) and each topic READ: the
partitions of a topic the principal may not read answer TOPIC_AUTHORIZATION_FAILED (their
acknowledgements too), as KafkaApis does. Omissions: Kafka's broker-side rejection of non-zero
fetch limits in an IsRenewAck request and of partitions named in a closing (-1) request; share
fetch purgatory fairness beyond rotating the partition order.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from typing import Any

from kemu.broker.authorization import group_read, unreadable_topics
from kemu.broker.authorization import refused as refused_by_acls
from kemu.broker.handlers import handler
from kemu.broker.share.actor import SharePartitionActor
from kemu.broker.share.manager import SharePartitionManager, share_partitions
from kemu.broker.share.partition import AckBatch, AcquireMode
from kemu.broker.share.routing import (
    PartitionAnswer,
    ack_batches,
    answered,
    current_leader,
    group_by_topic,
    millis,
    refused,
    route,
)
from kemu.broker.share.sessions import INITIAL_EPOCH, SharePartitionRef, ShareSession
from kemu.broker.share.settings import ShareSettings, share_settings
from kemu.cluster.context import RequestContext
from kemu.cluster.partition import Partition
from kemu.protocol.errors import ErrorCode
from kemu.protocol.topic_ids import wire_topic_id
from kemu.protocol.views.share_fetch import AcknowledgementBatchView, ShareFetchRequestView

API_KEY = 78
NO_MAX_BYTES = "Requested max bytes must be greater than 0"


@handler(API_KEY, 1, 2)
async def handle(ctx: RequestContext, request: ShareFetchRequestView) -> Any:
    denied = refused_by_acls(ctx, request, group_read(request.group_id))
    if denied is not None:
        return denied
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    if not group_id or not member_id:
        return refused(ctx, ErrorCode.invalid_request, 0, "GroupId and MemberId are required")
    settings = share_settings(ctx.runtime, group_id)
    lock_ms = settings.partition.record_lock_duration_ms
    mode_id = int(getattr(request, "share_acquire_mode", 0))
    if mode_id not in (AcquireMode.BATCH_OPTIMIZED, AcquireMode.RECORD_LIMIT):
        return refused(ctx, ErrorCode.invalid_request, lock_ms, f"Unknown acquire mode {mode_id}")
    manager = share_partitions(ctx.runtime)
    requested: list[SharePartitionRef] = []
    acknowledgements: dict[SharePartitionRef, tuple[AcknowledgementBatchView, ...]] = {}
    for topic in request.topics:
        topic_id = wire_topic_id(topic.topic_id)
        for p in topic.partitions:
            ref: SharePartitionRef = (topic_id, p.partition_index)
            requested.append(ref)
            if p.acknowledgement_batches:
                acknowledgements[ref] = p.acknowledgement_batches
    forgotten: list[SharePartitionRef] = [
        (wire_topic_id(t.topic_id), index)
        for t in request.forgotten_topics_data
        for index in t.partitions
    ]
    key = (ctx.node.node_id, group_id, member_id)
    decision = manager.sessions.for_fetch(
        key,
        request.share_session_epoch,
        requested,
        forgotten,
        has_acknowledgements=bool(acknowledgements),
        now_ms=ctx.now_ms(),
        connection=ctx.connection,
    )
    if decision.error is not ErrorCode.none or decision.session is None:
        # A session error is Kafka's getErrorResponse: no acquisition lock timeout (0).
        return refused(ctx, decision.error, 0, decision.message)
    # READ on each topic, as KafkaApis filters the session's partitions (logged once a request)
    unreadable = unreadable_topics(
        ctx, {t for t, _ in requested} | {t for t, _ in decision.session.partitions}
    )
    hooks = ctx.connection
    if request.share_session_epoch == INITIAL_EPOCH and hooks is not None:
        hooks.on_close(key, lambda: manager.connection_closed(key, hooks))

    fetching = not (
        decision.final or getattr(request, "is_renew_ack", False) or request.max_records <= 0
    )
    answers: dict[SharePartitionRef, PartitionAnswer] = {}
    releases: list[Deferred] = []
    for ref, raw in acknowledgements.items():
        if ref[0] in unreadable:
            answers[ref] = PartitionAnswer(ack_error=ErrorCode.topic_authorization_failed)
            continue
        answers[ref] = await _acknowledge(
            ctx, manager, settings, group_id, member_id, ref, raw, releases if fetching else None
        )
    if decision.final:
        await manager.close_session(decision.session)
    if not fetching:
        return _respond(ctx, answers, lock_ms)
    if request.max_bytes <= 0:
        # Kafka's PartitionMaxBytesStrategy refuses a request max bytes of 0 and the delayed
        # share fetch completes every partition it holds with that exception: no records.
        session_refs = list(decision.session.partitions)
        targets = _targets(
            ctx, manager, group_id, session_refs, answers, unreadable, decision.session.deleted
        )
        for ref, _partition, _actor in targets:
            answer = answers.setdefault(ref, PartitionAnswer())
            answer.error = ErrorCode.unknown_server_error
            answer.message = NO_MAX_BYTES
        return _respond(ctx, answers, lock_ms)
    try:
        await _fetch_with_wait(
            ctx,
            request,
            (group_id, member_id),
            manager,
            settings,
            decision.session,
            answers,
            releases,
            unreadable,
        )
    finally:
        await _release(member_id, releases)
    if request.share_session_epoch != INITIAL_EPOCH:
        # An incremental answer: only partitions with something to say, as Kafka's
        # ShareSessionContext; acknowledgement results are always listed.
        session = decision.session
        answers = {
            ref: answer
            for ref, answer in answers.items()
            if session.must_answer(
                ref,
                records=bool(answer.records or answer.acquired),
                error=answer.error is not ErrorCode.none,
            )
            or ref in acknowledgements
        }
    return _respond(ctx, answers, lock_ms)


Deferred = tuple[SharePartitionActor, tuple[AckBatch, ...]]


async def _fetch_with_wait(
    ctx: RequestContext,
    request: ShareFetchRequestView,
    member: tuple[str, str],
    manager: SharePartitionManager,
    settings: ShareSettings,
    session: ShareSession,
    answers: dict[SharePartitionRef, PartitionAnswer],
    releases: list[Deferred],
    unreadable: set[uuid.UUID],
) -> None:
    """Acquire, long-polling up to MaxWaitMs for MinBytes. The request's own RELEASEs take effect
    after the first attempt, and before any wait: they are handed out (to this request too) only
    when the first attempt found nothing. ``member`` is the (group id, member id) checked
    non-empty."""
    group_id, member_id = member
    order = session.fetch_order()
    deadline = ctx.wait_ms() + max(millis(request.max_wait), 0)
    min_bytes = max(int(request.min_bytes), 1)
    mode = AcquireMode(int(getattr(request, "share_acquire_mode", 0)))
    while True:
        remaining = deadline - ctx.wait_ms()
        targets = _targets(ctx, manager, group_id, order, answers, unreadable, session.deleted)
        if remaining <= 0 or not targets or _acquirable(targets, settings, min_bytes) >= min_bytes:
            acquired, failed = await _fetch(
                ctx, request, settings, member_id, mode, targets, answers
            )
            if acquired or failed or not targets or (remaining <= 0 and not releases):
                return
        if releases:
            await _release(member_id, releases)
            continue  # what the request released may be what there is to hand out
        await _wait_for_records(targets, remaining / 1000)


async def _release(member_id: str, releases: list[Deferred]) -> None:
    """Apply (once) the RELEASE acknowledgements the request's fetch went without."""
    pending = list(releases)
    releases.clear()
    for actor, batches in pending:
        await actor.release_deferred(member_id, batches)


Target = tuple[SharePartitionRef, Partition, SharePartitionActor]


def _targets(
    ctx: RequestContext,
    manager: SharePartitionManager,
    group_id: str,
    order: list[SharePartitionRef],
    answers: dict[SharePartitionRef, PartitionAnswer],
    unreadable: set[uuid.UUID],
    deleted: set[SharePartitionRef],
) -> list[Target]:
    """The session's partitions this broker leads and the principal may READ; the others get
    their error answer (a partition the session held when its topic was deleted:
    UNKNOWN_TOPIC_OR_PARTITION, as Kafka's session, holding it by name, finds no partition)."""
    targets = []
    for ref in order:
        if ref[0] in unreadable:
            answers.setdefault(ref, PartitionAnswer()).error = ErrorCode.topic_authorization_failed
            continue
        if ref in deleted:
            answers.setdefault(ref, PartitionAnswer()).error = ErrorCode.unknown_topic_or_partition
            continue
        where = route(ctx, *ref)
        if where.error is not ErrorCode.none or where.partition is None:
            answer = answers.setdefault(ref, PartitionAnswer())
            answer.error = where.error
            if where.leader_id is not None:
                answer.leader = where.partition
            continue
        targets.append((ref, where.partition, manager.actor(group_id, *ref)))
    return targets


def _acquirable(targets: list[Target], settings: ShareSettings, min_bytes: int) -> int:
    total = 0
    for _, partition, actor in targets:
        total += actor.estimate_bytes(partition, settings, min_bytes - total)
        if total >= min_bytes:
            break
    return total


async def _fetch(
    ctx: RequestContext,
    request: ShareFetchRequestView,
    settings: ShareSettings,
    member_id: str,
    mode: AcquireMode,
    targets: list[Target],
    answers: dict[SharePartitionRef, PartitionAnswer],
) -> tuple[int, bool]:
    """Acquire from each target in turn: how many records were acquired, whether any failed."""
    bytes_left = int(request.max_bytes)
    records_left = int(request.max_records)
    total = 0
    failed = False
    for ref, partition, actor in targets:
        answer = answers.setdefault(ref, PartitionAnswer())
        if records_left <= 0 or bytes_left <= 0:
            continue
        outcome = await actor.acquire(
            partition,
            member_id,
            settings,
            max_records=records_left,
            batch_size=int(request.batch_size),
            mode=mode,
            max_bytes=bytes_left,
            min_one=total == 0,
        )
        answer.error = outcome.error
        failed = failed or outcome.error is not ErrorCode.none
        answer.records = outcome.records
        answer.acquired = [
            (r.first_offset, r.last_offset, r.delivery_count) for r in outcome.acquired
        ]
        bytes_left -= len(outcome.records)
        records_left -= outcome.count
        total += outcome.count
    return total, failed


async def _acknowledge(
    ctx: RequestContext,
    manager: SharePartitionManager,
    settings: ShareSettings,
    group_id: str,
    member_id: str,
    ref: SharePartitionRef,
    raw: Iterable[AcknowledgementBatchView],
    releases: list[Deferred] | None,
) -> PartitionAnswer:
    """Apply one partition's acknowledgements; with ``releases`` its RELEASEs are held back and
    appended there."""
    answer = PartitionAnswer()
    where = route(ctx, *ref)
    if where.error is not ErrorCode.none or where.partition is None:
        answer.ack_error = where.error
        if where.leader_id is not None:
            answer.error = where.error
            answer.leader = where.partition
        return answer
    batches = ack_batches(raw, ctx.version)
    if batches is None:
        answer.ack_error = ErrorCode.invalid_request
        answer.ack_message = "RENEW needs ShareFetch v2"
        return answer
    actor = manager.actor(group_id, *ref)
    answer.ack_error, answer.ack_message, held = await actor.acknowledge_deferring(
        where.partition, member_id, batches, settings, defer_release=releases is not None
    )
    if held and releases is not None:
        releases.append((actor, held))
    return answer


async def _wait_for_records(targets: list[Target], timeout: float) -> None:
    loop = asyncio.get_running_loop()
    woken = loop.create_future()

    def wake() -> None:
        if not woken.done():
            woken.set_result(None)

    for _, partition, actor in targets:
        partition.listeners.add(wake)
        actor.waiters.add(wake)
    try:
        await asyncio.wait_for(woken, timeout)
    except TimeoutError:
        pass
    finally:
        for _, partition, actor in targets:
            partition.listeners.discard(wake)
            actor.waiters.discard(wake)


def _respond(
    ctx: RequestContext, answers: dict[SharePartitionRef, PartitionAnswer], lock_ms: int
) -> Any:
    topics = []
    for topic_id, entries in group_by_topic(answers).items():
        partitions = tuple(
            ctx.make(
                "PartitionData",
                partition_index=index,
                error_code=answer.error,
                error_message=answer.message,
                acknowledge_error_code=answer.ack_error,
                acknowledge_error_message=answer.ack_message,
                current_leader=current_leader(ctx, answer),
                records=answer.records,
                acquired_records=tuple(
                    ctx.make(
                        "AcquiredRecords",
                        first_offset=first,
                        last_offset=last,
                        delivery_count=count,
                    )
                    for first, last, count in answer.acquired
                ),
            )
            for index, answer in entries
        )
        topics.append(
            ctx.make("ShareFetchableTopicResponse", topic_id=topic_id, partitions=partitions)
        )
    return answered(ctx, lock_ms, topics, answers)
