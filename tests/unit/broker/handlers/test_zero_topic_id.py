"""The all-zero topic id (Kafka's ``Uuid.ZERO_UUID``, which no topic has) through every handler
that names topics by id: each request is encoded and decoded as a broker decodes it (kio reads
the zero id as ``None``), and the answer is UNKNOWN_TOPIC_ID for that topic, echoing the zero
id, with nothing else refused and nothing raised."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest

from kemu.protocol.errors import ErrorCode
from kemu.testing.harness import HandlerHarness

PRODUCE, OFFSET_COMMIT, CONSUMER_HEARTBEAT, SHARE_FETCH, SHARE_ACK = 0, 8, 68, 78, 79
ZERO = uuid.UUID(int=0)
ECHOED_ZERO = (None, ZERO)  # a response's zero id decodes as None too


@pytest.fixture
def broker() -> HandlerHarness:
    broker = HandlerHarness(brokers=1, cluster_id="zero-topic-id")
    broker.cluster.create_topic("t", 1, 1)
    return broker


async def test_produce_v13_to_the_zero_topic_id(broker: HandlerHarness) -> None:
    partition = broker.nested(PRODUCE, 13, "PartitionProduceData", index=0, records=None)
    topic = broker.nested(
        PRODUCE, 13, "TopicProduceData", topic_id=ZERO, partition_data=(partition,)
    )
    response = await broker.send(
        PRODUCE,
        13,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(topic,),
    )
    [answer] = response.responses
    assert answer.topic_id in ECHOED_ZERO
    assert [p.error_code for p in answer.partition_responses] == [ErrorCode.unknown_topic_id]


async def test_offset_commit_v10_to_the_zero_topic_id(broker: HandlerHarness) -> None:
    known = broker.cluster.topics["t"].topic_id
    topics = tuple(
        broker.nested(
            OFFSET_COMMIT,
            10,
            "OffsetCommitRequestTopic",
            topic_id=topic_id,
            partitions=(
                broker.nested(
                    OFFSET_COMMIT,
                    10,
                    "OffsetCommitRequestPartition",
                    partition_index=0,
                    committed_offset=5,
                    committed_leader_epoch=-1,
                    committed_metadata="",
                ),
            ),
        )
        for topic_id in (ZERO, known)
    )
    response = await broker.send(
        OFFSET_COMMIT,
        10,
        group_id="g",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=topics,
    )
    zero, real = response.topics
    assert zero.topic_id in ECHOED_ZERO and real.topic_id == known
    assert [p.error_code for p in zero.partitions] == [ErrorCode.unknown_topic_id]
    assert [p.error_code for p in real.partitions] == [ErrorCode.none]


async def test_a_consumer_heartbeat_owning_partitions_of_the_zero_topic_id(
    broker: HandlerHarness,
) -> None:
    member_id = str(uuid.UUID(int=7))
    owned = broker.nested(CONSUMER_HEARTBEAT, 1, "TopicPartitions", topic_id=ZERO, partitions=(0,))
    epoch = 0
    for topic_partitions in ((), (owned,)):  # join, then claim a partition of no topic
        response = await broker.send(
            CONSUMER_HEARTBEAT,
            1,
            group_id="g",
            member_id=member_id,
            member_epoch=epoch,
            instance_id=None,
            rack_id=None,
            rebalance_timeout=datetime.timedelta(seconds=30),
            subscribed_topic_names=("t",),
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=topic_partitions,
        )
        assert response.error_code == ErrorCode.none
        assert response.member_epoch >= 1
        epoch = response.member_epoch


async def share_fetch(broker: HandlerHarness, version: int, epoch: int, **fields: Any) -> Any:
    return await broker.send(
        SHARE_FETCH,
        version,
        group_id="g",
        member_id="m",
        share_session_epoch=epoch,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=500,
        batch_size=500,
        **fields,
    )


@pytest.mark.parametrize("version", [1, 2])
async def test_share_fetch_and_acknowledge_of_the_zero_topic_id(
    broker: HandlerHarness, version: int
) -> None:
    fetch_partition = broker.nested(SHARE_FETCH, version, "FetchPartition", partition_index=0)
    fetch_topic = broker.nested(
        SHARE_FETCH, version, "FetchTopic", topic_id=ZERO, partitions=(fetch_partition,)
    )
    response = await share_fetch(broker, version, 0, topics=(fetch_topic,))
    assert response.error_code == ErrorCode.none
    [answer] = response.responses
    assert answer.topic_id in ECHOED_ZERO
    assert [p.error_code for p in answer.partitions] == [ErrorCode.unknown_topic_id]

    batch = broker.nested(
        SHARE_ACK,
        version,
        "AcknowledgementBatch",
        first_offset=0,
        last_offset=0,
        acknowledge_types=(1,),
    )
    ack_partition = broker.nested(
        SHARE_ACK,
        version,
        "AcknowledgePartition",
        partition_index=0,
        acknowledgement_batches=(batch,),
    )
    ack_topic = broker.nested(
        SHARE_ACK, version, "AcknowledgeTopic", topic_id=ZERO, partitions=(ack_partition,)
    )
    response = await broker.send(
        SHARE_ACK, version, group_id="g", member_id="m", share_session_epoch=1, topics=(ack_topic,)
    )
    assert response.error_code == ErrorCode.none
    [answer] = response.responses
    assert answer.topic_id in ECHOED_ZERO
    assert [p.error_code for p in answer.partitions] == [ErrorCode.unknown_topic_id]

    forgotten = broker.nested(
        SHARE_FETCH, version, "ForgottenTopic", topic_id=ZERO, partitions=(0,)
    )
    response = await share_fetch(broker, version, 2, forgotten_topics_data=(forgotten,))
    assert response.error_code == ErrorCode.none
    assert response.responses == ()  # the session no longer holds it
