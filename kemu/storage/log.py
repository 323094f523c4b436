"""Partition logs: append-only sequences of v2 record batches addressed by offset.

Every partition, internal topics included, sits on a ``PartitionLog``. ``MemoryLog`` keeps the
batches in lists with a ``BatchIndex`` (one entry per batch), so that reads are a bisect;
``kemu.storage.segments.SegmentLog`` keeps them in segment files and survives a restart: its
in-memory index is sparse (one entry per ``index.interval.bytes``), so its memory does not grow
with the number of batches on disk.
"""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from array import array
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kemu.protocol.records import BatchHeader

if TYPE_CHECKING:
    # compaction: types only here, loaded with the segment log (a fresh start has no use for it)
    from kemu.storage.compaction import CleanResult, CompactionPolicy
    from kemu.storage.recovery import NotedBatch  # recovery imports this module


@dataclass(frozen=True, slots=True)
class TimestampMatch:
    offset: int
    timestamp: int


@dataclass(slots=True)
class RecoveredProducer:
    """An idempotent producer's state as the log's batches show it after a restart."""

    epoch: int
    # (first sequence, last sequence, base offset) of its most recent batches, oldest first
    recent: list[tuple[int, int, int]]
    transactional: bool = False  # it wrote transactional batches (Partition then replays them)
    last_timestamp: int = -1  # the max timestamp of its last batch (DescribeProducers)


def drain(steps: Generator[None, None, CleanResult | None]) -> CleanResult | None:
    """Run a stepwise cleaning to its end at once."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: CleanResult | None = done.value
            return result


class PartitionLog(ABC):
    """The contract every log keeps.

    Appends come with offsets already assigned (the batch's base offset equals
    ``log_end_offset``). Reads return whole batches, starting with the one that holds the
    requested offset, and never split a batch.
    """

    log_start_offset: int

    @property
    @abstractmethod
    def log_end_offset(self) -> int: ...

    @property
    @abstractmethod
    def size_bytes(self) -> int: ...

    @abstractmethod
    def append(self, header: BatchHeader, batch: bytes, *, now_ms: int) -> None: ...

    @abstractmethod
    def read(self, offset: int, max_bytes: int, *, upper: int, min_one: bool = True) -> bytes:
        """Whole batches from the one holding ``offset``, up to ``max_bytes``.

        Batches whose base offset is at or past ``upper`` (the high watermark or last stable
        offset) are not returned. With ``min_one`` the first batch is returned even when it is
        larger than ``max_bytes``, as Kafka does so that consumers always make progress.
        """

    @abstractmethod
    def batches(self, offset: int, upper: int) -> Iterator[tuple[BatchHeader, bytes]]:
        """Batches holding offsets in [offset, upper), decoded header first."""

    @abstractmethod
    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampMatch | None:
        """The first offset whose batch max timestamp is >= ``timestamp_ms``."""

    @abstractmethod
    def max_timestamp(self) -> TimestampMatch | None: ...

    @abstractmethod
    def advance_start(self, new_start: int) -> None:
        """Move the log start offset forward (DeleteRecords, retention); drops whole batches."""

    @abstractmethod
    def truncate_to(self, end_offset: int) -> None:
        """Drop every batch at or past ``end_offset`` (batches are dropped whole)."""

    @abstractmethod
    def enforce_retention(
        self, *, now_ms: int, retention_ms: int, retention_bytes: int
    ) -> None: ...

    def configure(  # noqa: B027 - memory logs have no segments
        self, *, segment_bytes: int, segment_ms: int, index_interval_bytes: int
    ) -> None:
        """Take the topic's ``segment.bytes``, ``segment.ms`` and ``index.interval.bytes``."""

    def recovered_producers(self) -> dict[int, RecoveredProducer]:
        """Idempotent-producer state found in the log when it was opened (none in memory)."""
        return {}

    def take_recovered_transactions(self) -> list[NotedBatch] | None:
        """The transactional batches found when the log was opened, those ``batches(log start,
        log end)`` gives, in offset order (``NotedBatch``: base and last offset, producer id,
        ``DATA_BATCH`` or the control batch's marker type; ``kemu.storage.recovery``). Handed
        over once (later calls give []); None when the log did not note them, and its batches
        must be read instead."""
        return None

    def clean(
        self,
        *,
        now_ms: int,
        policy: CompactionPolicy,
        last_stable_offset: int,
        aborted: list[tuple[int, int, int]],
    ) -> CleanResult | None:
        """Compact the log when it is due (``kemu.storage.compaction``); None when it was not.

        ``aborted`` lists the aborted transactions (producer id, first offset, marker offset)
        the partition knows of; nothing at or past ``last_stable_offset`` is cleaned.
        """
        return drain(
            self.cleaning(
                now_ms=now_ms,
                policy=policy,
                last_stable_offset=last_stable_offset,
                aborted=aborted,
            )
        )

    def cleaning(
        self,
        *,
        now_ms: int,
        policy: CompactionPolicy,
        last_stable_offset: int,
        aborted: list[tuple[int, int, int]],
    ) -> Generator[None, None, CleanResult | None]:
        """``clean`` in steps, yielding between them (memory logs are not compacted)."""
        del now_ms, policy, last_stable_offset, aborted
        return None
        yield  # makes this a generator

    def flush(self) -> None:  # noqa: B027 - memory logs have nothing to flush
        """Make appended batches durable (a no-op in memory)."""

    def close(self) -> None:  # noqa: B027
        """Release files."""


class BatchIndex:
    """Parallel arrays over the batches of a ``MemoryLog``.

    Machine-word arrays rather than lists of ints: 32 bytes per batch instead of about 140, which
    is most of a busy partition's resident memory (500,000 1 KiB records are 33,000 batches).
    """

    __slots__ = ("base_offsets", "max_timestamps", "next_offsets", "sizes")

    def __init__(self) -> None:
        self.base_offsets: array[int] = array("q")
        self.next_offsets: array[int] = array("q")
        self.max_timestamps: array[int] = array("q")
        self.sizes: array[int] = array("q")

    def __len__(self) -> int:
        return len(self.base_offsets)

    def add(self, header: BatchHeader) -> None:
        self.base_offsets.append(header.base_offset)
        self.next_offsets.append(header.next_offset)
        self.max_timestamps.append(header.max_timestamp)
        self.sizes.append(header.size)

    def position_of(self, offset: int) -> int:
        """Index of the first batch whose next offset is past ``offset``."""
        return bisect.bisect_right(self.next_offsets, offset)

    def take(self, start: int, budget: int, upper: int, *, min_one: bool) -> tuple[int, int]:
        """How far a read from batch ``start`` goes: (end index, bytes).

        Batches are taken while they fit ``budget`` and begin before ``upper``; with ``min_one``
        the first one is taken even when it alone is over budget.
        """
        end = start
        total = 0
        base_offsets = self.base_offsets
        sizes = self.sizes
        while end < len(base_offsets) and base_offsets[end] < upper:
            size = sizes[end]
            if total + size > budget and (end > start or not min_one):
                break
            total += size
            end += 1
        return end, total

    def drop_front(self, count: int) -> None:
        del self.base_offsets[:count]
        del self.next_offsets[:count]
        del self.max_timestamps[:count]
        del self.sizes[:count]

    def drop_back(self, keep: int) -> None:
        del self.base_offsets[keep:]
        del self.next_offsets[keep:]
        del self.max_timestamps[keep:]
        del self.sizes[keep:]

    def offset_for_timestamp(self, timestamp_ms: int, start: int) -> TimestampMatch | None:
        for index, max_ts in enumerate(self.max_timestamps):
            if max_ts >= timestamp_ms:
                return TimestampMatch(max(self.base_offsets[index], start), max_ts)
        return None

    def max_timestamp(self) -> TimestampMatch | None:
        if not self.max_timestamps:
            return None
        best = max(range(len(self.max_timestamps)), key=self.max_timestamps.__getitem__)
        return TimestampMatch(self.next_offsets[best] - 1, self.max_timestamps[best])


class MemoryLog(PartitionLog):
    """A log held in memory: what ``kemu serve`` uses without ``--data-dir``."""

    def __init__(self, start_offset: int = 0) -> None:
        self.log_start_offset = start_offset
        self._end = start_offset
        self._index = BatchIndex()
        self._batches: list[bytes] = []
        self._append_times: list[int] = []
        self._size = 0

    @property
    def log_end_offset(self) -> int:
        return self._end

    @property
    def size_bytes(self) -> int:
        return self._size

    def append(self, header: BatchHeader, batch: bytes, *, now_ms: int) -> None:
        self._index.add(header)
        self._batches.append(batch)
        self._append_times.append(now_ms)
        self._size += len(batch)
        self._end = header.next_offset

    def read(self, offset: int, max_bytes: int, *, upper: int, min_one: bool = True) -> bytes:
        start = self._index.position_of(offset)
        end, _ = self._index.take(start, max_bytes, upper, min_one=min_one)
        return b"".join(self._batches[start:end])

    def batches(self, offset: int, upper: int) -> Iterator[tuple[BatchHeader, bytes]]:
        from kemu.protocol.records import read_header

        index = self._index.position_of(offset)
        while index < len(self._batches) and self._index.base_offsets[index] < upper:
            batch = self._batches[index]
            yield read_header(batch), batch
            index += 1

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampMatch | None:
        return self._index.offset_for_timestamp(timestamp_ms, self.log_start_offset)

    def max_timestamp(self) -> TimestampMatch | None:
        return self._index.max_timestamp()

    def advance_start(self, new_start: int) -> None:
        if new_start <= self.log_start_offset:
            return
        self.log_start_offset = min(new_start, self._end)
        drop = bisect.bisect_right(self._index.next_offsets, self.log_start_offset)
        self._drop_front(drop)

    def _drop_front(self, count: int) -> None:
        if count <= 0:
            return
        self._size -= sum(len(batch) for batch in self._batches[:count])
        del self._batches[:count]
        del self._append_times[:count]
        self._index.drop_front(count)

    def truncate_to(self, end_offset: int) -> None:
        keep = bisect.bisect_left(self._index.base_offsets, end_offset)
        self._size -= sum(len(batch) for batch in self._batches[keep:])
        del self._batches[keep:]
        del self._append_times[keep:]
        self._index.drop_back(keep)
        self._end = (
            self._index.next_offsets[-1]
            if self._batches
            else max(self.log_start_offset, min(self._end, end_offset))
        )

    def enforce_retention(self, *, now_ms: int, retention_ms: int, retention_bytes: int) -> None:
        drop = 0
        size = self._size
        # The active (last) batch is kept, as Kafka keeps the active segment.
        while drop < len(self._batches) - 1:
            too_old = retention_ms >= 0 and now_ms - self._index.max_timestamps[drop] > retention_ms
            too_big = retention_bytes >= 0 and size > retention_bytes
            if not (too_old or too_big):
                break
            size -= len(self._batches[drop])
            drop += 1
        if drop:
            self.log_start_offset = self._index.next_offsets[drop - 1]
            self._drop_front(drop)
