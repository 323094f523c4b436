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
from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.share.persister import SharePartitionKey
from kemu.coordinator.share.service import share_persister
from kemu.protocol.errors import ErrorCode, default_message
from kemu.protocol.topic_ids import ZERO_UUID
from kemu.protocol.views.delete_share_group_offsets import DeleteShareGroupOffsetsRequestView

API_KEY = 92
NO_OFFSETS = "There is no offset information to delete."


@handler(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: DeleteShareGroupOffsetsRequestView) -> Any:
    if not request.group_id:
        return ctx.respond(error_code=ErrorCode.invalid_group_id, responses=())
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        denied = ErrorCode.group_authorization_failed
        return ctx.respond(error_code=denied, error_message=default_message(denied), responses=())
    coordinator = group_coordinator(ctx.runtime)
    try:
        group = coordinator.share.empty_group_for_offsets(request.group_id, create=False)
    except GroupError as error:
        return ctx.respond(error_code=error.code, error_message=error.message, responses=())
    persister = share_persister(ctx.runtime)
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
    written = coordinator.write_group(group.group_id)
    coordinator.forget_share_state(group.group_id, deleted)
    if written != ErrorCode.none:
        # The group's records were not written (Kafka's error for the failed append); the
        # share state is already changed, as on Kafka, and the group's next write catches up.
        message = default_message(written)
        return ctx.respond(error_code=written, error_message=message, responses=())
    return ctx.respond(error_code=ErrorCode.none, responses=tuple(topics))


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
