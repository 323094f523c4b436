"""Heartbeat (key 12), v0-v4.

Keeps a classic group member's session alive (``session.timeout.ms`` it joined with) and tells
it when to rejoin: REBALANCE_IN_PROGRESS while the group prepares a rebalance. Errors:
INVALID_GROUP_ID, UNKNOWN_MEMBER_ID (unknown group or member, an Empty group, or a group of
another type), FENCED_INSTANCE_ID, ILLEGAL_GENERATION.

Every broker answers (one group coordinator per process). Omissions: no authorizer.
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.authorization import group_read, refused
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.service import group_coordinator
from kemu.protocol.views.heartbeat import HeartbeatRequestView

API_KEY = 12


@handler(API_KEY, 0, 4)
def handle(ctx: RequestContext, request: HeartbeatRequestView) -> Any:
    denied = refused(ctx, request, group_read(request.group_id))
    if denied is not None:
        return denied
    error = group_coordinator(ctx.runtime).heartbeat(
        request.group_id,
        request.member_id,
        request.generation_id,
        getattr(request, "group_instance_id", None),
    )
    return ctx.respond(throttle_time=datetime.timedelta(0), error_code=error)
