"""IdempotentProducer: Kafka's idempotent producer without transactions, pipelined.

What Java's ``KafkaProducer`` does with ``enable.idempotence=true`` (its default) and no
``transactional.id``: InitProducerId with a null transactional id gets a producer id and epoch 0
before the first send; every batch carries the partition's next sequence number, so the leader
appends a retried batch once and answers a copy it already has as before; up to
``max_in_flight`` (at most 5, the batches a leader remembers per producer) batches of a partition
are in flight on one connection, written and retried in sequence order
(``produce_pipeline.IdempotentPipeline``). A leader takes any first sequence from a producer id it
has no state for, so until one of a partition's batches is acknowledged only its first is in
flight: had the first been refused and the second taken, the first could never follow it.

Errors, as Java's ``TransactionManager.canRetry`` sorts them for a producer without transactions:
a retriable error (a moved leader, a lost connection, a timeout) retries the batch with its
sequence once every batch before it is acknowledged; OUT_OF_ORDER_SEQUENCE_NUMBER retries it too,
and when it is the batch right after the last acknowledged one (the leader has a gap, not merely
a batch before it still retrying) the producer bumps its epoch itself (KIP-360: no request, the
leader takes a new epoch from sequence 0) and the partition's unacknowledged batches are numbered
again from 0. OUT_OF_ORDER_SEQUENCE_NUMBER on the first unacknowledged batch when the leader has
acknowledged a later one (it took that one without state for the producer) fails the batch at
once: it can never be appended in order, and Java retries it until its delivery timeout.
A batch that is not acknowledged within ``delivery_timeout`` fails its ``send``.
If it was ever written, the leader may or may not have it: once the partition has nothing left in
flight, its sequence is resolved, or the epoch bumped, as Java does (``markSequenceUnresolved``).
If it never was (it waited out the timeout for a leader), the leader cannot have it: as Java's
expired batch that never drew a sequence, it fails without a bump and the next batch takes its
sequence. Nothing acknowledged is written twice or out of send order.
"""

from __future__ import annotations

import asyncio
import datetime
import random
import time

from kemu.client.backoff import Backoff
from kemu.client.cluster import ClusterClient, RetriableError
from kemu.client.codec import producer_batch
from kemu.client.connection import ConnectionClosed
from kemu.client.errors import COORDINATOR_MOVED, LEADER_MOVED, IllegalStateError, KafkaError
from kemu.client.produce_pipeline import IdempotentPipeline, PendingBatch
from kemu.client.producer import RecordMetadata, placed, split_by_partition
from kemu.protocol.errors import ErrorCode

PRODUCE, INIT_PRODUCER_ID = 0, 22
ACKS_ALL = -1
MAX_IN_FLIGHT = 5  # a leader deduplicates against a producer's last five batches
MAX_EPOCH = 0x7FFF
NO_TRANSACTION_TIMEOUT = datetime.timedelta(milliseconds=0x7FFFFFFF)  # as Java sends it


class IdempotentProducer:
    def __init__(
        self,
        bootstrap: str,
        *,
        max_in_flight: int = MAX_IN_FLIGHT,
        client_id: str = "kemu-idempotent-producer",
        request_timeout: float = 30.0,
        delivery_timeout: float = 120.0,
        allow_auto_topic_creation: bool = True,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
        first_batch_alone: bool = True,
    ) -> None:
        """``first_batch_alone=False`` pipelines a partition's batches from its first, as Java's
        producer does, which a refused first batch may then never follow (the module's text);
        the simulator drives kemu so, as Java's producers will."""
        if not 1 <= max_in_flight <= MAX_IN_FLIGHT:
            raise ValueError(
                f"max_in_flight is 1 to {MAX_IN_FLIGHT} for an idempotent producer (a leader "
                f"deduplicates against a producer's last {MAX_IN_FLIGHT} batches)"
            )
        self.max_in_flight = max_in_flight
        self.first_batch_alone = first_batch_alone
        self.request_timeout = request_timeout
        self.delivery_timeout = delivery_timeout
        self.cluster = ClusterClient(
            bootstrap,
            client_id,
            allow_auto_topic_creation=allow_auto_topic_creation,
            backoff=backoff,
            rng=rng,
        )
        self.producer_id = -1
        self.producer_epoch = -1
        self.epoch_bumps = 0  # how often a gap made it bump its epoch (KIP-360)
        self._pipelines: dict[tuple[str, int], IdempotentPipeline] = {}
        # FIFO: concurrent sends take their sequences in the order they were called
        self._send_order = asyncio.Lock()
        self._renewing = asyncio.Lock()  # one InitProducerId for an exhausted epoch at a time
        self._round_robin = 0
        self._closed = False

    async def __aenter__(self) -> IdempotentProducer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Get a producer id (the first ``send`` does it otherwise)."""
        async with self._send_order:
            await self._ensure_producer_id()

    async def close(self) -> None:
        """Close the connections; sends still in flight fail."""
        self._closed = True
        await self.cluster.close()

    # --- producing -----------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
    ) -> RecordMetadata:
        """Write one record and wait until its leader has it (acks=all)."""
        return (await self.send_many(topic, [(key, value)], partition=partition))[0]

    async def send_many(
        self,
        topic: str,
        records: list[tuple[bytes | None, bytes | None]],
        partition: int | None = None,
    ) -> list[RecordMetadata]:
        """Write (key, value) records, one batch per partition; raises the first batch's error
        once every batch is answered or has failed."""
        self._check_open()
        timestamp_ms = int(time.time() * 1000)
        async with self._send_order:
            await self._ensure_producer_id()
            info = await self.cluster.topic(topic)
            by_partition, self._round_robin = split_by_partition(
                records, partition, len(info.leaders), self._round_robin
            )
            batches = {
                p: self._pipeline(topic, p).add_under(
                    len(entries), self.producer_id, self.producer_epoch
                )
                for p, entries in by_partition.items()
            }
        outcomes = await asyncio.gather(
            *(
                self._produce(topic, p, [e for _, e in entries], batches[p], timestamp_ms)
                for p, entries in by_partition.items()
            ),
            return_exceptions=True,
        )
        base_offsets = []
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
            base_offsets.append(outcome)
        return placed(topic, by_partition, base_offsets)

    def _pipeline(self, topic: str, partition: int) -> IdempotentPipeline:
        pipeline = self._pipelines.get((topic, partition))
        if pipeline is None:
            pipeline = IdempotentPipeline(
                self.max_in_flight,
                self.producer_id,
                self.producer_epoch,
                first_batch_alone=self.first_batch_alone,
            )
            self._pipelines[topic, partition] = pipeline
        return pipeline

    async def _produce(
        self,
        topic: str,
        partition: int,
        entries: list[tuple[bytes | None, bytes | None]],
        batch: PendingBatch,
        timestamp_ms: int,
    ) -> int:
        pipeline = self._pipelines[topic, partition]

        async def attempt() -> int:
            return await self._attempt(topic, partition, entries, pipeline, batch, timestamp_ms)

        try:
            base_offset = await self.cluster.retry(attempt, timeout=self.delivery_timeout)
        except BaseException as exc:
            pipeline.give_up(batch, exc)
            raise
        pipeline.acknowledged(batch)
        return base_offset

    async def _attempt(
        self,
        topic: str,
        partition: int,
        entries: list[tuple[bytes | None, bytes | None]],
        pipeline: IdempotentPipeline,
        batch: PendingBatch,
        timestamp_ms: int,
    ) -> int:
        self._check_open()
        leader = await self.cluster.leader(topic, partition)
        version = await self.cluster.version(PRODUCE, 12, leader)
        connection = await self.cluster.connection(leader)
        await pipeline.wait_turn(batch)
        if pipeline.bump_wanted:  # this batch leads and nothing of the partition is out
            await self._bump_epoch(pipeline)
        if not connection.connected:
            raise RetriableError("the connection closed before the batch was sent")
        records = producer_batch(
            entries,
            timestamp_ms=timestamp_ms,
            producer_id=pipeline.producer_id,
            producer_epoch=pipeline.epoch,
            base_sequence=batch.sequence,
            transactional=False,
        )
        partition_data = self.cluster.nested(
            PRODUCE, version, "PartitionProduceData", index=partition, records=records
        )
        topic_data = self.cluster.nested(
            PRODUCE, version, "TopicProduceData", name=topic, partition_data=(partition_data,)
        )
        # Marked before the call, which writes the request before it first waits: the batches
        # it wakes are written after it.
        pipeline.mark_written(batch)
        try:
            response = await connection.call(
                PRODUCE,
                version,
                wait_s=self.request_timeout,
                transactional_id=None,
                acks=ACKS_ALL,
                timeout=datetime.timedelta(milliseconds=int(self.request_timeout * 1000)),
                topic_data=(topic_data,),
            )
        except (ConnectionClosed, OSError) as exc:
            pipeline.mark_failed(batch)
            self.cluster.connection_lost(leader, connection)
            raise RetriableError(str(exc)) from exc
        self.cluster.learn_nodes(getattr(response, "node_endpoints", ()))
        [result] = [p for t in response.responses for p in t.partition_responses]
        error = result.error_code
        if error in (ErrorCode.none, ErrorCode.duplicate_sequence_number):
            return int(result.base_offset)
        message = f"Produce: {result.error_message or error.name}"
        if (
            error == ErrorCode.out_of_order_sequence_number
            and pipeline.leads(batch)
            and pipeline.precedes_acknowledged(batch.sequence)
        ):
            # The leader took a later batch (it had no state for the producer when it did):
            # this one can never be appended in order, so it fails now, not at its timeout.
            raise KafkaError(error, f"{message}: the leader has a later batch of this epoch")
        if error in (ErrorCode.out_of_order_sequence_number, ErrorCode.unknown_producer_id):
            self._on_sequence_error(error, pipeline, batch)
            pipeline.mark_failed(batch)
            raise RetriableError(message)
        if error in LEADER_MOVED:
            pipeline.mark_failed(batch)
            await self.cluster.forget_leaders()
            raise RetriableError(message)
        if error.retriable:
            pipeline.mark_failed(batch)
            raise RetriableError(message)
        raise KafkaError(error, message)  # failed for good (the partition's sequence resolves)

    def _on_sequence_error(
        self, error: ErrorCode, pipeline: IdempotentPipeline, batch: PendingBatch
    ) -> None:
        """Whether the retry needs a bumped epoch, as Java's ``canRetry`` decides without a
        transaction: UNKNOWN_PRODUCER_ID (the leader lost the producer's state) always;
        OUT_OF_ORDER_SEQUENCE_NUMBER when the batch follows the last acknowledged one (the gap is
        real) and was not renumbered already, or when a failed batch left the sequence
        unresolved and this one follows the last acknowledged; otherwise it is out of order only
        because a batch before it is still being retried, and waits for it."""
        follows = pipeline.follows_acknowledged(batch.sequence)
        if error == ErrorCode.unknown_producer_id:
            pipeline.bump_wanted = True
        elif pipeline.unresolved:
            pipeline.bump_wanted = pipeline.bump_wanted or follows
        elif follows and not batch.renumbered:
            pipeline.bump_wanted = True

    async def _bump_epoch(self, pipeline: IdempotentPipeline) -> None:
        if self.producer_epoch >= MAX_EPOCH:  # as Java: a new producer id past the last epoch
            await self._renew_producer_id()
        else:
            self.producer_epoch += 1
        self.epoch_bumps += 1
        pipeline.renumber(self.producer_id, self.producer_epoch)

    async def _renew_producer_id(self) -> None:
        """A new producer id for an exhausted epoch. The old id and epoch stay current until
        the new ones arrive, both at once: a send meanwhile numbers an idle partition's batch
        under the old (still valid) ones, never under no id. Partitions bumping together share
        one InitProducerId."""
        exhausted = self.producer_id
        async with self._renewing:
            if self.producer_id != exhausted:  # a bump of another partition renewed it
                return
            self.producer_id, self.producer_epoch = await self._init_producer_id()

    async def _ensure_producer_id(self) -> None:
        if self.producer_id >= 0:
            return
        self.producer_id, self.producer_epoch = await self._init_producer_id()

    async def _init_producer_id(self) -> tuple[int, int]:
        """A new producer id and its epoch from InitProducerId; assigns nothing."""
        await self.cluster.start(timeout=self.delivery_timeout)
        nodes: list[int] = []

        async def attempt() -> tuple[int, int]:
            # Any broker answers an idempotent producer's InitProducerId; the next one after a
            # failure.
            if not nodes:
                nodes.extend(sorted(self.cluster.nodes) or [-1])
            node = nodes.pop(0)
            if node < 0:
                await self.cluster.refresh_metadata(())
                raise RetriableError("no broker known")
            version = await self.cluster.version(INIT_PRODUCER_ID, 5, node)
            response = await self.cluster.call(
                node,
                INIT_PRODUCER_ID,
                version,
                transactional_id=None,
                transaction_timeout=NO_TRANSACTION_TIMEOUT,
                producer_id=-1,
                producer_epoch=-1,
            )
            error = response.error_code
            if error in COORDINATOR_MOVED or error.retriable:
                raise RetriableError(f"InitProducerId: {error.name}")
            if error != ErrorCode.none:
                raise KafkaError(error, "InitProducerId")
            return int(response.producer_id), int(response.producer_epoch)

        return await self.cluster.retry(attempt, timeout=self.delivery_timeout)

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("the producer is closed")

    def __repr__(self) -> str:
        return f"IdempotentProducer(id={self.producer_id}, epoch={self.producer_epoch})"
