"""confluent-kafka (librdkafka) against a 3-broker kemu.

Everything produced is consumed back byte-for-byte with the offsets, keys, headers and
timestamps it was sent with, on 4-partition topics whose leaders sit on different brokers;
for every compression codec, idempotence off and on, and acks 0, 1 and all. Consumers use
``assign()``; the offset lookups are ``offsets_for_times``, ``get_watermark_offsets`` and
``list_topics``.

librdkafka does not implement KIP-227 fetch sessions for consumers (it always fetches with
session epoch -1), so the long-running consumer here exercises sessionless fetches across
brokers; ``test_kafka_python.py`` covers incremental sessions.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from kemu.testing.inprocess import InProcessKemu
from tests.integration.clients import round_trip
from tests.integration.clients.round_trip import (
    PARTITIONS,
    TIMEOUT,
    Received,
    Sent,
    four_partition_kemu,
)
from tests.integration.three_brokers import unique

pytestmark = pytest.mark.integration

BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    with four_partition_kemu(tmp_path_factory, "confluent") as process:
        yield process


Headers = list[tuple[str, bytes | None]] | None


def messages(count: int, *, start: int = 0) -> list[Sent[Headers]]:
    """Keys, values and headers of every shape: null key, tombstone, empty, binary, large,
    repeated and null-valued headers; distinct timestamps so offsets_for_times can find them."""
    out = []
    for i in range(start, start + count):
        key: bytes | None = f"key-{i}".encode() if i % 7 else None
        value: bytes | None = bytes([i % 256]) * (i % 50) + f"value-{i}".encode()
        if i % 11 == 5:
            value = None
        if i % 13 == 6:
            value = b"x" * 20_000 + bytes(range(256))
        headers: list[tuple[str, bytes | None]] | None = [
            ("seq", str(i).encode()),
            ("dup", b"one"),
            ("dup", b"two"),
            ("empty", b""),
            ("null", None),
        ]
        if i % 5 == 0:
            headers = None
        out.append(Sent(i % PARTITIONS, key, value, headers, BASE_TS + i * 10))
    return out


def produce(producer: Producer, topic: str, batch: list[Sent[Headers]]) -> dict[int, list[int]]:
    """Produce in order; the offsets delivery reports gave, per partition."""
    reported: dict[int, list[int]] = {}
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            errors.append(error)
        else:
            reported.setdefault(message.partition(), []).append(message.offset())

    for sent in batch:
        kwargs: dict[str, Any] = {"timestamp": sent.timestamp, "on_delivery": delivered}
        if sent.headers is not None:
            kwargs["headers"] = sent.headers
        producer.produce(topic, value=sent.value, key=sent.key, partition=sent.partition, **kwargs)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0
    assert errors == []
    return reported


def consumer(kemu: InProcessKemu, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": kemu.bootstrap,
            "group.id": unique("assign-only"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **extra,
        }
    )


def consume(client: Consumer, count: int) -> list[Message]:
    received: list[Message] = []
    deadline = time.monotonic() + TIMEOUT
    while len(received) < count and time.monotonic() < deadline:
        for message in client.consume(num_messages=500, timeout=0.5):
            if message.error() is None:
                received.append(message)
            else:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
    return received


def check_round_trip(
    consumed: list[Message], topic: str, batch: list[Sent[Headers]], first_offset: int = 0
) -> None:
    round_trip.check_round_trip([as_received(m) for m in consumed], topic, batch, first_offset)


def as_received(message: Message) -> Received[Headers]:
    timestamp_type, timestamp = message.timestamp()
    return Received(
        message.topic(),
        message.partition(),
        message.offset(),
        message.key(),
        message.value(),
        timestamp,
        timestamp_type == TIMESTAMP_CREATE_TIME,
        message.headers() or None,
    )


def leaders(kemu: InProcessKemu, topic: str) -> dict[int, int]:
    client = consumer(kemu)
    try:
        metadata = client.list_topics(topic, timeout=TIMEOUT)
    finally:
        client.close()
    return {p.id: p.leader for p in metadata.topics[topic].partitions.values()}


CASES = [
    pytest.param(codec, idempotent, acks, id=f"{codec}-{'idem' if idempotent else 'plain'}-{acks}")
    for codec in ("none", "gzip", "snappy", "lz4", "zstd")
    for idempotent, acks in ((False, "1"), (True, "all"))
] + [
    pytest.param("none", False, "0", id="none-plain-acks0"),
    pytest.param("lz4", False, "0", id="lz4-plain-acks0"),
    pytest.param("zstd", False, "all", id="zstd-plain-all"),
]


@pytest.mark.parametrize(("codec", "idempotent", "acks"), CASES)
def test_produce_then_consume_back(
    kemu: InProcessKemu, codec: str, idempotent: bool, acks: str
) -> None:
    topic = unique(f"cf-{codec}")
    producer = Producer(
        {
            "bootstrap.servers": kemu.bootstrap,
            "compression.type": codec,
            "enable.idempotence": idempotent,
            "acks": acks,
            "linger.ms": 5,
        }
    )
    batch = messages(120)
    reported = produce(producer, topic, batch)
    per_partition = {p: sum(1 for s in batch if s.partition == p) for p in range(PARTITIONS)}
    if acks != "0":
        # delivery reports carry the offsets the broker assigned
        assert reported == {p: list(range(n)) for p, n in per_partition.items()}
    assert len(set(leaders(kemu, topic).values())) == 3

    client = consumer(kemu)
    try:
        client.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        received = consume(client, len(batch))
    finally:
        client.close()
    check_round_trip(received, topic, batch)


def test_idempotent_producer_sequences_survive_many_batches(kemu: InProcessKemu) -> None:
    topic = unique("cf-idem-many")
    producer = Producer(
        {
            "bootstrap.servers": kemu.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 0,
            "batch.num.messages": 3,
            "max.in.flight.requests.per.connection": 5,
        }
    )
    batch = messages(400)
    reported = produce(producer, topic, batch)
    assert {p: len(o) for p, o in reported.items()} == {p: 100 for p in range(PARTITIONS)}
    assert all(offsets == list(range(100)) for offsets in reported.values())


def test_long_running_consumer_follows_new_data_on_every_broker(kemu: InProcessKemu) -> None:
    topic = unique("cf-follow")
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 2})
    produce(producer, topic, messages(8))  # creates the topic
    client = consumer(kemu, **{"fetch.wait.max.ms": 100, "enable.partition.eof": False})
    sent: list[Sent[Headers]] = messages(8)
    received: list[Message] = []
    try:
        client.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        received += consume(client, len(sent))
        for round_number in range(1, 6):
            more = messages(40, start=round_number * 1000)
            produce(producer, topic, more)
            sent += more
            received += consume(client, len(sent) - len(received))
        # nothing more arrives: no duplicates across fetches
        received += [m for m in client.consume(num_messages=100, timeout=1.0) if not m.error()]
    finally:
        client.close()
    check_round_trip(received, topic, sent)


def one_record_per_batch(kemu: InProcessKemu) -> Producer:
    return Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 0, "batch.num.messages": 1})


def test_offsets_for_times(kemu: InProcessKemu) -> None:
    topic = unique("cf-times")
    batch = messages(40)
    produce(one_record_per_batch(kemu), topic, batch)
    client = consumer(kemu)
    try:
        for partition in range(PARTITIONS):
            sent = [s for s in batch if s.partition == partition]
            queries = {
                "before all": (sent[0].timestamp - 1_000, 0),
                "exact first": (sent[0].timestamp, 0),
                "exact third": (sent[2].timestamp, 2),
                "between": (sent[2].timestamp + 1, 3),
                "exact last": (sent[-1].timestamp, len(sent) - 1),
                "after all": (sent[-1].timestamp + 1, OFFSET_END),
            }
            for name, (timestamp, expected) in queries.items():
                (found,) = client.offsets_for_times(
                    [TopicPartition(topic, partition, timestamp)], timeout=TIMEOUT
                )
                assert found.error is None, (name, found.error)
                assert found.offset == expected, (partition, name)
    finally:
        client.close()


BATCH_TIMESTAMP_STEPS = [20, 21, 25, 22, 23]  # the largest in the middle of the batch


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_lookups_inside_one_batch_find_the_record(kemu: InProcessKemu, codec: str) -> None:
    """Five records in one (compressed) batch: the timestamp lookups and MAX_TIMESTAMP answer
    with the record's own offset, as Kafka 3.8+ does (librdkafka writes raw snappy)."""
    topic = unique(f"cf-times-{codec}")
    batch = [
        Sent(0, f"k{i}".encode(), f"v{i}".encode() * 50, None, BASE_TS + step * 1000)
        for i, step in enumerate(BATCH_TIMESTAMP_STEPS)
    ]
    producer = Producer(
        {"bootstrap.servers": kemu.bootstrap, "linger.ms": 200, "compression.type": codec}
    )
    assert produce(producer, topic, batch) == {0: [0, 1, 2, 3, 4]}
    client = consumer(kemu)
    try:
        found = [
            client.offsets_for_times([TopicPartition(topic, 0, timestamp)], timeout=TIMEOUT)[0]
            for timestamp in (BASE_TS + 21_000, BASE_TS + 21_500, BASE_TS + 25_000)
        ]
    finally:
        client.close()
    assert [(f.error, f.offset) for f in found] == [(None, 1), (None, 2), (None, 2)]
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    partition = TopicPartition(topic, 0)
    (future,) = admin.list_offsets({partition: OffsetSpec.max_timestamp()}).values()
    latest = future.result(timeout=TIMEOUT)
    assert (latest.offset, latest.timestamp) == (2, BASE_TS + 25_000)


def test_get_watermark_offsets(kemu: InProcessKemu) -> None:
    topic = unique("cf-marks")
    batch = messages(30)
    produce(Producer({"bootstrap.servers": kemu.bootstrap}), topic, batch)
    client = consumer(kemu)
    try:
        for partition in range(PARTITIONS):
            count = sum(1 for s in batch if s.partition == partition)
            low, high = client.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=TIMEOUT, cached=False
            )
            assert (low, high) == (0, count)
        produce(Producer({"bootstrap.servers": kemu.bootstrap}), topic, messages(4, start=30))
        assert client.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT) == (
            0,
            sum(1 for s in batch if s.partition == 0) + 1,
        )
    finally:
        client.close()


def test_list_topics(kemu: InProcessKemu) -> None:
    topic = unique("cf-list")
    produce(Producer({"bootstrap.servers": kemu.bootstrap}), topic, messages(4))
    client = consumer(kemu)
    try:
        everything = client.list_topics(timeout=TIMEOUT)
        assert topic in everything.topics
        assert sorted(everything.brokers) == [1, 2, 3]
        ports = {b.port for b in everything.brokers.values()}
        assert ports == {int(a.rsplit(":", 1)[1]) for a in kemu.bootstrap.split(",")}
        assert everything.controller_id in everything.brokers
        assert everything.cluster_id
        metadata = client.list_topics(topic, timeout=TIMEOUT).topics[topic]
        assert metadata.error is None
        assert sorted(metadata.partitions) == list(range(PARTITIONS))
        for partition in metadata.partitions.values():
            assert partition.leader in everything.brokers
            assert partition.replicas == [partition.leader]
            assert partition.isrs == [partition.leader]
        assert len({p.leader for p in metadata.partitions.values()}) == 3
    finally:
        client.close()


def test_consumer_starts_from_an_assigned_offset(kemu: InProcessKemu) -> None:
    topic = unique("cf-seek")
    batch = messages(40)
    produce(Producer({"bootstrap.servers": kemu.bootstrap}), topic, batch)
    client = consumer(kemu)
    try:
        client.assign([TopicPartition(topic, p, 4) for p in range(PARTITIONS)])
        received = consume(client, len(batch) - 4 * PARTITIONS)
    finally:
        client.close()
    seen: dict[int, int] = {}
    expected = []
    for sent in batch:
        seen[sent.partition] = seen.get(sent.partition, 0) + 1
        if seen[sent.partition] > 4:
            expected.append(sent)
    check_round_trip(received, topic, expected, first_offset=4)
