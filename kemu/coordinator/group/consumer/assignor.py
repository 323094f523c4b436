"""Server-side assignors of KIP-848 consumer groups: "uniform" (the default) and "range".

Each partition of a subscribed topic goes to exactly one member subscribed to it.

* uniform: members' partition counts differ by at most one among members with the same
  subscription; a member keeps what it has whenever that stays within its share (stickiness).
  Partitions are handed out topic by topic, each to the least-loaded subscriber.
* range: per topic, the subscribers sorted by member id get contiguous ranges, the first ones
  one partition more when the count does not divide evenly (Kafka's range assignor).

Members are ordered by id and partitions by (topic id, index) so that a given input always
gives the same output.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from kemu.coordinator.group.assignor import TopicPartition

UNIFORM, RANGE = "uniform", "range"
ASSIGNORS = (UNIFORM, RANGE)

Assignment = dict[str, frozenset[TopicPartition]]


def assign(
    name: str,
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    partition_counts: Mapping[uuid.UUID, int],
    current: Mapping[str, frozenset[TopicPartition]],
) -> Assignment:
    if name == RANGE:
        return _range(subscriptions, partition_counts)
    return _uniform(subscriptions, partition_counts, current)


def _subscribers(subscriptions: Mapping[str, frozenset[uuid.UUID]], topic: uuid.UUID) -> list[str]:
    return sorted(member for member, topics in subscriptions.items() if topic in topics)


def _range(
    subscriptions: Mapping[str, frozenset[uuid.UUID]], partition_counts: Mapping[uuid.UUID, int]
) -> Assignment:
    result: dict[str, set[TopicPartition]] = {member: set() for member in subscriptions}
    topics = sorted(
        {t for topics in subscriptions.values() for t in topics if t in partition_counts}
    )
    for topic in topics:
        members = _subscribers(subscriptions, topic)
        count = partition_counts[topic]
        each, extra = divmod(count, len(members))
        start = 0
        for index, member in enumerate(members):
            size = each + (1 if index < extra else 0)
            result[member].update((topic, p) for p in range(start, start + size))
            start += size
    return {member: frozenset(partitions) for member, partitions in result.items()}


def _uniform(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    partition_counts: Mapping[uuid.UUID, int],
    current: Mapping[str, frozenset[TopicPartition]],
) -> Assignment:
    members = sorted(subscriptions)
    result: dict[str, set[TopicPartition]] = {member: set() for member in members}
    if not members:
        return {}
    partitions = sorted(
        (topic, index)
        for topic in {t for topics in subscriptions.values() for t in topics}
        for index in range(partition_counts.get(topic, 0))
    )
    # Each member's fair share of what it can consume (its subscribed partitions spread evenly
    # over the members sharing its subscription); stickiness is kept within it.
    eligible = {m: sum(partition_counts.get(t, 0) for t in subscriptions[m]) for m in members}
    same = {m: sum(1 for o in members if subscriptions[o] == subscriptions[m]) for m in members}
    quota = {m: -(-eligible[m] // same[m]) for m in members}
    taken: set[TopicPartition] = set()
    for member in members:
        for partition in sorted(current.get(member, frozenset())):
            topic = partition[0]
            if (
                partition in taken
                or topic not in subscriptions[member]
                or partition[1] >= partition_counts.get(topic, 0)
                or len(result[member]) >= quota[member]
            ):
                continue
            result[member].add(partition)
            taken.add(partition)
    for partition in partitions:
        if partition in taken:
            continue
        candidates = [m for m in members if partition[0] in subscriptions[m]]
        chosen = min(candidates, key=lambda m: (len(result[m]), m))
        result[chosen].add(partition)
        taken.add(partition)
    _even_out(result, subscriptions)
    return {member: frozenset(partitions) for member, partitions in result.items()}


def _even_out(
    result: dict[str, set[TopicPartition]], subscriptions: Mapping[str, frozenset[uuid.UUID]]
) -> None:
    """Move partitions from the most to the least loaded member that may take them until no
    such pair differs by more than one (stickiness gave way where it had to)."""
    for _ in range(sum(len(p) for p in result.values()) + 1):
        moved = False
        by_load = sorted(result, key=lambda m: (len(result[m]), m))
        for heavy in reversed(by_load):
            for light in by_load:
                if len(result[heavy]) - len(result[light]) <= 1:
                    break
                movable = sorted(p for p in result[heavy] if p[0] in subscriptions[light])
                if movable:
                    result[heavy].remove(movable[-1])
                    result[light].add(movable[-1])
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return
