"""The order of one partition's produce batches: sequence numbers, in-flight limit, retries.

As Java's idempotent producer with ``max.in.flight.requests.per.connection`` above 1: a batch
takes the partition's next sequence number when it is sent, up to ``max_in_flight`` batches of a
partition are in flight without waiting for each other, and they are written to the connection
in sequence order. A batch whose attempt failed (a lost connection, a moved leader, or
OUT_OF_ORDER_SEQUENCE_NUMBER because a batch before it failed) is retried only once every batch
before it is acknowledged, with the same sequence, so the leader appends them in order and
answers a batch it already has as before (a duplicate). With ``max_in_flight=1`` a partition has
one batch in flight at a time.

``IdempotentPipeline`` is the same order for an idempotent producer without transactions, where
no transaction ends a failure: a gap in a partition's sequences is closed by bumping the
producer's epoch and numbering the unacknowledged batches again from 0 (KIP-360).
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
    renumbered: bool = False  # its sequence was rewritten under a bumped epoch
    sent: bool = False  # an attempt was written: the leader may have it (Java's inRetry)


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
        batch.written = batch.sent = True
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


SEQUENCE_MASK = 0x7FFFFFFF


class IdempotentPipeline(PartitionPipeline):
    """One partition of a non-transactional idempotent producer, as Java's ``TransactionManager``
    keeps it without a transactional id (KIP-360): a batch failed for good leaves the partition's
    sequence *unresolved* (the leader may or may not have it); once no batch of the partition is
    left, it is resolved if the last acknowledged sequence is the last one taken, and otherwise
    the producer's epoch is bumped. OUT_OF_ORDER_SEQUENCE_NUMBER on the batch right after the last
    acknowledged one (a real gap at the leader) also asks for a bump. A bump waits until none of
    the partition's batches is on the wire, then numbers the unacknowledged ones again from 0
    under the new epoch, in their order; the batches of every partition are stamped with the
    partition's producer id and epoch, which moves to the producer's current one whenever the
    partition has nothing unacknowledged.

    A leader with no state for a producer id takes any sequence from it (so that a producer whose
    state expired there goes on; Kafka's ``ProducerAppendInfo.checkSequence``). Had the first
    batch of a new producer id been refused and the one pipelined behind it taken, the first
    could never be appended after it. So until the leader has acknowledged a batch of this
    producer id, only the leading batch is on the wire; a new epoch of a known id needs
    sequence 0, so the pipeline stays full across a bump. (``first_batch_alone=False``: as
    Java's producer, which pipelines from the first batch.)"""

    def __init__(
        self, max_in_flight: int, producer_id: int, epoch: int, *, first_batch_alone: bool = True
    ) -> None:
        super().__init__(max_in_flight)
        self.producer_id, self.epoch = producer_id, epoch
        self.first_batch_alone = first_batch_alone
        self.leader_knows_producer = False  # a batch of this producer id was acknowledged
        self.last_acknowledged = -1  # the highest sequence the leader confirmed, this epoch
        self.unresolved = False
        self.bump_wanted = False

    def add_under(self, record_count: int, producer_id: int, epoch: int) -> PendingBatch:
        """``add`` for the producer's current id and epoch: an idle partition moves to them."""
        idle = not self.unacknowledged and not self.bump_wanted and not self.unresolved
        if idle and (producer_id, epoch) != (self.producer_id, self.epoch):
            self.renumber(producer_id, epoch)
        return self.add(record_count)

    def follows_acknowledged(self, sequence: int) -> bool:
        return sequence == (self.last_acknowledged + 1) & SEQUENCE_MASK

    def precedes_acknowledged(self, sequence: int) -> bool:
        """Whether the leader acknowledged a later batch than ``sequence``, this epoch."""
        if self.last_acknowledged < 0:
            return False
        return (self.last_acknowledged - sequence) & SEQUENCE_MASK < SEQUENCE_MASK // 2

    def renumber(self, producer_id: int, epoch: int) -> None:
        """The epoch bump: the unacknowledged batches take sequences from 0, in their order."""
        if producer_id != self.producer_id:
            self.leader_knows_producer = False
        self.producer_id, self.epoch = producer_id, epoch
        sequence = 0
        for batch in self.unacknowledged:
            batch.sequence = sequence
            batch.renumbered = True
            sequence += batch.record_count
        self.next_sequence = sequence
        self.last_acknowledged = -1
        self.unresolved = self.bump_wanted = False
        self._wake()

    def _may_send(self, batch: PendingBatch) -> bool:
        if self.bump_wanted:  # the leading batch bumps, once the partition has nothing out
            return self.leads(batch) and not any(p.written for p in self.unacknowledged)
        if self.first_batch_alone and not self.leader_knows_producer and not self.leads(batch):
            return False
        return super()._may_send(batch)

    def acknowledged(self, batch: PendingBatch) -> None:
        self.leader_knows_producer = True
        last = (batch.sequence + batch.record_count - 1) & SEQUENCE_MASK
        self.last_acknowledged = max(self.last_acknowledged, last)
        self.forget(batch)
        self._resolve()

    def give_up(self, batch: PendingBatch, cause: BaseException) -> None:
        """The batch failed for good; the batches behind it go on (no transaction ends here).
        One never written (it expired waiting for a leader or its turn) cannot be at the
        leader: as in Java, where such a batch never drew a sequence, nothing needs resolving
        and the batches behind it (none written either, as they go in order) take its
        sequences; one that was written leaves the partition's sequence unresolved."""
        if not batch.sent and batch in self.unacknowledged:
            for later in self.unacknowledged[self.unacknowledged.index(batch) + 1 :]:
                later.sequence = (later.sequence - batch.record_count) & SEQUENCE_MASK
            self.next_sequence = (self.next_sequence - batch.record_count) & SEQUENCE_MASK
        else:
            self.unresolved = True
        self.forget(batch)
        self._resolve()

    def _resolve(self) -> None:
        if not self.unresolved or self.unacknowledged:
            return
        if self.follows_acknowledged(self.next_sequence):
            self.unresolved = False  # the leader has everything up to the last sequence taken
        else:
            self.bump_wanted = True
