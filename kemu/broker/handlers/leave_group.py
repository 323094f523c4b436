"""LeaveGroup (key 13), v0-v5.

Removes members from a classic group (v3+: a batch, each answered on its own; an empty member
id with a ``group.instance.id`` removes that static member, as admin clients do) and rebalances
the rest. A parked JoinGroup of a removed member is answered UNKNOWN_MEMBER_ID. Errors:
INVALID_GROUP_ID, UNKNOWN_MEMBER_ID (unknown group, or group of another type: top level;
unknown member: per member), FENCED_INSTANCE_ID. Up to v2 the one member's error is the
top-level error, as Kafka answers it.

Every broker answers (one group coordinator per process). Omissions: no authorizer.
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.authorization import group_read, refused
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.classic.group import LeavingMember
from kemu.coordinator.group.service import group_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.leave_group import LeaveGroupRequestView

API_KEY = 13
FIRST_BATCH_VERSION = 3


@handler(API_KEY, 0, 5)
def handle(ctx: RequestContext, request: LeaveGroupRequestView) -> Any:
    denied = refused(ctx, request, group_read(request.group_id))
    if denied is not None:
        return denied
    if ctx.version < FIRST_BATCH_VERSION:
        leaving = [LeavingMember(request.member_id)]
    else:
        leaving = [LeavingMember(m.member_id, m.group_instance_id) for m in request.members]
    result = group_coordinator(ctx.runtime).leave_group(request.group_id, leaving)
    if ctx.version < FIRST_BATCH_VERSION:
        error = result.error
        if error == ErrorCode.none and result.members:
            error = result.members[0][1]
        return ctx.respond(throttle_time=datetime.timedelta(0), error_code=error)
    if result.error == ErrorCode.unknown_member_id and not result.members:
        # No such group: Kafka's GroupCoordinatorService answers NONE with every member
        # UNKNOWN_MEMBER_ID (v0-2 carry that member error at the top, as above).
        return ctx.respond(
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.none,
            members=tuple(
                ctx.make(
                    "MemberResponse",
                    member_id=member.member_id,
                    group_instance_id=member.group_instance_id,
                    error_code=ErrorCode.unknown_member_id,
                )
                for member in leaving
            ),
        )
    return ctx.respond(
        throttle_time=datetime.timedelta(0),
        error_code=result.error,
        members=tuple(
            ctx.make(
                "MemberResponse",
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                error_code=error,
            )
            for member, error in result.members
        ),
    )
