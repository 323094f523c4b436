"""aiokafka 0.14.0 against a 3-broker kemu.

aiokafka speaks older versions than the other clients (Produce v7, Fetch v11, Metadata v5,
ListOffsets v3), so this is where the pre-flexible encodings get exercised. AIOKafkaProducer's
``send_and_wait`` and ``send_batch`` write; AIOKafkaConsumer with ``assign()`` reads everything
back byte-for-byte with offsets, keys, headers and timestamps, on 4-partition topics led by
different brokers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

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

BASE_TS = 1_720_000_000_000


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    with four_partition_kemu(tmp_path_factory, "aiokafka") as process:
        yield process


def messages(count: int, *, start: int = 0) -> list[Sent[TupleHeaders]]:
    out = []
    for i in range(start, start + count):
        key = f"key-{i}".encode() if i % 5 else None
        value: bytes | None = bytes([i % 256]) * (i % 30) + f"value-{i}".encode()
        if i % 8 == 3:
            value = None  # a tombstone; aiokafka wants a key then
            key = f"key-{i}".encode()
        if i % 19 == 7:
            value = bytes(range(256)) * 64
        headers: tuple[tuple[str, bytes], ...] = (("seq", str(i).encode()), ("dup", b"x"))
        if i % 3 == 0:
            headers = ()
        out.append(Sent(i % PARTITIONS, key, value, headers, BASE_TS + i * 10))
    return out


async def consume(client: AIOKafkaConsumer, count: int) -> list[Any]:
    received: list[Any] = []
    deadline = time.monotonic() + TIMEOUT
    while len(received) < count and time.monotonic() < deadline:
        for records in (await client.getmany(timeout_ms=500)).values():
            received.extend(records)
    return received


async def read_back(kemu: InProcessKemu, topic: str, count: int) -> tuple[list[Any], set[int]]:
    """Everything in the topic, and the brokers leading its partitions."""
    client = AIOKafkaConsumer(
        bootstrap_servers=kemu.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await client.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        client.assign(partitions)
        received = await consume(client, count)
        cluster = client._client.cluster
        leaders = {cluster.leader_for_partition(tp) for tp in partitions}
    finally:
        await client.stop()
    return received, leaders


@pytest.mark.parametrize(
    ("codec", "idempotent"),
    [(None, False), ("gzip", True), ("snappy", False), ("lz4", True), ("zstd", False)],
)
async def test_send_and_wait_then_consume_back(
    kemu: InProcessKemu, codec: str | None, idempotent: bool
) -> None:
    topic = unique(f"aio-{codec or 'none'}")
    producer = AIOKafkaProducer(
        bootstrap_servers=kemu.bootstrap,
        compression_type=codec,
        enable_idempotence=idempotent,
        acks="all" if idempotent else 1,
    )
    batch = messages(60)
    await producer.start()
    try:
        offsets: dict[int, list[int]] = {}
        for sent in batch:
            metadata = await producer.send_and_wait(
                topic,
                value=sent.value,
                key=sent.key,
                partition=sent.partition,
                timestamp_ms=sent.timestamp,
                headers=list(sent.headers),
            )
            assert (metadata.topic, metadata.partition) == (topic, sent.partition)
            assert metadata.timestamp == sent.timestamp
            offsets.setdefault(sent.partition, []).append(metadata.offset)
    finally:
        await producer.stop()
    assert all(found == list(range(len(found))) for found in offsets.values())
    received, leaders = await read_back(kemu, topic, len(batch))
    assert len(leaders) == 3
    check_records(received, topic, batch)


async def test_concurrent_sends_keep_per_partition_order(kemu: InProcessKemu) -> None:
    topic = unique("aio-concurrent")
    producer = AIOKafkaProducer(
        bootstrap_servers=kemu.bootstrap, enable_idempotence=True, linger_ms=5
    )
    batch = messages(200)
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                value=s.value,
                key=s.key,
                partition=s.partition,
                timestamp_ms=s.timestamp,
                headers=list(s.headers),
            )
            for s in batch
        ]
        results = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    by_partition: dict[int, list[int]] = {}
    for metadata in results:
        by_partition.setdefault(metadata.partition, []).append(metadata.offset)
    assert by_partition == {p: list(range(50)) for p in range(PARTITIONS)}
    received, _ = await read_back(kemu, topic, len(batch))
    check_records(received, topic, batch)


@pytest.mark.parametrize("codec", [None, "gzip", "lz4", "zstd"])
async def test_send_batch_then_consume_back(kemu: InProcessKemu, codec: str | None) -> None:
    topic = unique(f"aio-batch-{codec or 'none'}")
    producer = AIOKafkaProducer(
        bootstrap_servers=kemu.bootstrap, compression_type=codec, max_batch_size=1 << 20
    )
    batch = messages(80)
    await producer.start()
    try:
        for partition in range(PARTITIONS):
            for chunk_start in (0, 10):  # two batches per partition: offsets continue
                sent_here = [s for s in batch if s.partition == partition]
                chunk = sent_here[chunk_start : chunk_start + 10]
                record_batch = producer.create_batch()
                for sent in chunk:
                    appended = record_batch.append(
                        key=sent.key,
                        value=sent.value,
                        timestamp=sent.timestamp,
                        headers=list(sent.headers),
                    )
                    assert appended is not None
                record_batch.close()
                future = await producer.send_batch(record_batch, topic, partition=partition)
                metadata = await future
                assert metadata.offset == chunk_start  # the batch's base offset
    finally:
        await producer.stop()
    received, leaders = await read_back(kemu, topic, len(batch))
    assert len(leaders) == 3
    check_records(received, topic, batch)


async def test_assign_seek_and_offset_lookups(kemu: InProcessKemu) -> None:
    topic = unique("aio-seek")
    producer = AIOKafkaProducer(bootstrap_servers=kemu.bootstrap)
    batch = messages(40)
    await producer.start()
    try:
        for sent in batch:  # one record per batch: timestamp lookups are exact
            await producer.send_and_wait(
                topic,
                value=sent.value,
                key=sent.key,
                partition=sent.partition,
                timestamp_ms=sent.timestamp,
                headers=list(sent.headers),
            )
    finally:
        await producer.stop()
    per_partition = {p: [s for s in batch if s.partition == p] for p in range(PARTITIONS)}
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    client = AIOKafkaConsumer(
        bootstrap_servers=kemu.bootstrap, group_id=None, enable_auto_commit=False
    )
    await client.start()
    try:
        client.assign(partitions)
        assert await client.beginning_offsets(partitions) == {tp: 0 for tp in partitions}
        assert await client.end_offsets(partitions) == {tp: 10 for tp in partitions}
        found = await client.offsets_for_times(
            {tp: per_partition[tp.partition][4].timestamp for tp in partitions}
        )
        assert {tp: f.offset for tp, f in found.items()} == {tp: 4 for tp in partitions}
        for tp in partitions:
            client.seek(tp, 7)
        received = await consume(client, 3 * PARTITIONS)
        assert sorted((r.partition, r.offset) for r in received) == [
            (p, o) for p in range(PARTITIONS) for o in (7, 8, 9)
        ]
        for record in received:
            sent = per_partition[record.partition][record.offset]
            assert (record.key, record.value, record.timestamp) == (
                sent.key,
                sent.value,
                sent.timestamp,
            )
    finally:
        await client.stop()
