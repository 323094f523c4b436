"""DescribeProducers (key 61), v0.

The producers a partition's replicas know (``kafka-transactions.sh describe-producers`` and
``find-hanging --broker-id N`` use it): producer id, epoch, last sequence, the max timestamp of
its last batch (``last_timestamp``, also after a restart: recovered from the log), and the first
offset of its open transaction here (-1 when none). As in Kafka, any broker hosting a replica
answers (kemu's one copy of the log is every replica's), a broker that does not gets
NOT_LEADER_OR_FOLLOWER, an unknown partition UNKNOWN_TOPIC_OR_PARTITION. A topic the principal
may not READ answers TOPIC_AUTHORIZATION_FAILED per partition, with its message, as KafkaApis.

``coordinator_epoch`` is that of the producer's last marker here: 0 for kemu's own coordinator
(its markers carry epoch 0, as a Kafka cluster's first coordinator epoch), a WriteTxnMarkers
caller's own, -1 before any marker. Omissions: producers that only wrote markers here are listed
with last sequence -1; after a restart the epoch is -1 until the next marker (kemu rebuilds
producer state from the log's batches, not from a snapshot).
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.cluster.partition import Partition
from kemu.protocol.errors import ErrorCode, default_message
from kemu.protocol.views.describe_producers import DescribeProducersRequestView, TopicRequestView

API_KEY = 61
# Kafka answers an unknown partition with the error's own message.
UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."


@handler(API_KEY, 0, 0)
def handle(ctx: RequestContext, request: DescribeProducersRequestView) -> Any:
    return ctx.respond(
        topics=tuple(
            ctx.make(
                "TopicResponse",
                name=topic.name,
                partitions=_partitions(ctx, topic),
            )
            for topic in request.topics
        )
    )


def _partitions(ctx: RequestContext, topic: TopicRequestView) -> tuple[Any, ...]:
    if not authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic.name):
        denied = ErrorCode.topic_authorization_failed
        return tuple(
            ctx.make(
                "PartitionResponse",
                partition_index=index,
                error_code=denied,
                error_message=default_message(denied),
                active_producers=(),
            )
            for index in topic.partition_indexes
        )
    return tuple(
        _partition(ctx, ctx.cluster.partition(topic.name, index), index)
        for index in topic.partition_indexes
    )


def _partition(ctx: RequestContext, partition: Partition | None, index: int) -> Any:
    if partition is None or ctx.node.node_id not in partition.replicas:
        code = (
            ErrorCode.unknown_topic_or_partition
            if partition is None
            else ErrorCode.not_leader_or_follower
        )
        return ctx.make(
            "PartitionResponse",
            partition_index=index,
            error_code=code,
            error_message=UNKNOWN_PARTITION_MESSAGE if partition is None else None,
            active_producers=(),
        )
    ongoing = partition.transactions.ongoing
    producers = tuple(
        ctx.make(
            "ProducerState",
            producer_id=producer_id,
            producer_epoch=entry.epoch,
            last_sequence=entry.last_sequence,
            last_timestamp=entry.last_timestamp,
            coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=ongoing.get(producer_id, -1),
        )
        for producer_id, entry in sorted(partition.producers.items())
    )
    return ctx.make(
        "PartitionResponse",
        partition_index=index,
        error_code=ErrorCode.none,
        error_message=None,
        active_producers=producers,
    )
