"""SyncGroup (key 14), v0-v5.

The leader of a classic group hands out the assignment of the generation its JoinGroup answer
carried; members without an entry get an empty assignment. Followers that sync before the leader
are parked until it does; in a Stable group a member gets its current assignment at once.
Errors: INVALID_GROUP_ID, UNKNOWN_MEMBER_ID (also for an unknown or Empty group, or a group of
another type), FENCED_INSTANCE_ID, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL (v5: the
protocol type or name differs from the group's), REBALANCE_IN_PROGRESS (the group is rebalancing
again: rejoin). v5 answers the protocol type and name.

Every broker answers (one group coordinator per process). Omissions: no authorizer.
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.authorization import group_read, refused
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.classic.group import SyncRequest
from kemu.coordinator.group.service import group_coordinator
from kemu.protocol.views.sync_group import SyncGroupRequestView

API_KEY = 14


@handler(API_KEY, 0, 5)
async def handle(ctx: RequestContext, request: SyncGroupRequestView) -> Any:
    denied = refused(ctx, request, group_read(request.group_id))
    if denied is not None:
        return denied
    sync = SyncRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        generation_id=request.generation_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments=tuple((a.member_id, a.assignment) for a in request.assignments),
    )
    answer = await group_coordinator(ctx.runtime).sync_group(sync)
    return ctx.respond(
        throttle_time=datetime.timedelta(0),
        error_code=answer.error,
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol_name,
        assignment=answer.assignment,
    )
