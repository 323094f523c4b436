"""kemu.client's non-KIP parts against a real Apache Kafka 4.4.0 (single-node KRaft, started
from the benchmark's jars in bench/.cache/lib; skipped when Java or the jars are not there):
share consumption with explicit acknowledgements, transactional produce read back
read_committed (commit visible, abort hidden), a fenced producer, and the idempotent producer
pipelining. The same tests run
against kemu in test_client.py, so where Kafka is the reference the client is known right.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.client import (
    AcknowledgeType,
    Admin,
    Consumer,
    IdempotentProducer,
    KafkaError,
    ProducerFencedError,
    ShareConsumer,
    ShareRecord,
    TransactionalProducer,
)
from kemu.protocol.errors import ErrorCode
from kemu.testing.kafka import SHARE_GROUPS, KafkaConfig, KafkaServer
from tests.integration.clients import rebalance, txn_offsets, txn_timeout

pytestmark = [pytest.mark.integration, pytest.mark.parity]


@pytest.fixture(scope="module")
def kafka(kafka_server: Callable[[KafkaConfig], KafkaServer]) -> str:
    """The session's share-group Kafka: share heartbeats every 500 ms (Kafka's default 5 s makes
    the first assignment, which waits for the share-partition state to be initialised, slow to
    arrive), 3 transaction and share-state partitions."""
    return kafka_server(SHARE_GROUPS).bootstrap


def create_topics(bootstrap: str, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1) for name, partitions in topics])
    for future in futures.values():
        future.result(timeout=30)


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0


async def joined(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    """A member holding its assignment (whose state Kafka initialised at the latest offset)."""
    consumer = ShareConsumer(bootstrap, group, acknowledgement_mode="explicit")
    await consumer.subscribe([topic])
    for _ in range(100):
        assert await consumer.poll(0.2) == []
        if consumer._assignment and any(s.partitions for s in consumer._sessions.values()):
            break
    return consumer


async def poll_until(consumer: ShareConsumer, count: int) -> list[ShareRecord]:
    records: list[ShareRecord] = []
    for _ in range(60):
        records += await consumer.poll(0.5)
        if len(records) >= count:
            break
    return records


async def committed_values(bootstrap: str, topic: str) -> list[Any]:
    async with Consumer(bootstrap) as reader:
        await reader.assign_topic(topic)
        return [r.value for r in await reader.poll(2.0)]


async def test_share_consumption_with_explicit_acknowledgements(kafka: str) -> None:
    create_topics(kafka, ("explicit", 1))
    consumer = await joined(kafka, "explicit", "explicit")
    try:
        produce(kafka, "explicit", [b"a", b"b", b"c"])
        records = await poll_until(consumer, 3)
        assert [(r.offset, r.value, r.delivery_count) for r in records] == [
            (0, b"a", 1),
            (1, b"b", 1),
            (2, b"c", 1),
        ]
        consumer.acknowledge(records[0], AcknowledgeType.ACCEPT)
        consumer.acknowledge(records[1], AcknowledgeType.RELEASE)
        consumer.acknowledge(records[2], AcknowledgeType.REJECT)
        assert list((await consumer.commit()).values()) == [None]
        [again] = await poll_until(consumer, 1)
        assert (again.offset, again.value, again.delivery_count) == (1, b"b", 2)
        consumer.acknowledge(again)
        assert list((await consumer.commit()).values()) == [None]
        async with Admin(kafka) as admin:
            for _ in range(100):
                if await admin.share_group_lag("explicit", "explicit") == 0:
                    break
                await asyncio.sleep(0.1)
            assert await admin.share_group_lag("explicit", "explicit") == 0
    finally:
        await consumer.close()


async def test_transactions_read_committed(kafka: str) -> None:
    create_topics(kafka, ("txn-out", 3))
    producer = TransactionalProducer(kafka, "tx-read-committed")
    try:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send("txn-out", b"aborted", key=b"k1")
        await producer.abort_transaction()
        producer.begin_transaction()
        for index in range(5):
            await producer.send("txn-out", f"committed-{index}".encode(), key=f"k{index}".encode())
        await producer.commit_transaction()
        values = await committed_values(kafka, "txn-out")
        assert sorted(values) == [f"committed-{index}".encode() for index in range(5)]
    finally:
        await producer.close()


async def test_a_fenced_producer_is_told_so(kafka: str) -> None:
    create_topics(kafka, ("fenced-out", 1))
    zombie = TransactionalProducer(kafka, "tx-fenced")
    successor = TransactionalProducer(kafka, "tx-fenced")
    try:
        await zombie.init_transactions()
        zombie.begin_transaction()
        await zombie.send("fenced-out", b"zombie")
        await successor.init_transactions()
        with pytest.raises(KafkaError) as refused:  # abortable, as for Java's producer
            await zombie.send("fenced-out", b"again")
        assert refused.value.error == ErrorCode.invalid_producer_epoch
        with pytest.raises(ProducerFencedError):  # the abort's EndTxn tells it is a zombie
            await zombie.abort_transaction()
        successor.begin_transaction()
        await successor.send("fenced-out", b"successor")
        await successor.commit_transaction()
        assert await committed_values(kafka, "fenced-out") == [b"successor"]
    finally:
        await zombie.close()
        await successor.close()


async def test_a_timed_out_transaction_is_abortable(kafka: str) -> None:
    """txn_timeout.py's scenario: a timed-out transaction is abortable, as for Java's producer."""
    create_topics(kafka, (txn_timeout.TOPIC, 1))
    await txn_timeout.a_timed_out_transaction_is_abortable(
        kafka, lambda topic: committed_values(kafka, topic)
    )


async def test_idempotent_producer_pipelines_in_order(kafka: str) -> None:
    """IdempotentProducer: InitProducerId without a transactional id, then 40 records to two
    partitions five batches deep; Kafka answers them in send order and holds each once."""
    create_topics(kafka, ("k-idem", 2))
    async with IdempotentProducer(kafka, max_in_flight=5) as producer:
        values = [b"i%02d" % n for n in range(40)]
        answers = await asyncio.gather(
            *(producer.send("k-idem", v, partition=n % 2) for n, v in enumerate(values))
        )
        assert producer.producer_id >= 0 and producer.producer_epoch == 0
    for partition in (0, 1):
        assert [a.offset for a in answers if a.partition == partition] == list(range(20))
    async with Consumer(kafka) as reader:
        await reader.assign([("k-idem", 0), ("k-idem", 1)])
        read: dict[int, list[bytes]] = {0: [], 1: []}
        while sum(map(len, read.values())) < 40:
            for record in await reader.poll(timeout=5.0):
                read[record.partition].append(record.value or b"")
    assert read == {p: values[p::2] for p in (0, 1)}


async def test_offsets_commit_with_the_transaction(kafka: str) -> None:
    """txn_offsets.py's scenario: the group's offsets in the producer's transaction."""
    create_topics(kafka, (txn_offsets.SOURCE, 1), (txn_offsets.SINK, 1))
    produce(kafka, txn_offsets.SOURCE, [f"in-{i}".encode() for i in range(txn_offsets.COUNT)])
    await txn_offsets.offsets_commit_with_the_transaction(
        kafka, lambda topic: committed_values(kafka, topic)
    )


async def test_revocation_waits_for_the_rebalance_listener(kafka: str) -> None:
    """rebalance.py's scenario: a member's listener runs before its partition moves."""
    create_topics(kafka, (rebalance.TOPIC, 2))
    await rebalance.revocation_waits_for_the_listener(kafka)
