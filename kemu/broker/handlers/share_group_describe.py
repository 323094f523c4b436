"""ShareGroupDescribe (key 77), v1.

Each group id answers its epoch, assignment epoch, state (Empty/Stable), the assignor ("simple")
and every member: id, epoch, rack, client id and host, subscribed topic names and assignment
with topic names resolved (a deleted topic left out, as Kafka describes only the topics its
metadata has). Unknown ids, and ids of groups of another type, get
GROUP_ID_NOT_FOUND; an empty id gets INVALID_GROUP_ID.

ACLs as KafkaApis checks them: a group the principal may not DESCRIBE answers
GROUP_AUTHORIZATION_FAILED (before the others), and a group whose assignments name a topic it may
not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED without its members.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import (
    OMITTED,
    ResourceType,
    hide_undescribable_topics,
    operations_if,
)
from kemu.broker.handlers import handler
from kemu.broker.handlers._groups import assignment, describe_groups
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.share.group import ASSIGNOR_NAME, ShareGroup, ShareMember
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.share_group_describe import ShareGroupDescribeRequestView

API_KEY = 77


@handler(API_KEY, 1, 1)
def handle(ctx: RequestContext, request: ShareGroupDescribeRequestView) -> Any:
    share = group_coordinator(ctx.runtime).share
    operations = bool(request.include_authorized_operations)
    groups = describe_groups(
        ctx,
        request.group_ids,
        find=share.describe,
        describe=lambda group: hide_undescribable_topics(ctx, _described(ctx, group, operations)),
        error=lambda group_id, code, message: _error(ctx, group_id, code, message),
    )
    return ctx.respond(groups=tuple(groups))


def _error(ctx: RequestContext, group_id: str, code: ErrorCode, message: str | None) -> Any:
    return ctx.make(
        "DescribedGroup",
        error_code=code,
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        assignor_name="",
        members=(),
        authorized_operations=OMITTED,
    )


def _described(ctx: RequestContext, group: ShareGroup, operations: bool) -> Any:
    return ctx.make(
        "DescribedGroup",
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group.group_id,
        group_state=group.state_name,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=ASSIGNOR_NAME,
        members=tuple(_member(ctx, m) for m in group.members.values()),
        authorized_operations=operations_if(operations, ctx, ResourceType.GROUP, group.group_id),
    )


def _member(ctx: RequestContext, member: ShareMember) -> Any:
    return ctx.make(
        "Member",
        member_id=member.member_id,
        rack_id=member.rack_id,
        member_epoch=member.member_epoch,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
        assignment=assignment(ctx, member.assigned, names=True),
    )
