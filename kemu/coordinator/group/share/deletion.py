"""Deleting a share group's share state (DeleteShareGroupOffsets, DeleteGroups): what moves to
its deleting topics and which share partitions the share persister is asked to delete. Sans-IO.

As Kafka's GroupMetadataManager: the group's ShareGroupStatePartitionMetadata is written with
the topics moved to DeletingTopics before the persister is called, and (offsets deletion) again
without those it deleted; a topic whose deletion failed stays deleting, across a restart too,
and the next deletion naming it asks for every partition the topic has. A heartbeat or
AlterShareGroupOffsets initializing a deleting topic takes it out of DeletingTopics.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping

from kemu.coordinator.group.share.group import ShareGroup

# topic id -> the share partitions to delete
Partitions = dict[uuid.UUID, tuple[int, ...]]
PartitionCount = Callable[[uuid.UUID], int | None]  # a topic's partitions (None: no such topic)


def offsets_deleting(group: ShareGroup, topics: Mapping[uuid.UUID, int]) -> Partitions:
    """DeleteShareGroupOffsets of ``topics`` (existing topics: their partition counts): each
    initialized topic moves to deleting and its initialized partitions are to be deleted; a
    topic already deleting has all its partitions deleted again (Kafka's
    sharePartitionsEligibleForOffsetDeletion). A topic in neither has no offsets to delete."""
    eligible: Partitions = {}
    for topic_id, partition_count in topics.items():
        initialized = group.initialized.pop(topic_id, None)
        if initialized:
            group.deleting.add(topic_id)
            eligible[topic_id] = tuple(sorted(initialized))
        elif topic_id in group.deleting:
            eligible[topic_id] = tuple(range(partition_count))
    return eligible


def offsets_deleted(group: ShareGroup, topic_ids: Iterable[uuid.UUID]) -> None:
    """The persister deleted these topics' share state: they are no longer deleting (Kafka's
    completeDeleteShareGroupOffsets)."""
    group.deleting.difference_update(topic_ids)


def deleting_all(group: ShareGroup, partition_count: PartitionCount) -> Partitions:
    """DeleteGroups of the (empty) group: every initialized or initializing partition, and
    every partition of a deleting topic that still exists, is to be deleted; exactly those
    topics are deleting and nothing is initialized or initializing any more (Kafka's
    shareGroupBuildPartitionDeleteRequest; a deleting topic since deleted is dropped)."""
    candidates: dict[uuid.UUID, set[int]] = {}
    for held in (group.initialized, group.initializing):
        for topic_id, partitions in held.items():
            candidates.setdefault(topic_id, set()).update(partitions)
    for topic_id in group.deleting:
        count = partition_count(topic_id)
        if count is not None:
            candidates.setdefault(topic_id, set()).update(range(count))
    group.initialized, group.initializing = {}, {}
    group.deleting = set(candidates)
    return {topic_id: tuple(sorted(p)) for topic_id, p in sorted(candidates.items())}
