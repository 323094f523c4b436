"""kemu.client's ShareConsumer ``acquire_mode`` (ShareFetch v2 ShareAcquireMode, KIP-1206):
``record_limit`` acquires at most ``max_poll_records`` records, so the rest of a log batch stays
available to the group's other members; ``batch_optimized`` (the default) acquires the whole
batch for the first member."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.client import ShareConsumer
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    process = InProcessKemu(
        brokers=1, log_path=tmp_path_factory.mktemp("kemu-acquire-mode") / "kemu.log"
    ).start()
    yield process
    process.stop()


def create_topic(kemu: InProcessKemu, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)


def produce_one_batch(kemu: InProcessKemu, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 1000})
    for index in range(count):
        producer.produce(topic, value=b"%d" % index, partition=0)
    assert producer.flush(15) == 0


async def joined(kemu: InProcessKemu, group: str, topic: str, mode: str) -> ShareConsumer:
    """A member with its assignment, before anything is written: the first heartbeat assigns
    nothing (the share state is initialized first), so poll until a later one has."""
    consumer = ShareConsumer(kemu.bootstrap, group, max_poll_records=7, acquire_mode=mode)
    await consumer.subscribe([topic])
    for _ in range(100):
        assigned = bool(consumer._assignment)
        assert await consumer.poll(0.2) == []
        if assigned:  # this poll's ShareFetch loaded the share partition at the log end
            break
    assert consumer._assignment
    return consumer


@pytest.mark.parametrize("mode", ["record_limit", "batch_optimized"])
async def test_record_limit_leaves_the_rest_of_the_batch_to_others(
    kemu: InProcessKemu, mode: str
) -> None:
    topic = f"acquire-{mode.replace('_', '-')}"
    create_topic(kemu, topic)
    first, second = await asyncio.gather(
        joined(kemu, f"g-{topic}", topic, mode), joined(kemu, f"g-{topic}", topic, mode)
    )
    try:
        produce_one_batch(kemu, topic, 30)
        # Both members have a ShareFetch in flight: either may be the one that acquires first.
        got: dict[int, list[int]] = {0: [], 1: []}
        for _ in range(10):
            for index, member in enumerate((first, second)):
                if not got[index]:
                    got[index] = [r.offset for r in await member.poll(0.5)]
            if got[0] and got[1]:
                break
        if mode == "record_limit":
            # 7 each, none twice; the first member's next fetch (sent as it handed its records
            # out) may have taken 7..13 before the other member asked
            assert len(got[0]) == len(got[1]) == 7
            assert not set(got[0]) & set(got[1])
            assert list(range(7)) in (got[0], got[1])
        else:  # one member acquired the whole batch and hands it out 7 at a time
            assert sorted([got[0], got[1]]) == [[], list(range(7))]
    finally:
        await first.close()
        await second.close()


def test_an_unknown_acquire_mode_is_refused() -> None:
    with pytest.raises(ValueError):
        ShareConsumer("127.0.0.1:1", "g", acquire_mode="greedy")
