"""JoinGroup (key 11), v0-v9.

Classic group membership (``kemu.coordinator.group.classic.group``): a new dynamic member on v4+
first gets MEMBER_ID_REQUIRED with the id to rejoin with; the JoinGroup is then parked until
the join phase completes (all members rejoined, the rebalance timeout, or for a group coming out
of Empty ``group.initial.rebalance.delay.ms``). The leader's answer lists every member's
metadata for the chosen protocol. Static members (``group.instance.id``, v5+) keep their place
across restarts; a restarted static member of a Stable group gets the current generation back
(``skip_assignment`` for a leader on v9). v0 has no rebalance timeout: the session timeout is
used, as Kafka does. Errors: INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT (outside
``group.min/max.session.timeout.ms``), INCONSISTENT_GROUP_PROTOCOL (also for a group of another
type), UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED (``group.max.size``).

Every broker answers (one group coordinator per process, see FindCoordinator). Omissions: no
authorizer; a non-empty KIP-848 consumer group cannot be joined through the classic protocol.
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.authorization import group_read, refused
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.classic.group import JoinRequest
from kemu.coordinator.group.service import group_coordinator
from kemu.protocol.views.join_group import JoinGroupRequestView

API_KEY = 11
FIRST_VERSION_REQUIRING_MEMBER_ID = 4
FIRST_VERSION_SKIPPING_ASSIGNMENT = 9
FIRST_VERSION_WITH_NULLABLE_PROTOCOL_NAME = 7


def _ms(value: datetime.timedelta) -> int:
    return value // datetime.timedelta(milliseconds=1)


@handler(API_KEY, 0, 9)
async def handle(ctx: RequestContext, request: JoinGroupRequestView) -> Any:
    denied = refused(ctx, request, group_read(request.group_id))
    if denied is not None:
        return denied
    session_timeout = _ms(request.session_timeout)
    rebalance = getattr(request, "rebalance_timeout", None)
    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols),
        session_timeout_ms=session_timeout,
        rebalance_timeout_ms=_ms(rebalance) if rebalance is not None else session_timeout,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.header.client_id or "",
        client_host=f"/{ctx.client_host}",
        requires_known_member_id=ctx.version >= FIRST_VERSION_REQUIRING_MEMBER_ID,
        supports_skip_assignment=ctx.version >= FIRST_VERSION_SKIPPING_ASSIGNMENT,
        reason=getattr(request, "reason", None),
    )
    answer = await group_coordinator(ctx.runtime).join_group(join)
    protocol_name = answer.protocol_name
    if protocol_name is None and ctx.version < FIRST_VERSION_WITH_NULLABLE_PROTOCOL_NAME:
        protocol_name = ""
    return ctx.respond(
        throttle_time=datetime.timedelta(0),
        error_code=answer.error,
        generation_id=answer.generation_id,
        protocol_type=answer.protocol_type,
        protocol_name=protocol_name,
        leader=answer.leader,
        skip_assignment=answer.skip_assignment,
        member_id=answer.member_id,
        members=tuple(
            ctx.make(
                "JoinGroupResponseMember",
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                metadata=member.metadata,
            )
            for member in answer.members
        ),
    )
