"""ListOffsets (key 2), v1-v11.

EARLIEST (-2) gives the log start offset, LATEST (-1) the high watermark (the last stable offset
under READ_COMMITTED), MAX_TIMESTAMP (-3, v7+) the first record carrying the largest timestamp,
EARLIEST_LOCAL (-4, v8+) the log start (kemu has no tiered storage), and
EARLIEST_PENDING_UPLOAD (-5, v11) -1; a timestamp >= 0 gives the first record at or after it
(-1 when none), as Kafka 3.8+ does: the batch index finds the batch, and that one batch is
decoded (decompressed when needed) to find the record. A found record at or past the high
watermark (last stable offset) is not shown to consumers (-1), and one in a batch that cannot be
decoded gets CORRUPT_MESSAGE. A partition led elsewhere gets NOT_LEADER_OR_FOLLOWER; a stale
CurrentLeaderEpoch FENCED_LEADER_EPOCH.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.cluster.model import Topic
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import CorruptBatch
from kemu.protocol.views.list_offsets import ListOffsetsPartitionView, ListOffsetsRequestView
from kemu.storage.timestamps import (
    RecordMatch,
    first_record_at_or_after,
    record_with_max_timestamp,
)

API_KEY = 2
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5
CONSUMER_REPLICA_ID = -1


@handler(API_KEY, 1, 11)
def handle(ctx: RequestContext, request: ListOffsetsRequestView) -> Any:
    read_committed = getattr(request, "isolation_level", 0) == 1
    from_consumer = getattr(request, "replica_id", CONSUMER_REPLICA_ID) == CONSUMER_REPLICA_ID
    topics = []
    for topic_request in request.topics:
        topic = ctx.cluster.topics.get(topic_request.name)
        # KafkaApis: DESCRIBE on the topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
        if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic_request.name):
            partitions = [
                _answer(ctx, topic, p, read_committed, from_consumer)
                for p in topic_request.partitions
            ]
        else:
            partitions = [_denied(ctx, p.partition_index) for p in topic_request.partitions]
        topics.append(
            ctx.make(
                "ListOffsetsTopicResponse", name=topic_request.name, partitions=tuple(partitions)
            )
        )
    return ctx.respond(topics=tuple(topics))


def _denied(ctx: RequestContext, index: int) -> Any:
    return ctx.make(
        "ListOffsetsPartitionResponse",
        partition_index=index,
        error_code=ErrorCode.topic_authorization_failed,
        timestamp=-1,
        offset=-1,
        leader_epoch=-1,
    )


def _answer(
    ctx: RequestContext,
    topic: Topic | None,
    request: ListOffsetsPartitionView,
    read_committed: bool,
    from_consumer: bool,
) -> Any:
    index = request.partition_index

    def reply(code: ErrorCode, offset: int = -1, timestamp: int = -1, epoch: int = -1) -> Any:
        return ctx.make(
            "ListOffsetsPartitionResponse",
            partition_index=index,
            error_code=code,
            timestamp=timestamp,
            offset=offset,
            leader_epoch=epoch,
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
    if wanted < 0 and wanted != MAX_TIMESTAMP:
        return reply(ErrorCode.invalid_request)
    match: RecordMatch | None
    try:
        if wanted == MAX_TIMESTAMP:
            match = record_with_max_timestamp(partition.log)
        else:
            match = first_record_at_or_after(partition.log, wanted)
    except CorruptBatch:
        return reply(ErrorCode.corrupt_message)
    # Kafka hides from consumers what they could not fetch yet.
    if from_consumer and match is not None:
        fetchable = partition.last_stable_offset if read_committed else partition.high_watermark
        if match.offset >= fetchable:
            match = None
    if match is None:
        return reply(ErrorCode.none, -1, -1, -1)
    return reply(ErrorCode.none, match.offset, match.timestamp, match.leader_epoch)
