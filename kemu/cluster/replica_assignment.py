"""Checks on manual replica assignments (CreateTopics, CreatePartitions), in Kafka's words."""

from __future__ import annotations

from kemu.cluster.model import Cluster


class AssignmentError(ValueError):
    """An assignment Kafka refuses with INVALID_REPLICA_ASSIGNMENT."""


def check_manual_assignment(
    cluster: Cluster, replicas: list[int], replication_factor: int | None
) -> None:
    """Raise AssignmentError unless ``replicas`` names registered brokers, each once, and has
    ``replication_factor`` entries (when one is already fixed)."""
    if not replicas:
        raise AssignmentError("The manual partition assignment includes an empty replica list.")
    previous: int | None = None
    for broker_id in sorted(replicas):
        if broker_id not in cluster.nodes:
            raise AssignmentError(
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered."
            )
        if broker_id == previous:
            raise AssignmentError(
                f"The manual partition assignment includes the broker {broker_id} more than once."
            )
        previous = broker_id
    if replication_factor is not None and len(replicas) != replication_factor:
        raise AssignmentError(
            f"The manual partition assignment includes a partition with {len(replicas)} "
            "replica(s), but this is not consistent with previous partitions, which have "
            f"{replication_factor} replica(s)."
        )
