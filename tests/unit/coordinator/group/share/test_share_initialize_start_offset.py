"""The start offset the group coordinator's share-state initialization gives the persister: -1
for a topic new to the group (``share.auto.offset.reset`` decides where its leader starts), 0
for partitions added to a topic the group already has state of, as Kafka 4.4.0's
buildInitializeShareGroupStateRequest does (beside Kafka:
``tests/integration/share/test_share_added_partitions_kafka.py``)."""

from __future__ import annotations

import asyncio
import uuid

from kemu.coordinator.share.persister import SharePartitionKey
from kemu.coordinator.share.service import share_persister
from tests.unit.broker.handlers.test_deleted_topic_share_state import Broker


async def start_offset(broker: Broker, topic_id: uuid.UUID, partition: int) -> int:
    summary = await share_persister(broker.runtime).read_summary(
        SharePartitionKey("shares", topic_id, partition), -1
    )
    assert summary.state is not None
    return summary.state.start_offset


def test_added_partitions_of_a_known_topic_start_at_zero() -> None:
    async def scenario() -> None:
        broker = Broker()
        broker.cluster.create_topic("live", 2, 1)
        broker.cluster.create_topic("gone", 1, 1)
        epoch = (await broker.heartbeat(0)).member_epoch
        for _ in range(3):
            epoch = (await broker.heartbeat(epoch)).member_epoch
        live = broker.topic_id("live")
        assert broker.initialized("shares")[live] == {0, 1}
        broker.cluster.add_partitions("live", 3)
        for _ in range(3):
            epoch = (await broker.heartbeat(epoch)).member_epoch
        assert broker.initialized("shares")[live] == {0, 1, 2}
        assert [await start_offset(broker, live, p) for p in range(3)] == [-1, -1, 0]
        assert await start_offset(broker, broker.topic_id("gone"), 0) == -1

    asyncio.run(scenario())
