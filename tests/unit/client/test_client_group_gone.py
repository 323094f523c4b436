"""kemu.client's consumers take a GROUP_ID_NOT_FOUND heartbeat answer as Java's 4.4 consumers do
(``AbstractHeartbeatRequestManager.onErrorResponse``): fatal to a member in the group, which
loses its partitions, stops heartbeating, does not rejoin (a later ``subscribe()`` joins
nothing) and leaves no group on close; the application's next ``poll()`` raises the error, once.
The same answer to a leave is ignored. No broker: the wire calls are stand-ins."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from kemu.client import GroupConsumer, RebalanceListener, ShareConsumer
from kemu.client.cluster import TopicInfo
from kemu.client.errors import KafkaError
from kemu.protocol.errors import ErrorCode

GONE = "Consumer group g not found."


class Coordinator:
    """The group coordinator's answers: GROUP_ID_NOT_FOUND to every heartbeat, counted."""

    def __init__(self) -> None:
        self.epochs: list[int] = []

    async def call(self, node: int, api_key: int, version: int, **fields: Any) -> Any:
        self.epochs.append(fields["member_epoch"])
        return SimpleNamespace(error_code=ErrorCode.group_id_not_found, error_message=GONE)


def stand_in(monkeypatch: pytest.MonkeyPatch, consumer: GroupConsumer | ShareConsumer) -> Any:
    coordinator = Coordinator()

    async def found(*args: Any) -> int:
        return 1

    async def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    monkeypatch.setattr(consumer.cluster, "coordinator", found)
    monkeypatch.setattr(consumer.cluster, "version", lambda *args: found())
    monkeypatch.setattr(consumer.cluster, "call", coordinator.call)
    monkeypatch.setattr(consumer.cluster, "start", nothing)
    monkeypatch.setattr(consumer.cluster, "refresh_metadata", nothing)
    monkeypatch.setattr(consumer.cluster, "topic", nothing)
    monkeypatch.setattr(consumer.cluster, "close", nothing)
    return coordinator


async def test_a_group_consumer_whose_group_is_gone_is_out_for_good(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer = GroupConsumer("127.0.0.1:1", "g")
    coordinator = stand_in(monkeypatch, consumer)
    consumer.member_epoch = 3  # in the group, owning a partition
    consumer._reader.positions[("t", 0)] = 7
    consumer._subscription = ("t",)
    task = asyncio.get_running_loop().create_task(consumer._heartbeat_loop())
    consumer._heartbeat_now.set()
    await asyncio.wait_for(task, 5)  # the loop ends: no more heartbeats
    assert coordinator.epochs == [3]
    with pytest.raises(KafkaError) as raised:
        await consumer.poll(0.1)
    assert (raised.value.error, raised.value.message) == (ErrorCode.group_id_not_found, GONE)
    assert await consumer.poll(0.1) == [] and consumer.assignment() == set()  # raised once
    await consumer.subscribe(["t"])  # no rejoin
    await consumer.close()  # no leave
    assert coordinator.epochs == [3]


async def test_a_listener_hears_the_partitions_lost_before_the_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As Java's transitionToFatal: onPartitionsLost with what the member owned, then the error
    from poll(); close() runs no callback (nothing is owned) and sends no leave."""
    heard: list[tuple[str, list[tuple[str, int]]]] = []

    class Listener(RebalanceListener):
        async def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> None:
            heard.append(("revoked", partitions))

    consumer = GroupConsumer("127.0.0.1:1", "g", listener=Listener())
    coordinator = stand_in(monkeypatch, consumer)
    consumer.member_epoch = 3
    consumer._reader.positions[("t", 0)] = 7
    consumer._subscription = ("t",)
    task = asyncio.get_running_loop().create_task(consumer._heartbeat_loop())
    consumer._heartbeat_now.set()
    await asyncio.wait_for(task, 5)
    assert heard == [] and consumer.assignment() == {("t", 0)}  # told in poll(), not before
    with pytest.raises(KafkaError) as raised:
        await consumer.poll(0.1)
    assert raised.value.error == ErrorCode.group_id_not_found
    assert heard == [("revoked", [("t", 0)])]  # on_partitions_lost's default
    assert consumer.assignment() == set()
    await consumer.close()
    assert heard == [("revoked", [("t", 0)])] and coordinator.epochs == [3]


async def test_a_group_consumer_leaving_a_group_that_is_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer = GroupConsumer("127.0.0.1:1", "g")
    coordinator = stand_in(monkeypatch, consumer)
    consumer.member_epoch = 3
    await consumer.close()  # the leave's answer is ignored
    assert coordinator.epochs == [-1]


async def test_a_share_consumer_whose_group_is_gone_is_out_for_good(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer = ShareConsumer("127.0.0.1:1", "g")
    coordinator = stand_in(monkeypatch, consumer)
    consumer.member_epoch = 3
    topic_id = uuid.uuid4()
    consumer.cluster.topics["t"] = TopicInfo("t", topic_id, {0: 1})
    consumer.cluster.topic_names[topic_id] = "t"
    consumer._assignment = {(topic_id, 0)}
    consumer._heartbeat_interval = 0.0
    task = asyncio.get_running_loop().create_task(consumer._heartbeat_loop())
    await asyncio.wait_for(task, 5)
    assert coordinator.epochs == [3] and consumer._assignment == set()
    with pytest.raises(KafkaError) as raised:
        await consumer.poll(0.1)
    assert raised.value.error == ErrorCode.group_id_not_found
    assert await consumer.poll(0.1) == []
    await consumer.subscribe(["t"])
    await consumer.close()
    assert coordinator.epochs == [3]
