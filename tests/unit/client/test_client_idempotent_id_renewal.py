"""IdempotentProducer: when a bump finds the epoch exhausted it asks InitProducerId for a new
producer id; until the answer arrives the old id and epoch stay current, so a send that takes a
sequence meanwhile numbers an idle partition's batch under them, never under no id (-1: a
batch the leader would take without deduplication). No broker: stand-ins for the wire calls."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from kemu.client import IdempotentProducer
from kemu.client import idempotent_producer as module
from kemu.client.backoff import Backoff
from kemu.client.cluster import TopicInfo
from kemu.protocol.errors import ErrorCode

NEW_ID = 8


class Broker:
    """A leader whose Produce answers can be held and made to fail, and an InitProducerId that
    answers when let."""

    def __init__(self) -> None:
        self.written: list[tuple[int, int, int]] = []  # (id, epoch, base sequence) per Produce
        self.connected = True
        self.nodes = {1: ("127.0.0.1", 1)}
        self.next_offset = 0
        self.produce_errors: list[ErrorCode] = []
        self.produce_gate = asyncio.Event()
        self.produce_gate.set()
        self.topic_gate = asyncio.Event()
        self.topic_gate.set()
        self.topic_waiting = asyncio.Event()
        self.init_started = asyncio.Event()
        self.init_gate = asyncio.Event()
        self.inits = 0

    async def leader(self, topic: str, partition: int) -> int:
        return 1

    async def version(self, *args: Any) -> int:
        return 12

    async def connection(self, node: int) -> Broker:
        return self

    async def start(self, timeout: float = 30.0) -> None:
        pass

    async def topic(self, name: str, *, timeout: float = 30.0) -> TopicInfo:
        self.topic_waiting.set()
        await self.topic_gate.wait()
        return TopicInfo(name, uuid.UUID(int=1), {0: 1, 1: 1})

    async def init_producer_id(self, node: int, api_key: int, *args: Any, **fields: Any) -> Any:
        assert api_key == module.INIT_PRODUCER_ID
        self.inits += 1
        self.init_started.set()
        await self.init_gate.wait()
        return SimpleNamespace(error_code=ErrorCode.none, producer_id=NEW_ID, producer_epoch=0)

    async def call(self, *args: Any, **fields: Any) -> Any:  # the connection's Produce
        await self.produce_gate.wait()
        error = self.produce_errors.pop(0) if self.produce_errors else ErrorCode.none
        result = SimpleNamespace(error_code=error, base_offset=self.next_offset, error_message=None)
        self.next_offset += 1
        return SimpleNamespace(responses=[SimpleNamespace(partition_responses=[result])])


@pytest.fixture
def producer(monkeypatch: pytest.MonkeyPatch) -> tuple[IdempotentProducer, Broker]:
    broker = Broker()
    producer = IdempotentProducer(
        "127.0.0.1:1", delivery_timeout=30.0, backoff=Backoff(retry_backoff_ms=1)
    )
    producer.producer_id, producer.producer_epoch = 7, module.MAX_EPOCH
    cluster = producer.cluster
    for name in ("leader", "version", "connection", "start", "topic"):
        monkeypatch.setattr(cluster, name, getattr(broker, name))
    monkeypatch.setattr(cluster, "call", broker.init_producer_id)
    monkeypatch.setattr(cluster, "nodes", broker.nodes)
    monkeypatch.setattr(cluster, "nested", lambda *args, **fields: None)

    def batch(entries: Any, **fields: Any) -> bytes:
        written = (fields["producer_id"], fields["producer_epoch"], fields["base_sequence"])
        broker.written.append(written)
        return b""

    monkeypatch.setattr(module, "producer_batch", batch)
    return producer, broker


async def test_a_send_during_the_renewal_uses_the_old_id(
    producer: tuple[IdempotentProducer, Broker],
) -> None:
    client, broker = producer
    last_epoch = module.MAX_EPOCH
    await client.send("t", b"a", partition=0)
    await client.send("t", b"x", partition=1)
    # "b" is in flight when the leader loses the producer: its retry bumps, past the last epoch
    broker.produce_gate.clear()
    broker.produce_errors = [ErrorCode.unknown_producer_id]
    bumping = asyncio.create_task(client.send("t", b"b", partition=0))
    while len(broker.written) < 3:
        await asyncio.sleep(0)
    # "y" has its producer id checked and waits for the topic's metadata ...
    broker.topic_gate.clear()
    broker.topic_waiting.clear()
    idle_send = asyncio.create_task(client.send("t", b"y", partition=1))
    await broker.topic_waiting.wait()
    # ... while "b" bumps and waits for its new producer id
    broker.produce_gate.set()
    await broker.init_started.wait()
    broker.topic_gate.set()
    await idle_send
    assert broker.written[3] == (7, last_epoch, 1)  # the old id, after "x"
    broker.init_gate.set()
    await bumping
    assert broker.written[-1] == (NEW_ID, 0, 0)
    assert (client.producer_id, client.producer_epoch) == (NEW_ID, 0)
    assert all(producer_id >= 0 for producer_id, _, _ in broker.written)
    assert broker.inits == 1 and client.epoch_bumps == 1


async def test_partitions_bumping_together_share_one_new_id(
    producer: tuple[IdempotentProducer, Broker], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, broker = producer
    renewing = 0
    renew = client._renew_producer_id

    async def counted_renew() -> None:
        nonlocal renewing
        renewing += 1
        await renew()

    monkeypatch.setattr(client, "_renew_producer_id", counted_renew)
    await client.send("t", b"a", partition=0)
    await client.send("t", b"x", partition=1)
    broker.produce_errors = [ErrorCode.unknown_producer_id] * 2
    sends = asyncio.gather(
        client.send_many("t", [(b"k", b"b")], partition=0),
        client.send_many("t", [(b"k", b"y")], partition=1),
    )
    while renewing < 2:  # both bumps found the last epoch
        await asyncio.sleep(0)
    broker.init_gate.set()
    await sends
    assert broker.inits == 1 and client.epoch_bumps == 2
    assert sorted(broker.written[-2:]) == [(NEW_ID, 0, 0), (NEW_ID, 0, 0)]
