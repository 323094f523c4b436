"""KIP-848 consumer groups with confluent-kafka on a 3-broker kemu in the test's process, as against
Kafka 4.4.0: a second consumer with an instance id held by an active member gets
UNRELEASED_INSTANCE_ID; a static consumer closed (a temporary leave, epoch -2) and opened again
gets its own partitions back without the other member being rebalanced (compared with Kafka on
the wire in ``test_static_leave_kafka.py``); with a regex subscription the explicit topics are
assigned first, the regex's topics on a later heartbeat, after the coordinator resolved the
regex.

Where they came from: differences from Kafka 4.4.0 found with librdkafka-based clients
(issue 15)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
)
from confluent_kafka.admin import (
    AdminClient,
)

from kemu.testing.inprocess import InProcessKemu
from tests.integration.three_brokers import (
    TIMEOUT_S,
    create_topic,
    three_brokers_in_process,
    unique,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kemu() -> Iterator[InProcessKemu]:
    yield from three_brokers_in_process()


def kip848_consumer(kemu: InProcessKemu, group: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": kemu.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )


def wait_for_assignment(consumer: Consumer, deadline_s: float = TIMEOUT_S) -> list[Any]:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        consumer.poll(0.2)
        if consumer.assignment():
            return list(consumer.assignment())
    raise AssertionError("no assignment")


def fatal(error: KafkaError) -> bool:
    return bool(error.fatal()) or error.code() == KafkaError._FATAL


def test_second_static_member_with_a_held_instance_id_is_refused(kemu: InProcessKemu) -> None:
    topic, group = unique("static"), unique("static-group")
    create_topic(kemu.bootstrap, topic, partitions=2)
    first = kip848_consumer(kemu, group, **{"group.instance.id": "instance-1"})
    errors: list[KafkaError] = []
    second = kip848_consumer(
        kemu, group, **{"group.instance.id": "instance-1", "error_cb": errors.append}
    )
    try:
        first.subscribe([topic])
        assert len(wait_for_assignment(first)) == 2
        second.subscribe([topic])
        seen: list[KafkaError] = []
        deadline = time.monotonic() + TIMEOUT_S
        while not any(fatal(e) for e in seen) and time.monotonic() < deadline:
            try:
                message = second.poll(0.2)
            except KafkaException as raised:
                seen.append(raised.args[0])
                continue
            if message is not None and message.error() is not None:
                seen.append(message.error())
            seen += errors
        # librdkafka makes UNRELEASED_INSTANCE_ID on ConsumerGroupHeartbeat a fatal error
        (text,) = {e.str() for e in seen if fatal(e)}
        assert "ConsumerGroupHeartbeat fatal error" in text
        assert "The instance ID is still used by another member in the consumer group" in text
        assert not second.assignment()
        admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)
        assert [m.group_instance_id for m in described.members] == ["instance-1"]
        assert len(first.assignment()) == 2
    finally:
        second.close()
        first.close()


def test_a_static_consumer_closed_and_opened_again_gets_its_partitions_back(
    kemu: InProcessKemu,
) -> None:
    """librdkafka's close of a consumer with ``group.instance.id`` leaves with epoch -2: the
    member stays with its partitions, and the consumer opened again with the instance id (a new
    member id) takes them back; the other member is neither given nor asked for any."""
    topic, group = unique("static"), unique("static-group")
    create_topic(kemu.bootstrap, topic, partitions=4)
    static = {"group.instance.id": "instance-1"}
    first = kip848_consumer(kemu, group, **static)
    other = kip848_consumer(kemu, group)
    changes: list[tuple[str, list[int]]] = []

    other.subscribe(
        [topic],
        on_assign=lambda _, partitions: changes.append(("assign", _numbers(partitions))),
        on_revoke=lambda _, partitions: changes.append(("revoke", _numbers(partitions))),
    )
    first.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    while not (len(first.assignment()) == len(other.assignment()) == 2):
        assert time.monotonic() < deadline, (first.assignment(), other.assignment())
        first.poll(0.1)
        other.poll(0.1)
    held = _numbers(first.assignment())
    before = list(changes)
    first_id = first.memberid()
    first.close()
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)
    left = {m.member_id: m for m in described.members}[first_id]
    assert left.group_instance_id == "instance-1"
    assert _numbers(left.assignment.topic_partitions) == held
    again = kip848_consumer(kemu, group, **static)
    try:
        again.subscribe([topic])
        back = wait_for_assignment(again)
        for _ in range(5):  # a few more heartbeats of the other member
            other.poll(0.1)
        assert _numbers(back) == held
        assert again.memberid() != first_id
        assert changes == before  # the other member was not rebalanced
        described = admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)
        assert sorted(m.member_id for m in described.members) == sorted(
            [again.memberid(), other.memberid()]
        )
    finally:
        again.close()
        other.close()


def _numbers(partitions: Any) -> list[int]:
    return sorted(p.partition for p in partitions)


def test_regex_topics_are_assigned_after_the_explicit_ones(kemu: InProcessKemu) -> None:
    prefix = unique("rx")
    explicit, matched = f"{prefix}-explicit", f"{prefix}-matched"
    create_topic(kemu.bootstrap, explicit, partitions=2)
    create_topic(kemu.bootstrap, matched, partitions=2)
    consumer = kip848_consumer(kemu, unique("regex-group"))
    assigned: list[set[str]] = []  # the topics of each incremental assignment, in order
    try:
        consumer.subscribe(
            [explicit, f"^{prefix}-mat.*"],
            on_assign=lambda _, partitions: assigned.append({p.topic for p in partitions}),
        )
        deadline = time.monotonic() + TIMEOUT_S
        while len(consumer.assignment()) < 4 and time.monotonic() < deadline:
            consumer.poll(0.1)
        # As Kafka: the first assignment has the explicit topic only; the regex's topic follows
        # once the coordinator resolved the regex and bumped the group epoch.
        assert [topics for topics in assigned if topics] == [{explicit}, {matched}]
        assert len(consumer.assignment()) == 4
    finally:
        consumer.close()
