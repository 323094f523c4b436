"""kemu.client's consumers whose group is deleted under them, against a kemu in the test's
process: a member stalls (its heartbeats stop), its session runs out, an admin deletes the now
empty group (DeleteGroups), and the member heartbeats again. The coordinator answers
GROUP_ID_NOT_FOUND, which Java's 4.4 consumers take as fatal (``kemu/client/membership.py``):
the next ``poll()`` raises it once, the member owns nothing and heartbeats no more, and it does
not bring the group back (no rejoin, no leave)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.client import GroupConsumer, ShareConsumer
from kemu.client.errors import KafkaError
from kemu.protocol.errors import ErrorCode
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

SESSION_MS = 1_000
WAIT_S = 30.0  # a bound for failing, not a measurement


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    process = InProcessKemu(
        brokers=1,
        overrides=[
            f"group.consumer.session.timeout.ms={SESSION_MS}",
            f"group.consumer.min.session.timeout.ms={SESSION_MS}",
            f"group.share.session.timeout.ms={SESSION_MS}",
            f"group.share.min.session.timeout.ms={SESSION_MS}",
        ],
        log_path=tmp_path_factory.mktemp("kemu-group-deleted") / "kemu.log",
    ).start()
    yield process
    process.stop()


def create_topic(admin: AdminClient, name: str) -> None:
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=15)


async def delete_once_empty(admin: AdminClient, group: str) -> None:
    """DeleteGroups, retried while the stalled member's session still holds the group."""
    deadline = time.monotonic() + WAIT_S
    while True:
        future = admin.delete_consumer_groups([group])[group]
        try:
            await asyncio.to_thread(future.result, 15)
            return
        except KafkaException as exc:
            assert exc.args[0].code() == ErrorCode.non_empty_group, exc
            assert time.monotonic() < deadline, "the member's session never ran out"
            await asyncio.sleep(0.2)


def listed(admin: AdminClient, group: str) -> bool:
    found = admin.list_consumer_groups().result(timeout=15)
    return any(g.group_id == group for g in found.valid)


async def stall(consumer: GroupConsumer | ShareConsumer) -> None:
    task = consumer._heartbeat_task
    assert task is not None
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def resume(consumer: GroupConsumer | ShareConsumer) -> asyncio.Task[None]:
    consumer._heartbeat_task = asyncio.get_running_loop().create_task(consumer._heartbeat_loop())
    return consumer._heartbeat_task


async def test_a_group_consumer_whose_group_was_deleted(kemu: InProcessKemu) -> None:
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    create_topic(admin, "gone-orders")
    consumer = GroupConsumer(kemu.bootstrap, "gone-billing")
    await consumer.subscribe(["gone-orders"])
    deadline = time.monotonic() + WAIT_S
    while not consumer.assignment():
        await consumer.poll(0.1)
        assert time.monotonic() < deadline, "never assigned"
    await stall(consumer)
    await delete_once_empty(admin, "gone-billing")
    heartbeats = await resume(consumer)
    consumer._heartbeat_now.set()
    await asyncio.wait_for(heartbeats, WAIT_S)  # its loop ends: no more heartbeats
    with pytest.raises(KafkaError) as raised:
        await consumer.poll(1.0)
    assert raised.value.error == ErrorCode.group_id_not_found
    assert raised.value.message == "Consumer group gone-billing not found."
    assert await consumer.poll(0.2) == [] and consumer.assignment() == set()
    await consumer.subscribe(["gone-orders"])  # joins nothing
    await consumer.close()  # leaves nothing
    assert not listed(admin, "gone-billing")


async def test_a_share_consumer_whose_group_was_deleted(kemu: InProcessKemu) -> None:
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    create_topic(admin, "gone-shared")
    consumer = ShareConsumer(kemu.bootstrap, "gone-workers")
    await consumer.subscribe(["gone-shared"])
    assert consumer._assignment
    await stall(consumer)
    await delete_once_empty(admin, "gone-workers")
    consumer._heartbeat_interval = 0.0
    await asyncio.wait_for(await resume(consumer), WAIT_S)
    with pytest.raises(KafkaError) as raised:
        await consumer.poll(1.0)
    assert raised.value.error == ErrorCode.group_id_not_found
    assert raised.value.message == "Share group gone-workers not found."
    assert await consumer.poll(0.2) == [] and not consumer._assignment
    await consumer.subscribe(["gone-shared"])
    await consumer.close()
    assert not listed(admin, "gone-workers")
