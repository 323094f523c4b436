"""confluent-kafka's ShareConsumer (librdkafka 2.16: ShareGroupHeartbeat, ShareFetch and
ShareAcknowledge v1) against a 3-broker kemu: share groups as queues.

Every record produced is delivered exactly once across the group's consumers and, once
acknowledged, never again; explicit RELEASE redelivers with a higher delivery count, REJECT
never redelivers; records a consumer held when it closed without acknowledging go to the next
consumer.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

PARTITIONS = 3
TIMEOUT = 30.0


@pytest.fixture
def kemu(kemu_inprocess: InProcessKemu) -> InProcessKemu:
    return kemu_inprocess


def setup_queue(kemu: InProcessKemu, records: int) -> tuple[str, str]:
    """A topic with ``records`` records spread over its partitions, and a share group that
    starts at the earliest offset."""
    topic, group = f"q-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(TIMEOUT)
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset",
                "earliest",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for index in range(records):
        producer.produce(topic, value=b"v%d" % index, partition=index % PARTITIONS)
    assert producer.flush(TIMEOUT) == 0
    return topic, group


def consumer(kemu: InProcessKemu, group: str, topic: str, **extra: str) -> ShareConsumer:
    share = ShareConsumer({"bootstrap.servers": kemu.bootstrap, "group.id": group, **extra})
    share.subscribe([topic])
    return share


def poll_until(
    consumers: list[ShareConsumer],
    wanted: int,
    *,
    timeout: float = TIMEOUT,
    decide: Callable[[Message], int] | None = None,
) -> list[Message]:
    """Poll until ``wanted`` records came; in explicit mode ``decide`` gives each one's
    acknowledge type (acknowledged at once, as explicit mode requires before the next poll)."""
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < wanted and time.monotonic() < deadline:
        for share in consumers:
            for message in share.poll(0.2):
                assert message.error() is None, message.error()
                got.append(message)
                if decide is not None:
                    share.acknowledge(message, decide(message))
    return got


def keys(messages: list[Message]) -> list[tuple[int, int]]:
    return sorted((m.partition(), m.offset()) for m in messages)


def everything(records: int) -> list[tuple[int, int]]:
    per = [0] * PARTITIONS
    out = []
    for index in range(records):
        partition = index % PARTITIONS
        out.append((partition, per[partition]))
        per[partition] += 1
    return sorted(out)


@pytest.fixture
def closing() -> Iterator[list[ShareConsumer]]:
    opened: list[ShareConsumer] = []
    yield opened
    for share in opened:
        with contextlib.suppress(Exception):  # already closed, or the broker is gone
            share.close()


def test_a_share_consumer_gets_every_record_once(
    kemu: InProcessKemu, closing: list[ShareConsumer]
) -> None:
    topic, group = setup_queue(kemu, 60)
    share = consumer(kemu, group, topic)
    closing.append(share)
    got = poll_until([share], 60)
    assert keys(got) == everything(60)
    assert {m.value() for m in got} == {b"v%d" % i for i in range(60)}
    assert all(m.delivery_count() == 1 for m in got)
    # implicit mode accepts the last poll's records on commit (librdkafka's close does not)
    results = share.commit_sync(TIMEOUT)
    assert all(error is None for error in results.values()), results
    share.close()
    closing.remove(share)
    # acknowledged: nothing is delivered again
    again = consumer(kemu, group, topic)
    closing.append(again)
    assert poll_until([again], 1, timeout=3) == []


def test_consumers_of_one_group_share_the_records_without_duplicates(
    kemu: InProcessKemu, closing: list[ShareConsumer]
) -> None:
    topic, group = setup_queue(kemu, 0)
    first = consumer(kemu, group, topic)
    second = consumer(kemu, group, topic)
    closing.extend([first, second])
    poll_until([first, second], 1, timeout=2)  # both join before records arrive
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for index in range(300):
        producer.produce(topic, value=b"v%d" % index, partition=index % PARTITIONS)
        if index % 30 == 0:
            producer.flush(TIMEOUT)
    assert producer.flush(TIMEOUT) == 0
    got = poll_until([first, second], 300)
    assert keys(got) == everything(300)  # every record, none twice


def test_explicit_release_redelivers_and_reject_does_not(
    kemu: InProcessKemu, closing: list[ShareConsumer]
) -> None:
    topic, group = setup_queue(kemu, 9)
    share = consumer(kemu, group, topic, **{"share.acknowledgement.mode": "explicit"})
    closing.append(share)

    def decide(message: Message) -> int:
        if message.delivery_count() == 1 and message.offset() == 0:
            return AcknowledgeType.RELEASE
        if message.delivery_count() == 1 and message.offset() == 1:
            return AcknowledgeType.REJECT
        return AcknowledgeType.ACCEPT

    # each partition's offset 0 comes twice (released once), everything else once
    got = poll_until([share], 9 + PARTITIONS, decide=decide)
    assert keys([m for m in got if m.delivery_count() == 1]) == everything(9)
    assert keys([m for m in got if m.delivery_count() == 2]) == [(p, 0) for p in range(PARTITIONS)]
    results = share.commit_sync(TIMEOUT)
    assert all(error is None for error in results.values()), results
    assert poll_until([share], 1, timeout=3, decide=decide) == []


def test_records_held_by_a_consumer_that_closes_go_to_the_next(
    kemu: InProcessKemu, closing: list[ShareConsumer]
) -> None:
    topic, group = setup_queue(kemu, 12)
    leaving = consumer(kemu, group, topic, **{"share.acknowledgement.mode": "explicit"})
    closing.append(leaving)
    held: list[Message] = []
    deadline = time.monotonic() + TIMEOUT
    while not held and time.monotonic() < deadline:
        held = list(leaving.poll(0.2))
    assert held
    leaving.close()  # without acknowledging: its records must not stay locked
    closing.remove(leaving)
    successor = consumer(kemu, group, topic)
    closing.append(successor)
    got = poll_until([successor], 12)
    assert keys(got) == everything(12)
