"""A deleted topic in the groups' admin answers, as Kafka 4.4.0 gives them
(tests/integration/groups/test_deleted_topic_admin_kafka.py compares): ConsumerGroupDescribe and
ShareGroupDescribe leave the topic out of the assignments they list, and every group's committed
offsets of it are deleted with it (durably: a restart, or the topic created again under its
name, finds none)."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path
from typing import Any

from kemu.coordinator.group.service import group_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.testing.harness import HandlerHarness
from tests.unit.broker.handlers.test_group_handlers import SERVE_ASSIGNMENT_INTERVALS

OFFSET_COMMIT, OFFSET_FETCH, DELETE_TOPICS = 8, 9, 20
CONSUMER_HEARTBEAT, CONSUMER_DESCRIBE, SHARE_HEARTBEAT, SHARE_DESCRIBE = 68, 69, 76, 77
ZERO_UUID = uuid.UUID(int=0)

Shown = dict[str, set[int]]  # topic name -> partitions


class Broker(HandlerHarness):
    """A kemu model with its share coordinator (DeleteTopics deletes share state through it)."""

    def __init__(self, data_dir: Path | None = None) -> None:
        super().__init__(config=SERVE_ASSIGNMENT_INTERVALS, data_dir=data_dir)

    async def share_heartbeat(self, member_id: str, epoch: int) -> Any:
        answer = await self.send(
            SHARE_HEARTBEAT,
            1,
            group_id="shares",
            member_id=member_id,
            member_epoch=epoch,
            rack_id=None,
            subscribed_topic_names=("live", "deleted") if epoch == 0 else None,
        )
        assert answer.error_code == ErrorCode.none, answer
        # the share state the heartbeat asked for is initialized before the next one
        await group_coordinator(self.runtime).background_done()
        return answer


def make_broker(data_dir: Path | None = None) -> Broker:
    broker = Broker(data_dir)
    broker.cluster.create_topic("live", 2, 1)
    broker.cluster.create_topic("deleted", 2, 1)
    return broker


async def delete_topic(broker: Broker, name: str) -> None:
    state = broker.nested(DELETE_TOPICS, 6, "DeleteTopicState", name=name, topic_id=ZERO_UUID)
    answer = await broker.send_body(broker.request(DELETE_TOPICS, 6, topics=(state,)))
    assert [r.error_code for r in answer.responses] == [ErrorCode.none]


def shown(assignment: Any) -> Shown:
    return {t.topic_name: set(t.partitions) for t in assignment.topic_partitions}


async def consumer_heartbeat(broker: Broker, member_id: str, epoch: int) -> Any:
    answer = await broker.send_body(
        broker.request(
            CONSUMER_HEARTBEAT,
            1,
            group_id="consumers",
            member_id=member_id,
            member_epoch=epoch,
            instance_id=None,
            rack_id=None,
            rebalance_timeout=datetime.timedelta(seconds=30),
            subscribed_topic_names=("live", "deleted") if epoch == 0 else None,
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=() if epoch == 0 else None,
        )
    )
    assert answer.error_code == ErrorCode.none, answer
    return answer


async def test_consumer_group_describe_leaves_a_deleted_topic_out() -> None:
    broker = make_broker()
    member_id = str(uuid.uuid4())
    joined = await consumer_heartbeat(broker, member_id, 0)
    deleted_id = broker.cluster.topics["deleted"].topic_id
    assert deleted_id in {t.topic_id for t in joined.assignment.topic_partitions}
    await delete_topic(broker, "deleted")

    answer = await broker.send_body(
        broker.request(
            CONSUMER_DESCRIBE, 1, group_ids=("consumers",), include_authorized_operations=False
        )
    )
    (member,) = answer.groups[0].members
    assert shown(member.assignment) == shown(member.target_assignment) == {"live": {0, 1}}


async def test_share_group_describe_leaves_a_deleted_topic_out() -> None:
    broker = make_broker()
    member_id = str(uuid.uuid4())
    first = await broker.share_heartbeat(member_id, 0)
    joined = await broker.share_heartbeat(member_id, first.member_epoch)
    deleted_id = broker.cluster.topics["deleted"].topic_id
    assert deleted_id in {t.topic_id for t in joined.assignment.topic_partitions}
    await delete_topic(broker, "deleted")

    answer = await broker.send_body(
        broker.request(
            SHARE_DESCRIBE, 1, group_ids=("shares",), include_authorized_operations=False
        )
    )
    (member,) = answer.groups[0].members
    assert shown(member.assignment) == {"live": {0, 1}}


async def commit(broker: Broker, group: str) -> None:
    """Offset 5 for both partitions of both topics, as a group of assign()-only consumers."""
    topics = tuple(
        broker.nested(
            OFFSET_COMMIT,
            9,
            "OffsetCommitRequestTopic",
            name=topic,
            partitions=tuple(
                broker.nested(
                    OFFSET_COMMIT,
                    9,
                    "OffsetCommitRequestPartition",
                    partition_index=index,
                    committed_offset=5,
                    committed_leader_epoch=-1,
                    committed_metadata="",
                )
                for index in (0, 1)
            ),
        )
        for topic in ("live", "deleted")
    )
    answer = await broker.send_body(
        broker.request(
            OFFSET_COMMIT,
            9,
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=topics,
        )
    )
    assert {p.error_code for t in answer.topics for p in t.partitions} == {ErrorCode.none}


async def fetched(broker: Broker, group: str, named: bool) -> dict[tuple[str, int], int]:
    """OffsetFetch v9 of all the group's offsets, or of both topics by name: per partition."""
    topics = (
        tuple(
            broker.nested(
                OFFSET_FETCH, 9, "OffsetFetchRequestTopics", name=t, partition_indexes=(0, 1)
            )
            for t in ("live", "deleted")
        )
        if named
        else None
    )
    request = broker.nested(
        OFFSET_FETCH,
        9,
        "OffsetFetchRequestGroup",
        group_id=group,
        member_id=None,
        member_epoch=-1,
        topics=topics,
    )
    answer = await broker.send_body(
        broker.request(OFFSET_FETCH, 9, groups=(request,), require_stable=False)
    )
    (found,) = answer.groups
    assert found.error_code == ErrorCode.none
    assert {p.error_code for t in found.topics for p in t.partitions} <= {ErrorCode.none}
    return {
        (t.name, p.partition_index): p.committed_offset for t in found.topics for p in t.partitions
    }


LIVE_AT_FIVE = {("live", 0): 5, ("live", 1): 5}
DELETED_UNKNOWN = {("deleted", 0): -1, ("deleted", 1): -1}


async def test_every_groups_offsets_of_a_deleted_topic_are_deleted_with_it() -> None:
    broker = make_broker()
    for group in ("first", "second"):
        await commit(broker, group)
    await delete_topic(broker, "deleted")

    for group in ("first", "second"):
        assert await fetched(broker, group, named=False) == LIVE_AT_FIVE
        assert await fetched(broker, group, named=True) == LIVE_AT_FIVE | DELETED_UNKNOWN


async def test_a_deleted_topics_offsets_stay_deleted_after_a_restart(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    await commit(broker, "group")
    await delete_topic(broker, "deleted")

    broker.restart()
    assert await fetched(broker, "group", named=False) == LIVE_AT_FIVE


async def test_a_topic_created_again_under_a_deleted_name_has_no_offsets() -> None:
    broker = make_broker()
    await commit(broker, "group")
    await delete_topic(broker, "deleted")
    broker.cluster.create_topic("deleted", 2, 1)

    assert await fetched(broker, "group", named=True) == LIVE_AT_FIVE | DELETED_UNKNOWN


async def test_deleting_a_topic_no_group_committed_for_writes_nothing() -> None:
    broker = make_broker()
    await commit(broker, "group")
    broker.cluster.create_topic("unused", 1, 1)
    await delete_topic(broker, "unused")

    assert await fetched(broker, "group", named=False) == LIVE_AT_FIVE | {
        ("deleted", 0): 5,
        ("deleted", 1): 5,
    }
