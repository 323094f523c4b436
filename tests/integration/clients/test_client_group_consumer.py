"""kemu.client's GroupConsumer (KIP-848) against a 3-broker kemu in the test's process.

Records written by confluent-kafka are consumed by one member, then split between two (no
partition owned by both, nothing skipped), then taken over by the survivor when one leaves; a
member that polls but does not commit leaves its records to the next owner (at least once from
the committed offset); what the members commit is what confluent-kafka's AdminClient reads as
the group's offsets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.client import ConsumerRecord, GroupConsumer
from kemu.testing.inprocess import InProcessKemu
from tests import REPO_ROOT

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    process = InProcessKemu(
        brokers=3,
        overrides=["group.consumer.heartbeat.interval.ms=500"],
        log_path=tmp_path_factory.mktemp("kemu-group-consumer") / "kemu.log",
    ).start()
    yield process
    process.stop()


def create_topic(kemu: InProcessKemu, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 3)]).values():
        future.result(timeout=15)


def produce(kemu: InProcessKemu, topic: str, values: list[bytes], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for index, value in enumerate(values):
        producer.produce(topic, value=value, partition=index % partitions)
    assert producer.flush(15) == 0


async def poll_values(consumers: list[GroupConsumer], count: int) -> dict[int, list[bytes]]:
    """What each consumer polls (by index) until ``count`` records came in all."""
    got: dict[int, list[ConsumerRecord]] = {i: [] for i in range(len(consumers))}
    for _ in range(100):
        for index, consumer in enumerate(consumers):
            got[index] += await consumer.poll(0.2)
        if sum(len(records) for records in got.values()) >= count:
            break
    return {i: [r.value or b"" for r in records] for i, records in got.items()}


async def until_assigned(consumers: list[GroupConsumer], partitions: int) -> None:
    """Poll until the members own ``partitions`` between them, none twice."""
    for _ in range(100):
        for consumer in consumers:
            await consumer.poll(0.1)
        owned = [tp for consumer in consumers for tp in consumer.assignment()]
        if len(owned) == partitions and all(c.assignment() for c in consumers):
            assert len(set(owned)) == len(owned)
            return
    raise AssertionError(f"assignment never settled: {[c.assignment() for c in consumers]}")


async def test_members_share_the_partitions_and_resume_at_the_commit(kemu: InProcessKemu) -> None:
    create_topic(kemu, "orders", 4)
    produce(kemu, "orders", [b"a%d" % i for i in range(40)], 4)
    first = GroupConsumer(kemu.bootstrap, "billing", auto_offset_reset="earliest")
    await first.subscribe(["orders"])
    values = await poll_values([first], 40)
    assert sorted(values[0]) == sorted(b"a%d" % i for i in range(40))
    assert await first.commit() == {("orders", p): 10 for p in range(4)}
    assert await first.committed([("orders", p) for p in range(4)]) == {
        ("orders", p): 10 for p in range(4)
    }

    second = GroupConsumer(kemu.bootstrap, "billing", auto_offset_reset="earliest")
    await second.subscribe(["orders"])
    await until_assigned([first, second], 4)
    produce(kemu, "orders", [b"b%d" % i for i in range(20)], 4)
    values = await poll_values([first, second], 20)
    # each member reads from the commit only its own partitions: nothing twice, nothing skipped
    assert sorted(values[0] + values[1]) == sorted(b"b%d" % i for i in range(20))
    assert values[0] and values[1]
    await first.commit()
    await second.commit()

    await first.close()  # leaves: its partitions move to the survivor at once
    await until_assigned([second], 4)
    produce(kemu, "orders", [b"c%d" % i for i in range(8)], 4)
    values = await poll_values([second], 8)
    assert sorted(values[0]) == sorted(b"c%d" % i for i in range(8))
    await second.commit()
    await second.close()

    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    future = admin.list_consumer_group_offsets(
        [_group_request("billing", [TopicPartition("orders", p) for p in range(4)])]
    )["billing"]
    offsets = {tp.partition: tp.offset for tp in future.result(timeout=15).topic_partitions}
    assert offsets == {p: 17 for p in range(4)}


async def test_an_uncommitted_poll_is_delivered_again(kemu: InProcessKemu) -> None:
    create_topic(kemu, "payments", 2)
    produce(kemu, "payments", [b"p%d" % i for i in range(10)], 2)
    reader = GroupConsumer(kemu.bootstrap, "audit", auto_offset_reset="earliest")
    await reader.subscribe(["payments"])
    assert len((await poll_values([reader], 10))[0]) == 10
    await reader.commit({("payments", 0): 3})  # only part of partition 0 was processed
    await reader.close()  # the rest was never committed

    again = GroupConsumer(kemu.bootstrap, "audit", auto_offset_reset="latest")
    await again.subscribe(["payments"])
    values = (await poll_values([again], 2))[0]
    # partition 0 from its commit (offset 3: values 6 and 8), partition 1 had no commit and
    # the reset is latest: nothing from it
    assert sorted(values) == [b"p6", b"p8"]
    assert again.position("payments", 0) == 5
    await again.close()


def _group_request(group: str, partitions: list[TopicPartition]) -> object:
    from confluent_kafka import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(group, partitions)


async def test_poll_before_any_assignment_waits_without_spinning(kemu: InProcessKemu) -> None:
    create_topic(kemu, "empty", 1)
    consumer = GroupConsumer(kemu.bootstrap, "idle")
    await consumer.subscribe(["empty"])
    assert await asyncio.wait_for(consumer.poll(0.3), 10) == []
    await consumer.close()


async def test_the_documented_group_consumer_runs(kemu: InProcessKemu) -> None:
    """docs/client.md's GroupConsumer block, as written there."""
    doc = (REPO_ROOT / "docs" / "client.md").read_text()
    fence = "```python run-by=tests/integration/clients/test_client_group_consumer.py\n"
    block = doc.split(fence)[1]
    namespace: dict[str, Any] = {}
    exec(compile(block.split("```")[0], "docs/client.md", "exec"), namespace)
    create_topic(kemu, "invoices", 3)
    produce(kemu, "invoices", [b"i%d" % i for i in range(9)], 3)
    seen = await asyncio.wait_for(namespace["bill"](kemu.bootstrap, 9), 60)
    assert sorted(seen) == sorted(b"i%d" % i for i in range(9))
