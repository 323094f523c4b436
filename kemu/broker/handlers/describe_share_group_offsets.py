"""DescribeShareGroupOffsets (key 90), v0-v1.

For each group, the share-partition start offset (SPSO) and leader epoch of the named topic
partitions, or - with null topics - of every partition the group initialized; read from the share
persister's state summary. v1 adds Lag (KIP-1226) = partition end offset - SPSO -
DeliveryCompleteCount (the offsets at or above the SPSO already acknowledged or archived); it is
-1 while the SPSO or the count is unknown. An unknown topic answers a zero topic id and start
offset -1, and a partition without state answers start offset -1, as Kafka does (absence of data,
not an error). An empty group id gets INVALID_GROUP_ID.

ACLs as KafkaApis checks them: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED with its
message); a named topic without DESCRIBE answers a zero topic id and, per partition, start offset
-1 with TOPIC_AUTHORIZATION_FAILED, after the others; an all-topics answer leaves it out.

Omissions: the end offset is the high watermark.
"""

from __future__ import annotations

import uuid
from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, allowed_names, authorize
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.share.group import ShareGroup
from kemu.coordinator.share.persister import (
    UNINITIALIZED_START_OFFSET,
    SharePartitionKey,
)
from kemu.coordinator.share.service import share_persister
from kemu.protocol.errors import ErrorCode, default_message
from kemu.protocol.topic_ids import ZERO_UUID
from kemu.protocol.views.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequestGroupView,
    DescribeShareGroupOffsetsRequestView,
)

API_KEY = 90
UNKNOWN = -1


@handler(API_KEY, 0, 1)
async def handle(ctx: RequestContext, request: DescribeShareGroupOffsetsRequestView) -> Any:
    groups = []
    for group in request.groups:
        groups.append(await _group(ctx, group))
    return ctx.respond(groups=tuple(groups))


async def _group(ctx: RequestContext, request: DescribeShareGroupOffsetsRequestGroupView) -> Any:
    group_id = request.group_id
    if not group_id:
        return ctx.make(
            "DescribeShareGroupOffsetsResponseGroup",
            group_id=group_id,
            topics=(),
            error_code=ErrorCode.invalid_group_id,
            error_message=None,
        )
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        denied = ErrorCode.group_authorization_failed
        return ctx.make(
            "DescribeShareGroupOffsetsResponseGroup",
            group_id=group_id,
            topics=(),
            error_code=denied,
            error_message=default_message(denied),
        )
    cluster = ctx.cluster
    wanted: list[tuple[str, uuid.UUID | None, list[int]]] = []
    refused: list[Any] = []
    if request.topics is None:
        found = group_coordinator(ctx.runtime).registry.get(group_id)
        if isinstance(found, ShareGroup):
            for initialized_id, initialized in found.initialized.items():
                by_id = cluster.topics_by_id.get(initialized_id)
                if by_id is not None and initialized:
                    wanted.append((by_id.name, initialized_id, sorted(initialized)))
        visible = allowed_names(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (w[0] for w in wanted)
        )
        wanted = [w for w in wanted if w[0] in visible]
    else:
        visible = allowed_names(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic_name for t in request.topics)
        )
        for entry in request.topics:
            if entry.topic_name not in visible:
                denied = ErrorCode.topic_authorization_failed
                partitions = [_partition(ctx, p, error=denied) for p in entry.partitions]
                refused.append(_topic(ctx, entry.topic_name, ZERO_UUID, partitions))
                continue
            topic = cluster.topics.get(entry.topic_name)
            wanted.append(
                (entry.topic_name, topic.topic_id if topic else None, list(entry.partitions))
            )
    known: list[Any] = []
    unknown: list[Any] = []
    for name, topic_id, partitions in wanted:
        if topic_id is None:
            unknown.append(_topic(ctx, name, ZERO_UUID, [_partition(ctx, p) for p in partitions]))
            continue
        answers = [await _describe(ctx, group_id, name, topic_id, p) for p in partitions]
        known.append(_topic(ctx, name, topic_id, answers))
    return ctx.make(
        "DescribeShareGroupOffsetsResponseGroup",
        group_id=group_id,
        topics=tuple(known + unknown + refused),
        error_code=ErrorCode.none,
        error_message=None,
    )


async def _describe(
    ctx: RequestContext, group_id: str, name: str, topic_id: uuid.UUID, index: int
) -> Any:
    summary = await share_persister(ctx.runtime).read_summary(
        SharePartitionKey(group_id, topic_id, index), UNKNOWN
    )
    state = summary.state
    if summary.error != ErrorCode.none or state is None:
        return _partition(ctx, index)
    lag = UNKNOWN
    partition = ctx.cluster.partition(name, index)
    if (
        partition is not None
        and state.start_offset != UNINITIALIZED_START_OFFSET
        and state.delivery_complete_count != UNKNOWN
    ):
        lag = partition.high_watermark - state.start_offset - state.delivery_complete_count
    return _partition(ctx, index, state.start_offset, state.leader_epoch, lag)


def _partition(
    ctx: RequestContext,
    index: int,
    start_offset: int = UNINITIALIZED_START_OFFSET,
    leader_epoch: int = 0,
    lag: int = UNKNOWN,
    error: ErrorCode = ErrorCode.none,
) -> Any:
    return ctx.make(
        "DescribeShareGroupOffsetsResponsePartition",
        partition_index=index,
        start_offset=start_offset,
        leader_epoch=leader_epoch,
        lag=lag,
        error_code=error,
        error_message=default_message(error) if error != ErrorCode.none else None,
    )


def _topic(ctx: RequestContext, name: str, topic_id: uuid.UUID, partitions: list[Any]) -> Any:
    return ctx.make(
        "DescribeShareGroupOffsetsResponseTopic",
        topic_name=name,
        topic_id=topic_id,
        partitions=tuple(partitions),
    )
