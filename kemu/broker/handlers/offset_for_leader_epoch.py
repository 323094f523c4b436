"""OffsetForLeaderEpoch (key 23), v2-v4.

What consumers (KIP-320) use to detect log truncation after a leader change: for each
partition, the end offset of the requested leader epoch. The current epoch ends at the log end
offset; an older epoch ends where the next epoch's first batch starts (the answer's epoch is the
largest one at or below the requested one that has batches, else the requested one); an epoch
newer than the current one is UNDEFINED (-1/-1), as Kafka answers it. CurrentLeaderEpoch is
checked first (FENCED_LEADER_EPOCH when stale, UNKNOWN_LEADER_EPOCH when ahead); a partition led
elsewhere is NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION. As KafkaApis
checks (KIP-320), CLUSTER_ACTION on the cluster or DESCRIBE on the topic is needed; other topics
answer TOPIC_AUTHORIZATION_FAILED per partition, after the authorized ones.

Omissions: kemu keeps no epoch cache; older epochs are found by scanning batch headers, which
is fine for how rarely clients ask. Replica ids are not checked (followers do not exist).
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    allowed_names,
    authorize,
)
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.cluster.partition import Partition
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.offset_for_leader_epoch import OffsetForLeaderEpochRequestView

API_KEY = 23
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@handler(API_KEY, 2, 4)
def handle(ctx: RequestContext, request: OffsetForLeaderEpochRequestView) -> Any:
    names = [t.topic for t in request.topics]
    if authorize(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, log=False):
        visible: set[str] = set(names)
    else:
        visible = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    topics = []
    for topic_request in request.topics:
        if topic_request.topic not in visible:
            continue
        topic = ctx.cluster.topics.get(topic_request.topic)
        results = []
        for p in topic_request.partitions:
            if topic is None or not 0 <= p.partition < len(topic.partitions):
                code, epoch, offset = ErrorCode.unknown_topic_or_partition, -1, -1
            else:
                code, epoch, offset = _end_offset(
                    ctx, topic.partitions[p.partition], p.current_leader_epoch, p.leader_epoch
                )
            results.append(
                ctx.make(
                    "EpochEndOffset",
                    error_code=code,
                    partition=p.partition,
                    leader_epoch=epoch,
                    end_offset=offset,
                )
            )
        topics.append(
            ctx.make(
                "OffsetForLeaderTopicResult", topic=topic_request.topic, partitions=tuple(results)
            )
        )
    for topic_request in request.topics:
        if topic_request.topic in visible:
            continue
        refusals = tuple(
            ctx.make(
                "EpochEndOffset",
                error_code=ErrorCode.topic_authorization_failed,
                partition=p.partition,
                leader_epoch=UNDEFINED_EPOCH,
                end_offset=UNDEFINED_OFFSET,
            )
            for p in topic_request.partitions
        )
        topics.append(
            ctx.make("OffsetForLeaderTopicResult", topic=topic_request.topic, partitions=refusals)
        )
    return ctx.respond(topics=tuple(topics))


def _end_offset(
    ctx: RequestContext, partition: Partition, current_epoch: int, requested: int
) -> tuple[ErrorCode, int, int]:
    if partition.leader_id != ctx.node.node_id:
        return ErrorCode.not_leader_or_follower, UNDEFINED_EPOCH, UNDEFINED_OFFSET
    leader_epoch = partition.leader_epoch
    if current_epoch >= 0 and current_epoch < leader_epoch:
        return ErrorCode.fenced_leader_epoch, UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if current_epoch > leader_epoch:
        return ErrorCode.unknown_leader_epoch, UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if requested == leader_epoch:
        return ErrorCode.none, leader_epoch, partition.log.log_end_offset
    if requested < 0 or requested > leader_epoch:
        return ErrorCode.none, UNDEFINED_EPOCH, UNDEFINED_OFFSET
    return (ErrorCode.none, *older_epoch_end(partition, requested))


def older_epoch_end(partition: Partition, requested: int) -> tuple[int, int]:
    """(epoch, end offset) for an epoch older than the current one, from the batch headers."""
    floor = -1
    log = partition.log
    for header, _ in log.batches(log.log_start_offset, log.log_end_offset):
        epoch = header.partition_leader_epoch
        if epoch > requested:
            return (floor if floor >= 0 else requested), header.base_offset
        floor = max(floor, epoch)
    return (floor if floor >= 0 else requested), log.log_end_offset
