"""DescribeQuorum (key 55), v0-v2 (``kafka-metadata-quorum.sh describe``).

kemu has no KRaft quorum and no metadata log: one virtual controller, the lowest node id (the
controller Metadata and DescribeCluster report), keeps the cluster model in memory (and in
``kemu-metadata.json``). The answer says so as honestly as the schema allows: partition 0 of
``__cluster_metadata`` is led by that node, epoch 1 (it was never re-elected), high watermark and
log end offset 0 (there is no log), that node the only voter and every other broker an observer,
all caught up now. The voter's directory id is a fixed uuid derived from the cluster id and the
node id; it has no controller listener (v2 ``nodes`` lists it with none), as kemu serves no
controller endpoint (DescribeCluster refuses endpoint type CONTROLLER).

A topic other than ``__cluster_metadata`` or a partition other than 0 is
UNKNOWN_TOPIC_OR_PARTITION for the whole request, as Kafka's raft client answers.

DESCRIBE on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED), as Kafka checks.
"""

from __future__ import annotations

import uuid
from typing import Any

from kemu.broker.authorization import AclOperation, cluster_check, refused
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.describe_quorum import DescribeQuorumRequestView

API_KEY = 55
METADATA_TOPIC = "__cluster_metadata"
LEADER_EPOCH = 1


def directory_id(cluster_id: str, node_id: int) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"kemu:{cluster_id}:{node_id}:metadata")


@handler(API_KEY, 0, 2)
def handle(ctx: RequestContext, request: DescribeQuorumRequestView) -> Any:
    denied = refused(ctx, request, cluster_check(AclOperation.DESCRIBE))
    if denied is not None:
        return denied
    wanted = [(t.topic_name, p.partition_index) for t in request.topics for p in t.partitions]
    if wanted != [(METADATA_TOPIC, 0)]:
        return ctx.respond(
            error_code=ErrorCode.unknown_topic_or_partition,
            error_message=None,
            topics=(),
            nodes=(),
        )
    cluster = ctx.cluster
    controller = cluster.controller_id
    now = ctx.now_ms()

    def replica(node_id: int) -> Any:
        return ctx.make(
            "ReplicaState",
            replica_id=node_id,
            replica_directory_id=directory_id(cluster.cluster_id, node_id),
            log_end_offset=0,
            last_fetch_timestamp=now,
            last_caught_up_timestamp=now,
        )

    partition = ctx.make(
        "PartitionData",
        partition_index=0,
        error_code=ErrorCode.none,
        error_message=None,
        leader_id=controller,
        leader_epoch=LEADER_EPOCH,
        high_watermark=0,
        current_voters=(replica(controller),),
        observers=tuple(replica(n) for n in cluster.node_ids if n != controller),
    )
    return ctx.respond(
        error_code=ErrorCode.none,
        error_message=None,
        topics=(ctx.make("TopicData", topic_name=METADATA_TOPIC, partitions=(partition,)),),
        nodes=(ctx.make("Node", node_id=controller, listeners=()),),
    )
