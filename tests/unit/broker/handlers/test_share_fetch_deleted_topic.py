"""A share session holding a partition of a topic deleted since, as Kafka 4.4.0 answers it
(tests/integration/share/test_share_deleted_topic_state_kafka.py compares): each ShareFetch lists
the partition with UNKNOWN_TOPIC_OR_PARTITION until the member forgets it; the session's other
partitions are fetched as usual."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import AsyncIterator

import pytest

from kemu.broker.server import KemuServer, ServerOptions
from kemu.config.definitions import BrokerConfig
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.testing.plugin import free_port_block
from tests.unit.broker.handlers.test_share_fetch import (
    Client,
    Harness,
    request_module,
    share_fetch,
)

DELETE_TOPICS = 20
ZERO_UUID = uuid.UUID(int=0)


@pytest.fixture
async def kemu() -> AsyncIterator[Harness]:
    """One broker (so that it leads every partition), topics ``t`` and ``gone``."""
    server = KemuServer(ServerOptions(brokers=1, port=free_port_block(1), config=BrokerConfig({})))
    now = [1_000_000]
    server.runtime.clock_ms = lambda: now[0]
    await server.start()
    server.cluster.create_topic("t", 1, 1)
    server.cluster.create_topic("gone", 1, 1)
    harness = Harness(server, now)
    try:
        yield harness
    finally:
        for client in harness.clients:
            client.writer.close()
        await server.close()


async def delete_topic(client: Client, name: str) -> None:
    module = request_module(DELETE_TOPICS, 6)
    state = wire.build(module.DeleteTopicState, name=name, topic_id=ZERO_UUID)
    answer = await client.call(
        wire.build(
            wire.request_schema(DELETE_TOPICS, 6),
            topics=(state,),
            timeout=datetime.timedelta(seconds=10),
        )
    )
    assert [r.error_code for r in answer.responses] == [ErrorCode.none]


def errors(response: object) -> dict[uuid.UUID, ErrorCode]:
    return {
        topic.topic_id: ErrorCode(data.error_code)
        for topic in response.responses  # type: ignore[attr-defined]
        for data in topic.partitions
    }


async def test_a_deleted_topics_partition_is_unknown_until_forgotten(kemu: Harness) -> None:
    client = await kemu.leader_client("t", 0)
    live, gone = kemu.topic_id("t"), kemu.topic_id("gone")
    assert (await client.call(share_fetch(live, {0: []}, epoch=0))).error_code == ErrorCode.none
    assert (await client.call(share_fetch(gone, {0: []}, epoch=1))).error_code == ErrorCode.none
    await delete_topic(client, "gone")
    kemu.produce("t", 0, 2)
    first = await client.call(share_fetch(live, {}, epoch=2))
    assert errors(first) == {live: ErrorCode.none, gone: ErrorCode.unknown_topic_or_partition}
    # listed again with nothing new for the live partition (an errored partition always is)
    again = await client.call(share_fetch(live, {}, epoch=3))
    assert errors(again) == {gone: ErrorCode.unknown_topic_or_partition}
    forgotten = await client.call(share_fetch(gone, {}, epoch=4, forgotten=[0]))
    assert errors(forgotten) == {}


async def test_naming_a_deleted_topic_in_a_new_session_is_an_unknown_topic_id(
    kemu: Harness,
) -> None:
    client = await kemu.leader_client("t", 0)
    gone = kemu.topic_id("gone")
    await delete_topic(client, "gone")
    response = await client.call(share_fetch(gone, {0: []}, epoch=0))
    assert errors(response) == {gone: ErrorCode.unknown_topic_id}
