"""A share consumer with ``fetch.max.bytes`` 0 gets no records and acquires none, as against Kafka
4.4.0 (confluent-kafka's ShareConsumer, a 3-broker kemu in the test's process).

Where it came from: a difference from Kafka 4.4.0 found with librdkafka-based clients (issue 15)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    Producer,
    ShareConsumer,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
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


def test_share_consumer_with_fetch_max_bytes_zero_gets_nothing(kemu: InProcessKemu) -> None:
    topic, group = unique("share-zero"), unique("share-zero-group")
    create_topic(kemu.bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for index in range(5):
        producer.produce(topic, value=b"v%d" % index, partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    config = {"bootstrap.servers": kemu.bootstrap, "group.id": group}
    starved = ShareConsumer({**config, "fetch.max.bytes": 0})
    fed = ShareConsumer(config)
    try:
        starved.subscribe([topic])
        got = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            got += [m for m in starved.poll(0.2) if m.error() is None]
        assert got == []
        # nothing was acquired (acquired records would stay locked for 30 s): another
        # consumer of the group gets all five at once
        fed.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 5 and time.monotonic() < deadline:
            got += [m for m in fed.poll(0.2) if m.error() is None]
        assert sorted(m.offset() for m in got) == [0, 1, 2, 3, 4]
    finally:
        fed.close()
        starved.close()
