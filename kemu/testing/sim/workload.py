"""The simulation's clients: ``kemu.client`` producers (transactional, and an idempotent one
without transactions), share consumers, KIP-1289 pipelines, consumer-group members and a
read_committed verifier, each a ``Process`` the harness may kill
and start again.

What they learn for certain goes into the ``Ledger`` the oracles read: values whose transaction
committed (the commit answered), input records whose transaction with their share
acknowledgement committed, records whose ACCEPT a ShareAcknowledge confirmed, offsets a
consumer group's OffsetCommit confirmed. A call that failed
proves nothing either way (an answer lost on a cut connection may follow a commit), so a failed
call adds nothing; the final check reads what is actually committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kemu.client import (
    ONE_RPC,
    TWO_RPC,
    AcknowledgeType,
    CommitFailedError,
    Consumer,
    GroupConsumer,
    IdempotentProducer,
    IllegalStateError,
    KafkaError,
    ProducerFencedError,
    RecordMetadata,
    ShareConsumer,
    TransactionalProducer,
)
from kemu.client.cluster import RetriableError
from kemu.client.connection import ConnectionClosed
from kemu.client.produce_pipeline import IdempotentPipeline, PendingBatch
from kemu.client.share_consumer import SHARE_FETCH, SHARE_GROUP_HEARTBEAT
from kemu.client.share_types import ShareRecord
from kemu.testing.sim.loop import Process

INPUT, OUTPUT, PLAIN = "input", "output", "plain"
PIPE_GROUP, READER_GROUP, CONSUMER_GROUP = "pipe", "readers", "members"
# the pipelines' group: its dead-letter queue (KIP-1191), and the share.delivery.count.limit the
# harness sets (the end check knows it from here, not from kemu)
DLQ = "dlq.pipe"
PIPE_DELIVERY_LIMIT = 5
# A few seconds (Kafka's clients: 60 s): a transaction left open by a stall (stalls.py), a
# dead producer or a slow answer times out while the simulated kemu is up, which it seldom is
# for long
INPUT_TRANSACTION_TIMEOUT_MS = 4_000
PIPE_TRANSACTION_TIMEOUT_MS = 3_500
Headers = tuple[tuple[str, bytes | None], ...]
# what a client survives and retries; anything else is a bug the harness reports
EXPECTED = (
    KafkaError,
    RetriableError,
    ConnectionClosed,
    ConnectionError,
    TimeoutError,
    IllegalStateError,
)


def transform(value: bytes) -> bytes:
    return b"out-" + value


@dataclass
class Ledger:
    """What the clients know for certain, and what the oracles found wrong."""

    produced: set[bytes] = field(default_factory=set)  # committed input values
    # committed pipeline inputs: (value, ``clock`` when the commit was confirmed)
    pipe_done: dict[tuple[str, int, int], tuple[bytes, int]] = field(default_factory=dict)
    # the highest delivery count a pipeline was handed each input record at
    pipe_delivered: dict[tuple[str, int, int], int] = field(default_factory=dict)
    # confirmed ACCEPTs of the reader: the ``clock`` when ShareAcknowledge confirmed them
    accepted: dict[tuple[str, int, int], int] = field(default_factory=dict)
    # orders the clients' sends and confirmations (``tick``): a ShareFetch sent after an
    # ACCEPT was confirmed has a higher stamp (``watch_share_fetches``)
    clock: int = 0
    seen: dict[str, dict[tuple[int, int], bytes]] = field(default_factory=dict)  # verifier
    # what the verifier read of the DLQ topic: (partition, offset) -> (value, headers)
    dead_letters: dict[tuple[int, int], tuple[bytes | None, Headers]] = field(default_factory=dict)
    # per topic, how many of ``seen[topic]``'s entries hold each value (none at 0): whether a
    # value was read, in O(1) (the output's duplicate check, the settling's end condition)
    seen_values: dict[str, dict[bytes, int]] = field(default_factory=dict)
    # consumer group: input records handed out to a member (and how many hold each value), and
    # the offsets commits confirmed
    group_seen: dict[tuple[int, int], bytes] = field(default_factory=dict)
    group_values: dict[bytes, int] = field(default_factory=dict)
    group_committed: dict[tuple[str, int], int] = field(default_factory=dict)
    # the operator's data-partition aborts (producer id, epoch, output partition), and what the
    # pipelines' transactions asked to commit wrote under each such key: the values it may abort
    tool_aborted: set[tuple[int, int, int]] = field(default_factory=set)
    pipe_sends: dict[tuple[int, int, int], list[bytes]] = field(default_factory=dict)
    # share groups whose offsets an operator is deleting (their start offsets may go back
    # meanwhile), and those it may have deleted since the last check
    resetting: set[str] = field(default_factory=set)
    reset: set[str] = field(default_factory=set)
    # the ``clock`` when the reader's confirmed ACCEPTs were last forgotten, a deletion of its
    # offsets having (maybe) applied: an ACCEPT sent before may have been applied before the
    # deletion, which undid it, however late its confirmation comes (``confirm_accepted``)
    accepts_forgotten_at: int = 0
    positions: dict[tuple[str, int], int] = field(default_factory=dict)
    # per (producer, topic, partition): the offsets and values it was answered (for an input
    # producer, of committed transactions), in send order, which must be the log's order too
    acknowledged: dict[tuple[str, str, int], list[tuple[int, bytes]]] = field(default_factory=dict)
    plain_values: set[bytes] = field(default_factory=set)  # what the verifier read of ``plain``
    violations: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)  # client errors outside EXPECTED
    counts: dict[str, int] = field(default_factory=dict)
    # the share coordinator's (member epoch, assignment) of (group, member id), set by the
    # harness: None while kemu is down or the member unknown
    share_member: Callable[[str, str], tuple[int, frozenset[Any]] | None] = lambda _g, _m: None

    def count(self, name: str, by: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + by

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def forget_accepted(self) -> None:
        """A deletion of the reader group's offsets may have applied: the ACCEPTs confirmed so
        far, and those sent before now, may be delivered again."""
        self.accepted.clear()
        self.accepts_forgotten_at = self.tick()

    def confirm_accepted(self, sent: int, records: Iterable[tuple[str, int, int]]) -> None:
        """The reader's ShareAcknowledge sent at ``sent`` (the ``clock`` then) confirmed the
        ACCEPTs of ``records``: none of them may be delivered again by a ShareFetch sent from
        now on, unless a deletion of the group's offsets was answered since it was sent (the
        acknowledgement may have been applied before the deletion and undone by it)."""
        confirmed = self.tick()
        if sent >= self.accepts_forgotten_at:
            for where in records:
                self.accepted[where] = confirmed


def put_counted(
    records: dict[tuple[int, int], bytes],
    values: dict[bytes, int],
    where: tuple[int, int],
    value: bytes,
) -> None:
    """``records[where] = value``, keeping ``values`` (how many records hold each value, none
    at 0) in step."""
    replaced = records.get(where)
    if replaced is not None:
        left = values[replaced] - 1
        if left:
            values[replaced] = left
        else:
            del values[replaced]
    records[where] = value
    values[value] = values.get(value, 0) + 1


class Actor:
    """A client role: ``body`` runs in a fresh ``Process`` each time the harness (re)starts it."""

    kind = "actor"

    def __init__(self, name: str, bootstrap: str, ledger: Ledger, rng: random.Random) -> None:
        self.name, self.bootstrap, self.ledger, self.rng = name, bootstrap, ledger, rng
        self.process: Process | None = None
        self.task: asyncio.Task[None] | None = None
        self.lives = 0
        self.clients: list[Any] = []  # the current life's clients, for a post-mortem
        # a stall the harness asked for (stalls.py): its length, and the point of ``body`` it
        # comes at (one of ``stall_points``); then ``stalling`` freezes this process
        self.stall_armed: tuple[float, str] | None = None
        self.stalling: Callable[[Actor, str, float], None] = lambda _a, _p, _s: None

    # where ``body`` holds what a stall is for (stalls.py); none: it never stalls
    stall_points: tuple[str, ...] = ()

    async def chance_to_stall(self, point: str) -> None:
        """Stall here if the harness asked for a stall at ``point``: the process freezes, and
        this task goes on when it thaws."""
        armed = self.stall_armed
        if armed is not None and armed[1] == point:
            self.stall_armed = None
            self.stalling(self, point, armed[0])
            await asyncio.sleep(0)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.lives += 1
        self.stall_armed = None
        self.process = Process(f"{self.name}#{self.lives}")
        self.task = loop.create_task(self._guarded(), context=self.process.context)

    @property
    def alive(self) -> bool:
        return self.process is not None and not self.process.dead

    async def _guarded(self) -> None:
        while True:
            try:
                await self.body()
                return
            except EXPECTED as error:
                self.ledger.count(f"{self.kind}.error.{type(error).__name__}")
            except Exception as error:  # a client crash: reported, then the role goes on
                where = traceback.extract_tb(error.__traceback__)[-3:]
                at = " < ".join(f"{f.name} ({Path(f.filename).name}:{f.lineno})" for f in where)
                self.ledger.unexpected.append(f"{self.name}: {error!r} at {at}")
            await asyncio.sleep(self.rng.uniform(0.05, 0.5))

    async def body(self) -> None:
        raise NotImplementedError


def watch_share_heartbeats(consumer: ShareConsumer, group: str, ledger: Ledger) -> None:
    """Count ``share.heartbeat.answer_lost`` when a ShareGroupHeartbeat goes out while the
    coordinator already holds its member at a later epoch with another assignment: an earlier
    heartbeat moved the assignment and its answer was lost (heartbeats go one at a time), the
    situation of seed 2's bug (docs/reliability.md). Count ``share.heartbeat.assignment_unlearnt``
    when a heartbeat is answered at the member's epoch without an assignment while the
    coordinator holds another one than the consumer's: the bug itself, as the coordinator sends
    the assignment again only to a full heartbeat (the member may never learn it; only a later
    rebalance or its death heals that, so the final check alone seldom sees it)."""
    call = consumer.cluster.call

    async def watched(node_id: int, api_key: int, version: int, **fields: Any) -> Any:
        if api_key != SHARE_GROUP_HEARTBEAT or fields.get("member_epoch", 0) <= 0:
            return await call(node_id, api_key, version, **fields)
        held = ledger.share_member(group, consumer.member_id)
        if (
            held is not None
            and held[0] > fields["member_epoch"]
            and held[1] != consumer._assignment
        ):
            ledger.count("share.heartbeat.answer_lost")
        answer = await call(node_id, api_key, version, **fields)
        held = ledger.share_member(group, consumer.member_id)
        if (
            answer.error_code == 0
            and answer.assignment is None
            and held is not None
            and held[0] == answer.member_epoch
            and held[1] != consumer._assignment
        ):
            ledger.count("share.heartbeat.assignment_unlearnt")
        return answer

    consumer.cluster.call = watched  # type: ignore[method-assign]


def watch_share_fetches(consumer: ShareConsumer, ledger: Ledger) -> Callable[[ShareRecord], int]:
    """Stamp each ShareFetch with ``ledger.tick()`` as it goes out; the function returned gives
    the stamp of the fetch that acquired a record ``poll`` handed out (0 if unknown; call it
    once per record handed). A record from a fetch sent after its ACCEPT, or the commit of the
    transaction holding its acknowledgement, was confirmed is a redelivery whatever its
    delivery count: one acquired before (a fetch in flight, or buffered across a restart) may
    still be handed out, and its acknowledgement then fails."""
    call = consumer.cluster.call
    records_in = consumer._records_in
    answered: dict[int, tuple[Any, int]] = {}  # id(answered partition) -> (it, its stamp)
    handed: dict[int, tuple[ShareRecord, int]] = {}  # id(record) -> (it, its fetch's stamp)

    async def watched(node_id: int, api_key: int, version: int, **fields: Any) -> Any:
        if api_key != SHARE_FETCH:
            return await call(node_id, api_key, version, **fields)
        stamp = ledger.tick()
        answer = await call(node_id, api_key, version, **fields)
        for topic in answer.responses:
            for partition in topic.partitions:
                if partition.acquired_records:
                    answered[id(partition)] = (partition, stamp)
        return answer

    def stamped(tp: Any, partition: Any) -> list[ShareRecord]:
        records = records_in(tp, partition)
        _, stamp = answered.pop(id(partition), (partition, 0))
        for record in records:
            handed[id(record)] = (record, stamp)
        return records

    def stamp_of(record: ShareRecord) -> int:
        return handed.pop(id(record), (record, 0))[1]

    consumer.cluster.call = watched  # type: ignore[method-assign]
    consumer._records_in = stamped  # type: ignore[method-assign]
    return stamp_of


def watch_first_batches(producer: IdempotentProducer, ledger: Ledger) -> None:
    """Count ``plain.first_batch_failed_behind`` when a producer's first batch to a partition
    (sequence 0 at epoch 0: the leader takes any first sequence from it) fails while a later
    batch of that partition is on the wire behind it: the situation of 8b4e80d's bug, where a
    fault rule let the later batch be appended first, and the retries after the KIP-360 epoch
    bump wrote it twice (docs/reliability.md)."""
    make = producer._pipeline

    def pipeline(topic: str, partition: int) -> IdempotentPipeline:
        made = make(topic, partition)
        if made.mark_failed.__name__ == "mark_failed":
            fail = made.mark_failed

            def watched(batch: PendingBatch) -> None:
                if (batch.sequence, made.epoch) == (0, 0) and any(
                    other.written for other in made.unacknowledged if other is not batch
                ):
                    ledger.count("plain.first_batch_failed_behind")
                fail(batch)

            made.mark_failed = watched  # type: ignore[method-assign]
        return made

    producer._pipeline = pipeline  # type: ignore[method-assign]


class _ApplicationAbort(Exception):
    """The pipeline decides to abort a transaction (as an application may)."""


class InputProducer(Actor):
    """Transactions of 1-5 new values to ``input``; one in ten is aborted on purpose. With
    ``max_in_flight`` above 1 a transaction's sends go out at once, pipelined per partition."""

    kind = "producer"
    stall_points = ("transaction",)

    def __init__(self, *args: Any, max_in_flight: int = 1, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sequence = 0
        self.max_in_flight = max_in_flight

    async def body(self) -> None:
        producer = TransactionalProducer(
            self.bootstrap,
            f"{self.name}-tx",
            transaction_timeout_ms=INPUT_TRANSACTION_TIMEOUT_MS,
            request_timeout=10,
            max_in_flight=self.max_in_flight,
        )
        self.clients = [producer]
        try:
            await producer.init_transactions()
            while True:
                values = []
                producer.begin_transaction()
                answers = []
                if self.max_in_flight == 1:
                    for _ in range(self.rng.randint(1, 5)):
                        self.sequence += 1
                        value = f"{self.name}-{self.sequence}".encode()
                        values.append(value)
                        answers.append(
                            await producer.send(INPUT, value, partition=self.rng.randrange(3))
                        )
                else:
                    sends = []
                    for _ in range(self.rng.randint(1, 8)):
                        self.sequence += 1
                        value = f"{self.name}-{self.sequence}".encode()
                        values.append(value)
                        sends.append(producer.send(INPUT, value, partition=self.rng.randrange(3)))
                    answers = await asyncio.gather(*sends)
                await self.chance_to_stall("transaction")
                if self.rng.random() < 0.1:
                    await producer.abort_transaction()
                    self.ledger.count("producer.aborted")
                else:
                    try:
                        await producer.commit_transaction()
                    except (ProducerFencedError, *EXPECTED):
                        raise
                    self.ledger.produced.update(values)
                    for answer, value in zip(answers, values, strict=True):
                        where = (self.name, INPUT, answer.partition)
                        self.ledger.acknowledged.setdefault(where, []).append(
                            (answer.offset, value)
                        )
                    self.ledger.count("producer.committed", len(values))
                await asyncio.sleep(self.rng.uniform(0.01, 0.3))
        finally:
            await _close(producer)


class PlainProducer(Actor):
    """An idempotent producer without transactions (``IdempotentProducer``, max_in_flight 2-5
    from the seed) writing rounds of 1-8 records to ``plain`` at once, pipelined per partition;
    every 1-3 rounds it closes and a new one (a new producer id, new to every partition) goes
    on. Each acknowledged record must be in the log once, at its answered offset, in send order;
    a failed send may or may not be there, but never twice (``_plain_final`` in ``run.py``)."""

    kind = "plain"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sequence = 0

    async def body(self) -> None:
        while True:
            producer = IdempotentProducer(
                self.bootstrap,
                max_in_flight=self.rng.randint(2, 5),
                request_timeout=10,
                delivery_timeout=10,
                # as Java's producers: kemu must keep a refused first batch's followers back
                first_batch_alone=False,
            )
            watch_first_batches(producer, self.ledger)
            self.clients = [producer]
            try:
                for _ in range(self.rng.randint(1, 3)):
                    await self._round(producer)
                    await asyncio.sleep(self.rng.uniform(0.01, 0.3))
            finally:
                self.ledger.count("plain.epoch_bumps", producer.epoch_bumps)
                await _close(producer)

    async def _round(self, producer: IdempotentProducer) -> None:
        values, sends = [], []
        for _ in range(self.rng.randint(1, 8)):
            self.sequence += 1
            value = f"{self.name}-{self.sequence}".encode()
            values.append(value)
            sends.append(producer.send(PLAIN, value, partition=self.rng.randrange(3)))
        answers = await asyncio.gather(*sends, return_exceptions=True)
        for answer, value in zip(answers, values, strict=True):
            if isinstance(answer, RecordMetadata):
                answered = self.ledger.acknowledged.setdefault(
                    (self.name, PLAIN, answer.partition), []
                )
                if answered and answered[-1][0] >= answer.offset:
                    self.ledger.violations.append(
                        f"plain: {value!r} answered offset {answer.offset} on partition "
                        f"{answer.partition}, after {answered[-1][1]!r} sent before it was "
                        f"answered {answered[-1][0]}"
                    )
                answered.append((answer.offset, value))
                self.ledger.count("plain.acknowledged")
            elif isinstance(answer, EXPECTED):
                self.ledger.count(f"plain.failed.{type(answer).__name__}")
            else:
                raise answer


class Pipeline(Actor):
    """KIP-1289: share -> transform -> produce, with the share acks in the same transaction."""

    kind = "pipeline"
    stall_points = ("records", "staged")

    async def body(self) -> None:
        consumer = ShareConsumer(
            self.bootstrap, PIPE_GROUP, acknowledgement_mode="explicit", max_poll_records=20
        )
        watch_share_heartbeats(consumer, PIPE_GROUP, self.ledger)
        fetched_at = watch_share_fetches(consumer, self.ledger)
        # KIP-1289's two wire forms: TxnShareAcknowledge alone, or after
        # AddShareAcknowledgementsToTxn to the transaction coordinator
        form = self.rng.choice((ONE_RPC, TWO_RPC))
        producer = TransactionalProducer(
            self.bootstrap,
            f"{self.name}-tx",
            transaction_timeout_ms=PIPE_TRANSACTION_TIMEOUT_MS,
            request_timeout=10,
            share_acknowledgement_form=form,
        )
        self.ledger.count(f"pipeline.form.{form}")
        self.clients = [consumer, producer]
        try:
            await consumer.subscribe([INPUT])
            await producer.init_transactions()
            while True:
                batch = await consumer.poll(timeout=self.rng.uniform(0.1, 1.0))
                for record in batch:
                    where = (record.topic, record.partition, record.offset)
                    delivered = self.ledger.pipe_delivered
                    delivered[where] = max(delivered.get(where, 0), record.delivery_count)
                    if record.delivery_count > PIPE_DELIVERY_LIMIT:
                        self.ledger.violations.append(
                            f"{PIPE_GROUP}: {where} delivered {record.delivery_count} times, "
                            f"above share.delivery.count.limit {PIPE_DELIVERY_LIMIT}"
                        )
                    fetched = fetched_at(record)
                    if self.ledger.pipe_done.get(where, (b"", fetched))[1] < fetched:
                        self.ledger.violations.append(
                            f"{PIPE_GROUP}: {where} delivered again (delivery "
                            f"{record.delivery_count}) by a ShareFetch sent after its "
                            "transaction's commit was confirmed"
                        )
                if not batch:
                    continue
                await self.chance_to_stall("records")
                producer.begin_transaction()
                sends: dict[tuple[int, int, int], list[bytes]] = {}
                try:
                    for record in batch:
                        value = transform(record.value or b"")
                        epoch = (producer.producer_id, producer.producer_epoch)
                        sent = await producer.send(OUTPUT, value)
                        sends.setdefault((*epoch, sent.partition), []).append(value)
                        consumer.acknowledge(record, AcknowledgeType.ACCEPT)
                    await producer.send_share_acknowledgements_to_transaction(
                        consumer.acknowledgements_for_transaction(),
                        consumer.share_group_metadata(),
                    )
                    await self.chance_to_stall("staged")  # its share acks TX_PENDING
                    if self.rng.random() < 0.05:
                        raise _ApplicationAbort
                    if self.rng.random() < 0.3:  # other work before the commit (a checkpoint)
                        await asyncio.sleep(self.rng.uniform(0.05, 1.0))
                    # noted before the commit: one whose answer is lost may still commit (its
                    # share acknowledgements too), after the operator aborted some of its sends
                    for key, values in sends.items():
                        self.ledger.pipe_sends.setdefault(key, []).extend(values)
                    await producer.commit_transaction()
                except ProducerFencedError:
                    raise
                except (KafkaError, _ApplicationAbort):
                    self.ledger.count("pipeline.aborted")
                    await producer.abort_transaction()
                    for record in batch:
                        with contextlib.suppress(IllegalStateError):
                            consumer.acknowledge(record, AcknowledgeType.RELEASE)
                    consumer.acknowledgements_for_transaction()
                    continue
                confirmed = self.ledger.tick()
                for record in batch:
                    self.ledger.pipe_done[(record.topic, record.partition, record.offset)] = (
                        record.value or b"",
                        confirmed,
                    )
                self.ledger.count("pipeline.committed", len(batch))
        finally:
            await _close(consumer)
            await _close(producer)


class Reader(Actor):
    """A share consumer ACCEPTing (or now and then RELEASEing) with explicit ShareAcknowledge."""

    kind = "reader"
    stall_points = ("records",)

    async def body(self) -> None:
        consumer = ShareConsumer(
            self.bootstrap, READER_GROUP, acknowledgement_mode="explicit", max_poll_records=50
        )
        watch_share_heartbeats(consumer, READER_GROUP, self.ledger)
        fetched_at = watch_share_fetches(consumer, self.ledger)
        self.clients = [consumer]
        try:
            await consumer.subscribe([INPUT])
            while True:
                batch = await consumer.poll(timeout=self.rng.uniform(0.1, 1.0))
                accepted = []
                for record in batch:
                    where = (record.topic, record.partition, record.offset)
                    fetched = fetched_at(record)
                    if self.ledger.accepted.get(where, fetched) < fetched:
                        self.ledger.violations.append(
                            f"{READER_GROUP}: {where} delivered again (delivery "
                            f"{record.delivery_count}) by a ShareFetch sent after its ACCEPT "
                            "was confirmed"
                        )
                    if self.rng.random() < 0.1:
                        consumer.acknowledge(record, AcknowledgeType.RELEASE)
                    else:
                        consumer.acknowledge(record, AcknowledgeType.ACCEPT)
                        accepted.append(record)
                if not batch:
                    continue
                await self.chance_to_stall("records")
                sent = self.ledger.clock
                results = await consumer.commit()
                self.ledger.confirm_accepted(
                    sent,
                    (
                        (record.topic, record.partition, record.offset)
                        for record in accepted
                        if record.topic_id_partition in results
                        and results[record.topic_id_partition] is None
                    ),
                )
                self.ledger.count("reader.accepted", len(accepted))
        finally:
            await _close(consumer)


class GroupMember(Actor):
    """A KIP-848 consumer-group member reading ``input`` read_committed, committing its positions
    after most polls: confirmed commits only move forward."""

    kind = "member"
    stall_points = ("polled",)

    async def body(self) -> None:
        consumer = GroupConsumer(
            self.bootstrap, CONSUMER_GROUP, auto_offset_reset="earliest", max_wait_ms=200
        )
        self.clients = [consumer]
        try:
            await consumer.subscribe([INPUT])
            while True:
                for record in await consumer.poll(timeout=self.rng.uniform(0.1, 1.0)):
                    put_counted(
                        self.ledger.group_seen,
                        self.ledger.group_values,
                        (record.partition, record.offset),
                        record.value or b"",
                    )
                await self.chance_to_stall("polled")  # its positions not committed yet
                if self.rng.random() < 0.2:
                    continue  # processed, not committed yet: delivered again if it moves
                try:
                    committed = await consumer.commit()
                except CommitFailedError:
                    self.ledger.count("member.commit_refused")
                    continue
                for tp, offset in committed.items():
                    before = self.ledger.group_committed.get(tp, 0)
                    if offset < before:
                        self.ledger.violations.append(
                            f"{CONSUMER_GROUP}: commit of {tp} went back from {before} to {offset}"
                        )
                    self.ledger.group_committed[tp] = max(before, offset)
                self.ledger.count("member.commits")
        finally:
            await _close(consumer)


class Verifier(Actor):
    """Reads ``input``, ``output``, ``plain`` and the pipelines' DLQ read_committed from the
    start: no committed value twice, offsets only forward."""

    kind = "verifier"

    async def body(self) -> None:
        consumer = Consumer(self.bootstrap, max_wait_ms=200)
        try:
            topics = (INPUT, OUTPUT, PLAIN, DLQ)
            partitions = [(topic, index) for topic in topics for index in range(3)]
            await consumer.assign(partitions)
            for tp in partitions:
                consumer.positions[tp] = self.ledger.positions.get(tp, 0)
            while True:
                for record in await consumer.poll(timeout=0.5):
                    if record.topic == DLQ:
                        where = (record.partition, record.offset)
                        self.ledger.dead_letters[where] = (record.value, record.headers)
                    self._see(record.topic, record.partition, record.offset, record.value or b"")
        finally:
            await _close(consumer)

    def _see(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        tp = (topic, partition)
        position = self.ledger.positions.get(tp, 0)
        if offset < position:
            self.ledger.violations.append(f"verifier: {tp} went back to {offset} from {position}")
        self.ledger.positions[tp] = offset + 1
        seen = self.ledger.seen.setdefault(topic, {})
        values = self.ledger.seen_values.setdefault(topic, {})
        if topic == OUTPUT and value in values:  # already in seen[OUTPUT], here or elsewhere
            self.ledger.violations.append(f"output: {value!r} committed twice (offset {offset})")
        if topic == PLAIN:
            if value in self.ledger.plain_values:
                self.ledger.violations.append(
                    f"plain: {value!r} written twice (again at {partition}/{offset})"
                )
            self.ledger.plain_values.add(value)
        put_counted(seen, values, (partition, offset), value)


async def _close(client: Any) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # a dead client's coroutine closed by the garbage collector: nothing to close
    with contextlib.suppress(BaseException):  # a dying client's close may fail any way
        await asyncio.wait_for(client.close(), 5)
