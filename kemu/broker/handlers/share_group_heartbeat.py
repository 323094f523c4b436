"""ShareGroupHeartbeat (key 76), v1.

KIP-932 membership with client-generated member ids (KIP-1082): epoch 0 joins (the subscribed
topic names are then required), -1 leaves, anything else must be the member's current epoch or
the one before it (else FENCED_MEMBER_EPOCH). Unknown group on a non-join: GROUP_ID_NOT_FOUND,
also for a group of another type; unknown member: UNKNOWN_MEMBER_ID; a full group
(``group.share.max.size``): GROUP_MAX_SIZE_REACHED; empty member/group/rack id or a bad epoch:
INVALID_REQUEST. The target assignment is computed by the coordinator (``assignor``) and handed
out at once; it is in the response on a join, on a full request (subscription present) and when
it changed. Sessions expire after ``share.session.timeout.ms`` (group config, else
``group.share.session.timeout.ms``); the interval answered is ``share.heartbeat.interval.ms``.

Every broker answers (kemu has one group coordinator per process, see FindCoordinator).
As KafkaApis checks, the group needs READ (GROUP_AUTHORIZATION_FAILED) and every subscribed
topic DESCRIBE (TOPIC_AUTHORIZATION_FAILED for the request). Omissions: v0 (early access) is not
served.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import group_read, refused, undescribable_subscription
from kemu.broker.handlers import handler
from kemu.broker.handlers._groups import assignment, heartbeat_error_fields, heartbeat_fields
from kemu.cluster.context import RequestContext
from kemu.coordinator.group import config_resource  # noqa: F401 - registers the GROUP resource
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.share.group import ShareHeartbeat
from kemu.protocol.views.share_group_heartbeat import ShareGroupHeartbeatRequestView

API_KEY = 76


@handler(API_KEY, 1, 1)
async def handle(ctx: RequestContext, request: ShareGroupHeartbeatRequestView) -> Any:
    denied = refused(ctx, request, group_read(request.group_id))
    if denied is None:
        denied = undescribable_subscription(ctx, request)
    if denied is not None:
        return denied
    heartbeat = ShareHeartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topic_names=(
            tuple(request.subscribed_topic_names)
            if request.subscribed_topic_names is not None
            else None
        ),
        client_id=ctx.header.client_id or "",
        client_host=f"/{ctx.client_host}",
    )
    try:
        result = await group_coordinator(ctx.runtime).share_heartbeat(heartbeat)
    except GroupError as error:
        return ctx.respond(
            **heartbeat_error_fields(error, member_id=None),
            assignment=None,
        )
    return ctx.respond(
        **heartbeat_fields(result),
        assignment=(assignment(ctx, result.assignment) if result.assignment is not None else None),
    )
