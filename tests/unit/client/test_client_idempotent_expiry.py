"""IdempotentProducer: a batch that expires before it was ever written fails without an epoch
bump, and the next batch takes its sequence (as Java's ``Sender`` fails an expired batch that
never drew a sequence); one that was written may be at the leader, so its partition's sequence
is resolved by a bump. No broker: the cluster's wire calls are replaced by stand-ins."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from kemu.client import IdempotentProducer, KafkaError
from kemu.client import idempotent_producer as module
from kemu.client.cluster import RetriableError, TopicInfo
from kemu.client.connection import ConnectionClosed
from kemu.protocol.errors import ErrorCode


class Broker:
    """Stand-ins for the producer's cluster: a leader that may be unknown, and a connection
    whose Produce calls may break."""

    def __init__(self) -> None:
        self.leader_known = True
        self.breaks = 0  # how many Produce calls fail with a broken connection
        self.written: list[tuple[int, int]] = []  # (epoch, base sequence) of each Produce
        self.connected = True
        self.next_offset = 0

    async def leader(self, topic: str, partition: int) -> int:
        if not self.leader_known:
            raise RetriableError("no leader")
        return 1

    async def version(self, *args: Any) -> int:
        return 12

    async def connection(self, node: int) -> Broker:
        return self

    async def call(self, *args: Any, **fields: Any) -> Any:
        if self.breaks:
            self.breaks -= 1
            raise ConnectionClosed("cut")
        result = SimpleNamespace(
            error_code=ErrorCode.none, base_offset=self.next_offset, error_message=None
        )
        self.next_offset += 1
        return SimpleNamespace(responses=[SimpleNamespace(partition_responses=[result])])


@pytest.fixture
def producer(monkeypatch: pytest.MonkeyPatch) -> tuple[IdempotentProducer, Broker]:
    broker = Broker()
    producer = IdempotentProducer("127.0.0.1:1", max_in_flight=1, delivery_timeout=0.3)
    producer.producer_id, producer.producer_epoch = 7, 0
    cluster = producer.cluster
    cluster.topics["t"] = TopicInfo("t", uuid.uuid4(), {0: 1})
    for name in ("leader", "version", "connection"):
        monkeypatch.setattr(cluster, name, getattr(broker, name))
    monkeypatch.setattr(cluster, "nested", lambda *args, **fields: None)

    def batch(entries: Any, **fields: Any) -> bytes:
        broker.written.append((fields["producer_epoch"], fields["base_sequence"]))
        return b""

    monkeypatch.setattr(module, "producer_batch", batch)
    return producer, broker


async def test_a_batch_never_written_expires_without_a_bump(
    producer: tuple[IdempotentProducer, Broker],
) -> None:
    client, broker = producer
    await client.send("t", b"a", partition=0)
    broker.leader_known = False
    with pytest.raises(KafkaError) as failed:
        await client.send("t", b"b", partition=0)
    assert failed.value.error == ErrorCode.request_timed_out
    broker.leader_known = True
    await client.send("t", b"c", partition=0)
    assert client.epoch_bumps == 0
    assert broker.written == [(0, 0), (0, 1)]  # "c" took the sequence "b" never used


async def test_a_batch_written_before_it_expired_resolves_by_a_bump(
    producer: tuple[IdempotentProducer, Broker],
) -> None:
    client, broker = producer
    await client.send("t", b"a", partition=0)
    broker.breaks = 100  # written, and then the connection broke, until it expired
    with pytest.raises(KafkaError):
        await client.send("t", b"b", partition=0)
    broker.breaks = 0
    await client.send("t", b"c", partition=0)
    assert client.epoch_bumps == 1
    assert broker.written[0] == (0, 0) and broker.written[-1] == (1, 0)
