"""ListOffsets (key 2), v1-v11.

EARLIEST (-2) gives the log start offset, LATEST (-1) the high watermark (the last stable offset
under READ_COMMITTED), MAX_TIMESTAMP (-3, v7+) the offset of the record batch with the largest
timestamp, EARLIEST_LOCAL (-4, v8+) the log start (kemu has no tiered storage), and
EARLIEST_PENDING_UPLOAD (-5, v11) -1; a timestamp >= 0 gives the first offset whose batch max
timestamp is at or after it (-1 when none). A partition led elsewhere gets
NOT_LEADER_OR_FOLLOWER; a stale CurrentLeaderEpoch FENCED_LEADER_EPOCH.

Omissions: timestamp lookups resolve to the batch, not the record inside a compressed batch
(kemu never decompresses); clients filter by timestamp themselves.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.context import RequestContext
from kemu.broker.handlers import handler
from kemu.protocol.errors import ErrorCode

API_KEY = 2
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5


@handler(API_KEY, 1, 11)
async def handle(ctx: RequestContext, request: Any) -> Any:
    read_committed = getattr(request, "isolation_level", 0) == 1
    topics = []
    for topic_request in request.topics:
        topic = ctx.cluster.topics.get(topic_request.name)
        partitions = []
        for p in topic_request.partitions:
            partitions.append(_answer(ctx, topic, p, read_committed))
        topics.append(
            ctx.make(
                "ListOffsetsTopicResponse", name=topic_request.name, partitions=tuple(partitions)
            )
        )
    return ctx.respond(topics=tuple(topics))


def _answer(ctx: RequestContext, topic: Any, request: Any, read_committed: bool) -> Any:
    index = request.partition_index

    def reply(code: ErrorCode, offset: int = -1, timestamp: int = -1, epoch: int = -1) -> Any:
        return ctx.make(
            "ListOffsetsPartitionResponse",
            partition_index=index,
            error_code=code,
            timestamp=timestamp,
            offset=offset,
            leader_epoch=epoch,
            old_style_offsets=(),
        )

    if topic is None or not 0 <= index < len(topic.partitions):
        return reply(ErrorCode.unknown_topic_or_partition)
    partition = topic.partitions[index]
    if partition.leader_id != ctx.node.node_id:
        return reply(ErrorCode.not_leader_or_follower)
    requested_epoch = getattr(request, "current_leader_epoch", -1)
    if 0 <= requested_epoch < partition.leader_epoch:
        return reply(ErrorCode.fenced_leader_epoch)
    if requested_epoch > partition.leader_epoch:
        return reply(ErrorCode.unknown_leader_epoch)
    epoch = partition.leader_epoch
    wanted = request.timestamp
    if wanted == LATEST:
        end = partition.last_stable_offset if read_committed else partition.high_watermark
        return reply(ErrorCode.none, end, -1, epoch)
    if wanted in (EARLIEST, EARLIEST_LOCAL):
        return reply(ErrorCode.none, partition.log_start_offset, -1, epoch)
    if wanted == EARLIEST_PENDING_UPLOAD:
        return reply(ErrorCode.none, -1, -1, -1)
    if wanted == MAX_TIMESTAMP:
        found = partition.log.max_timestamp()
        if found is None:
            return reply(ErrorCode.none, -1, -1, -1)
        return reply(ErrorCode.none, found.offset, found.timestamp, epoch)
    if wanted < 0:
        return reply(ErrorCode.invalid_request)
    match = partition.log.offset_for_timestamp(wanted)
    if match is None:
        return reply(ErrorCode.none, -1, -1, -1)
    return reply(ErrorCode.none, match.offset, match.timestamp, epoch)
