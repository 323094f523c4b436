"""GroupConsumer's RebalanceListener against a kemu in the test's process, beyond rebalance.py's
scenario (which runs against Kafka too): a member whose session expired hears of its partitions
in ``on_partitions_lost``, cannot commit them there, and rejoins only after the callback
returned; ``seek()`` in ``on_partitions_assigned`` moves where reading starts; a callback that
raises comes out of ``poll()``, and the next ``poll()`` tries the reconciliation again.

The session expires on kemu's virtual clock (``advance``), so no test waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.client import CommitFailedError, GroupConsumer, RebalanceListener
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

Partition = tuple[str, int]


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    process = InProcessKemu(
        brokers=1,
        clock="virtual",
        log_path=tmp_path_factory.mktemp("kemu-rebalance-listener") / "kemu.log",
    ).start()
    yield process
    process.stop()


def topic_of(kemu: InProcessKemu, name: str, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(timeout=15)
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for index in range(records):
        producer.produce(name, value=f"v{index}".encode(), partition=0)
    assert producer.flush(15) == 0


async def poll_until(consumer: GroupConsumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    for _ in range(80):
        values += [record.value or b"" for record in await consumer.poll(0.25)]
        if len(values) >= count:
            break
    return values


async def test_an_expired_member_hears_its_partitions_lost_then_rejoins(
    kemu: InProcessKemu,
) -> None:
    heard: list[tuple[str, list[Partition]]] = []
    lost = asyncio.Event()
    release = asyncio.Event()
    refused: list[BaseException] = []

    class Listener(RebalanceListener):
        async def on_partitions_assigned(self, partitions: list[Partition]) -> None:
            heard.append(("assigned", partitions))

        async def on_partitions_lost(self, partitions: list[Partition]) -> None:
            heard.append(("lost", partitions))
            try:
                await consumer.commit()
            except CommitFailedError as exc:  # another member may own them already
                refused.append(exc)
            lost.set()
            await release.wait()

    topic_of(kemu, "lost-in", 3)
    consumer = GroupConsumer(
        kemu.bootstrap, "lost-group", auto_offset_reset="earliest", listener=Listener()
    )
    try:
        await consumer.subscribe(["lost-in"])
        assert await poll_until(consumer, 3) == [b"v0", b"v1", b"v2"]
        assert heard == [("assigned", [("lost-in", 0)])]
        kemu.control.advance("46s")  # past the 45 s session: the coordinator drops the member
        polling = asyncio.get_running_loop().create_task(poll_until(consumer, 3))
        await asyncio.wait_for(lost.wait(), 30)
        assert heard[-1] == ("lost", [("lost-in", 0)]) and len(refused) == 1
        await asyncio.sleep(1.5)  # a few heartbeat intervals: no rejoin while the callback runs
        assert consumer.member_epoch == 0
        release.set()
        # rejoined, and read again from the group's offset: nothing was committed
        assert await asyncio.wait_for(polling, 30) == [b"v0", b"v1", b"v2"]
        assert heard[-1] == ("assigned", [("lost-in", 0)]) and consumer.member_epoch > 0
    finally:
        release.set()
        await consumer.close()


async def test_seek_in_on_partitions_assigned_moves_the_start(kemu: InProcessKemu) -> None:
    class StartAtTwo(RebalanceListener):
        async def on_partitions_assigned(self, partitions: list[Partition]) -> None:
            for topic, partition in partitions:
                consumer.seek(topic, partition, 2)

    topic_of(kemu, "seek-in", 4)
    consumer = GroupConsumer(
        kemu.bootstrap, "seek-group", auto_offset_reset="earliest", listener=StartAtTwo()
    )
    try:
        await consumer.subscribe(["seek-in"])
        assert await poll_until(consumer, 2) == [b"v2", b"v3"]
        with pytest.raises(Exception, match="not assigned"):
            consumer.seek("seek-in", 7, 0)
    finally:
        await consumer.close()


async def test_a_failing_callback_comes_out_of_poll_and_is_tried_again(
    kemu: InProcessKemu,
) -> None:
    failures = [RuntimeError("not ready yet")]

    class FailsOnce(RebalanceListener):
        async def on_partitions_assigned(self, partitions: list[Partition]) -> None:
            if partitions and failures:
                raise failures.pop()

    topic_of(kemu, "fails-in", 2)
    consumer = GroupConsumer(
        kemu.bootstrap, "fails-group", auto_offset_reset="earliest", listener=FailsOnce()
    )
    try:
        await consumer.subscribe(["fails-in"])
        with pytest.raises(RuntimeError, match="not ready yet"):
            await poll_until(consumer, 2)
        assert consumer.assignment() == set()  # not taken: nothing was read of it
        assert await poll_until(consumer, 2) == [b"v0", b"v1"]
    finally:
        await consumer.close()
