"""DescribeGroups (key 15), v0-v6.

Each classic group's state, protocol type, and members (id, instance id, client id and host);
a Stable group also answers its protocol name and each member's metadata and assignment, as
Kafka does. A group that does not exist, or is of another type (share, consumer), is described
as state Dead; from v6 with GROUP_ID_NOT_FOUND and a message. v3+ answers the authorized
operations when asked (all of them: kemu has no authorizer).
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.authorization import OMITTED, AclOperation, ResourceType, authorize, operations_if
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.classic.group import DEAD, STABLE, ClassicGroup
from kemu.coordinator.group.service import group_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.describe_groups import DescribeGroupsRequestView

API_KEY = 15
FIRST_VERSION_WITH_NOT_FOUND = 6


@handler(API_KEY, 0, 6)
def handle(ctx: RequestContext, request: DescribeGroupsRequestView) -> Any:
    coordinator = group_coordinator(ctx.runtime)
    operations = bool(getattr(request, "include_authorized_operations", False))
    described = []
    for group_id in request.groups:
        found = coordinator.registry.get(group_id)
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(
                ctx.make(
                    "DescribedGroup",
                    error_code=ErrorCode.group_authorization_failed,
                    error_message=None,
                    group_id=group_id,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=(),
                    authorized_operations=OMITTED,
                )
            )
            continue
        if isinstance(found, ClassicGroup):
            described.append(_describe(ctx, found, operations))
            continue
        message = (
            f"Group {group_id} not found."
            if found is None
            else f"Group {group_id} is not a classic group."
        )
        not_found = ctx.version >= FIRST_VERSION_WITH_NOT_FOUND
        described.append(
            ctx.make(
                "DescribedGroup",
                error_code=ErrorCode.group_id_not_found if not_found else ErrorCode.none,
                error_message=message if not_found else None,
                group_id=group_id,
                group_state=DEAD,
                protocol_type="",
                protocol_data="",
                members=(),
                authorized_operations=OMITTED,
            )
        )
    return ctx.respond(throttle_time=datetime.timedelta(0), groups=tuple(described))


def _describe(ctx: RequestContext, group: ClassicGroup, operations: bool) -> Any:
    stable = group.state == STABLE
    return ctx.make(
        "DescribedGroup",
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group.group_id,
        group_state=group.state,
        protocol_type=group.protocol_type,
        protocol_data=(group.protocol_name or "") if stable else "",
        members=tuple(
            ctx.make(
                "DescribedGroupMember",
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                member_metadata=member.metadata(group.protocol_name) if stable else b"",
                member_assignment=member.assignment if stable else b"",
            )
            for member in group.members.values()
        ),
        authorized_operations=operations_if(operations, ctx, ResourceType.GROUP, group.group_id),
    )
