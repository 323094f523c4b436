"""Transactions with real Python clients on a 3-broker kemu.

- confluent-kafka: a transactional ``Producer`` commits and aborts; a ``read_committed`` consumer
  sees only committed records (and the LSO holds back while a transaction is open), a
  ``read_uncommitted`` one sees all; ``send_offsets_to_transaction`` commits a consumer group's
  offsets with the transaction (and an abort drops them); a second producer with the same
  transactional id fences the first.
- kafka-python and aiokafka transactional producers commit and abort, with offsets sent to the
  transaction (committed with it, dropped by an abort); their read_committed consumers drop
  aborted records (Fetch aborted_transactions).
- a share group with ``share.isolation.level=read_committed`` gets only the committed records (the
  aborted transaction and the open one are skipped), a read_uncommitted one every record.
- a transaction past `transaction.timeout.ms` is aborted by the coordinator (the LSO moves on,
  the producer's commit fails).
- SIGKILL: committed transactions survive a kill -9 of kemu, an open one is aborted after the
  restart once its timeout passes, and the last stable offset moves on.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.testing.inprocess import InProcessKemu
from kemu.testing.plugin import KemuProcess

pytestmark = pytest.mark.integration

TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    log_path = tmp_path_factory.mktemp("transactions") / "kemu.log"
    process = InProcessKemu(
        brokers=3, log_path=log_path, overrides=["group.initial.rebalance.delay.ms=200"]
    ).start()
    yield process
    process.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(30)


def transactional_producer(bootstrap: str, transactional_id: str, **extra: object) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **extra}
    )
    producer.init_transactions(30)
    return producer


def read_all(
    bootstrap: str, topic: str, isolation: str, expected: int, idle_s: float = 2.0
) -> list[bytes]:
    """Values read from the start of ``topic`` until ``expected`` arrived and then ``idle_s``
    passed without more."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                if len(values) >= expected:
                    quiet_until = quiet_until or time.monotonic() + idle_s
                    if time.monotonic() > quiet_until:
                        break
                continue
            quiet_until = None
            value = message.value()
            assert value is not None
            values.append(value)
    finally:
        consumer.close()
    return values


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
    finally:
        consumer.close()
    return [tp.offset for tp in found]


def watermarks_and_lso(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(high watermark, last stable offset) of one partition."""
    result = []
    for isolation in ("read_uncommitted", "read_committed"):
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": unique("wm"),
                "isolation.level": isolation,
            }
        )
        try:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 30)
        finally:
            consumer.close()
        result.append(high)
    return result[0], result[1]


def test_confluent_commit_and_abort(kemu: InProcessKemu) -> None:
    topic = unique("txn")
    create_topic(kemu.bootstrap, topic)
    producer = transactional_producer(kemu.bootstrap, unique("tid"))
    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic, f"committed-{i}".encode(), partition=i % 3)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(20):
        producer.produce(topic, f"aborted-{i}".encode(), partition=i % 3)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, f"late-{i}".encode(), partition=i % 3)
    producer.commit_transaction(30)

    committed = read_all(kemu.bootstrap, topic, "read_committed", 40)
    assert sorted(committed) == sorted(
        [f"committed-{i}".encode() for i in range(30)] + [f"late-{i}".encode() for i in range(10)]
    )
    everything = read_all(kemu.bootstrap, topic, "read_uncommitted", 60)
    assert len(everything) == 60
    assert sum(v.startswith(b"aborted-") for v in everything) == 20


def test_confluent_open_transaction_holds_the_lso(kemu: InProcessKemu) -> None:
    topic = unique("lso")
    create_topic(kemu.bootstrap, topic, partitions=1)
    plain = Producer({"bootstrap.servers": kemu.bootstrap})
    for i in range(5):
        plain.produce(topic, f"plain-{i}".encode(), partition=0)
    plain.flush(30)
    producer = transactional_producer(kemu.bootstrap, unique("tid"))
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"open-{i}".encode(), partition=0)
    producer.flush(30)
    high, stable = watermarks_and_lso(kemu.bootstrap, topic, 0)
    assert (high, stable) == (10, 5)
    assert len(read_all(kemu.bootstrap, topic, "read_committed", 5, idle_s=1.0)) == 5
    producer.commit_transaction(30)
    high, stable = watermarks_and_lso(kemu.bootstrap, topic, 0)
    assert high == stable == 11  # the COMMIT marker takes an offset
    assert len(read_all(kemu.bootstrap, topic, "read_committed", 10)) == 10


def test_confluent_send_offsets_to_transaction(kemu: InProcessKemu) -> None:
    source, sink, group = unique("src"), unique("sink"), unique("eos")
    create_topic(kemu.bootstrap, source)
    create_topic(kemu.bootstrap, sink)
    plain = Producer({"bootstrap.servers": kemu.bootstrap})
    for i in range(30):
        plain.produce(source, f"in-{i}".encode(), partition=i % 3)
    plain.flush(30)
    consumer = Consumer(
        {
            "bootstrap.servers": kemu.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([source])
    producer = transactional_producer(kemu.bootstrap, unique("tid"))
    try:
        messages = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(messages) < 30 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                messages.append(message)
        assert len(messages) == 30
        positions = consumer.position(consumer.assignment())

        producer.begin_transaction()
        for message in messages[:10]:
            producer.produce(sink, message.value(), partition=0)
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        producer.abort_transaction(30)
        assert committed_offsets(kemu.bootstrap, group, source, 3) == [-1001] * 3

        producer.begin_transaction()
        for message in messages:
            producer.produce(sink, message.value(), partition=0)
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
    finally:
        consumer.close()
    assert committed_offsets(kemu.bootstrap, group, source, 3) == [10, 10, 10]
    assert len(read_all(kemu.bootstrap, sink, "read_committed", 30)) == 30


def test_confluent_second_producer_fences_the_first(kemu: InProcessKemu) -> None:
    topic = unique("fence")
    create_topic(kemu.bootstrap, topic)
    transactional_id = unique("tid")
    first = transactional_producer(kemu.bootstrap, transactional_id)
    first.begin_transaction()
    first.produce(topic, b"zombie", partition=0)
    first.flush(30)
    second = transactional_producer(kemu.bootstrap, transactional_id)  # aborts first's txn
    second.begin_transaction()
    second.produce(topic, b"fresh", partition=0)
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as raised:
        first.produce(topic, b"late", partition=0)
        first.commit_transaction(30)
    assert raised.value.args[0].fatal() or raised.value.args[0].txn_requires_abort()
    assert read_all(kemu.bootstrap, topic, "read_committed", 1) == [b"fresh"]


def test_kafka_python_transactions(kemu: InProcessKemu) -> None:
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KafkaTopicPartition

    topic, group = unique("kp"), unique("kp-group")
    create_topic(kemu.bootstrap, topic)
    producer = KafkaProducer(
        bootstrap_servers=kemu.bootstrap, transactional_id=unique("kp-tid"), acks="all"
    )
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(10):
        producer.send(topic, f"commit-{i}".encode(), partition=i % 3)
    offsets = {KafkaTopicPartition(topic, 1): OffsetAndMetadata(4, "", -1)}
    producer.send_offsets_to_transaction(offsets, group)
    producer.commit_transaction()
    producer.begin_transaction()
    for i in range(5):
        producer.send(topic, f"abort-{i}".encode(), partition=i % 3)
    producer.send_offsets_to_transaction(
        {KafkaTopicPartition(topic, 1): OffsetAndMetadata(9, "", -1)}, group
    )
    producer.flush()
    producer.abort_transaction()
    producer.close()
    assert committed_offsets(kemu.bootstrap, group, topic, 3) == [-1001, 4, -1001]
    committed = read_all(kemu.bootstrap, topic, "read_committed", 10)
    assert sorted(committed) == sorted(f"commit-{i}".encode() for i in range(10))
    assert len(read_all(kemu.bootstrap, topic, "read_uncommitted", 15)) == 15


def test_aiokafka_transactions(kemu: InProcessKemu) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    topic, group = unique("aio"), unique("aio-group")
    create_topic(kemu.bootstrap, topic)

    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=kemu.bootstrap, transactional_id=unique("aio-tid")
        )
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(10):
                    await producer.send(topic, f"commit-{i}".encode(), partition=i % 3)
                await producer.send_offsets_to_transaction({AioTopicPartition(topic, 2): 6}, group)
            await producer.begin_transaction()
            for i in range(5):
                await producer.send_and_wait(topic, f"abort-{i}".encode(), partition=i % 3)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    assert committed_offsets(kemu.bootstrap, group, topic, 3) == [-1001, -1001, 6]
    committed = read_all(kemu.bootstrap, topic, "read_committed", 10)
    assert sorted(committed) == sorted(f"commit-{i}".encode() for i in range(10))
    assert len(read_all(kemu.bootstrap, topic, "read_uncommitted", 15)) == 15


@pytest.mark.process  # SIGKILL: kemu as a real process
def test_sigkill_keeps_commits_and_aborts_the_open_transaction(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    process = kemu_factory(brokers=3, data_dir=tmp_path / "data").start()
    topic = unique("kill")
    create_topic(process.bootstrap, topic, partitions=1)
    producer = transactional_producer(
        process.bootstrap, unique("tid"), **{"transaction.timeout.ms": 3000}
    )
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"kept-{i}".encode(), partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"open-{i}".encode(), partition=0)
    producer.flush(30)
    assert watermarks_and_lso(process.bootstrap, topic, 0) == (11, 6)

    process.restart()
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        high, stable = watermarks_and_lso(process.bootstrap, topic, 0)
        if stable == high:
            break
        time.sleep(0.5)
    assert (high, stable) == (12, 12)  # the ABORT marker after the open transaction's records
    committed = read_all(process.bootstrap, topic, "read_committed", 5)
    assert sorted(committed) == sorted(f"kept-{i}".encode() for i in range(5))
    assert len(read_all(process.bootstrap, topic, "read_uncommitted", 10)) == 10


def test_share_consumer_read_committed_skips_aborted_and_open_transactions(
    kemu: InProcessKemu,
) -> None:
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    topic = unique("share-txn")
    create_topic(kemu.bootstrap, topic, partitions=1)
    producer = transactional_producer(kemu.bootstrap, unique("tid"))
    for outcome in ("commit", "abort", "commit", "open"):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, f"{outcome}-{i}".encode(), partition=0)
        producer.flush(30)
        if outcome == "commit":
            producer.commit_transaction(30)
        elif outcome == "abort":
            producer.abort_transaction(30)

    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})

    def share_values(isolation: str, expected: int) -> list[bytes]:
        group = unique("sg")
        resource = ConfigResource(
            ResourceType.GROUP,
            group,
            incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
                for name, value in (
                    ("share.auto.offset.reset", "earliest"),
                    ("share.isolation.level", isolation),
                )
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(30)
        share = ShareConsumer({"bootstrap.servers": kemu.bootstrap, "group.id": group})
        share.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        quiet_until = None
        try:
            while time.monotonic() < deadline:
                batch = share.poll(0.2)
                for message in batch:
                    assert message.error() is None, message.error()
                    value = message.value()
                    assert value is not None
                    values.append(value)
                if not batch and len(values) >= expected:
                    quiet_until = quiet_until or time.monotonic() + 2.0
                    if time.monotonic() > quiet_until:
                        break
        finally:
            share.close()
        return values

    committed = share_values("read_committed", 10)
    assert sorted(committed) == sorted([f"commit-{i}".encode() for i in range(5)] * 2)
    assert len(share_values("read_uncommitted", 20)) == 20
    producer.abort_transaction(30)


def test_confluent_transaction_past_its_timeout_is_aborted(kemu: InProcessKemu) -> None:
    topic = unique("timeout")
    create_topic(kemu.bootstrap, topic, partitions=1)
    producer = transactional_producer(
        kemu.bootstrap, unique("tid"), **{"transaction.timeout.ms": 1000}
    )
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"late-{i}".encode(), partition=0)
    producer.flush(30)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        high, stable = watermarks_and_lso(kemu.bootstrap, topic, 0)
        if stable == high:
            break
        time.sleep(0.2)
    assert (high, stable) == (4, 4)  # three records and the coordinator's ABORT marker
    with pytest.raises(KafkaException):
        producer.commit_transaction(30)
    assert read_all(kemu.bootstrap, topic, "read_committed", 0, idle_s=1.0) == []


def test_kafka_python_and_aiokafka_read_committed_consumers(kemu: InProcessKemu) -> None:
    from aiokafka import AIOKafkaConsumer
    from kafka import KafkaConsumer

    topic = unique("rc")
    create_topic(kemu.bootstrap, topic, partitions=1)
    producer = transactional_producer(kemu.bootstrap, unique("tid"))
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(4):
            producer.produce(topic, f"{outcome}-{i}".encode(), partition=0)
        producer.flush(30)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    wanted = sorted([f"commit-{i}".encode() for i in range(4)] * 2)

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kemu.bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        consumer_timeout_ms=3000,
    )
    try:
        assert sorted(message.value for message in consumer) == wanted
    finally:
        consumer.close()

    async def read_aiokafka() -> list[bytes]:
        aio = AIOKafkaConsumer(
            topic,
            bootstrap_servers=kemu.bootstrap,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        await aio.start()
        values: list[bytes] = []
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while len(values) < len(wanted) and time.monotonic() < deadline:
                batches = await aio.getmany(timeout_ms=500)
                values.extend(m.value for records in batches.values() for m in records if m.value)
            batches = await aio.getmany(timeout_ms=1000)  # nothing more may come
            values.extend(m.value for records in batches.values() for m in records if m.value)
        finally:
            await aio.stop()
        return values

    assert sorted(asyncio.run(read_aiokafka())) == wanted
