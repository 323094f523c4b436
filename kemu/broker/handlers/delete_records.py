"""DeleteRecords (key 21), v0-v2.

Moves a partition's log start offset forward to the requested offset (-1 means the high
watermark) and answers with the new low watermark. Whole batches below it are dropped; a
fetch below it then gets OFFSET_OUT_OF_RANGE. An offset past the high watermark (or negative
other than -1) is OFFSET_OUT_OF_RANGE, an offset below the current start changes nothing. A
partition led by another broker gets NOT_LEADER_OR_FOLLOWER, an unknown one
UNKNOWN_TOPIC_OR_PARTITION, a topic whose ``cleanup.policy`` lacks ``delete``
POLICY_VIOLATION, as in Kafka. kemu keeps one copy, so the answer never waits for followers.

A topic the caller may not DELETE answers TOPIC_AUTHORIZATION_FAILED per partition, as
KafkaApis checks.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, allowed_names
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.delete_records import DeleteRecordsRequestView

API_KEY = 21
HIGH_WATERMARK = -1
INVALID_LOW_WATERMARK = -1


@handler(API_KEY, 0, 2)
def handle(ctx: RequestContext, request: DeleteRecordsRequestView) -> Any:
    deletable = allowed_names(
        ctx, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    topics = []
    for topic_request in request.topics:
        partitions = tuple(
            _delete(ctx, topic_request.name, p.partition_index, p.offset)
            if topic_request.name in deletable
            else ctx.make(
                "DeleteRecordsPartitionResult",
                partition_index=p.partition_index,
                low_watermark=INVALID_LOW_WATERMARK,
                error_code=ErrorCode.topic_authorization_failed,
            )
            for p in topic_request.partitions
        )
        topics.append(
            ctx.make("DeleteRecordsTopicResult", name=topic_request.name, partitions=partitions)
        )
    return ctx.respond(topics=tuple(topics))


def _delete(ctx: RequestContext, topic_name: str, index: int, offset: int) -> Any:
    def reply(code: ErrorCode, low_watermark: int = INVALID_LOW_WATERMARK) -> Any:
        return ctx.make(
            "DeleteRecordsPartitionResult",
            partition_index=index,
            low_watermark=low_watermark,
            error_code=code,
        )

    topic = ctx.cluster.topics.get(topic_name)
    if topic is None or not 0 <= index < len(topic.partitions):
        return reply(ErrorCode.unknown_topic_or_partition)
    partition = topic.partitions[index]
    if partition.leader_id != ctx.node.node_id:
        return reply(ErrorCode.not_leader_or_follower)
    if "delete" not in (topic.config.get("cleanup.policy") or ""):
        return reply(ErrorCode.policy_violation)
    high_watermark = partition.high_watermark
    target = high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0 or target > high_watermark:
        return reply(ErrorCode.offset_out_of_range)
    if target > partition.log_start_offset:
        partition.log.advance_start(target)
    return reply(ErrorCode.none, partition.log_start_offset)
