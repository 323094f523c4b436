"""TxnOffsetCommit offsets of transactions that have not ended, by producer id, as Kafka's
``OffsetMetadataManager`` keeps them (``pendingTransactionalOffsets``, ``openTransactions``).
Sans-IO.

A TxnOffsetCommit's offsets are written to the group's ``__consumer_offsets`` partition at once,
in a transactional batch of the producer's id and epoch; replaying that batch (as it is written,
or at a load) puts them here. The transaction's marker on that partition ends them: a COMMIT
moves them to the offset store, unless an offset committed later in the log outside the
transaction is there (the larger record offset wins, as in Kafka), an ABORT drops them. An
offset tombstone of a group's partition drops them too. Because they are records in the log, a
transaction still Ongoing keeps its offsets across a restart, and a transaction prepared before a
crash commits them when its markers are written again.
"""

from __future__ import annotations

from collections.abc import Callable

from kemu.coordinator.group.offsets import CommittedOffset, TopicPartitionKey

# group -> (topic, partition) -> the offset a transaction committed
GroupOffsets = dict[str, dict[TopicPartitionKey, CommittedOffset]]


class PendingOffsets:
    def __init__(self) -> None:
        self._by_producer: dict[int, GroupOffsets] = {}
        # group -> (topic, partition) -> the producers with an offset of it pending
        self._open: dict[str, dict[TopicPartitionKey, set[int]]] = {}

    def put(
        self, producer_id: int, group_id: str, key: TopicPartitionKey, value: CommittedOffset
    ) -> None:
        self._by_producer.setdefault(producer_id, {}).setdefault(group_id, {})[key] = value
        self._open.setdefault(group_id, {}).setdefault(key, set()).add(producer_id)

    def remove(self, group_id: str, key: TopicPartitionKey) -> None:
        """An offset tombstone: no transaction's offset of that partition stays pending."""
        producers = self._open.get(group_id, {}).pop(key, set())
        for producer_id in producers:
            groups = self._by_producer.get(producer_id, {})
            offsets = groups.get(group_id, {})
            offsets.pop(key, None)
            if not offsets:
                groups.pop(group_id, None)
            if not groups:
                self._by_producer.pop(producer_id, None)
        self._drop_empty(group_id)

    def end(self, producer_id: int, in_partition: Callable[[str], bool]) -> GroupOffsets:
        """The producer's transaction ended on a ``__consumer_offsets`` partition: its offsets
        of the groups ``in_partition`` says live there, taken out."""
        groups = self._by_producer.get(producer_id)
        if groups is None:
            return {}
        ended = {
            group_id: offsets for group_id, offsets in groups.items() if in_partition(group_id)
        }
        for group_id, offsets in ended.items():
            del groups[group_id]
            held = self._open.get(group_id, {})
            for key in offsets:
                producers = held.get(key)
                if producers is not None:
                    producers.discard(producer_id)
                    if not producers:
                        del held[key]
            self._drop_empty(group_id)
        if not groups:
            del self._by_producer[producer_id]
        return ended

    def forget_groups(self, in_partition: Callable[[str], bool]) -> None:
        """A ``__consumer_offsets`` partition is loaded again: what it held is replayed anew."""
        for group_id in [g for g in self._open if in_partition(g)]:
            for key in list(self._open.get(group_id, {})):
                self.remove(group_id, key)

    def is_open(self, group_id: str, key: TopicPartitionKey) -> bool:
        return key in self._open.get(group_id, {})

    def open_offsets(self) -> dict[str, set[TopicPartitionKey]]:
        """The partitions an open transaction holds offsets of, by group."""
        return {group_id: set(held) for group_id, held in self._open.items()}

    def of_group(self, group_id: str) -> set[TopicPartitionKey]:
        return set(self._open.get(group_id, {}))

    def of_producer(self, producer_id: int) -> GroupOffsets:
        return {g: dict(offsets) for g, offsets in self._by_producer.get(producer_id, {}).items()}

    def _drop_empty(self, group_id: str) -> None:
        if not self._open.get(group_id, True):
            del self._open[group_id]
