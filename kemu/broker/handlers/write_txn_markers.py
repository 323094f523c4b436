"""WriteTxnMarkers (key 27), v1-v2, for tools.

Kafka's coordinator sends it to partition leaders; kemu's coordinator writes its markers in
process, so this serves only tools that complete a hanging transaction by hand: each marker is
written as a COMMIT/ABORT control batch to every listed partition this broker leads (others get
NOT_LEADER_OR_FOLLOWER, unknown ones UNKNOWN_TOPIC_OR_PARTITION), and the transaction
coordinator's marker listeners hear of them (with an empty transactional id). The partition
checks the marker as Kafka's ``ProducerAppendInfo`` does (``kemu.cluster.producer_state``): a
producer epoch below the one the partition last saw from that producer (with v2's
``TransactionVersion`` 2: not above it, unless equal while no transaction of it is open, a retry)
is INVALID_PRODUCER_EPOCH, a coordinator epoch below the producer's last marker's
TRANSACTION_COORDINATOR_FENCED: a tool's abort of a transaction that has ended since would
otherwise end the producer's next one on that partition, whose coordinator may commit it.

ALTER or CLUSTER_ACTION on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED), as Kafka
checks.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    authorize,
    cluster_check,
    refused,
)
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.cluster.partition import MarkerRefused
from kemu.coordinator.transaction.coordinator import Markers
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.write_txn_markers import WriteTxnMarkersRequestView

API_KEY = 27


@handler(API_KEY, 1, 2)
def handle(ctx: RequestContext, request: WriteTxnMarkersRequestView) -> Any:
    if not authorize(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, log=False):
        # Kafka: ALTER on the cluster, else CLUSTER_ACTION (brokers write markers)
        denied = refused(ctx, request, cluster_check(AclOperation.CLUSTER_ACTION))
        if denied is not None:
            return denied
    now = ctx.now_ms()
    results = []
    for marker in request.markers:
        written: set[tuple[str, int]] = set()
        transaction_version = marker.transaction_version if ctx.version >= 2 else 0
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                partition = ctx.cluster.partition(topic.name, index)
                if partition is None:
                    code = ErrorCode.unknown_topic_or_partition
                elif partition.leader_id != ctx.node.node_id:
                    code = ErrorCode.not_leader_or_follower
                else:
                    try:
                        partition.write_marker(
                            marker.producer_id,
                            marker.producer_epoch,
                            bool(marker.transaction_result),
                            coordinator_epoch=marker.coordinator_epoch,
                            transaction_version=transaction_version,
                            now_ms=now,
                        )
                        code = ErrorCode.none
                        written.add((topic.name, index))
                    except MarkerRefused as refusal:
                        code = refusal.refusal.error
                    except OSError:
                        code = ErrorCode.kafka_storage_error
                partitions.append(
                    ctx.make(
                        "WritableTxnMarkerPartitionResult", partition_index=index, error_code=code
                    )
                )
            topics.append(
                ctx.make(
                    "WritableTxnMarkerTopicResult", name=topic.name, partitions=tuple(partitions)
                )
            )
        if written:
            transaction_coordinator(ctx.runtime).notify_markers(
                Markers(
                    "",
                    marker.producer_id,
                    marker.producer_epoch,
                    bool(marker.transaction_result),
                    frozenset(written),
                )
            )
        results.append(
            ctx.make(
                "WritableTxnMarkerResult", producer_id=marker.producer_id, topics=tuple(topics)
            )
        )
    return ctx.respond(markers=tuple(results))
