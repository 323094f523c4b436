"""TransactionalProducer: idempotent, transactional record batches, a consumer group's offsets
(``send_offsets_to_transaction``, ``kemu.client.txn_offsets``) and KIP-1289 share
acknowledgements carried by the transaction.

Transactions follow what the cluster finalized (ApiVersions ``transaction.version``): with 2
(KIP-890 part 2) a partition joins the transaction when its leader sees the first transactional
batch (Produce v12+) and every EndTxn (v5) answers the epoch to use next; below 2 the producer
adds partitions itself with AddPartitionsToTxn first. Each ``send`` is one batch with the
partition's next sequence number. ``max_in_flight`` (default 1: a partition's sends wait for
each other) lets up to that many batches of a partition be in flight at once, written in
sequence order and, after a failure, retried in order (``produce_pipeline``); a retried batch
keeps its sequence (the leader deduplicates it).

Share acknowledgements go in one of the two KIP-1289 wire forms (spec §2.7):
- ``one-rpc``: TxnShareAcknowledge (key 95 by default) to each source partition's leader, which
  enlists the group's ``__share_group_state`` partitions in the transaction itself;
- ``two-rpc``: AddShareAcknowledgementsToTxn (key 96 by default) to the transaction coordinator
  first, then TxnShareAcknowledge as above.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import random
import time
from dataclasses import dataclass
from typing import Any

from kemu.client.backoff import Backoff
from kemu.client.cluster import (
    TRANSACTION_COORDINATOR,
    ClusterClient,
    RetriableError,
    TopicIdPartition,
)
from kemu.client.codec import partition_for_key, producer_batch
from kemu.client.connection import ConnectionClosed
from kemu.client.errors import (
    COORDINATOR_MOVED,
    LEADER_MOVED,
    MEMBER_FENCED,
    PRODUCER_FENCED,
    CommitFailedError,
    IllegalStateError,
    KafkaError,
    ProducerFencedError,
    TransactionAbortableError,
)
from kemu.client.produce_pipeline import PartitionPipeline, PendingBatch
from kemu.client.share_types import ShareAcknowledgements, ShareGroupMetadata
from kemu.client.txn_offsets import TransactionalOffsets
from kemu.protocol.errors import ErrorCode

PRODUCE, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 0, 22, 24, 26
TXN_SHARE_ACKNOWLEDGE, ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN = 95, 96
ACKS_ALL = -1
ONE_RPC, TWO_RPC = "one-rpc", "two-rpc"


class _State(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    ABORTABLE = "abortable"
    FENCED = "fenced"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int


Record = tuple[bytes | None, bytes | None]  # (key, value)
ByPartition = dict[int, list[tuple[int, Record]]]  # partition -> (index in the call, record)


def split_by_partition(
    records: list[Record], partition: int | None, partition_count: int, round_robin: int
) -> tuple[ByPartition, int]:
    """The records of one ``send_many`` per partition, with their places in the call: the given
    partition, else the key's hash, else round robin from ``round_robin`` (returned advanced)."""
    by_partition: ByPartition = {}
    for index, (key, value) in enumerate(records):
        chosen = partition
        if chosen is None:
            if key is not None:
                chosen = partition_for_key(key, partition_count)
            else:
                chosen = round_robin % partition_count
                round_robin += 1
        by_partition.setdefault(chosen, []).append((index, (key, value)))
    return by_partition, round_robin


def placed(topic: str, by_partition: ByPartition, base_offsets: list[int]) -> list[RecordMetadata]:
    """Each record's metadata, in the order of the call, from its batch's base offset."""
    results: dict[int, RecordMetadata] = {}
    for (p, entries), base_offset in zip(by_partition.items(), base_offsets, strict=True):
        for position, (index, _) in enumerate(entries):
            results[index] = RecordMetadata(topic, p, base_offset + position)
    return [results[index] for index in sorted(results)]


class TransactionalProducer(TransactionalOffsets):
    def __init__(
        self,
        bootstrap: str,
        transactional_id: str,
        *,
        transaction_timeout_ms: int = 60_000,
        share_acknowledgement_form: str = ONE_RPC,
        txn_share_acknowledge_api_key: int = TXN_SHARE_ACKNOWLEDGE,
        add_share_acknowledgements_api_key: int = ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN,
        client_id: str = "kemu-transactional-producer",
        request_timeout: float = 30.0,
        allow_auto_topic_creation: bool = True,
        max_in_flight: int = 1,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight is at least 1")
        if share_acknowledgement_form not in (ONE_RPC, TWO_RPC):
            raise ValueError(f"share_acknowledgement_form is {ONE_RPC!r} or {TWO_RPC!r}")
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.share_acknowledgement_form = share_acknowledgement_form
        self.txn_share_acknowledge_api_key = txn_share_acknowledge_api_key
        self.add_share_acknowledgements_api_key = add_share_acknowledgements_api_key
        self.request_timeout = request_timeout
        self.max_in_flight = max_in_flight
        # As the Java producer: a send to a topic that does not exist asks the broker to create
        # it (with the broker's num.partitions); False to refuse, failing such a send at once.
        self.cluster = ClusterClient(
            bootstrap,
            client_id,
            allow_auto_topic_creation=allow_auto_topic_creation,
            backoff=backoff,
            rng=rng,
        )
        self.producer_id = -1
        self.producer_epoch = -1
        self._state = _State.UNINITIALIZED
        self._abort_cause: KafkaError | None = None
        self._transaction_version = 0
        self._pipelines: dict[tuple[str, int], PartitionPipeline] = {}
        # FIFO: concurrent sends take their sequences in the order they were called, even when
        # the first has to look the topic up
        self._send_order = asyncio.Lock()
        self._added: set[tuple[str, int]] = set()
        self._has_work = False
        self._round_robin = 0

    async def __aenter__(self) -> TransactionalProducer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- lifecycle -----------------------------------------------------------------------------

    async def init_transactions(self) -> None:
        """Get a producer id and epoch for the transactional id, fencing any earlier producer
        with it (its open transaction is aborted)."""
        await self.cluster.start()
        features = await self.cluster.features()
        self._transaction_version = features.finalized.get("transaction.version", 0)
        self._check_not_fenced()

        async def attempt() -> None:
            node = await self.cluster.coordinator(
                TRANSACTION_COORDINATOR, self.transactional_id, timeout=self.request_timeout
            )
            version = await self.cluster.version(INIT_PRODUCER_ID, 5, node)
            response = await self.cluster.call(
                node,
                INIT_PRODUCER_ID,
                version,
                transactional_id=self.transactional_id,
                transaction_timeout=datetime.timedelta(milliseconds=self.transaction_timeout_ms),
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
            )
            self._raise_for(response.error_code, "InitProducerId", coordinator=True)
            self.producer_id = int(response.producer_id)
            self.producer_epoch = int(response.producer_epoch)

        await self.cluster.retry(attempt, timeout=self.request_timeout)
        self._pipelines.clear()
        self._state = _State.READY

    def begin_transaction(self) -> None:
        if self._state is not _State.READY:
            raise IllegalStateError(f"cannot begin a transaction in state {self._state.value}")
        self._state = _State.IN_TRANSACTION
        self._added.clear()
        self._has_work = False
        self._abort_cause = None

    async def commit_transaction(self) -> None:
        """Commit: the produced records become visible to read_committed readers and the
        acknowledged share records complete, atomically. Raises the error that made the
        transaction abortable, if one did (then ``abort_transaction()``)."""
        self._check_not_fenced()
        if self._state is _State.ABORTABLE:
            raise TransactionAbortableError(
                self._abort_cause.error if self._abort_cause else ErrorCode.transaction_abortable,
                f"the transaction must be aborted: {self._abort_cause}",
            )
        self._require(_State.IN_TRANSACTION, "commit")
        await self._end(commit=True)

    async def abort_transaction(self) -> None:
        self._check_not_fenced()
        if self._state not in (_State.IN_TRANSACTION, _State.ABORTABLE):
            raise IllegalStateError(f"no transaction to abort in state {self._state.value}")
        await self._end(commit=False)

    async def _end(self, *, commit: bool) -> None:
        if not self._has_work:
            self._state = _State.READY  # nothing reached a broker: nothing to end there
            return

        async def attempt() -> None:
            node = await self.cluster.coordinator(
                TRANSACTION_COORDINATOR, self.transactional_id, timeout=self.request_timeout
            )
            wanted = 5 if self._transaction_version >= 2 else 4
            version = await self.cluster.version(END_TXN, wanted, node)
            response = await self.cluster.call(
                node,
                END_TXN,
                version,
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                committed=commit,
            )
            self._raise_for(response.error_code, "EndTxn", coordinator=True)
            if version >= 5 and int(response.producer_epoch) >= 0:
                if int(response.producer_epoch) != self.producer_epoch:
                    self._pipelines.clear()
                self.producer_id = int(response.producer_id)
                self.producer_epoch = int(response.producer_epoch)

        await self.cluster.retry(attempt, timeout=self.request_timeout)
        self._state = _State.READY

    async def close(self) -> None:
        self._state = _State.CLOSED
        await self.cluster.close()

    # --- producing -----------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
    ) -> RecordMetadata:
        """Write one record in the open transaction and wait until its leader has it."""
        return (await self.send_many(topic, [(key, value)], partition=partition))[0]

    async def send_many(
        self,
        topic: str,
        records: list[tuple[bytes | None, bytes | None]],
        partition: int | None = None,
    ) -> list[RecordMetadata]:
        """Write (key, value) records in the open transaction, one batch per partition."""
        self._check_not_fenced()
        self._require(_State.IN_TRANSACTION, "send")
        async with self._send_order:
            info = await self.cluster.topic(topic)
            by_partition, self._round_robin = split_by_partition(
                records, partition, len(info.leaders), self._round_robin
            )
            batches = {p: self._pipeline(topic, p).add(len(e)) for p, e in by_partition.items()}
        done = await asyncio.gather(
            *(
                self._produce(topic, p, [entry for _, entry in entries], batches[p])
                for p, entries in by_partition.items()
            )
        )
        return placed(topic, by_partition, list(done))

    def _pipeline(self, topic: str, partition: int) -> PartitionPipeline:
        pipeline = self._pipelines.get((topic, partition))
        if pipeline is None:
            pipeline = self._pipelines[topic, partition] = PartitionPipeline(self.max_in_flight)
        return pipeline

    async def _produce(
        self,
        topic: str,
        partition: int,
        entries: list[tuple[bytes | None, bytes | None]],
        batch: PendingBatch,
    ) -> int:
        pipeline = self._pipeline(topic, partition)
        try:
            await self._add_partition_if_needed(topic, partition)
            base_offset = await self._produce_batch(topic, partition, entries, pipeline, batch)
        except (ProducerFencedError, CommitFailedError) as exc:
            pipeline.give_up(batch, exc)
            raise
        except KafkaError as exc:
            pipeline.give_up(batch, exc)
            self._make_abortable(exc)
            raise
        except BaseException as exc:
            pipeline.give_up(batch, exc)
            raise
        pipeline.acknowledged(batch)
        return base_offset

    async def _produce_batch(
        self,
        topic: str,
        partition: int,
        entries: list[tuple[bytes | None, bytes | None]],
        pipeline: PartitionPipeline,
        batch: PendingBatch,
    ) -> int:
        records = producer_batch(
            entries,
            timestamp_ms=int(time.time() * 1000),
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=batch.sequence,
            transactional=True,
        )
        self._has_work = True

        async def attempt() -> int:
            leader = await self.cluster.leader(topic, partition)
            wanted = 12 if self._transaction_version >= 2 else 11
            version = await self.cluster.version(PRODUCE, wanted, leader)
            partition_data = self.cluster.nested(
                PRODUCE, version, "PartitionProduceData", index=partition, records=records
            )
            topic_data = self.cluster.nested(
                PRODUCE, version, "TopicProduceData", name=topic, partition_data=(partition_data,)
            )
            connection = await self.cluster.connection(leader)
            await pipeline.wait_turn(batch)
            if not connection.connected:
                raise RetriableError("the connection closed before the batch was sent")
            # Marked before the call: ``call`` writes the request before it first waits, so the
            # batches it wakes are written after it (a batch marked written while its
            # connection was still being opened let the next one overtake it).
            pipeline.mark_written(batch)
            try:
                response = await connection.call(
                    PRODUCE,
                    version,
                    transactional_id=self.transactional_id,
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
            if error in LEADER_MOVED:
                pipeline.mark_failed(batch)
                await self.cluster.forget_leaders()
                raise RetriableError(error.name)
            if error == ErrorCode.concurrent_transactions:
                pipeline.mark_failed(batch)
                raise RetriableError(error.name)  # the previous transaction is completing
            if error == ErrorCode.out_of_order_sequence_number and not pipeline.leads(batch):
                # A batch before it failed and is being retried: as Java's producer, retry this
                # one behind it (it is out of order only if it still is once it leads).
                pipeline.mark_failed(batch)
                raise RetriableError(error.name)
            if error == ErrorCode.invalid_producer_epoch:
                # Abortable, as for Java's producer (KIP-588): a partition leader cannot tell a
                # timed-out transaction from a fenced producer; the abort's EndTxn does (NONE and
                # the bumped epoch, or PRODUCER_FENCED).
                raise KafkaError(error, f"Produce: {result.error_message or error.name}")
            self._raise_for(error, "Produce", message=result.error_message)
            return int(result.base_offset)

        return await self.cluster.retry(attempt, timeout=self.request_timeout)

    async def _add_partition_if_needed(self, topic: str, partition: int) -> None:
        """Transaction version < 2: the producer adds a partition before its first batch."""
        if self._transaction_version >= 2 or (topic, partition) in self._added:
            return

        async def attempt() -> None:
            node = await self.cluster.coordinator(
                TRANSACTION_COORDINATOR, self.transactional_id, timeout=self.request_timeout
            )
            version = await self.cluster.version(ADD_PARTITIONS_TO_TXN, 3, node)
            entry = self.cluster.nested(
                ADD_PARTITIONS_TO_TXN,
                version,
                "AddPartitionsToTxnTopic",
                name=topic,
                partitions=(partition,),
            )
            response = await self.cluster.call(
                node,
                ADD_PARTITIONS_TO_TXN,
                version,
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=self.producer_id,
                v3_and_below_producer_epoch=self.producer_epoch,
                v3_and_below_topics=(entry,),
            )
            for result in response.results_by_topic_v3_and_below:
                for p in result.results_by_partition:
                    self._raise_for(p.partition_error_code, "AddPartitionsToTxn", coordinator=True)

        await self.cluster.retry(attempt, timeout=self.request_timeout)
        self._added.add((topic, partition))

    # --- share acknowledgements (KIP-1289) -----------------------------------------------------

    async def send_share_acknowledgements_to_transaction(
        self, acknowledgements: ShareAcknowledgements, metadata: ShareGroupMetadata
    ) -> None:
        """Stage a share consumer's acknowledgements in the open transaction: they take effect
        when it commits and are undone (the records redelivered) when it aborts.

        Raises CommitFailedError when the member's epoch is no longer current (abort, then poll
        again), ProducerFencedError when this producer was fenced."""
        self._check_not_fenced()
        self._require(_State.IN_TRANSACTION, "send share acknowledgements")
        if acknowledgements.is_empty():
            return
        try:
            if self.share_acknowledgement_form == TWO_RPC:
                await self._add_share_acknowledgements(acknowledgements, metadata)
            await self._txn_share_acknowledge(acknowledgements, metadata)
        except ProducerFencedError:
            raise
        except KafkaError as exc:
            self._make_abortable(exc)
            raise

    async def _add_share_acknowledgements(
        self, acknowledgements: ShareAcknowledgements, metadata: ShareGroupMetadata
    ) -> None:
        by_topic: dict[Any, list[int]] = {}
        for tp in acknowledgements.acknowledgements:
            by_topic.setdefault(tp.topic_id, []).append(tp.partition)

        async def attempt() -> None:
            node = await self.cluster.coordinator(
                TRANSACTION_COORDINATOR, self.transactional_id, timeout=self.request_timeout
            )
            key = ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN
            topics = tuple(
                self.cluster.nested(
                    key,
                    0,
                    "AddShareAcknowledgementsToTxnTopic",
                    topic_id=topic_id,
                    partitions=tuple(sorted(partitions)),
                )
                for topic_id, partitions in by_topic.items()
            )
            await self._require_served(self.add_share_acknowledgements_api_key, node)
            response = await self.cluster.call(
                node,
                key,
                0,
                wire_key=self.add_share_acknowledgements_api_key,
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                group_id=metadata.group_id,
                topics=topics,
            )
            self._raise_for(
                response.error_code,
                "AddShareAcknowledgementsToTxn",
                coordinator=True,
                message=response.error_message,
            )

        await self.cluster.retry(attempt, timeout=self.request_timeout)
        self._has_work = True

    async def _txn_share_acknowledge(
        self, acknowledgements: ShareAcknowledgements, metadata: ShareGroupMetadata
    ) -> None:
        remaining = dict(acknowledgements.acknowledgements)
        # partition -> the leader that answered UNKNOWN_TOPIC_OR_PARTITION (see below)
        not_hosted: dict[TopicIdPartition, int] = {}

        async def attempt() -> None:
            by_leader: dict[int, dict[TopicIdPartition, Any]] = {}
            for tp, batches in remaining.items():
                leader = await self.cluster.leader(tp.topic, tp.partition)
                by_leader.setdefault(leader, {})[tp] = batches
            outcomes = await asyncio.gather(
                *(
                    self._txn_share_acknowledge_to(node, acks, metadata, not_hosted)
                    for node, acks in by_leader.items()
                ),
                return_exceptions=True,
            )
            retry = False
            for outcome in outcomes:
                if isinstance(outcome, RetriableError):
                    retry = True
                elif isinstance(outcome, BaseException):
                    raise outcome
                else:
                    for tp in outcome:
                        remaining.pop(tp, None)
            if remaining or retry:
                raise RetriableError(f"share acknowledgements left to stage: {len(remaining)}")

        await self.cluster.retry(attempt, timeout=self.request_timeout)

    async def _txn_share_acknowledge_to(
        self,
        node: int,
        acks: dict[TopicIdPartition, Any],
        metadata: ShareGroupMetadata,
        not_hosted: dict[TopicIdPartition, int],
    ) -> list[TopicIdPartition]:
        """Stage ``acks`` at one leader; the partitions it staged (others are to be retried).

        UNKNOWN_TOPIC_OR_PARTITION once is a leader that may have moved: the metadata is
        refreshed and the partition retried. From the same leader again (the metadata still
        names it), that leader has no share partition loaded, as after it restarted: the records
        this member acquired were in its memory and are gone, so no retry can stage them. That is
        raised at once (abortable: abort and poll again) rather than retried until the request
        timeout, which would outlive a transaction timeout of the same length and end in
        PRODUCER_FENCED. COORDINATOR_NOT_AVAILABLE & co. for a partition: the share coordinator
        could not take the stage's write and the leader took the stage back (KIP-1289 §7), so
        the partition is sent again, as the draft client does."""
        key = TXN_SHARE_ACKNOWLEDGE
        await self._require_served(self.txn_share_acknowledge_api_key, node)
        by_topic: dict[Any, list[TopicIdPartition]] = {}
        for tp in acks:
            by_topic.setdefault(tp.topic_id, []).append(tp)
        topics = tuple(
            self.cluster.nested(
                key,
                0,
                "TxnShareAcknowledgeTopic",
                topic_id=topic_id,
                partitions=tuple(
                    self.cluster.nested(
                        key,
                        0,
                        "TxnShareAcknowledgePartition",
                        partition_index=tp.partition,
                        acknowledgement_batches=tuple(
                            self.cluster.nested(
                                key,
                                0,
                                "TxnShareAcknowledgeBatch",
                                first_offset=batch.first_offset,
                                last_offset=batch.last_offset,
                                acknowledge_types=batch.acknowledge_types,
                            )
                            for batch in acks[tp]
                        ),
                    )
                    for tp in tps
                ),
            )
            for topic_id, tps in by_topic.items()
        )
        response = await self.cluster.call(
            node,
            key,
            0,
            wire_key=self.txn_share_acknowledge_api_key,
            transactional_id=self.transactional_id,
            group_id=metadata.group_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            member_id=metadata.member_id,
            member_epoch=metadata.member_epoch,
            topics=topics,
        )
        self._has_work = True
        error = response.error_code
        if error in MEMBER_FENCED:
            raise CommitFailedError(error, "the share-group member's epoch is no longer current")
        if error in COORDINATOR_MOVED or error == ErrorCode.concurrent_transactions:
            raise RetriableError(error.name)
        self._raise_for(error, "TxnShareAcknowledge")
        staged = []
        moved = False
        for topic in response.responses:
            for partition in topic.partitions:
                tp = next(
                    t
                    for t in acks
                    if t.topic_id == topic.topic_id and t.partition == partition.partition_index
                )
                perror = partition.error_code
                if perror == ErrorCode.none:
                    staged.append(tp)
                elif perror == ErrorCode.unknown_topic_or_partition and not_hosted.get(tp) == node:
                    raise KafkaError(
                        perror,
                        f"{tp}: broker {node} has no share partition for it (restarted?), so "
                        f"not the records this member acquired: {partition.error_message or ''}",
                    )
                elif perror in LEADER_MOVED:
                    if perror == ErrorCode.unknown_topic_or_partition:
                        not_hosted[tp] = node
                    moved = True
                elif perror in MEMBER_FENCED:
                    raise CommitFailedError(perror, partition.error_message)
                elif perror in COORDINATOR_MOVED:
                    # the share coordinator could not take the stage's write: the leader took
                    # the stage back, the records are still this member's; send it again
                    continue
                else:
                    raise KafkaError(perror, f"{tp}: {partition.error_message or ''}")
        if moved:
            await self.cluster.forget_leaders()
        return staged

    async def _require_served(self, wire_key: int, node: int) -> None:
        connection = await self.cluster.connection(node)
        if wire_key not in connection.features.versions:
            raise KafkaError(
                ErrorCode.unsupported_version,
                f"broker {node} does not serve api key {wire_key} (is KIP-1289 enabled?)",
            )

    # --- state and errors ----------------------------------------------------------------------

    def _require(self, state: _State, what: str) -> None:
        if self._state is _State.ABORTABLE and state is _State.IN_TRANSACTION:
            raise TransactionAbortableError(
                self._abort_cause.error if self._abort_cause else ErrorCode.transaction_abortable,
                f"cannot {what}: the transaction must be aborted ({self._abort_cause})",
            )
        if self._state is not state:
            raise IllegalStateError(f"cannot {what} in state {self._state.value}")

    def _require_in_transaction(self, what: str) -> None:
        self._require(_State.IN_TRANSACTION, what)

    def _check_not_fenced(self) -> None:
        if self._state is _State.FENCED:
            raise ProducerFencedError(ErrorCode.producer_fenced, "this producer was fenced")
        if self._state is _State.CLOSED:
            raise IllegalStateError("the producer is closed")

    def _make_abortable(self, cause: KafkaError) -> None:
        if self._state is _State.IN_TRANSACTION:
            self._state = _State.ABORTABLE
            self._abort_cause = cause

    def _raise_for(
        self,
        error: ErrorCode,
        what: str,
        *,
        coordinator: bool = False,
        message: str | None = None,
    ) -> None:
        if error == ErrorCode.none:
            return
        if error in PRODUCER_FENCED:
            self._state = _State.FENCED
            raise ProducerFencedError(error, f"{what}: {message or 'the producer was fenced'}")
        if coordinator and error in COORDINATOR_MOVED:
            self.cluster.forget_coordinator(TRANSACTION_COORDINATOR, self.transactional_id)
            raise RetriableError(f"{what}: {error.name}")
        if error == ErrorCode.concurrent_transactions:
            raise RetriableError(f"{what}: {error.name}")
        raise KafkaError(error, f"{what}: {message}" if message else what)
