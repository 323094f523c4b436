"""``controller_mutation_rate`` on the wire, on a virtual clock: CreateTopics, CreatePartitions and
DeleteTopics charge each topic its partitions; strict versions refuse topics met with the
client's token bucket below zero (THROTTLING_QUOTA_EXCEEDED), older versions accept them; the
answer carries the throttle time and the connection reads nothing more until it has passed.

Quota 2 partitions/s with the default 11 windows of 1 s: a full bucket holds 22 partitions.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest

from kemu.cluster.clock import VirtualClock
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.test_throttling import set_quota, settle, setup, throttle_ms

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
START_MS = 1_000_000  # the bucket starts empty at time 0: full again by now
TIMEOUT = datetime.timedelta(seconds=30)


def create_topics(correlation_id: int, version: int, names: list[str], partitions: int) -> bytes:
    module = wire.request_module(CREATE_TOPICS, version)
    topics = tuple(
        wire.build(
            module.CreatableTopic, name=name, num_partitions=partitions, replication_factor=1
        )
        for name in names
    )
    body = wire.build(
        wire.request_schema(CREATE_TOPICS, version),
        topics=topics,
        timeout=TIMEOUT,
        validate_only=False,
    )
    return wire.encode_request_frame(body, correlation_id, client_id="admin")


def create_partitions(correlation_id: int, version: int, counts: dict[str, int]) -> bytes:
    module = wire.request_module(CREATE_PARTITIONS, version)
    topics = tuple(
        wire.build(module.CreatePartitionsTopic, name=name, count=count, assignments=None)
        for name, count in counts.items()
    )
    body = wire.build(
        wire.request_schema(CREATE_PARTITIONS, version),
        topics=topics,
        timeout=TIMEOUT,
        validate_only=False,
    )
    return wire.encode_request_frame(body, correlation_id, client_id="admin")


def delete_topics(correlation_id: int, version: int, names: list[str]) -> bytes:
    schema = wire.request_schema(DELETE_TOPICS, version)
    if version >= 6:
        module = wire.request_module(DELETE_TOPICS, version)
        states = tuple(
            wire.build(module.DeleteTopicState, name=name, topic_id=uuid.UUID(int=0))
            for name in names
        )
        body = wire.build(schema, topics=states, timeout=TIMEOUT)
    else:
        body = wire.build(schema, topic_names=tuple(names), timeout=TIMEOUT)
    return wire.encode_request_frame(body, correlation_id, client_id="admin")


def answer(frame: bytes, api_key: int, version: int) -> Any:
    return wire.decode_response(api_key, version, frame)[1]


@pytest.mark.asyncio
async def test_strict_create_topics_refuses_the_excess_and_mutes() -> None:
    clock = VirtualClock(start_ms=START_MS)
    runtime, connection, transport = setup(clock)
    set_quota(runtime, "controller_mutation_rate", 2.0, **{"client-id": "admin"})
    names = [f"burst-{i}" for i in range(10)]
    connection.data_received(create_topics(1, 7, names, 3))
    await settle()
    connection.data_received(create_topics(2, 7, ["after-the-mute"], 1))
    await settle()
    answers = transport.answers()
    assert len(answers) == 1  # the next request waits, unread, while the client is muted
    created = answer(answers[0], CREATE_TOPICS, 7)
    codes = [topic.error_code for topic in created.topics]
    # 22 tokens: the 8th topic still finds the bucket at 1 (not below zero) and takes 3
    assert codes == [ErrorCode.none] * 8 + [ErrorCode.throttling_quota_exceeded] * 2
    assert created.topics[8].error_message == "The throttling quota has been exceeded."
    assert throttle_ms(created) == 1_000  # -2 tokens at 2 per second
    assert sorted(runtime.cluster.topics) == sorted([*names[:8], "t"])
    assert not transport.reading
    clock.advance(999)
    await settle()
    assert len(transport.answers()) == 1
    clock.advance(1)
    await settle()
    later = answer(transport.answers()[1], CREATE_TOPICS, 7)
    assert later.topics[0].error_code == ErrorCode.none  # the bucket is back at 0
    assert throttle_ms(later) == 0  # now at -1: strict throttles only when it refuses


@pytest.mark.asyncio
async def test_permissive_create_topics_accepts_everything_and_throttles() -> None:
    clock = VirtualClock(start_ms=START_MS)
    runtime, connection, transport = setup(clock)
    set_quota(runtime, "controller_mutation_rate", 2.0, user=None)
    connection.data_received(create_topics(1, 5, [f"old-{i}" for i in range(10)], 3))
    await settle()
    created = answer(transport.answers()[0], CREATE_TOPICS, 5)
    assert {topic.error_code for topic in created.topics} == {ErrorCode.none}
    assert throttle_ms(created) == 4_000  # 22 - 30 = -8 at 2 per second
    assert not transport.reading


@pytest.mark.asyncio
async def test_create_partitions_and_delete_topics_are_charged() -> None:
    clock = VirtualClock(start_ms=START_MS)
    runtime, connection, transport = setup(clock)
    for name in ("a", "b", "c"):
        runtime.cluster.create_topic(name, 1, 1)
    set_quota(runtime, "controller_mutation_rate", 2.0, **{"client-id": "admin"})
    connection.data_received(create_partitions(1, 3, {"a": 21, "b": 5, "c": 2}))
    await settle()
    grown = answer(transport.answers()[0], CREATE_PARTITIONS, 3)
    # 20 new partitions leave 2 tokens; 4 more take the bucket to -2; the third is refused
    assert [r.error_code for r in grown.results] == [
        ErrorCode.none,
        ErrorCode.none,
        ErrorCode.throttling_quota_exceeded,
    ]
    assert [len(runtime.cluster.topics[n].partitions) for n in "abc"] == [21, 5, 1]
    assert throttle_ms(grown) == 1_000
    clock.advance(1_000)
    connection.data_received(delete_topics(2, 6, ["a", "b"]))
    await settle()
    deleted = answer(transport.answers()[1], DELETE_TOPICS, 6)
    assert [r.error_code for r in deleted.responses] == [
        ErrorCode.none,
        ErrorCode.throttling_quota_exceeded,
    ]
    assert sorted(runtime.cluster.topics) == ["b", "c", "t"]
    assert throttle_ms(deleted) == 10_500  # 0 - 21 partitions at 2 per second
    clock.advance(10_500)
    connection.data_received(delete_topics(3, 4, ["b", "c"]))  # v4: permissive
    await settle()
    old = answer(transport.answers()[2], DELETE_TOPICS, 4)
    assert {r.error_code for r in old.responses} == {ErrorCode.none}
    assert sorted(runtime.cluster.topics) == ["t"]
    assert throttle_ms(old) == 3_000  # 0 - 6


@pytest.mark.asyncio
async def test_no_mutation_quota_no_throttle() -> None:
    clock = VirtualClock(start_ms=START_MS)
    runtime, connection, transport = setup(clock)
    set_quota(runtime, "controller_mutation_rate", 2.0, **{"client-id": "someone-else"})
    connection.data_received(create_topics(1, 7, [f"free-{i}" for i in range(10)], 50))
    await settle()
    created = answer(transport.answers()[0], CREATE_TOPICS, 7)
    assert {topic.error_code for topic in created.topics} == {ErrorCode.none}
    assert throttle_ms(created) == 0
    assert transport.reading


def metadata(correlation_id: int, name: str) -> bytes:
    module = wire.request_module(3, 12)
    body = wire.build(
        wire.request_schema(3, 12),
        topics=(wire.build(module.MetadataRequestTopic, name=name, topic_id=uuid.UUID(int=0)),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    return wire.encode_request_frame(body, correlation_id, client_id="admin")


@pytest.mark.asyncio
async def test_metadata_auto_creation_is_charged_to_the_client() -> None:
    """Kafka's broker forwards an auto-creation as the client's CreateTopics (strict): refused,
    the topic is not created and Metadata says LEADER_NOT_AVAILABLE, without a throttle."""
    clock = VirtualClock(start_ms=START_MS)
    runtime, connection, transport = setup(clock)
    set_quota(runtime, "controller_mutation_rate", 2.0, **{"client-id": "admin"})
    connection.data_received(create_topics(1, 7, ["big"], 30))  # 22 - 30: the bucket at -8
    await settle()
    clock.advance(4_000)  # unmuted, the bucket back at 0: the next auto-creation is taken
    connection.data_received(metadata(2, "auto-1"))
    await settle()
    connection.data_received(metadata(3, "auto-2"))
    await settle()
    first, second = (answer(frame, 3, 12) for frame in transport.answers()[1:])
    assert first.topics[0].error_code == ErrorCode.none
    assert second.topics[0].error_code == ErrorCode.leader_not_available
    assert throttle_ms(second) == 0
    assert "auto-1" in runtime.cluster.topics
    assert "auto-2" not in runtime.cluster.topics
    assert transport.reading
