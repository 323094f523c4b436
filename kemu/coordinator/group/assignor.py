"""Share-group target assignment, after the rules of Kafka's share ``SimpleAssignor`` (KIP-932).

Every partition of a subscribed topic goes to at least one member. When members outnumber
partitions a partition is shared: each gets ``ceil(members / partitions)`` members. Member loads
differ by at most one slot (balance), and a member keeps what it already has whenever balance
allows (stickiness); balance wins over stickiness. Members that subscribe to different topic
sets are assigned topic by topic among the members of each topic.

Members are ordered by id and partitions by (topic id, index) so a given input always gives the
same output.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping

TopicPartition = tuple[uuid.UUID, int]
Assignment = dict[str, frozenset[TopicPartition]]


def assign(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    partition_counts: Mapping[uuid.UUID, int | Collection[int]],
    current: Mapping[str, frozenset[TopicPartition]],
) -> Assignment:
    """The target assignment of every member.

    ``subscriptions`` maps member id to the ids of the existing topics it subscribes to,
    ``partition_counts`` gives each topic's partition count, or the indexes of the partitions
    that may be assigned (share groups: those whose state is initialized), and ``current`` the
    previous target assignment (for stickiness).
    """
    members = sorted(subscriptions)
    result: dict[str, set[TopicPartition]] = {member: set() for member in members}
    topic_sets = {subscriptions[member] for member in members}
    if len(topic_sets) == 1:
        topics = sorted(next(iter(topic_sets)))
        _assign_into(result, members, _partitions(topics, partition_counts), current)
    else:
        for topic in sorted({t for topics in topic_sets for t in topics}):
            subscribers = [m for m in members if topic in subscriptions[m]]
            _assign_into(result, subscribers, _partitions([topic], partition_counts), current)
    return {member: frozenset(partitions) for member, partitions in result.items()}


def _partitions(
    topics: list[uuid.UUID], partition_counts: Mapping[uuid.UUID, int | Collection[int]]
) -> list[TopicPartition]:
    found: list[TopicPartition] = []
    for topic in topics:
        indexes = partition_counts.get(topic, 0)
        chosen = range(indexes) if isinstance(indexes, int) else sorted(indexes)
        found.extend((topic, index) for index in chosen)
    return found


def _assign_into(
    result: dict[str, set[TopicPartition]],
    members: list[str],
    partitions: list[TopicPartition],
    current: Mapping[str, frozenset[TopicPartition]],
) -> None:
    for member, partitions_of_member in balanced(members, partitions, current).items():
        result[member].update(partitions_of_member)


def balanced(
    members: list[str],
    partitions: list[TopicPartition],
    current: Mapping[str, frozenset[TopicPartition]],
) -> dict[str, set[TopicPartition]]:
    """Spread ``partitions`` over ``members`` (all subscribed to all of them)."""
    assigned: dict[str, set[TopicPartition]] = {member: set() for member in members}
    if not members or not partitions:
        return assigned
    sharing = -(-len(members) // len(partitions))  # members per partition
    quota = _quotas(len(members), sharing * len(partitions))
    capacity = dict(zip(members, quota, strict=True))
    holders: dict[TopicPartition, int] = {partition: 0 for partition in partitions}

    # Stickiness: keep what each member already holds, within its quota and the sharing limit.
    for member in members:
        for partition in sorted(current.get(member, frozenset())):
            if len(assigned[member]) >= capacity[member]:
                break
            if partition in holders and holders[partition] < sharing:
                assigned[member].add(partition)
                holders[partition] += 1

    # Balance: hand out the remaining slots to the least loaded members that still have room.
    for partition in partitions:
        while holders[partition] < sharing:
            candidates = [
                m
                for m in members
                if len(assigned[m]) < capacity[m] and partition not in assigned[m]
            ]
            if candidates:
                chosen = min(candidates, key=lambda m: len(assigned[m]))
            else:
                # Only members already holding this partition have room: one of them takes over
                # another partition from a member that can then take this one.
                swapped = _make_room(assigned, capacity, members, partition)
                if swapped is None:
                    break  # a slight imbalance, as Kafka tolerates too
                chosen = swapped
            assigned[chosen].add(partition)
            holders[partition] += 1
    return assigned


def _make_room(
    assigned: dict[str, set[TopicPartition]],
    capacity: dict[str, int],
    members: list[str],
    partition: TopicPartition,
) -> str | None:
    """Move a partition from a member not holding ``partition`` to one with room; return the
    member that can now take ``partition``."""
    for taker in members:
        if len(assigned[taker]) >= capacity[taker]:
            continue
        for giver in members:
            if partition in assigned[giver]:
                continue
            for moved in sorted(assigned[giver]):
                if moved not in assigned[taker]:
                    assigned[giver].remove(moved)
                    assigned[taker].add(moved)
                    return giver
    return None


def _quotas(member_count: int, slots: int) -> list[int]:
    """Split ``slots`` over ``member_count`` members so that loads differ by at most one."""
    return [
        -(-slots * (index + 1) // member_count) - (-(-slots * index // member_count))
        for index in range(member_count)
    ]
