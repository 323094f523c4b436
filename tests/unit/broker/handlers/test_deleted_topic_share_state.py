"""A deleted topic in a share group's ShareGroupStatePartitionMetadata, as Kafka 4.4.0 writes it
(tests/integration/share/test_share_deleted_topic_state_kafka.py compares): DeleteTopics has each
share group with state of the topic write the record again without it (an empty value for a
group that had nothing else), durably; a topic created again under the name is initialized as a
new one; an initialization finishing after the deletion records nothing (the share
coordinator refuses it)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.share.group import InitializePartitions, ShareGroup
from kemu.coordinator.group.share.records import (
    STATE_PARTITIONS,
    ShareRecordKey,
    ShareStatePartitionsValue,
    TopicPartitionsInfo,
)
from kemu.coordinator.share.persister import SharePartitionKey
from kemu.coordinator.share.service import share_persister
from kemu.protocol.errors import ErrorCode
from kemu.testing.harness import HandlerHarness
from tests.unit.broker.handlers.test_group_handlers import SERVE_ASSIGNMENT_INTERVALS

DELETE_TOPICS, SHARE_HEARTBEAT, ALTER_SHARE_OFFSETS = 20, 76, 91
ZERO_UUID = uuid.UUID(int=0)
MEMBER = "member-1"


class Broker(HandlerHarness):
    def __init__(self) -> None:
        super().__init__(config=SERVE_ASSIGNMENT_INTERVALS)

    def topic_id(self, name: str) -> uuid.UUID:
        return self.cluster.topics[name].topic_id

    async def heartbeat(self, epoch: int) -> Any:
        answer = await self.send(
            SHARE_HEARTBEAT,
            1,
            group_id="shares",
            member_id=MEMBER,
            member_epoch=epoch,
            rack_id=None,
            subscribed_topic_names=("live", "gone") if epoch == 0 else None,
        )
        assert answer.error_code == ErrorCode.none, answer
        await group_coordinator(self.runtime).background_done()
        return answer

    async def join(self) -> None:
        """The member, until every partition it subscribes to has its share state."""
        epoch = (await self.heartbeat(0)).member_epoch
        for _ in range(3):
            epoch = (await self.heartbeat(epoch)).member_epoch

    async def alter_offsets(self, group_id: str, topic: str, start: int) -> None:
        partition = self.nested(
            ALTER_SHARE_OFFSETS,
            0,
            "AlterShareGroupOffsetsRequestPartition",
            partition_index=0,
            start_offset=start,
        )
        named = self.nested(
            ALTER_SHARE_OFFSETS,
            0,
            "AlterShareGroupOffsetsRequestTopic",
            topic_name=topic,
            partitions=(partition,),
        )
        answer = await self.send(ALTER_SHARE_OFFSETS, 0, group_id=group_id, topics=(named,))
        assert answer.error_code == ErrorCode.none, answer

    async def delete_topic(self, name: str) -> None:
        state = self.nested(DELETE_TOPICS, 6, "DeleteTopicState", name=name, topic_id=ZERO_UUID)
        answer = await self.send(DELETE_TOPICS, 6, topics=(state,))
        assert [r.error_code for r in answer.responses] == [ErrorCode.none]

    def initialized(self, group_id: str) -> dict[uuid.UUID, set[int]]:
        group = group_coordinator(self.runtime).registry.get(group_id)
        assert isinstance(group, ShareGroup)
        return group.initialized

    def state_partitions(self, group_id: str) -> list[ShareStatePartitionsValue | None]:
        """Every ShareGroupStatePartitionMetadata value of the group in __consumer_offsets."""
        return [
            value  # type: ignore[misc]
            for key, value in group_coordinator(self.runtime).offsets_log.replay()
            if key == ShareRecordKey(STATE_PARTITIONS, group_id)
        ]


async def consumed_then_deleted() -> Broker:
    broker = Broker()
    broker.cluster.create_topic("live", 2, 1)
    broker.cluster.create_topic("gone", 2, 1)
    await broker.join()
    await broker.alter_offsets("idle", "gone", 1)
    gone = broker.topic_id("gone")
    assert set(broker.initialized("shares")) == {broker.topic_id("live"), gone}
    assert broker.initialized("idle") == {gone: {0}}
    await broker.delete_topic("gone")
    return broker


def info(broker: Broker, name: str) -> TopicPartitionsInfo:
    return TopicPartitionsInfo(broker.topic_id(name), name, (0, 1))


def test_deleting_a_topic_writes_the_state_partitions_record_without_it() -> None:
    async def scenario() -> None:
        broker = await consumed_then_deleted()
        live = broker.topic_id("live")
        assert broker.initialized("shares") == {live: {0, 1}}
        assert broker.state_partitions("shares")[-1] == ShareStatePartitionsValue(
            initialized=(info(broker, "live"),)
        )
        # an empty value, not a tombstone: the group is still there
        assert broker.initialized("idle") == {}
        assert broker.state_partitions("idle")[-1] == ShareStatePartitionsValue()

    asyncio.run(scenario())


def test_a_restart_finds_the_deleted_topic_gone() -> None:
    """The coordinator loaded again from __consumer_offsets (a fresh runtime over the same
    logs) has the groups without it."""

    async def scenario() -> Broker:
        return await consumed_then_deleted()

    broker = asyncio.run(scenario())
    live = broker.topic_id("live")
    broker.restart()
    group_coordinator(broker.runtime)  # created afresh: it loads __consumer_offsets
    assert broker.initialized("shares") == {live: {0, 1}}
    assert broker.initialized("idle") == {}


def test_a_topic_created_again_is_initialized_as_a_new_one() -> None:
    """The record then names the new topic id and the live one, nothing of the old id."""

    async def scenario() -> None:
        broker = await consumed_then_deleted()
        old = broker.topic_id("gone") if "gone" in broker.cluster.topics else None
        assert old is None
        broker.cluster.create_topic("gone", 2, 1)
        group = group_coordinator(broker.runtime).registry.get("shares")
        assert isinstance(group, ShareGroup)
        epoch = group.members[MEMBER].member_epoch
        for _ in range(3):
            epoch = (await broker.heartbeat(epoch)).member_epoch
        written = broker.state_partitions("shares")[-1]
        assert written is not None and not written.initializing
        assert set(written.initialized) == {info(broker, "live"), info(broker, "gone")}
        assert set(broker.initialized("shares")) == {
            broker.topic_id("live"),
            broker.topic_id("gone"),
        }

    asyncio.run(scenario())


def test_an_initialization_done_after_the_deletion_records_nothing() -> None:
    async def scenario() -> None:
        broker = Broker()
        broker.cluster.create_topic("live", 2, 1)
        broker.cluster.create_topic("gone", 2, 1)
        await broker.join()
        late = broker.cluster.create_topic("late", 1, 1).topic_id
        await broker.delete_topic("late")
        service = group_coordinator(broker.runtime)
        await service.apply([InitializePartitions("shares", 1, ((late, 0),))])
        assert late not in broker.initialized("shares")
        summary = await share_persister(broker.runtime).read_summary(
            SharePartitionKey("shares", late, 0), -1
        )
        assert summary.state is None or summary.state.start_offset == -1

    asyncio.run(scenario())
