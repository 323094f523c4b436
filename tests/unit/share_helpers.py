"""Test helpers for share-partition cores: an in-memory log of real v2 batches and a driver."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from kemu.broker.share.partition import (
    AckBatch,
    AcquireMode,
    AcquireResult,
    SharePartitionConfig,
    SharePartitionCore,
)
from kemu.coordinator.share.persister import PersistedBatch, PersistedState, merge_batches
from kemu.protocol.records import (
    CONTROL_ABORT,
    BatchHeader,
    build_batch,
    control_batch,
    read_header,
    with_offset,
)


@dataclass
class FakeLog:
    """Batches with offsets assigned, as a partition log holds them."""

    batches: list[tuple[BatchHeader, bytes]] = field(default_factory=list)
    end: int = 0
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # (producer, first, last)

    def append(self, count: int, *, transactional: bool = False, producer_id: int = -1) -> int:
        """Append a batch of ``count`` records; return its base offset."""
        raw = build_batch(
            [(None, b"v%d" % i) for i in range(count)],
            timestamp_ms=1000,
            transactional=transactional,
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
        )
        return self._put(raw)

    def append_control(self, producer_id: int = 7, marker: int = CONTROL_ABORT) -> int:
        raw = control_batch(
            marker, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0, timestamp_ms=1
        )
        return self._put(raw)

    def skip(self, count: int) -> None:
        """Leave ``count`` offsets out of the log, as compaction does."""
        self.end += count

    def _put(self, raw: bytes) -> int:
        base = self.end
        stored = with_offset(raw, base, 0)
        header = read_header(stored)
        self.batches.append((header, stored))
        self.end = header.next_offset
        return base

    def read(self, offset: int) -> Iterator[tuple[BatchHeader, bytes]]:
        for header, data in self.batches:
            if header.last_offset >= offset:
                yield header, data


def acquire(
    core: SharePartitionCore,
    log: FakeLog,
    member: str,
    now: int,
    *,
    max_records: int = 500,
    batch_size: int = 500,
    mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED,
    **extra: object,
) -> AcquireResult:
    return core.acquire(
        member,
        log.read(core.next_fetch_offset()),
        max_records=max_records,
        batch_size=batch_size,
        mode=mode,
        now_ms=now,
        **extra,  # type: ignore[arg-type]
    )


def ranges(result: AcquireResult) -> list[tuple[int, int, int]]:
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in result.acquired]


def ack(first: int, last: int, *types: int) -> AckBatch:
    return AckBatch(first, last, tuple(types))


def new_core(
    *,
    lock_ms: int = 1000,
    limit: int = 5,
    max_in_flight: int = 2000,
    start: int = 0,
    batches: tuple[PersistedBatch, ...] = (),
) -> SharePartitionCore:
    config = SharePartitionConfig(
        record_lock_duration_ms=lock_ms,
        delivery_count_limit=limit,
        max_in_flight_records=max_in_flight,
    )
    core, _ = SharePartitionCore.from_persisted(
        PersistedState(0, start, batches=batches), config, reset_offset=start
    )
    return core


def normalised(start: int, batches: tuple[PersistedBatch, ...]) -> tuple[PersistedBatch, ...]:
    """Persisted batches at or after ``start``, with never-delivered records (AVAILABLE with
    delivery count 0, the same as absent) left out and neighbours coalesced."""
    kept = tuple(b for b in batches if not (b.delivery_state == 0 and b.delivery_count == 0))
    return merge_batches((), kept, start)
