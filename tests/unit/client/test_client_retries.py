"""kemu.client's calls survive a broker connection lost between two requests (the exactly-once
crash harness SIGKILLs kemu at random points): the metadata refresh of ``subscribe()``, a share
consumer's leader lookup in ``poll()`` and a reader's fetch are retried, not raised. No broker:
the wire calls are replaced by stand-ins that fail once."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from kemu.client import Consumer, ShareConsumer
from kemu.client.cluster import KafkaError, RetriableError, TopicInfo
from kemu.client.connection import ConnectionClosed
from kemu.protocol.errors import ErrorCode


class FailingOnce:
    def __init__(self, error: Exception, result: Any = None) -> None:
        self.error, self.result, self.calls = error, result, 0

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            raise self.error
        return self.result


async def nothing(*args: Any, **kwargs: Any) -> None:
    return None


@pytest.mark.parametrize(
    "error", [RetriableError("closed"), ConnectionClosed("closed")], ids=["retriable", "closed"]
)
async def test_subscribe_retries_its_metadata_refresh(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    consumer = ShareConsumer("127.0.0.1:1", "g")
    refresh = FailingOnce(error)
    monkeypatch.setattr(consumer.cluster, "start", nothing)
    monkeypatch.setattr(consumer.cluster, "refresh_metadata", refresh)
    monkeypatch.setattr(consumer, "_heartbeat", nothing)
    await consumer.subscribe(["t"])
    assert refresh.calls == 2
    assert consumer._heartbeat_task is not None
    consumer._heartbeat_task.cancel()


async def test_a_failed_leader_lookup_in_poll_waits_for_the_next_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer = ShareConsumer("127.0.0.1:1", "g")
    topic_id = uuid.uuid4()
    consumer.cluster.topics["t"] = TopicInfo("t", topic_id, {0: -1})
    consumer.cluster.topic_names[topic_id] = "t"
    consumer._assignment = {(topic_id, 0)}
    monkeypatch.setattr(consumer.cluster, "refresh_metadata", FailingOnce(ConnectionClosed("x")))
    assert await consumer.poll(timeout=0.2) == []


async def test_a_reader_retries_a_fetch_whose_connection_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reader = Consumer("127.0.0.1:1")
    reader.positions[("t", 0)] = 0

    async def leader(topic: str, partition: int) -> int:
        return 1

    fetch = FailingOnce(ConnectionClosed("closed"), result=[])
    monkeypatch.setattr(reader.cluster, "leader", leader)
    monkeypatch.setattr(reader, "_fetch", fetch)
    assert await reader.poll(timeout=0.3) == []
    assert fetch.calls >= 2


async def test_an_assignment_that_failed_to_apply_is_asked_for_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The heartbeat's answer assigns a topic the consumer has no metadata for, and the metadata
    refresh fails: the next heartbeat is a full one (with the subscription), so the coordinator
    sends the assignment again."""
    consumer = ShareConsumer("127.0.0.1:1", "g")
    consumer._subscription = ["t"]
    topic_id = uuid.uuid4()
    sent: list[dict[str, Any]] = []

    async def coordinator(*args: Any) -> int:
        return 1

    async def call(node: int, api_key: int, version: int, **fields: Any) -> Any:
        sent.append(fields)
        return SimpleNamespace(
            error_code=ErrorCode.none,
            error_message=None,
            member_epoch=len(sent),
            heartbeat_interval=100,
            assignment=SimpleNamespace(
                topic_partitions=[SimpleNamespace(topic_id=topic_id, partitions=[0])]
            ),
        )

    async def refresh(topics: Any) -> None:
        if len(sent) == 1:
            raise KafkaError(ErrorCode.unknown_server_error, "metadata failed")
        consumer.cluster.topic_names[topic_id] = "t"

    monkeypatch.setattr(consumer.cluster, "coordinator", coordinator)
    monkeypatch.setattr(consumer.cluster, "call", call)
    monkeypatch.setattr(consumer.cluster, "refresh_metadata", refresh)
    with pytest.raises(KafkaError):
        await consumer._heartbeat()
    await consumer._heartbeat()
    assert [fields["subscribed_topic_names"] for fields in sent] == [["t"], ["t"]]
    assert consumer._assignment == {(topic_id, 0)}
