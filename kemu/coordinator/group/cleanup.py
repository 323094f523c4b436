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

An open transaction's TxnOffsetCommit offsets (``OffsetMetadataManager``'s pending
transactional offsets and open transactions, kemu's ``pending_offsets``) hold their group: an
offset of a partition one holds does not expire (``hasPendingTransactionalOffsets``), and a
group one holds offsets for is not deleted (``openTransactions.contains``), until the
transaction ends.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from kemu.coordinator.group.offset_manager import Record
from kemu.coordinator.group.offsets import OffsetStore
from kemu.coordinator.group.records import OffsetCommitKey
from kemu.coordinator.group.registry import Group
from kemu.coordinator.group.share.group import ShareGroup


def expires(group: Group) -> bool:
    """Kafka's ``Group.shouldExpire``: every group type but share groups."""
    return not isinstance(group, ShareGroup)


def spare_open_offsets(
    expired: Mapping[str, list[Record]], open_offsets: Mapping[str, Collection[tuple[str, int]]]
) -> dict[str, list[Record]]:
    """``expired`` (offset tombstones by group) without the partitions an open transaction
    holds offsets of."""
    kept: dict[str, list[Record]] = {}
    for group_id, records in expired.items():
        held = open_offsets.get(group_id, ())
        left = [
            (key, value)
            for key, value in records
            if not (isinstance(key, OffsetCommitKey) and (key.topic, key.partition) in held)
        ]
        if left:
            kept[group_id] = left
    return kept


def groups_to_delete(
    groups: Iterable[Group],
    offsets: OffsetStore,
    expired: Mapping[str, list[Record]],
    in_open_transactions: Collection[str] = (),
) -> list[str]:
    """The groups a retention check deletes: empty, of a type that expires, with no committed
    offset left once ``expired`` (this check's offset tombstones, by group) is written, and no
    open transaction holding offsets for them."""
    found = []
    for group in groups:
        if not expires(group) or not group.is_empty():
            continue
        if group.group_id in in_open_transactions:
            continue
        tombstoned = {
            (key.topic, key.partition)
            for key, _ in expired.get(group.group_id, [])
            if isinstance(key, OffsetCommitKey)
        }
        if set(offsets.of_group(group.group_id)) <= tombstoned:
            found.append(group.group_id)
    return found
