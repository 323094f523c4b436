"""DeleteShareGroupOffsets (key 92), v0.

Deletes the share state of the named topics for an empty share group, so that the next member
starts them afresh from ``share.auto.offset.reset``. The group must exist and be a share group
(GROUP_ID_NOT_FOUND) without members (NON_EMPTY_GROUP); an empty id gets INVALID_GROUP_ID. A
topic that does not exist, or for which the group has no share state, gets
UNKNOWN_TOPIC_OR_PARTITION; a persister failure is reported on the topic.

ACLs as KafkaApis checks them: DELETE on the group (GROUP_AUTHORIZATION_FAILED for the request)
and READ on each topic (TOPIC_AUTHORIZATION_FAILED on the topic).
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
from kemu.protocol.views.delete_share_group_offsets import DeleteShareGroupOffsetsRequestView

API_KEY = 92
NO_OFFSETS = "There is no offset information to delete."


@handler(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: DeleteShareGroupOffsetsRequestView) -> Any:
    return await change_share_offsets(
        ctx,
        request.group_id,
        operation=AclOperation.DELETE,
        change=partial(_delete, ctx, request),
    )


async def _delete(
    ctx: RequestContext,
    request: DeleteShareGroupOffsetsRequestView,
    group: ShareGroup,
    persister: SharePersister,
) -> tuple[list[Any], set[uuid.UUID]]:
    topics = []
    deleted: set[uuid.UUID] = set()
    for entry in request.topics:
        name = entry.topic_name
        topic = ctx.cluster.topics.get(name)
        if not authorize(ctx, AclOperation.READ, ResourceType.TOPIC, name):
            code = ErrorCode.topic_authorization_failed
            topics.append(_topic(ctx, name, ZERO_UUID, code, default_message(code)))
            continue
        if topic is None:
            code = ErrorCode.unknown_topic_or_partition
            topics.append(_topic(ctx, name, ZERO_UUID, code, default_message(code)))
            continue
        partitions = group.initialized.get(topic.topic_id)
        if not partitions:
            topics.append(
                _topic(ctx, name, ZERO_UUID, ErrorCode.unknown_topic_or_partition, NO_OFFSETS)
            )
            continue
        failure = ErrorCode.none
        for index in sorted(partitions):
            code = ErrorCode(
                await persister.delete_state(
                    SharePartitionKey(group.group_id, topic.topic_id, index)
                )
            )
            if code != ErrorCode.none:
                failure = code
        if failure == ErrorCode.none:
            del group.initialized[topic.topic_id]
        deleted.add(topic.topic_id)
        topics.append(_topic(ctx, name, topic.topic_id, failure, default_message(failure)))
    return topics, deleted


def _topic(
    ctx: RequestContext, name: str, topic_id: uuid.UUID, code: ErrorCode, message: str | None
) -> Any:
    return ctx.make(
        "DeleteShareGroupOffsetsResponseTopic",
        topic_name=name,
        topic_id=topic_id,
        error_code=code,
        error_message=message,
    )
