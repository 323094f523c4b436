"""kemu.client's ShareConsumer keeps a ShareFetch in flight, as Java's consumer does: a poll that
hands out the last buffered records sends the next ShareFetch at once (with the acknowledgements
pending so far), so the next poll finds the records already there; the records it brings are
decoded only when a poll takes them in."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.client import Admin, ShareConsumer
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

TOPIC = "prefetch"


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    process = InProcessKemu(
        brokers=1, log_path=tmp_path_factory.mktemp("kemu-prefetch") / "kemu.log"
    ).start()
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=15)
    yield process
    process.stop()


def produce(kemu: InProcessKemu, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for value in values:
        producer.produce(TOPIC, value=value, partition=0)
    assert producer.flush(15) == 0


def in_flight(consumer: ShareConsumer) -> bool:
    return any(session.fetch is not None for session in consumer._sessions.values())


async def lag(kemu: InProcessKemu, group: str) -> int:
    async with Admin(kemu.bootstrap) as admin:
        return await admin.share_group_lag(group, TOPIC)


async def test_the_next_fetch_leaves_with_the_poll_and_carries_the_acks(
    kemu: InProcessKemu,
) -> None:
    consumer = ShareConsumer(kemu.bootstrap, "prefetch-group")
    await consumer.subscribe([TOPIC])
    try:
        # The first heartbeat assigns nothing: wait for a later one, then poll once more so
        # that a ShareFetch has loaded the share partition (at the log end) before producing.
        for _ in range(100):
            assigned = bool(consumer._assignment)
            assert await consumer.poll(0.2) == []
            if assigned:
                break
        produce(kemu, [b"a", b"b", b"c"])
        first: list[int] = []
        for _ in range(50):
            first = [r.offset for r in await consumer.poll(0.5)]
            if first:
                break
        assert first == [0, 1, 2]
        assert in_flight(consumer)  # sent as the poll handed its records out
        produce(kemu, [b"d"])
        second = [r.offset for r in await consumer.poll(5.0)]
        assert second == [3]
        # Implicit mode: the second poll accepted 0..2 and the fetch it sent carried them,
        # without a commit: only 3 (acquired, not acknowledged) is left in the group's lag.
        assert in_flight(consumer)
        left = -1
        for _ in range(100):
            left = await lag(kemu, "prefetch-group")
            if left == 1:
                break
            await asyncio.sleep(0.1)
        assert left == 1
    finally:
        await consumer.close()


async def test_acknowledgements_no_fetch_carries_are_sent_without_another_poll(
    kemu: InProcessKemu,
) -> None:
    consumer = ShareConsumer(kemu.bootstrap, "flush-group", acknowledgement_mode="explicit")
    await consumer.subscribe([TOPIC])
    try:
        for _ in range(100):
            assigned = bool(consumer._assignment)
            assert await consumer.poll(0.2) == []
            if assigned:
                break
        before = await lag(kemu, "flush-group")
        produce(kemu, [b"e"])
        records = []
        for _ in range(50):
            records = await consumer.poll(0.5)
            if records:
                break
        assert len(records) == 1
        assert in_flight(consumer)  # the next fetch left before the record was acknowledged
        consumer.acknowledge(records[0])
        assert await consumer.poll(0.01) == []  # returns while that fetch is still out
        left = -1
        for _ in range(100):  # no more polls: a ShareAcknowledge after the fetch carries it
            left = await lag(kemu, "flush-group")
            if left == before:
                break
            await asyncio.sleep(0.1)
        assert left == before
    finally:
        await consumer.close()
