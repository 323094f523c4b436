"""OffsetDelete (key 47), v0.

Deletes a group's committed offsets (tombstones in ``__consumer_offsets``). Allowed for an Empty
group, and for a "consumer" group with members only on topics none of them subscribes to (else
GROUP_SUBSCRIBED_TO_TOPIC per partition); any other group with members gets NON_EMPTY_GROUP. An
unknown group, or one of another type, gets GROUP_ID_NOT_FOUND; unknown topics or partitions
UNKNOWN_TOPIC_OR_PARTITION. Deleting an offset that was never committed succeeds.

Every broker answers (one group coordinator per process). As KafkaApis checks, the group needs
DELETE (GROUP_AUTHORIZATION_FAILED for the request), each topic READ (TOPIC_AUTHORIZATION_FAILED
per partition).
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.authorization import (
    AclOperation,
    ResourceType,
    allowed_names,
    group_check,
    refused,
)
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.service import group_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.offset_delete import OffsetDeleteRequestView

API_KEY = 47


@handler(API_KEY, 0, 0)
def handle(ctx: RequestContext, request: OffsetDeleteRequestView) -> Any:
    denied = refused(ctx, request, group_check(AclOperation.DELETE, request.group_id))
    if denied is not None:
        return denied
    readable = allowed_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    requested: list[tuple[str, list[int]]] = []
    unknown: set[tuple[str, int]] = set()
    for topic in request.topics:
        if topic.name not in readable:
            continue
        indexes: list[int] = []
        for partition in topic.partitions:
            if ctx.cluster.partition(topic.name, partition.partition_index) is None:
                unknown.add((topic.name, partition.partition_index))
            else:
                indexes.append(partition.partition_index)
        name: str = topic.name
        requested.append((name, indexes))
    result = group_coordinator(ctx.runtime).delete_offsets(request.group_id, requested)
    if result.error != ErrorCode.none:
        return ctx.respond(error_code=result.error, throttle_time=datetime.timedelta(0), topics=())
    topics = tuple(
        ctx.make(
            "OffsetDeleteResponseTopic",
            name=topic.name,
            partitions=tuple(
                ctx.make(
                    "OffsetDeleteResponsePartition",
                    partition_index=p.partition_index,
                    error_code=(
                        ErrorCode.topic_authorization_failed
                        if topic.name not in readable
                        else ErrorCode.unknown_topic_or_partition
                        if (topic.name, p.partition_index) in unknown
                        else result.partitions.get((topic.name, p.partition_index), ErrorCode.none)
                    ),
                )
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return ctx.respond(
        error_code=ErrorCode.none, throttle_time=datetime.timedelta(0), topics=topics
    )
