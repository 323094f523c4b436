"""Stopping and starting one virtual broker, as Kafka's controller sees a broker fail and return.

Pure decisions over the cluster model (no sockets, no coordinators: ``kemu/broker/failover.py``
closes the broker's listener and connections and reloads what moved):

- a stopped broker leaves every partition's in-sync replicas (``Cluster.in_sync``); every
  partition it led gets a new leader, the first replica (in replica order) on a running broker,
  with a new leader epoch; a partition with no such replica goes offline (leader -1, Kafka's
  LEADER_NOT_AVAILABLE in Metadata), as Kafka's controller leaves a partition whose last
  in-sync replica failed (no unclean election: ``unclean.leader.election.enable`` is false);
- a broker that starts again is a follower of every partition that has a leader; an offline
  partition it holds a replica of gets it as leader (it was the last in-sync replica); its
  preferred leaderships come back only with a preferred-leader election (ElectLeaders, or
  ``elect_preferred``), as ``kafka-leader-election.sh`` brings them back.

Each change goes through ``Cluster.move_leader``, so the leader listeners hear of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kemu.cluster.model import NO_LEADER, Cluster
from kemu.cluster.partition import Partition


class FailoverError(ValueError):
    """A stop or start the cluster cannot do (the message says why)."""


@dataclass(frozen=True, slots=True)
class LeaderChange:
    topic: str
    partition: int
    previous: int
    leader: int  # NO_LEADER: offline


def new_leader(cluster: Cluster, partition: Partition) -> int:
    """The first replica on a running broker, or NO_LEADER."""
    return next((r for r in partition.replicas if r not in cluster.stopped), NO_LEADER)


def stop_broker(cluster: Cluster, node_id: int) -> list[LeaderChange]:
    """Mark ``node_id`` stopped and move every leadership it held; returns the changes."""
    if node_id not in cluster.nodes:
        raise FailoverError(f"no broker {node_id}")
    if node_id in cluster.stopped:
        return []
    if cluster.live_node_ids == [node_id]:
        raise FailoverError("at least one broker must keep running")
    cluster.stopped.add(node_id)
    changes = []
    for partition in list(cluster.all_partitions()):
        if partition.leader_id == node_id:
            leader = new_leader(cluster, partition)
            if leader == NO_LEADER:
                cluster.last_in_sync[(partition.topic_name, partition.index)] = node_id
            changes.append(_move(cluster, partition, leader))
    return changes


def start_broker(cluster: Cluster, node_id: int, *, elect_preferred: bool) -> list[LeaderChange]:
    """Mark ``node_id`` running: offline partitions it holds come back led by it; with
    ``elect_preferred`` so do the partitions whose preferred (first) replica it is."""
    if node_id not in cluster.nodes:
        raise FailoverError(f"no broker {node_id}")
    cluster.stopped.discard(node_id)
    changes = []
    for partition in list(cluster.all_partitions()):
        if node_id not in partition.replicas:
            continue
        offline = partition.leader_id == NO_LEADER or partition.leader_id in cluster.stopped
        preferred = elect_preferred and partition.replicas[0] == node_id
        if (offline or preferred) and partition.leader_id != node_id:
            changes.append(_move(cluster, partition, node_id))
    return changes


def _move(cluster: Cluster, partition: Partition, leader: int) -> LeaderChange:
    if leader != NO_LEADER:
        cluster.last_in_sync.pop((partition.topic_name, partition.index), None)
    previous = partition.leader_id
    cluster.move_leader(partition, leader)
    return LeaderChange(partition.topic_name, partition.index, previous, leader)
