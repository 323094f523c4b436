"""ConsumerGroupDescribe (key 69), v0-v1.

Each KIP-848 consumer group's epoch, assignment epoch, state (Empty, Assigning, Reconciling,
Stable), assignor, and every member: id, instance and rack ids, epoch, client id and host,
subscription (names and regex), current and target assignment with topic names resolved; v1
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
    AclOperation,
    ResourceType,
    authorize,
    hide_undescribable_topics,
    operations_if,
)
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.assignor import TopicPartition
from kemu.coordinator.group.consumer.group import ConsumerGroup
from kemu.coordinator.group.service import group_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.consumer_group_describe import ConsumerGroupDescribeRequestView

API_KEY = 69
CONSUMER_MEMBER_TYPE = 1


@handler(API_KEY, 0, 1)
def handle(ctx: RequestContext, request: ConsumerGroupDescribeRequestView) -> Any:
    registry = group_coordinator(ctx.runtime).registry
    operations = bool(request.include_authorized_operations)
    refused = []
    groups = []
    for group_id in request.group_ids:
        found = registry.get(group_id)
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            refused.append(_error(ctx, group_id, ErrorCode.group_authorization_failed, None))
        elif not group_id:
            groups.append(_error(ctx, group_id, ErrorCode.invalid_group_id, None))
        elif isinstance(found, ConsumerGroup):
            groups.append(hide_undescribable_topics(ctx, _describe(ctx, found, operations)))
        else:
            message = (
                f"Group {group_id} not found."
                if found is None
                else f"Group {group_id} is not a consumer group."
            )
            groups.append(_error(ctx, group_id, ErrorCode.group_id_not_found, message))
    return ctx.respond(throttle_time=datetime.timedelta(0), groups=tuple(refused + groups))


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
                assignment=_assignment(ctx, member.assigned),
                target_assignment=_assignment(ctx, group.target.get(member.member_id, frozenset())),
                member_type=CONSUMER_MEMBER_TYPE,
            )
            for member in group.members.values()
        ),
        authorized_operations=operations_if(operations, ctx, ResourceType.GROUP, group.group_id),
    )


def _assignment(ctx: RequestContext, partitions: frozenset[TopicPartition]) -> Any:
    by_topic: dict[Any, list[int]] = {}
    for topic_id, index in sorted(partitions):
        by_topic.setdefault(topic_id, []).append(index)
    topics = ctx.cluster.topics_by_id
    return ctx.make(
        "Assignment",
        topic_partitions=tuple(
            ctx.make(
                "TopicPartitions",
                topic_id=topic_id,
                topic_name=topics[topic_id].name if topic_id in topics else "",
                partitions=tuple(indexes),
            )
            for topic_id, indexes in by_topic.items()
        ),
    )
