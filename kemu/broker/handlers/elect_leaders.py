"""ElectLeaders (key 43), v0-v2 (``kafka-leader-election.sh``).

Elections run on the cluster model, as Kafka's controller runs them (any broker answers, as any
Kafka broker forwards the request to its controller):

- PREFERRED (0; the only type before v1): the first replica becomes leader with a new leader
  epoch, unless it already leads (ELECTION_NOT_NEEDED) or its broker is stopped
  (PREFERRED_LEADER_NOT_AVAILABLE; ``kemu ctl broker stop``). This is how leaderships come back
  to a broker started again.
- UNCLEAN (1): an offline partition (leader -1) gets its first replica on a running broker
  (ELIGIBLE_LEADERS_NOT_AVAILABLE when none runs); a partition with a leader needs none
  (ELECTION_NOT_NEEDED).
- Unknown topics and partitions get UNKNOWN_TOPIC_OR_PARTITION with Kafka's messages ("No such
  topic as T", "No such partition as T-P").
- ``topic_partitions`` null elects over every partition and, as Kafka, lists only the
  partitions whose election was needed (no entries where the leader was already right).

A moved leader is what a reassignment or a broker failure gives in Kafka: the old leader answers
NOT_LEADER_OR_FOLLOWER and clients follow the new one through Metadata.

Omissions: the request timeout is not used (an election completes before the answer).

ALTER on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED), as Kafka checks.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, cluster_check, refused
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.cluster.model import NO_LEADER
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.elect_leaders import ElectLeadersRequestView

API_KEY = 43
PREFERRED, UNCLEAN = 0, 1


def elect(
    ctx: RequestContext, topic: str, index: int, election_type: int
) -> tuple[ErrorCode, str | None]:
    """Run one election; (error, message) as Kafka's ReplicationControlManager.electLeader."""
    found = ctx.cluster.topics.get(topic)
    if found is None:
        return ErrorCode.unknown_topic_or_partition, f"No such topic as {topic}"
    if not 0 <= index < len(found.partitions):
        return ErrorCode.unknown_topic_or_partition, f"No such partition as {topic}-{index}"
    partition = found.partitions[index]
    cluster = ctx.cluster
    preferred = partition.replicas[0]
    if election_type == PREFERRED and partition.leader_id != preferred:
        if preferred in cluster.stopped:
            return (
                ErrorCode.preferred_leader_not_available,
                f"Failed to elect leader for partition {topic}-{index} under strategy "
                "PreferredReplicaPartitionLeaderElectionStrategy",
            )
        cluster.move_leader(partition, preferred)
        return ErrorCode.none, None
    if election_type == UNCLEAN and partition.leader_id == NO_LEADER:
        running = [r for r in partition.replicas if r not in cluster.stopped]
        if not running:
            return (
                ErrorCode.eligible_leaders_not_available,
                f"Failed to elect leader for partition {topic}-{index} under strategy "
                "UncleanRecoveryStrategy",
            )
        cluster.move_leader(partition, running[0])
        return ErrorCode.none, None
    return ErrorCode.election_not_needed, "Leader election not needed for topic partition."


@handler(API_KEY, 0, 2)
def handle(ctx: RequestContext, request: ElectLeadersRequestView) -> Any:
    denied = refused(ctx, request, cluster_check(AclOperation.ALTER))
    if denied is not None:
        return denied
    election_type = getattr(request, "election_type", PREFERRED)
    if election_type not in (PREFERRED, UNCLEAN):
        return ctx.respond(error_code=ErrorCode.invalid_request, replica_election_results=())
    results = []
    if request.topic_partitions is None:
        for topic in list(ctx.cluster.topics.values()):
            outcomes = [
                (index, *elect(ctx, topic.name, index, election_type))
                for index in range(len(topic.partitions))
            ]
            results.append(
                _topic_result(
                    ctx, topic.name, [o for o in outcomes if o[1] != ErrorCode.election_not_needed]
                )
            )
    else:
        for wanted in request.topic_partitions:
            outcomes = [
                (index, *elect(ctx, wanted.topic, index, election_type))
                for index in wanted.partitions
            ]
            results.append(_topic_result(ctx, wanted.topic, outcomes))
    return ctx.respond(error_code=ErrorCode.none, replica_election_results=tuple(results))


def _topic_result(
    ctx: RequestContext, topic: str, outcomes: list[tuple[int, ErrorCode, str | None]]
) -> Any:
    return ctx.make(
        "ReplicaElectionResult",
        topic=topic,
        partition_result=tuple(
            ctx.make("PartitionResult", partition_id=index, error_code=code, error_message=message)
            for index, code, message in outcomes
        ),
    )
