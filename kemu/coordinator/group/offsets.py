"""Committed offsets of every group, and when they expire. Sans-IO.

Offsets are kept by topic name, as Kafka keys them (``OffsetCommitKey``: group, topic,
partition). Retention follows Kafka's ``offsets.retention.minutes``: an offset committed with an
explicit retention time (OffsetCommit v2-v4) expires at that time; otherwise a group with no
protocol (a "simple" group of assign()-only consumers) loses an offset once it is older than the
retention, an Empty group once it has been Empty that long, and a Stable "consumer" group only
for topics it no longer subscribes to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None
    # where its record is in ``__consumer_offsets`` (-1: not known): a transaction's offset
    # replaces a committed one at its COMMIT marker only if written after it
    record_offset: int = -1


# The time an offset's retention counts from, or None when it must not expire now.
RetentionBase = Callable[[str, str, CommittedOffset], int | None]  # group, topic, offset


class OffsetStore:
    def __init__(self) -> None:
        self._groups: dict[str, dict[TopicPartitionKey, CommittedOffset]] = {}

    def get(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._groups.get(group_id, {}).get((topic, partition))

    def put(self, group_id: str, topic: str, partition: int, value: CommittedOffset) -> None:
        self._groups.setdefault(group_id, {})[(topic, partition)] = value

    def remove(self, group_id: str, topic: str, partition: int) -> bool:
        offsets = self._groups.get(group_id)
        if offsets is None or offsets.pop((topic, partition), None) is None:
            return False
        if not offsets:
            del self._groups[group_id]
        return True

    def of_group(self, group_id: str) -> dict[TopicPartitionKey, CommittedOffset]:
        """The group's offsets, ordered by topic then partition."""
        return dict(sorted(self._groups.get(group_id, {}).items()))

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._groups.get(group_id))

    def drop_group(self, group_id: str) -> list[TopicPartitionKey]:
        return sorted(self._groups.pop(group_id, {}))

    def has_any(self) -> bool:
        return bool(self._groups)

    def group_ids(self) -> Iterator[str]:
        return iter(list(self._groups))

    def expired(
        self, now_ms: int, retention_ms: int, base: RetentionBase
    ) -> list[tuple[str, str, int]]:
        """(group, topic, partition) of every offset past its retention at ``now_ms``."""
        found = []
        for group_id, offsets in self._groups.items():
            for (topic, partition), value in offsets.items():
                if value.expire_timestamp_ms is not None:
                    if now_ms >= value.expire_timestamp_ms:
                        found.append((group_id, topic, partition))
                    continue
                start = base(group_id, topic, value)
                if start is not None and now_ms - start >= retention_ms:
                    found.append((group_id, topic, partition))
        return found
