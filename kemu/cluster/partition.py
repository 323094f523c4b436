"""One topic-partition: its log, its leader, idempotent-producer state and fetch waiters.

kemu keeps one copy of every partition; the replicas it reports are all in sync by
construction, so the high watermark is the log end offset.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kemu.cluster.partition_transactions import PartitionTransactions
from kemu.cluster.producer_state import ProducerEntry, ProducerStates, Refusal
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


class MarkerRefused(Exception):
    """A transaction marker the partition refuses (its error and Kafka's message)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


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
        self.producers = ProducerStates(
            (producer_id, ProducerEntry(state.epoch, list(state.recent), state.last_timestamp))
            for producer_id, state in log.recovered_producers().items()
        )  # a reopened log knows which batches its idempotent producers last wrote
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
                self.producers.remember_batch(assigned, offset)
        self.notify()
        return AppendResult(ErrorCode.none, base_offset, now_ms if log_append_time else -1)

    def _check_sequence(self, header: BatchHeader) -> AppendResult | None:
        """Kafka's checks of a client's batch against its producer's state here
        (``kemu.cluster.producer_state``): a duplicate answers its original offset."""
        duplicate = self.producers.duplicate_of(header)
        if duplicate is not None:
            return AppendResult(ErrorCode.none, duplicate)
        refusal = self.producers.check_batch(
            header,
            offset=self.log.log_end_offset,
            in_transaction=header.producer_id in self.transactions.ongoing,
            where=f"{self.topic_name}-{self.index}",
        )
        if refusal is not None:
            return AppendResult(refusal.error, message=refusal.message)
        return None

    def write_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        coordinator_epoch: int | None = None,
        transaction_version: int = 0,
        now_ms: int,
    ) -> int:
        """Append a COMMIT/ABORT control batch ending ``producer_id``'s transaction here; the
        marker's epoch becomes the producer's (a bumped epoch restarts its sequences). Raises
        ``MarkerRefused`` for a stale producer or coordinator epoch, as Kafka's partition
        leader refuses it (``producer_state.check_marker``); ``coordinator_epoch`` None: kemu's
        own coordinator (written as 0, never fenced)."""
        refusal = self.producers.check_marker(
            producer_id,
            producer_epoch,
            coordinator_epoch,
            transaction_version=transaction_version,
            in_transaction=producer_id in self.transactions.ongoing,
            where=f"{self.topic_name}-{self.index}",
        )
        if refusal is not None:
            raise MarkerRefused(refusal)
        batch = control_batch(
            CONTROL_COMMIT if commit else CONTROL_ABORT,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch or 0,
            timestamp_ms=now_ms,
        )
        offset = self.log.log_end_offset
        stored = with_offset(batch, offset, self.leader_epoch)
        self.log.append(read_header(stored), stored, now_ms=now_ms)
        self.transactions.on_marker(producer_id, commit, offset)
        self.producers.remember_marker(producer_id, producer_epoch, coordinator_epoch, now_ms)
        self.notify()
        return offset

    def expire_producers(self, *, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle ``expiration_ms`` without an open transaction here."""
        return self.producers.expire(now_ms, expiration_ms, self.transactions.ongoing)

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
