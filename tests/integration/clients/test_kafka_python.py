"""kafka-python 3.0.12 against a 3-broker kemu.

KafkaProducer with every codec kafka-python has (gzip, snappy, lz4, zstd) and without, then
KafkaConsumer with ``assign()``, ``seek``, ``beginning_offsets``/``end_offsets`` and
``offsets_for_times``: everything comes back byte-for-byte with its offset, key, headers and
timestamp, on 4-partition topics led by different brokers. kafka-python's consumer uses
incremental fetch sessions (KIP-227), so the long-running consumer checks that its sessions
really advanced. kafka-python infers the broker release from ApiVersions: it sees 4.3, its
newest (DescribeLogDirs v5 is its 4.3 marker).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.net.compat import KafkaNetClient

from kemu.testing.inprocess import InProcessKemu
from tests.integration.clients.round_trip import (
    PARTITIONS,
    TIMEOUT,
    Sent,
    TupleHeaders,
    check_records,
    four_partition_kemu,
)
from tests.integration.three_brokers import unique

pytestmark = pytest.mark.integration

BASE_TS = 1_710_000_000_000
KAFKA_4_3 = (4, 3)


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    with four_partition_kemu(tmp_path_factory, "kafka-python") as process:
        yield process


def messages(count: int, *, start: int = 0) -> list[Sent[TupleHeaders]]:
    out = []
    for i in range(start, start + count):
        key = f"key-{i}".encode() if i % 6 else None
        value: bytes | None = bytes([i % 256]) * (i % 40) + f"value-{i}".encode()
        if i % 9 == 4:
            value = None
        if i % 17 == 3:
            value = bytes(range(256)) * 100
        headers: tuple[tuple[str, bytes], ...] = (
            ("seq", str(i).encode()),
            ("dup", b"a"),
            ("dup", b"b"),
            ("empty", b""),
        )
        if i % 4 == 0:
            headers = ()
        out.append(Sent(i % PARTITIONS, key, value, headers, BASE_TS + i * 10))
    return out


def produce(
    producer: KafkaProducer, topic: str, batch: list[Sent[TupleHeaders]]
) -> dict[int, list[int]]:
    futures = [
        (
            sent,
            producer.send(
                topic,
                value=sent.value,
                key=sent.key,
                headers=list(sent.headers),
                partition=sent.partition,
                timestamp_ms=sent.timestamp,
            ),
        )
        for sent in batch
    ]
    producer.flush(TIMEOUT)
    offsets: dict[int, list[int]] = {}
    for sent, future in futures:
        metadata = future.get(timeout=TIMEOUT)
        assert (metadata.topic, metadata.partition) == (topic, sent.partition)
        offsets.setdefault(sent.partition, []).append(metadata.offset)
    return offsets


def consumer(kemu: InProcessKemu, **extra: Any) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=kemu.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=30_000,
        **extra,
    )


def poll_until(client: KafkaConsumer, count: int) -> list[Any]:
    received: list[Any] = []
    deadline = time.monotonic() + TIMEOUT
    while len(received) < count and time.monotonic() < deadline:
        for records in client.poll(timeout_ms=500).values():
            received.extend(records)
    return received


def leaders(kemu: InProcessKemu, topic: str) -> dict[int, int]:
    client = consumer(kemu)
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            partitions = client.partitions_for_topic(topic)
            if partitions:
                cluster = client._client.cluster
                return {
                    p: cluster.leader_for_partition(TopicPartition(topic, p)) for p in partitions
                }
            time.sleep(0.2)
    finally:
        client.close()
    raise AssertionError(f"no metadata for {topic}")


def test_kafka_python_sees_kafka_4_3(kemu: InProcessKemu) -> None:
    client = KafkaNetClient(bootstrap_servers=kemu.bootstrap)
    try:
        assert client.check_version(timeout_ms=10_000) == KAFKA_4_3
        for node_id in (1, 2, 3):
            assert client.check_version(node_id=node_id, timeout_ms=10_000) == KAFKA_4_3
    finally:
        client.close()
    reader = consumer(kemu)
    try:
        assert reader.config["api_version"] == KAFKA_4_3
    finally:
        reader.close()


@pytest.mark.parametrize(
    ("codec", "idempotent", "acks"),
    [
        (None, True, "all"),
        ("gzip", True, "all"),
        ("snappy", False, 1),
        ("lz4", True, "all"),
        ("zstd", False, 1),
        (None, False, 1),
    ],
)
def test_produce_then_consume_back(
    kemu: InProcessKemu, codec: str | None, idempotent: bool, acks: Any
) -> None:
    topic = unique(f"kp-{codec or 'none'}")
    producer = KafkaProducer(
        bootstrap_servers=kemu.bootstrap,
        compression_type=codec,
        enable_idempotence=idempotent,
        acks=acks,
        linger_ms=5,
    )
    batch = messages(120)
    try:
        offsets = produce(producer, topic, batch)
    finally:
        producer.close()
    count = {p: sum(1 for s in batch if s.partition == p) for p in range(PARTITIONS)}
    assert offsets == {p: list(range(n)) for p, n in count.items()}
    assert len(set(leaders(kemu, topic).values())) == 3

    client = consumer(kemu)
    try:
        client.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        received = poll_until(client, len(batch))
    finally:
        client.close()
    check_records(received, topic, batch)


def test_seek_and_offset_lookups(kemu: InProcessKemu) -> None:
    topic = unique("kp-seek")
    batch = messages(40)
    producer = KafkaProducer(bootstrap_servers=kemu.bootstrap, linger_ms=0, batch_size=1)
    try:
        produce(producer, topic, batch)
    finally:
        producer.close()
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    per_partition = {p: [s for s in batch if s.partition == p] for p in range(PARTITIONS)}
    client = consumer(kemu)
    try:
        client.assign(partitions)
        assert client.beginning_offsets(partitions) == {tp: 0 for tp in partitions}
        assert client.end_offsets(partitions) == {
            tp: len(per_partition[tp.partition]) for tp in partitions
        }

        lookups = client.offsets_for_times(
            {tp: per_partition[tp.partition][3].timestamp for tp in partitions}
        )
        for tp, found in lookups.items():
            assert found is not None
            assert found.offset == 3
            assert found.timestamp == per_partition[tp.partition][3].timestamp
        between = client.offsets_for_times({partitions[0]: per_partition[0][3].timestamp + 1})
        assert between[partitions[0]].offset == 4
        after = client.offsets_for_times({partitions[1]: BASE_TS + 10**9})
        assert after[partitions[1]] is None

        for tp in partitions:
            client.seek(tp, 6)
        received = poll_until(client, len(batch) - 6 * PARTITIONS)
        check_records(received, topic, [s for p in per_partition.values() for s in p[6:]], 6)

        client.seek(partitions[2], 2)
        again = poll_until(client, len(per_partition[2]) - 2)
        check_records(again, topic, per_partition[2][2:], 2)

        client.seek_to_beginning(partitions[3])
        from_start = poll_until(client, len(per_partition[3]))
        check_records(from_start, topic, per_partition[3])
    finally:
        client.close()


def test_long_running_consumer_uses_incremental_fetch_sessions(kemu: InProcessKemu) -> None:
    topic = unique("kp-follow")
    producer = KafkaProducer(bootstrap_servers=kemu.bootstrap, linger_ms=2)
    sent = messages(8)
    received: list[Any] = []
    client = consumer(kemu, fetch_max_wait_ms=100)
    try:
        produce(producer, topic, sent)
        client.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        received += poll_until(client, len(sent))
        for round_number in range(1, 8):
            more = messages(30, start=round_number * 1000)
            produce(producer, topic, more)
            sent += more
            received += poll_until(client, len(sent) - len(received))
            if round_number == 4:  # a partition leaves and comes back: forgotten topics
                client.pause(TopicPartition(topic, 0))
                received += poll_until(client, 0)
                client.resume(TopicPartition(topic, 0))
        for _ in range(3):  # nothing more: no duplicates from incremental responses
            received += [r for rs in client.poll(timeout_ms=300).values() for r in rs]
        handlers = client._fetcher._session_handlers
        sessions = {node: h.next_metadata for node, h in handlers.items()}
    finally:
        client.close()
        producer.close()
    check_records(received, topic, sent)
    # one session per leader, each well past its first (full) fetch
    assert set(sessions) == {1, 2, 3}
    for metadata in sessions.values():
        assert metadata.session_id != 0
        assert metadata.epoch > 5
