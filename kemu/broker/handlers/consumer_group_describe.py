"""ConsumerGroupDescribe (key 69), v0-v1.

Each KIP-848 consumer group's epoch, assignment epoch, state (Empty, Assigning, Reconciling,
Stable), assignor, and every member: id, instance and rack ids, epoch, client id and host,
subscription (names and regex), current and target assignment with topic names resolved (a
deleted topic left out, as Kafka describes only the topics its metadata has); v1
also the member type (1: consumer protocol). Unknown ids, and groups of another type, get
GROUP_ID_NOT_FOUND; an empty id INVALID_GROUP_ID.

ACLs as KafkaApis checks them: a group the principal may not DESCRIBE answers
GROUP_AUTHORIZATION_FAILED (before the others), and a group whose assignments name a topic it may
not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED without its members.
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.authorization import (
    OMITTED,
    ResourceType,
    hide_undescribable_topics,
    operations_if,
)
from kemu.broker.handlers import handler
from kemu.broker.handlers._groups import assignment, describe_groups, registered
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.consumer.group import ConsumerGroup
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.consumer_group_describe import ConsumerGroupDescribeRequestView

API_KEY = 69
CONSUMER_MEMBER_TYPE = 1


@handler(API_KEY, 0, 1)
def handle(ctx: RequestContext, request: ConsumerGroupDescribeRequestView) -> Any:
    operations = bool(request.include_authorized_operations)
    groups = describe_groups(
        ctx,
        request.group_ids,
        find=registered(ctx, ConsumerGroup, "consumer"),
        describe=lambda group: hide_undescribable_topics(ctx, _describe(ctx, group, operations)),
        error=lambda group_id, code, message: _error(ctx, group_id, code, message),
    )
    return ctx.respond(throttle_time=datetime.timedelta(0), groups=tuple(groups))


def _error(ctx: RequestContext, group_id: str, code: ErrorCode, message: str | None) -> Any:
    return ctx.make(
        "DescribedGroup",
        error_code=code,
        error_message=message,
        group_id=group_id,
        authorized_operations=OMITTED,
    )


def _describe(ctx: RequestContext, group: ConsumerGroup, operations: bool) -> Any:
    return ctx.make(
        "DescribedGroup",
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group.group_id,
        group_state=group.state_name,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor_name,
        members=tuple(
            ctx.make(
                "Member",
                member_id=member.member_id,
                instance_id=member.instance_id,
                rack_id=member.rack_id,
                member_epoch=member.member_epoch,
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
                subscribed_topic_regex=member.subscribed_topic_regex or "",  # Kafka: "" for none
                assignment=assignment(ctx, member.assigned, names=True),
                target_assignment=assignment(
                    ctx, group.target.get(member.member_id, frozenset()), names=True
                ),
                member_type=CONSUMER_MEMBER_TYPE,
            )
            for member in group.members.values()
        ),
        authorized_operations=operations_if(operations, ctx, ResourceType.GROUP, group.group_id),
    )
