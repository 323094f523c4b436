"""Fetch (key 1), v4-v18.

Whole batches from the one holding the fetch offset, bounded by PartitionMaxBytes and MaxBytes
(the first batch of the first partition with data is always returned, KIP-74). Long poll: waits
up to MaxWaitMs until MinBytes are there, woken by appends. Incremental fetch sessions
(KIP-227, v7+) with forgotten topics; topics by id from v13 (UNKNOWN_TOPIC_ID, the zero id
too). READ_COMMITTED reads stop at the last stable offset (the first offset of the earliest open
transaction) and carry the aborted transactions (producer id, first offset) overlapping what
they may read. A fetch offset outside [log start, high watermark] gets OFFSET_OUT_OF_RANGE; a
stale or future CurrentLeaderEpoch gets FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH; a partition
led elsewhere gets NOT_LEADER_OR_FOLLOWER with the leader (v12+) and its endpoint (v16+).

Omissions: follower fetching (replica ids >= 0 are served like consumers), preferred read
replicas (always -1), diverging epochs and snapshots (one copy, nothing diverges).
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from dataclasses import dataclass
from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.broker.fetch_session import (
    FetchSession,
    FetchSessionCache,
    PartitionKey,
    SessionPartition,
)
from kemu.broker.handlers import handler
from kemu.broker.leadership import endpoints_field, leader_fields
from kemu.cluster.context import RequestContext, Runtime
from kemu.cluster.partition import Partition
from kemu.cluster.services import Service
from kemu.protocol.errors import ErrorCode
from kemu.protocol.topic_ids import wire_topic_id
from kemu.protocol.views.fetch import FetchRequestView

API_KEY = 1
READ_COMMITTED = 1


FETCH_SESSIONS = Service("fetch_sessions", lambda _: FetchSessionCache())


def fetch_sessions(runtime: Runtime) -> FetchSessionCache:
    return runtime.services.get(FETCH_SESSIONS)


@dataclass(slots=True)
class Target:
    key: PartitionKey
    topic_name: str | None
    topic_id: uuid.UUID | None
    index: int
    state: SessionPartition


@handler(API_KEY, 4, 18)
async def handle(ctx: RequestContext, request: FetchRequestView) -> Any:
    by_id = ctx.version >= 13
    now = ctx.now_ms()
    session: FetchSession | None = None
    incremental = False
    if ctx.version >= 7:
        decision = fetch_sessions(ctx.runtime).decide(
            ctx.node.node_id, request.session_id, request.session_epoch, now
        )
        if decision.error is not ErrorCode.none:
            return ctx.respond(error_code=decision.error, session_id=0, responses=())
        session, incremental = decision.session, decision.incremental

    targets = _targets(ctx, request, session, incremental, by_id)
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    max_wait_ms = _millis(request.max_wait)
    deadline = ctx.wait_ms() + max_wait_ms
    while True:
        results, total, errors, partitions = _read_all(ctx, request, targets, read_committed)
        remaining = deadline - ctx.wait_ms()
        if total >= request.min_bytes or errors or remaining <= 0 or not partitions:
            break
        await _wait_for_append(partitions, remaining / 1000)

    other_leaders = {leader for _, _, leader in results if leader is not None}
    responses = _group_by_topic(ctx, results, tracked=session is not None, incremental=incremental)
    return ctx.respond(
        error_code=ErrorCode.none,
        session_id=session.session_id if session is not None else 0,
        responses=responses,
        **endpoints_field(ctx, other_leaders),
    )


def _millis(value: datetime.timedelta | int) -> int:
    if hasattr(value, "total_seconds"):
        return int(value.total_seconds() * 1000)
    return int(value)


def _targets(
    ctx: RequestContext,
    request: FetchRequestView,
    session: FetchSession | None,
    incremental: bool,
    by_id: bool,
) -> list[Target]:
    cluster = ctx.cluster
    requested: list[Target] = []
    for topic in request.topics:
        topic_id = wire_topic_id(topic.topic_id) if by_id else None
        topic_key: object = topic_id if by_id else topic.topic
        known = cluster.topics_by_id.get(topic_id) if topic_id is not None else None
        name = known.name if known is not None else (None if by_id else topic.topic)
        for p in topic.partitions:
            state = SessionPartition(
                p.fetch_offset, p.partition_max_bytes, getattr(p, "current_leader_epoch", -1)
            )
            requested.append(
                Target(
                    (topic_key, p.partition),
                    name,
                    topic_id,
                    p.partition,
                    state,
                )
            )
    if session is None:
        return requested
    if not incremental:
        session.partitions.clear()
    for forgotten in getattr(request, "forgotten_topics_data", ()):
        topic_key = wire_topic_id(forgotten.topic_id) if by_id else forgotten.topic
        for index in forgotten.partitions:
            session.partitions.pop((topic_key, index), None)
    for target in requested:
        existing = session.partitions.get(target.key)
        if existing is None:
            session.partitions[target.key] = target.state
        else:
            existing.fetch_offset = target.state.fetch_offset
            existing.max_bytes = target.state.max_bytes
            existing.current_leader_epoch = target.state.current_leader_epoch
    targets = []
    for key, state in session.partitions.items():
        topic_key, index = key
        if by_id:
            assert isinstance(topic_key, uuid.UUID)
            known = cluster.topics_by_id.get(topic_key)
            targets.append(Target(key, known.name if known else None, topic_key, index, state))
        else:
            assert isinstance(topic_key, str)
            targets.append(Target(key, topic_key, None, index, state))
    return targets


# target, its PartitionData's fields, other leader to point at. A long poll reads its partitions
# again on every append it is woken by, and an incremental session answers only the partitions
# that changed: the PartitionData messages are built once, for what the answer carries.
Result = tuple[Target, dict[str, Any], int | None]


def _read_all(
    ctx: RequestContext,
    request: FetchRequestView,
    targets: list[Target],
    read_committed: bool,
) -> tuple[list[Result], int, bool, list[Partition]]:
    cluster = ctx.cluster
    bytes_left: int = request.max_bytes
    total = 0
    errors = False
    results: list[Result] = []
    live: list[Partition] = []
    neutral_leader = _neutral_leader(ctx)
    for target in targets:
        topic = cluster.topics.get(target.topic_name) if target.topic_name is not None else None
        if topic is not None and not authorize(
            ctx, AclOperation.READ, ResourceType.TOPIC, topic.name
        ):
            code = ErrorCode.topic_authorization_failed
            results.append((target, _partition_error(ctx, target, code, **REFUSED_UP_FRONT), None))
            errors = True
            continue
        if topic is None or (target.topic_id is not None and topic.topic_id != target.topic_id):
            code = (
                ErrorCode.unknown_topic_id
                if target.topic_id is not None
                else ErrorCode.unknown_topic_or_partition
            )
            results.append((target, _partition_error(ctx, target, code, **REFUSED_UP_FRONT), None))
            errors = True
            continue
        if not 0 <= target.index < len(topic.partitions):
            results.append(
                (target, _partition_error(ctx, target, ErrorCode.unknown_topic_or_partition), None)
            )
            errors = True
            continue
        partition = topic.partitions[target.index]
        if partition.leader_id != ctx.node.node_id:
            data = _partition_error(
                ctx,
                target,
                ErrorCode.not_leader_or_follower,
                current_leader=leader_fields(ctx, partition),
            )
            results.append((target, data, partition.leader_id))
            errors = True
            continue
        state = target.state
        epoch_error = _epoch_error(state.current_leader_epoch, partition.leader_epoch)
        offset = state.fetch_offset
        high_watermark = partition.high_watermark
        log_start_offset = partition.log_start_offset
        if epoch_error is not None or not log_start_offset <= offset <= high_watermark:
            # Kafka's failed log read: high watermark, LSO and log start offset all -1
            code = epoch_error or ErrorCode.offset_out_of_range
            results.append((target, _partition_error(ctx, target, code), None))
            errors = True
            continue
        live.append(partition)
        last_stable_offset = partition.last_stable_offset
        upper = last_stable_offset if read_committed else high_watermark
        records = b""
        if offset < upper and bytes_left > 0:
            records = partition.log.read(
                offset, min(state.max_bytes, bytes_left), upper=upper, min_one=total == 0
            )
            bytes_left -= len(records)
            total += len(records)
        data = {
            "partition_index": target.index,
            "error_code": ErrorCode.none,
            "high_watermark": high_watermark,
            "last_stable_offset": last_stable_offset,
            "log_start_offset": log_start_offset,
            "aborted_transactions": (
                _aborted(ctx, partition, offset, upper) if read_committed else None
            ),
            "preferred_read_replica": -1,
            "records": records,
            **neutral_leader,
        }
        results.append((target, data, None))
    return results, total, errors, live


def _aborted(ctx: RequestContext, partition: Partition, start: int, end: int) -> tuple[Any, ...]:
    """The aborted transactions a READ_COMMITTED consumer must drop from [start, end)."""
    if start >= end or not partition.transactions.aborted:
        return ()
    partition.transactions.forget_below(partition.log_start_offset)  # retention, DeleteRecords
    return tuple(
        ctx.make("AbortedTransaction", producer_id=producer_id, first_offset=first)
        for producer_id, first in partition.transactions.aborted_between(start, end)
    )


def _epoch_error(requested: int, current: int) -> ErrorCode | None:
    if requested < 0 or requested == current:
        return None
    return ErrorCode.fenced_leader_epoch if requested < current else ErrorCode.unknown_leader_epoch


def _neutral_leader(ctx: RequestContext) -> dict[str, Any]:
    if not ctx.has("LeaderIdAndEpoch"):
        return {}
    return {"current_leader": ctx.make_shared("LeaderIdAndEpoch", leader_id=-1, leader_epoch=-1)}


# Kafka refuses a partition before reading (unknown topic, topic id or authorization) with
# FetchResponse.partitionResponse, whose aborted transactions are the empty default; a failed
# read (not leader, offsets, epochs) leaves them null.
REFUSED_UP_FRONT: dict[str, Any] = {"aborted_transactions": ()}


def _partition_error(
    ctx: RequestContext,
    target: Target,
    code: ErrorCode,
    **extra: Any,
) -> dict[str, Any]:
    values: dict[str, Any] = {
        "partition_index": target.index,
        "error_code": code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }
    values.update(_neutral_leader(ctx))
    values.update(extra)
    return values


async def _wait_for_append(partitions: list[Partition], timeout: float) -> None:
    loop = asyncio.get_running_loop()
    woken = loop.create_future()

    def wake() -> None:
        if not woken.done():
            woken.set_result(None)

    for partition in partitions:
        partition.listeners.add(wake)
    try:
        await asyncio.wait_for(woken, timeout)
    except TimeoutError:
        pass
    finally:
        for partition in partitions:
            partition.listeners.discard(wake)


def _group_by_topic(
    ctx: RequestContext, results: list[Result], *, tracked: bool, incremental: bool
) -> tuple[Any, ...]:
    grouped: dict[object, list[Any]] = {}
    names: dict[object, tuple[str | None, uuid.UUID | None]] = {}
    for target, data, _ in results:
        changed = _changed(target.state, data) if tracked else True
        if incremental and not changed:
            continue
        topic_key = target.key[0]
        grouped.setdefault(topic_key, []).append(ctx.make("PartitionData", **data))
        names[topic_key] = (target.topic_name, target.topic_id)
    by_id = ctx.version >= 13  # only the field this version has: the id instead of the name
    return tuple(
        ctx.make(
            "FetchableTopicResponse",
            partitions=tuple(parts),
            **({"topic_id": names[key][1]} if by_id else {"topic": names[key][0]}),
        )
        for key, parts in grouped.items()
    )


def _changed(state: SessionPartition, data: dict[str, Any]) -> bool:
    """Whether an incremental response must carry this partition; records what was sent."""
    high_watermark = data["high_watermark"]
    last_stable_offset = data["last_stable_offset"]
    log_start_offset = data["log_start_offset"]
    changed = (
        bool(data["records"])
        or data["error_code"] != ErrorCode.none
        or high_watermark != state.last_high_watermark
        or last_stable_offset != state.last_stable_offset
        or log_start_offset != state.last_log_start
    )
    state.last_high_watermark = high_watermark
    state.last_stable_offset = last_stable_offset
    state.last_log_start = log_start_offset
    return changed
