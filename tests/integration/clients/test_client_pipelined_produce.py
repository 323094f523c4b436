"""kemu.client's TransactionalProducer with ``max_in_flight`` above 1 against kemu (in-process):
batches of one partition pipelined on one connection while fault rules (docs/control.md) delay,
refuse, drop and tear Produce requests; every committed record is in the log once, in the order
it was sent, and the offsets the producer was answered grow in send order."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.client import KafkaError, TransactionalProducer
from kemu.client.consumer import Consumer
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

FAULTS = [
    {"api": "produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": None, "fraction": 0.05},
    {"api": "produce", "kind": "latency", "latency_ms": 30, "count": None, "fraction": 0.1},
    {"api": "produce", "kind": "drop_before", "count": None, "fraction": 0.05},
    {"api": "produce", "kind": "drop_after", "count": None, "fraction": 0.05},
    {"api": "produce", "kind": "torn", "count": None, "fraction": 0.05},
]


async def test_pipelined_batches_arrive_once_and_in_order_under_faults(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(brokers=1, with_control=True).start()
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic("piped", 2, 1)])["piped"].result(timeout=30)
    producer = TransactionalProducer(kemu.bootstrap, "piped-tx", max_in_flight=5)
    await producer.init_transactions()
    for rule in FAULTS:
        kemu.control.add_fault(**rule)
    committed: list[tuple[int, bytes, int]] = []  # partition, value, answered offset
    for transaction in range(12):
        producer.begin_transaction()
        values = [b"t%02d-%02d" % (transaction, n) for n in range(10)]
        sends = [producer.send("piped", value, partition=n % 2) for n, value in enumerate(values)]
        try:
            answers = await asyncio.gather(*sends)
            await producer.commit_transaction()
        except KafkaError:
            await producer.abort_transaction()  # a batch out of order or timed out: all or none
            continue
        committed += [(a.partition, v, a.offset) for a, v in zip(answers, values, strict=True)]
    injected = sum(int(rule["fired"]) for rule in kemu.control.faults())
    kemu.control.clear_faults()
    assert committed, "no transaction committed"
    assert injected >= 5
    await producer.close()

    consumer = Consumer(kemu.bootstrap, isolation_level="read_committed")
    await consumer.assign([("piped", 0), ("piped", 1)])
    read: dict[int, list[tuple[bytes, int]]] = {0: [], 1: []}
    expected = {p: [(v, o) for q, v, o in committed if q == p] for p in (0, 1)}
    while any(len(read[p]) < len(expected[p]) for p in (0, 1)):
        for record in await consumer.poll(5.0):
            read[record.partition].append((record.value or b"", record.offset))
    await consumer.close()
    for partition in (0, 1):
        assert read[partition] == expected[partition]  # once each, in send order, where answered
        offsets = [o for _, o in expected[partition]]
        assert offsets == sorted(offsets)
