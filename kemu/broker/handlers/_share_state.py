"""What the share-state RPCs (keys 83-87) have in common, as Kafka's ShareCoordinatorService
handles them.

A request names one group and, per topic id, partitions. An empty group id, no topics, or (except
for Initialize) a topic without partitions gets an empty answer. Every partition is answered on
its own: NOT_COORDINATOR when this broker does not lead the partition of ``__share_group_state``
that the key ``groupId:topicId:partition`` hashes to (the client finds the right broker with
FindCoordinator, key type SHARE, that same key), INVALID_REQUEST for a null topic id, otherwise
the share coordinator's result.
Results are grouped by topic id in request order.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kemu.cluster.context import RequestContext
from kemu.coordinator.share.persister import SharePartitionKey
from kemu.coordinator.share.service import NOT_COORDINATOR_MESSAGE, share_persister
from kemu.protocol.errors import ErrorCode

PartitionAnswer = Callable[[SharePartitionKey, Any], Any]


def share_state_response(
    ctx: RequestContext,
    request: Any,
    *,
    operation: str,
    result_class: str,
    answer: PartitionAnswer,
    partitions_required: bool = True,
) -> Any:
    """The response: ``answer(key, partition_data)`` for every partition this broker leads."""
    if not request.group_id or not request.topics:
        return ctx.respond(results=())
    if partitions_required and any(not topic.partitions for topic in request.topics):
        return ctx.respond(results=())
    service = share_persister(ctx.runtime)
    by_topic: dict[uuid.UUID | None, dict[int, Any]] = {}
    for topic in request.topics:
        results = by_topic.setdefault(topic.topic_id, {})
        for data in topic.partitions:
            if topic.topic_id is None or topic.topic_id.int == 0:
                results[data.partition] = partition_error(
                    ctx, data.partition, ErrorCode.invalid_request, "Invalid topic id."
                )
                continue
            key = SharePartitionKey(request.group_id, topic.topic_id, data.partition)
            if service.is_coordinator(ctx.node.node_id, key):
                results[data.partition] = answer(key, data)
            else:
                results[data.partition] = partition_error(
                    ctx,
                    data.partition,
                    ErrorCode.not_coordinator,
                    f"Unable to {operation}: {NOT_COORDINATOR_MESSAGE}",
                )
    return ctx.respond(
        results=tuple(
            ctx.make(result_class, topic_id=topic_id, partitions=tuple(results.values()))
            for topic_id, results in by_topic.items()
        )
    )


def partition_error(
    ctx: RequestContext, partition: int, error: ErrorCode, message: str | None
) -> Any:
    """A PartitionResult carrying only the error, the rest left at Kafka's defaults."""
    return ctx.make("PartitionResult", partition=partition, error_code=error, error_message=message)
