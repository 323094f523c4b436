"""What the Describe and Heartbeat handlers of the three modern group types (consumer, KIP-848;
share, KIP-932; streams, KIP-1071) have in common.

Describe: per group id, in request order, GROUP_AUTHORIZATION_FAILED when the principal may not
DESCRIBE the group (those answers first, as KafkaApis), INVALID_GROUP_ID for an empty id, the
lookup's GroupError (GROUP_ID_NOT_FOUND for an unknown id or a group of another type), else the
group described. Heartbeat: the success answer's common fields, and assignments as topic ids
with their partitions.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.assignor import TopicPartition
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.service import group_coordinator
from kemu.protocol.errors import ErrorCode

Group = TypeVar("Group")
# (group id, error code, message) -> a DescribedGroup carrying the error
DescribeError = Callable[[str, ErrorCode, "str | None"], Any]


def describe_groups(
    ctx: RequestContext,
    group_ids: Iterable[str],
    *,
    find: Callable[[str], Group],
    describe: Callable[[Group], Any],
    error: DescribeError,
) -> list[Any]:
    """The DescribedGroups: refused ones first, then the others in request order. ``find``
    raises GroupError for a group it cannot describe."""
    refused = []
    groups = []
    for group_id in group_ids:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            refused.append(error(group_id, ErrorCode.group_authorization_failed, None))
            continue
        if not group_id:
            groups.append(error(group_id, ErrorCode.invalid_group_id, None))
            continue
        try:
            group = find(group_id)
        except GroupError as failure:
            groups.append(error(group_id, failure.code, failure.message))
            continue
        groups.append(describe(group))
    return refused + groups


def registered(ctx: RequestContext, kind: type[Group], name: str) -> Callable[[str], Group]:
    """A ``find`` over the coordinator's registry: a group of ``kind``, else GROUP_ID_NOT_FOUND
    ("Group g not found." / "Group g is not a {name} group.")."""
    registry = group_coordinator(ctx.runtime).registry

    def find(group_id: str) -> Group:
        found = registry.get(group_id)
        if isinstance(found, kind):
            return found
        message = (
            f"Group {group_id} not found."
            if found is None
            else f"Group {group_id} is not a {name} group."
        )
        raise GroupError(ErrorCode.group_id_not_found, message)

    return find


def assignment(
    ctx: RequestContext, partitions: Iterable[TopicPartition], *, names: bool = False
) -> Any:
    """An Assignment: per topic id (sorted) its partitions; ``names``: with the topic's name, as
    the Describe answers carry it, and without the topics the cluster no longer has (Kafka's
    describes list only the topics its metadata image has; heartbeats list them all)."""
    topics = ctx.cluster.topics_by_id
    by_topic: dict[Any, list[int]] = {}
    for topic_id, index in sorted(partitions):
        if not names or topic_id in topics:
            by_topic.setdefault(topic_id, []).append(index)
    return ctx.make(
        "Assignment",
        topic_partitions=tuple(
            ctx.make(
                "TopicPartitions",
                topic_id=topic_id,
                partitions=tuple(indexes),
                **({"topic_name": topics[topic_id].name} if names else {}),
            )
            for topic_id, indexes in by_topic.items()
        ),
    )


class Joined(Protocol):
    @property
    def member_id(self) -> str: ...
    @property
    def member_epoch(self) -> int: ...
    @property
    def heartbeat_interval_ms(self) -> int: ...


def heartbeat_fields(result: Joined) -> dict[str, Any]:
    """A successful heartbeat answer's common fields."""
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "member_id": result.member_id,
        "member_epoch": result.member_epoch,
        "heartbeat_interval": datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
    }


def heartbeat_error_fields(error: GroupError, member_id: str | None) -> dict[str, Any]:
    """A refused heartbeat's common fields: the code and message, the rest at defaults."""
    return {
        "error_code": error.code,
        "error_message": error.message,
        "member_id": member_id,
        "member_epoch": 0,
        "heartbeat_interval": datetime.timedelta(0),
    }
