"""DeleteShareGroupOffsets (key 92), v0.

Deletes the share state of the named topics for an empty share group, so that the next member
starts them afresh from ``share.auto.offset.reset``. The group must exist and be a share group
(GROUP_ID_NOT_FOUND) without members (NON_EMPTY_GROUP); an empty id gets INVALID_GROUP_ID. A
topic that does not exist, or for which the group has no share state, gets
UNKNOWN_TOPIC_OR_PARTITION; a persister failure is reported on the topic. The answer lists, as
Kafka's: the topics the principal may not read, those deleted, the others refused in request
order, then those the persister failed to delete; a group whose log holds no
ShareGroupStatePartitionMetadata (it never had share state) gets no topic but the unreadable.

What ``__consumer_offsets`` gets is Kafka's: the group's ShareGroupStatePartitionMetadata with
the topics moved from the initialized ones to DeletingTopics (written even when nothing moved),
before the persister is called, then without those whose state it deleted. A topic whose
deletion failed stays deleting; naming it again deletes all its partitions
(``kemu.coordinator.group.share.deletion``). A failed write answers its error for the request.

ACLs as KafkaApis checks them: DELETE on the group (GROUP_AUTHORIZATION_FAILED for the request)
and READ on each topic (TOPIC_AUTHORIZATION_FAILED on the topic).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.broker.handlers._share_offsets import refusal
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
# a partition without share state is deleted already (a deleting topic's retry names them all)
DELETED = (ErrorCode.none, ErrorCode.unknown_topic_or_partition)


@handler(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: DeleteShareGroupOffsetsRequestView) -> Any:
    refused = refusal(ctx, request.group_id, AclOperation.DELETE)
    if refused is not None:
        return refused
    named = [(entry.topic_name, _checked(ctx, entry.topic_name)) for entry in request.topics]
    coordinator = group_coordinator(ctx.runtime)
    wanted = {found[0]: found[1] for _, found in named if isinstance(found, tuple)}
    try:
        eligible = coordinator.share_offsets_deleting(request.group_id, wanted)
    except GroupError as error:
        return ctx.respond(error_code=error.code, error_message=error.message, responses=())
    # KafkaApis answers the topics the principal may not read first, then the coordinator's
    denied = ErrorCode.topic_authorization_failed
    topics = [
        _topic(ctx, name, ZERO_UUID, denied, default_message(denied))
        for name, found in named
        if found == denied
    ]
    if eligible is None:
        return ctx.respond(error_code=ErrorCode.none, responses=tuple(topics))
    persister = share_persister(ctx.runtime)
    failures: dict[uuid.UUID, ErrorCode] = {}
    for topic_id, partitions in eligible.items():
        for index in partitions:
            key = SharePartitionKey(request.group_id, topic_id, index)
            code = ErrorCode(await persister.delete_state(key))
            if code not in DELETED:
                failures[topic_id] = code
    written = coordinator.share_offsets_deleted(request.group_id, set(eligible) - set(failures))
    coordinator.forget_share_state(request.group_id, set(eligible))
    if written != ErrorCode.none:
        return ctx.respond(error_code=written, error_message=default_message(written), responses=())
    return ctx.respond(
        error_code=ErrorCode.none,
        responses=tuple(topics + _coordinator_rows(ctx, named, eligible, failures)),
    )


def _coordinator_rows(
    ctx: RequestContext,
    named: Sequence[tuple[str, tuple[uuid.UUID, int] | ErrorCode]],
    eligible: dict[uuid.UUID, tuple[int, ...]],
    failures: dict[uuid.UUID, ErrorCode],
) -> list[Any]:
    """Kafka's coordinator's rows: the topics deleted, then the refused ones in request order,
    then those the persister failed to delete."""
    deleted, refused, failed = [], [], []
    for name, found in named:
        if found == ErrorCode.topic_authorization_failed:
            continue
        if isinstance(found, ErrorCode):
            refused.append(_topic(ctx, name, ZERO_UUID, found, default_message(found)))
        elif found[0] not in eligible:
            code = ErrorCode.unknown_topic_or_partition
            refused.append(_topic(ctx, name, ZERO_UUID, code, NO_OFFSETS))
        elif found[0] in failures:
            code = failures[found[0]]
            failed.append(_topic(ctx, name, found[0], code, default_message(code)))
        else:
            deleted.append(_topic(ctx, name, found[0], ErrorCode.none, None))
    return deleted + refused + failed


def _checked(ctx: RequestContext, name: str) -> tuple[uuid.UUID, int] | ErrorCode:
    """The named topic's id and partition count, or why it is refused."""
    topic = ctx.cluster.topics.get(name)
    if not authorize(ctx, AclOperation.READ, ResourceType.TOPIC, name):
        return ErrorCode.topic_authorization_failed
    if topic is None:
        return ErrorCode.unknown_topic_or_partition
    return topic.topic_id, len(topic.partitions)


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
