"""The order of one partition's produce batches: sequence numbers, in-flight limit, retries.

As Java's idempotent producer with ``max.in.flight.requests.per.connection`` above 1: a batch
takes the partition's next sequence number when it is sent, up to ``max_in_flight`` batches of a
partition are in flight without waiting for each other, and they are written to the connection
in sequence order. A batch whose attempt failed (a lost connection, a moved leader, or
OUT_OF_ORDER_SEQUENCE_NUMBER because a batch before it failed) is retried only once every batch
before it is acknowledged, with the same sequence, so the leader appends them in order and
answers a batch it already has as before (a duplicate). With ``max_in_flight=1`` a partition has
one batch in flight at a time.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kemu.client.errors import KafkaError
from kemu.protocol.errors import ErrorCode


@dataclass(eq=False)
class PendingBatch:
    sequence: int
    record_count: int
    written: bool = False  # its current attempt is on the wire
    failed: bool = False  # an attempt failed: the next one waits until it leads
    doomed: BaseException | None = None  # a batch before it failed for good


class PartitionPipeline:
    def __init__(self, max_in_flight: int) -> None:
        self.max_in_flight = max_in_flight
        self.next_sequence = 0
        self.unacknowledged: list[PendingBatch] = []
        # A batch failed for good: those behind it fail too, and once none is left the
        # partition's sequence goes back to the first failed batch's (as before any pipelining).
        self._gap: BaseException | None = None
        self._rollback_to = 0
        self._changed = asyncio.Event()

    def add(self, record_count: int) -> PendingBatch:
        """Take the next sequence numbers for a batch (synchronously: send order)."""
        batch = PendingBatch(self.next_sequence, record_count, doomed=self._gap)
        self.next_sequence = (self.next_sequence + record_count) & 0x7FFFFFFF
        self.unacknowledged.append(batch)
        return batch

    def leads(self, batch: PendingBatch) -> bool:
        return bool(self.unacknowledged) and self.unacknowledged[0] is batch

    def _may_send(self, batch: PendingBatch) -> bool:
        position = self.unacknowledged.index(batch)
        if position >= self.max_in_flight:
            return False
        if batch.failed:
            return position == 0
        return all(p.written and not p.failed for p in self.unacknowledged[:position])

    async def wait_turn(self, batch: PendingBatch) -> None:
        """Until ``batch`` may be written: within the in-flight limit, every batch before it on
        the wire (or, after a failure, every batch before it acknowledged)."""
        while True:
            if batch.doomed is not None:
                self.forget(batch)
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"a batch sent before this one to the partition failed: {batch.doomed}",
                )
            if self._may_send(batch):
                return
            changed = self._changed
            await changed.wait()

    def mark_written(self, batch: PendingBatch) -> None:
        batch.written = True
        batch.failed = False  # retried: the batches behind it may follow it again
        self._wake()

    def mark_failed(self, batch: PendingBatch) -> None:
        batch.written = False
        batch.failed = True
        self._wake()

    def acknowledged(self, batch: PendingBatch) -> None:
        self.forget(batch)

    def give_up(self, batch: PendingBatch, cause: BaseException) -> None:
        """The batch failed for good: the ones behind it cannot be appended in order."""
        if self._gap is None:
            self._gap = cause
            self._rollback_to = batch.sequence
        position = self.unacknowledged.index(batch) if batch in self.unacknowledged else 0
        for later in self.unacknowledged[position + 1 :]:
            later.doomed = later.doomed or cause
        self.forget(batch)

    def forget(self, batch: PendingBatch) -> None:
        if batch in self.unacknowledged:
            self.unacknowledged.remove(batch)
        if self._gap is not None and not self.unacknowledged:
            self._gap = None
            self.next_sequence = self._rollback_to
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
