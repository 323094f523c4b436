"""What one partition knows about transactions: which producers have one open (from the first
offset of their first transactional batch), and which were aborted (first offset to marker offset).

The last stable offset is the first offset of the earliest open transaction (else the high
watermark); READ_COMMITTED fetches get the aborted transactions overlapping what they read, and
share partitions the aborted offset ranges. Sans-IO; ``Partition`` feeds it appends and markers,
and after a restart ``rebuild`` replays the log's transactional batches and markers.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from kemu.protocol.record_reader import control_type
from kemu.protocol.records import CONTROL_COMMIT, BatchHeader, CorruptBatch
from kemu.storage.recovery import DATA_BATCH, UNKNOWN_MARKER, NotedBatch


class PartitionTransactions:
    __slots__ = ("aborted", "ongoing")

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        # (last offset = the ABORT marker's offset, first offset, producer id), by last offset
        self.aborted: list[tuple[int, int, int]] = []

    def on_append(self, header: BatchHeader, base_offset: int) -> None:
        if header.is_transactional and not header.is_control:
            self.ongoing.setdefault(header.producer_id, base_offset)

    def on_marker(self, producer_id: int, commit: bool, marker_offset: int) -> None:
        first = self.ongoing.pop(producer_id, None)
        if not commit and first is not None:
            self.aborted.append((marker_offset, first, producer_id))

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing.values()) if self.ongoing else None

    def aborted_between(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, end)."""
        at = bisect_left(self.aborted, (start, -1, -1))
        return [
            (producer_id, first) for _last, first, producer_id in self.aborted[at:] if first < end
        ]

    def aborted_ranges(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """(producer id, first, last) of aborted transactions overlapping [start, end): a batch is
        aborted only if its own producer's transaction was (transactions interleave)."""
        at = bisect_left(self.aborted, (start, -1, -1))
        return [
            (producer_id, first, last)
            for last, first, producer_id in self.aborted[at:]
            if first < end
        ]

    def forget_below(self, log_start: int) -> None:
        at = bisect_left(self.aborted, (log_start, -1, -1))
        if at:
            del self.aborted[:at]

    def forget_markers(self, marker_offsets: Iterable[int]) -> None:
        """Drop the aborted transactions whose ABORT markers compaction removed."""
        gone = set(marker_offsets)
        self.aborted = [entry for entry in self.aborted if entry[0] not in gone]

    def replay(self, noted: Iterable[NotedBatch]) -> None:
        """What ``rebuild`` does, from the transactional batches that a log's recovery noted
        (``kemu.storage.recovery``)."""
        for offset, _last_offset, producer_id, marker in noted:
            if marker == DATA_BATCH:
                self.ongoing.setdefault(producer_id, offset)
            elif marker != UNKNOWN_MARKER:
                self.on_marker(producer_id, marker == CONTROL_COMMIT, offset)

    def rebuild(self, batches: Iterable[tuple[BatchHeader, bytes]]) -> None:
        for header, batch in batches:
            if not header.is_transactional:
                continue
            if not header.is_control:
                self.on_append(header, header.base_offset)
                continue
            commit = marker_is_commit(batch)
            if commit is not None:
                self.on_marker(header.producer_id, commit, header.base_offset)


def marker_is_commit(batch: bytes) -> bool | None:
    """Whether a control batch is a COMMIT (True) or ABORT (False) marker; None if neither."""
    try:
        marker = control_type(batch)
    except CorruptBatch:
        return None
    return None if marker is None else marker == CONTROL_COMMIT
