"""AlterPartitionReassignments (key 45), v0-v1 (``kafka-reassign-partitions.sh --execute``).

A reassignment gives a partition a new replica set in the cluster model. kemu keeps one copy of
each log that every replica reports, so the new replicas are in sync at once and the
reassignment completes before the answer (ListPartitionReassignments never shows it ongoing).
As Kafka's controller does on completion, a leader that is not among the new replicas hands
over to the first of them with a new leader epoch: clients on the old leader get
NOT_LEADER_OR_FOLLOWER and follow Metadata. A leader still among them stays (``kafka-leader-
election`` moves it to the preferred replica).

Checks and errors, with Kafka's messages (ReplicationControlManager):

- unknown topic: UNKNOWN_TOPIC_OR_PARTITION "Unable to find a topic named T."; unknown
  partition: "Unable to find partition T:P.";
- an empty replica list, an unregistered broker or a broker named twice:
  INVALID_REPLICA_ASSIGNMENT;
- v1 with ``allow_replication_factor_change`` false and another replica count:
  INVALID_REPLICATION_FACTOR "The replication factor is changed from X to Y";
- replicas null (cancel): NO_REASSIGNMENT_IN_PROGRESS, as none is ever in progress.

Omissions: the timeout is not used; log directories are not assigned.

ALTER on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED), as Kafka checks.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, cluster_check, refused
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.alter_partition_reassignments import AlterPartitionReassignmentsRequestView

API_KEY = 45


def reassign(
    ctx: RequestContext, topic: str, index: int, replicas: list[int] | None, allow_rf_change: bool
) -> tuple[ErrorCode, str | None]:
    cluster = ctx.cluster
    found = cluster.topics.get(topic)
    if found is None:
        return ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {topic}."
    if not 0 <= index < len(found.partitions):
        return ErrorCode.unknown_topic_or_partition, f"Unable to find partition {topic}:{index}."
    partition = found.partitions[index]
    if replicas is None:
        return ErrorCode.no_reassignment_in_progress, None
    if not replicas:
        return (
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        )
    seen: set[int] = set()
    for broker in replicas:
        if broker not in cluster.nodes:
            return (
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker}, but no such broker "
                "is registered.",
            )
        if broker in seen:
            return (
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {broker} more than once.",
            )
        seen.add(broker)
    if not allow_rf_change and len(replicas) != len(partition.replicas):
        return (
            ErrorCode.invalid_replication_factor,
            f"The replication factor is changed from {len(partition.replicas)} to {len(replicas)}",
        )
    cluster.reassign(partition, replicas)
    return ErrorCode.none, None


@handler(API_KEY, 0, 1)
def handle(ctx: RequestContext, request: AlterPartitionReassignmentsRequestView) -> Any:
    denied = refused(ctx, request, cluster_check(AclOperation.ALTER))
    if denied is not None:
        return denied
    allow = getattr(request, "allow_replication_factor_change", True)
    topics = tuple(
        ctx.make(
            "ReassignableTopicResponse",
            name=topic.name,
            partitions=tuple(
                _partition(
                    ctx,
                    p.partition_index,
                    *reassign(
                        ctx,
                        topic.name,
                        p.partition_index,
                        None if p.replicas is None else list(p.replicas),
                        allow,
                    ),
                )
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return ctx.respond(
        allow_replication_factor_change=allow,
        error_code=ErrorCode.none,
        error_message=None,
        responses=topics,
    )


def _partition(ctx: RequestContext, index: int, code: ErrorCode, message: str | None) -> Any:
    return ctx.make(
        "ReassignablePartitionResponse",
        partition_index=index,
        error_code=code,
        error_message=message,
    )
