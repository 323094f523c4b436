"""AlterShareGroupOffsets (key 91), v0.

Sets the share-partition start offset of the named partitions of an empty share group (created
empty if it does not exist, as Kafka does): each partition's share state is re-initialized through
the share persister with the new start offset and a new state epoch (greater than the stored one
and at least the group epoch), which fences the cached state of the partition's leader. A group
with members gets NON_EMPTY_GROUP, a group of another type GROUP_ID_NOT_FOUND, an empty id
INVALID_GROUP_ID; an unknown topic or partition index gets UNKNOWN_TOPIC_OR_PARTITION on that
partition.

ACLs as KafkaApis checks them: READ on the group (GROUP_AUTHORIZATION_FAILED for the request,
before the group is created) and READ on each topic (TOPIC_AUTHORIZATION_FAILED on its
partitions).

Omissions: start offsets are not checked against the log (neither does Kafka).
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.broker.handlers._share_offsets import change_share_offsets
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.share.group import ShareGroup
from kemu.coordinator.share.persister import SharePartitionKey, SharePersister
from kemu.protocol.errors import ErrorCode, default_message
from kemu.protocol.topic_ids import ZERO_UUID
from kemu.protocol.views.alter_share_group_offsets import AlterShareGroupOffsetsRequestView

API_KEY = 91
NO_LEADER_EPOCH = -1


@handler(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: AlterShareGroupOffsetsRequestView) -> Any:
    return await change_share_offsets(
        ctx,
        request.group_id,
        operation=AclOperation.READ,
        create=True,
        change=partial(_alter, ctx, request),
    )


async def _alter(
    ctx: RequestContext,
    request: AlterShareGroupOffsetsRequestView,
    group: ShareGroup,
    persister: SharePersister,
) -> tuple[list[Any], set[uuid.UUID]]:
    topics = []
    altered: set[uuid.UUID] = set()
    for entry in request.topics:
        topic = ctx.cluster.topics.get(entry.topic_name)
        readable = authorize(ctx, AclOperation.READ, ResourceType.TOPIC, entry.topic_name)
        partitions = []
        for requested in entry.partitions:
            index = requested.partition_index
            if not readable:
                partitions.append(_partition(ctx, index, ErrorCode.topic_authorization_failed))
                continue
            if topic is None or not 0 <= index < len(topic.partitions):
                partitions.append(_partition(ctx, index, ErrorCode.unknown_topic_or_partition))
                continue
            key = SharePartitionKey(group.group_id, topic.topic_id, index)
            stored = await persister.read_summary(key, NO_LEADER_EPOCH)
            stored_epoch = stored.state.state_epoch if stored.state is not None else 0
            state_epoch = max(group.group_epoch, stored_epoch + 1)
            code = await persister.initialize(key, state_epoch, requested.start_offset)
            if code == ErrorCode.none:
                group.initialized.setdefault(topic.topic_id, set()).add(index)
                altered.add(topic.topic_id)
            partitions.append(_partition(ctx, index, ErrorCode(code)))
        topics.append(
            ctx.make(
                "AlterShareGroupOffsetsResponseTopic",
                topic_name=entry.topic_name,
                topic_id=topic.topic_id if topic is not None else ZERO_UUID,
                partitions=tuple(partitions),
            )
        )
    return topics, altered


def _partition(ctx: RequestContext, index: int, code: ErrorCode) -> Any:
    return ctx.make(
        "AlterShareGroupOffsetsResponsePartition",
        partition_index=index,
        error_code=code,
        error_message=default_message(code),
    )
