"""Which groups the offsets-retention check deletes. Sans-IO.

Kafka 4.4.0's ``GroupCoordinatorShard.cleanupGroupMetadata`` runs every
``offsets.retention.check.interval.ms`` (first that long after the coordinator loads) over every
group it holds: ``OffsetMetadataManager.cleanupExpiredOffsets`` tombstones the group's offsets
past their retention and says whether none is left (a group with no offsets at all: none left),
then a group of a type that expires (``Group.shouldExpire``) and is empty (``Group.isEmpty``)
is deleted, its tombstones (``createGroupTombstoneRecords``, those of DeleteGroups) after its
offsets' in the same write:

- classic: empty is the Empty state (members still joining do not count);
- consumer (KIP-848) and streams: empty is no member (a streams group's topology does not keep
  it; Kafka keeps one only when a topology description plugin, which kemu does not have, has
  stored its description);
- share: never deleted (``ShareGroup.shouldExpire`` is false), empty or not.

Kafka also keeps a group while an open transaction holds offsets for it; kemu's transactional
offsets wait in the transaction coordinator and are not seen here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kemu.coordinator.group.offset_manager import Record
from kemu.coordinator.group.offsets import OffsetStore
from kemu.coordinator.group.records import OffsetCommitKey
from kemu.coordinator.group.registry import Group
from kemu.coordinator.group.share.group import ShareGroup


def expires(group: Group) -> bool:
    """Kafka's ``Group.shouldExpire``: every group type but share groups."""
    return not isinstance(group, ShareGroup)


def groups_to_delete(
    groups: Iterable[Group], offsets: OffsetStore, expired: Mapping[str, list[Record]]
) -> list[str]:
    """The groups a retention check deletes: empty, of a type that expires, and with no
    committed offset left once ``expired`` (this check's offset tombstones, by group) is
    written."""
    found = []
    for group in groups:
        if not expires(group) or not group.is_empty():
            continue
        tombstoned = {
            (key.topic, key.partition)
            for key, _ in expired.get(group.group_id, [])
            if isinstance(key, OffsetCommitKey)
        }
        if set(offsets.of_group(group.group_id)) <= tombstoned:
            found.append(group.group_id)
    return found
