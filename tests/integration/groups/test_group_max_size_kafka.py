"""A full KIP-848 consumer group (``group.consumer.max.size``) on kemu beside a real Apache Kafka
4.4.0 (bench's jars; that side skipped without java or them), with the same hand-built
ConsumerGroupHeartbeats and the same assertions.

Kafka 4.4.0's ``consumerGroupHeartbeat`` runs ``throwIfConsumerGroupIsFull`` on every heartbeat
but a leave, joining or not, right after finding the group: a member id the group does not know
gets GROUP_MAX_SIZE_REACHED from a full group before anything finds it unknown. The check
returns at once when the heartbeat names an instance id a member holds
(``ConsumerGroup.hasStaticMember``), even one that left for now: the instance id's own checks
answer then (UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID), and a static member's replacement gets
into a full group. A leave (epoch -1 or -2) is never checked: an unknown member id leaving is
UNKNOWN_MEMBER_ID.

``group.consumer.max.size`` is a static broker property on Kafka (not a group config, not
reconfigurable), so the Kafka side is a Kafka of its own configuration, started for this module.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from kemu.protocol.errors import ErrorCode
from kemu.testing.kafka import KafkaConfig
from tests.integration.groups.consumer_wire import Broker, Partition
from tests.integration.groups.test_static_leave_kafka import (
    STATIC_LEAVE_EPOCH,
    Answer,
    Member,
    settle,
)
from tests.integration.parity import kemu_or_kafka
from tests.integration.txn.wire_parity import Server, coordinator_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

MAX_SIZE = STREAMS_MAX_SIZE = 2
# Also the Kafka of test_streams_group_max_size_kafka.py (one JVM for both modules: conftest's
# SHARED_KAFKA_MODULES), whose streams targets are computed at once.
FULL_GROUPS = KafkaConfig(
    "kafka-group-max-size",
    {
        "group.consumer.max.size": str(MAX_SIZE),
        "group.streams.max.size": str(STREAMS_MAX_SIZE),
        "group.streams.assignment.interval.ms": "0",
    },
)
INSTANCE, OTHER_INSTANCE = "instance-a", "instance-z"


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory, kafka_config=FULL_GROUPS) as chosen:
        yield chosen


@dataclass
class Full:
    """Static member A (``INSTANCE``) and dynamic member B fill a group of ``MAX_SIZE``, stable
    at ``epoch``; the answers to what came knocking (each from a member id the group does not
    know unless said), then to A's temporary leave and to a new member id taking A's place."""

    epoch: int
    held: frozenset[Partition]
    dynamic_beat: Answer
    dynamic_join: Answer
    dynamic_leave: Answer
    unknown_group_beat: Answer
    held_instance_join: Answer
    held_instance_beat: Answer
    free_instance_join: Answer
    free_instance_beat: Answer
    known_beat: Answer
    static_leave: Answer
    replacement: Answer
    after_replacement: Answer


@pytest.fixture(scope="module")
def full(server: Server) -> Full:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"full-{suffix}", f"full-{suffix}"
    broker = Broker(server)
    try:
        broker.create_topic(topic, 4)
        coordinator_ready(broker.client, 0, group)
        a = Member(broker, group, INSTANCE)
        b = Member(broker, group)
        a.join((topic,))
        b.join((topic,))
        epoch = settle(broker, group, [a, b], MAX_SIZE * 2).group_epoch
        stranger = Member(broker, group)
        taker = Member(broker, group, INSTANCE)
        newcomer = Member(broker, group, OTHER_INSTANCE)
        lost = Member(broker, f"none-{suffix}")
        found = dict(
            dynamic_beat=stranger.send(epoch),
            dynamic_join=stranger.send(0, (topic,)),
            dynamic_leave=stranger.send(-1),
            unknown_group_beat=lost.send(epoch),
            held_instance_join=taker.send(0, (topic,)),
            held_instance_beat=taker.send(epoch),
            free_instance_join=newcomer.send(0, (topic,)),
            free_instance_beat=newcomer.send(epoch),
            known_beat=b.heartbeat(),
        )
        held = a.owned
        static_leave = a.send(STATIC_LEAVE_EPOCH)
        replacement = Member(broker, group, INSTANCE).send(0, (topic,))
        return Full(
            epoch,
            held,
            **found,
            static_leave=static_leave,
            replacement=replacement,
            after_replacement=stranger.send(0, (topic,)),
        )
    finally:
        broker.close()


def test_an_unknown_member_heartbeating_finds_the_group_full(full: Full) -> None:
    """Kemu once answered UNKNOWN_MEMBER_ID: it checked the size on a join only."""
    assert full.dynamic_beat.error == ErrorCode.group_max_size_reached


def test_an_unknown_member_joining_finds_the_group_full(full: Full) -> None:
    assert full.dynamic_join.error == ErrorCode.group_max_size_reached


def test_a_leave_is_not_checked(full: Full) -> None:
    assert full.dynamic_leave.error == ErrorCode.unknown_member_id


def test_a_heartbeat_to_a_group_that_does_not_exist(full: Full) -> None:
    """Kemu once answered UNKNOWN_MEMBER_ID (``test_unknown_group_kafka.py`` has the others)."""
    assert full.unknown_group_beat.error == ErrorCode.group_id_not_found


def test_a_held_instance_id_is_spared_the_size_check(full: Full) -> None:
    """Kemu once answered GROUP_MAX_SIZE_REACHED to the join."""
    assert full.held_instance_join.error == ErrorCode.unreleased_instance_id
    assert full.held_instance_beat.error == ErrorCode.fenced_instance_id


def test_an_instance_id_nobody_holds_finds_the_group_full(full: Full) -> None:
    assert full.free_instance_join.error == ErrorCode.group_max_size_reached
    assert full.free_instance_beat.error == ErrorCode.group_max_size_reached


def test_the_members_heartbeat_on(full: Full) -> None:
    assert (full.known_beat.error, full.known_beat.epoch) == (ErrorCode.none, full.epoch)


def test_a_static_members_replacement_gets_into_the_full_group(full: Full) -> None:
    """Kemu once refused it with GROUP_MAX_SIZE_REACHED: the member at -2 counts, but its
    instance id is held."""
    assert full.static_leave.error == ErrorCode.none
    answer = full.replacement
    assert (answer.error, answer.epoch, answer.assignment) == (
        ErrorCode.none,
        full.epoch,
        full.held,
    )
    # still full: the replaced member is gone, its replacement counts
    assert full.after_replacement.error == ErrorCode.group_max_size_reached
