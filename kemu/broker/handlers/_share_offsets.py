"""What AlterShareGroupOffsets (key 91) and DeleteShareGroupOffsets (key 92) have in common: both
change, through the share persister, the share state of partitions of an empty share group, and
write the group.

An empty group id gets INVALID_GROUP_ID and a principal without ``operation`` on the group
GROUP_AUTHORIZATION_FAILED, for the whole request (``refusal``). DeleteShareGroupOffsets
(``change_share_offsets``): so does the group lookup's GroupError (a group with members, of
another type, or unknown). After the change the group's records are written and the share
leaders caching the changed topics' state drop it (what is still queued on them, a marker, an
acknowledgement, a lock expiry, then does nothing) and reload it on next use; a failed write
answers its error for the request, the share state being changed already (as on Kafka: the
group's next write catches up). AlterShareGroupOffsets writes before and after the persister
(its handler).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.share.group import ShareGroup
from kemu.coordinator.share.persister import SharePersister
from kemu.coordinator.share.service import share_persister
from kemu.protocol.errors import ErrorCode, default_message

# (the group, the persister) -> the answer's topics and the ids of the topics whose state changed
Change = Callable[[ShareGroup, SharePersister], Awaitable[tuple[list[Any], set[uuid.UUID]]]]


async def change_share_offsets(
    ctx: RequestContext,
    group_id: str,
    *,
    operation: AclOperation,
    change: Change,
) -> Any:
    """The response of a request that makes ``change`` to group ``group_id``'s share state."""
    refused = refusal(ctx, group_id, operation)
    if refused is not None:
        return refused
    coordinator = group_coordinator(ctx.runtime)
    try:
        group = coordinator.share.empty_group_for_offsets(group_id, create=False)
    except GroupError as error:
        return ctx.respond(error_code=error.code, error_message=error.message, responses=())
    topics, changed = await change(group, share_persister(ctx.runtime))
    written = coordinator.write_group(group.group_id)
    coordinator.forget_share_state(group.group_id, changed)
    if written != ErrorCode.none:
        message = default_message(written)
        return ctx.respond(error_code=written, error_message=message, responses=())
    return ctx.respond(error_code=ErrorCode.none, responses=tuple(topics))


def refusal(ctx: RequestContext, group_id: str, operation: AclOperation) -> Any | None:
    """The response refusing the whole request (an empty group id, ``operation`` on the group
    not allowed), or None."""
    if not group_id:
        return ctx.respond(error_code=ErrorCode.invalid_group_id, responses=())
    if not authorize(ctx, operation, ResourceType.GROUP, group_id):
        denied = ErrorCode.group_authorization_failed
        return ctx.respond(error_code=denied, error_message=default_message(denied), responses=())
    return None
