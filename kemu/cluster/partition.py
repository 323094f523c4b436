"""One topic-partition: its log, its leader, idempotent-producer state and fetch waiters.

kemu keeps one copy of every partition; the replicas it reports are all in sync by
construction, so the high watermark is the log end offset.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kemu.cluster.partition_transactions import PartitionTransactions
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    BatchHeader,
    control_batch,
    read_header,
    with_log_append_time,
    with_offset,
)
from kemu.storage.log import PartitionLog, drain

if TYPE_CHECKING:
    from kemu.storage.compaction import CleanResult, CompactionPolicy

Listener = Callable[[], None]


class WakeList(dict[Listener, None]):
    """A set of callbacks woken in the order they were added (a ``set`` of functions would
    wake them in an order of memory addresses, different in each run)."""

    def add(self, listener: Listener) -> None:
        self[listener] = None

    def discard(self, listener: Listener) -> None:
        self.pop(listener, None)


MAX_REMEMBERED_BATCHES = 5  # Kafka dedupes against the producer's last five batches


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    # (first sequence, last sequence, base offset) of the most recent batches
    recent: list[tuple[int, int, int]] = field(default_factory=list)
    last_timestamp: int = -1  # the max timestamp of its last batch, as Kafka's lastTimestamp

    @property
    def last_sequence(self) -> int:
        return self.recent[-1][1] if self.recent else -1


@dataclass(frozen=True, slots=True)
class AppendResult:
    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = -1
    message: str | None = None


class Partition:
    __slots__ = (
        "index",
        "leader_epoch",
        "leader_id",
        "listeners",
        "log",
        "producers",
        "replicas",
        "topic_id",
        "topic_name",
        "transactions",
    )

    def __init__(
        self,
        topic_name: str,
        topic_id: uuid.UUID,
        index: int,
        leader_id: int,
        replicas: list[int],
        log: PartitionLog,
    ) -> None:
        self.topic_name = topic_name
        self.topic_id = topic_id
        self.index = index
        self.leader_id = leader_id
        self.leader_epoch = 0
        self.replicas = replicas
        self.log = log
        self.producers: dict[int, ProducerEntry] = {
            producer_id: ProducerEntry(state.epoch, list(state.recent), state.last_timestamp)
            for producer_id, state in log.recovered_producers().items()
        }  # a reopened log knows which batches its idempotent producers last wrote
        self.listeners = WakeList()
        self.transactions = PartitionTransactions()
        noted = log.take_recovered_transactions()
        if noted is not None:
            # open and aborted transactions: from the batches and markers the log's recovery saw
            self.transactions.replay(noted)
        elif any(state.transactional for state in log.recovered_producers().values()):
            # ... or read back from the log's batches and markers
            self.transactions.rebuild(log.batches(log.log_start_offset, log.log_end_offset))

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        unstable = self.transactions.first_unstable_offset()
        return self.high_watermark if unstable is None else unstable

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def append(
        self,
        batches: list[tuple[BatchHeader, bytes]],
        *,
        now_ms: int,
        log_append_time: bool = False,
    ) -> AppendResult:
        """Assign offsets and append; idempotent duplicates return their original offset."""
        first = batches[0][0]
        if first.producer_id >= 0 and first.base_sequence >= 0:
            checked = self._check_sequence(first)
            if checked is not None:
                return checked
        base_offset = self.log.log_end_offset
        for header, batch in batches:
            offset = self.log.log_end_offset
            stored = with_offset(batch, offset, self.leader_epoch)
            if log_append_time:
                stored = with_log_append_time(stored, now_ms)
            assigned = BatchHeader(
                offset,
                header.batch_length,
                self.leader_epoch,
                header.magic,
                header.crc,
                header.attributes,
                header.last_offset_delta,
                header.base_timestamp,
                now_ms if log_append_time else header.max_timestamp,
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.record_count,
            )
            self.log.append(assigned, stored, now_ms=now_ms)
            if header.is_transactional:
                self.transactions.on_append(header, offset)
            if header.producer_id >= 0 and header.base_sequence >= 0:
                self._remember(assigned, offset)
        self.notify()
        return AppendResult(ErrorCode.none, base_offset, now_ms if log_append_time else -1)

    def _check_sequence(self, header: BatchHeader) -> AppendResult | None:
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None  # first batch we see from this producer (or its state expired)
        if header.producer_epoch < entry.epoch:
            return AppendResult(ErrorCode.invalid_producer_epoch, message="Producer epoch is stale")
        if header.producer_epoch > entry.epoch:
            return None  # a bumped epoch starts its sequences again
        last_sequence = header.base_sequence + header.last_offset_delta
        for first_seq, last_seq, offset in entry.recent:
            if first_seq == header.base_sequence and last_seq == last_sequence:
                return AppendResult(ErrorCode.none, offset)  # duplicate: answer as before
        expected = (entry.last_sequence + 1) & 0x7FFFFFFF
        if header.base_sequence != expected:
            return AppendResult(
                ErrorCode.out_of_order_sequence_number,
                message=f"Out of order sequence number: expected {expected}, "
                f"got {header.base_sequence}",
            )
        return None

    def _remember(self, header: BatchHeader, base_offset: int) -> None:
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = ProducerEntry(header.producer_epoch)
            self.producers[header.producer_id] = entry
        entry.recent.append(
            (header.base_sequence, header.base_sequence + header.last_offset_delta, base_offset)
        )
        entry.last_timestamp = header.max_timestamp
        if len(entry.recent) > MAX_REMEMBERED_BATCHES:
            del entry.recent[0]

    def write_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        coordinator_epoch: int = 0,
        now_ms: int,
    ) -> int:
        """Append a COMMIT/ABORT control batch ending ``producer_id``'s transaction here; the
        marker's epoch becomes the producer's (a bumped epoch restarts its sequences)."""
        batch = control_batch(
            CONTROL_COMMIT if commit else CONTROL_ABORT,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            timestamp_ms=now_ms,
        )
        offset = self.log.log_end_offset
        stored = with_offset(batch, offset, self.leader_epoch)
        self.log.append(read_header(stored), stored, now_ms=now_ms)
        self.transactions.on_marker(producer_id, commit, offset)
        entry = self.producers.get(producer_id)
        if entry is None or entry.epoch != producer_epoch:
            self.producers[producer_id] = ProducerEntry(producer_epoch)
        self.notify()
        return offset

    def clean(self, *, now_ms: int, policy: CompactionPolicy) -> CleanResult | None:
        """Compact the log if it is due, at once (``cleaning`` in steps)."""
        return drain(self.cleaning(now_ms=now_ms, policy=policy))

    def cleaning(
        self, *, now_ms: int, policy: CompactionPolicy
    ) -> Generator[None, None, CleanResult | None]:
        """Compact the log if it is due, yielding between steps: never at or past the last
        stable offset, aborted transactions as this partition knows them. ABORT markers the
        cleaner removed take their transactions out of what READ_COMMITTED fetches are told (as
        Kafka's cleaned transaction index drops them): no batch of theirs is left."""
        result = yield from self.log.cleaning(
            now_ms=now_ms,
            policy=policy,
            last_stable_offset=self.last_stable_offset,
            aborted=self.transactions.aborted_ranges(self.log.log_start_offset, 2**63 - 1),
        )
        if result is not None and result.removed_abort_markers:
            self.transactions.forget_markers(result.removed_abort_markers)
        return result

    def aborted_ranges(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """(producer id, first, last) of aborted transactions overlapping [start, end)."""
        return self.transactions.aborted_ranges(start, end)

    def notify(self) -> None:
        for listener in list(self.listeners):
            listener()
