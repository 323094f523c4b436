"""What ``kemu serve`` starts with when given nothing: the values of Kafka's shipped
``server.properties`` where they differ from Kafka's code defaults, reported as a Kafka broker
started with that file reports them. Today that is ``group.initial.rebalance.delay.ms=0``, so a new
classic group's first rebalance does not wait 3 s; ``--override`` restores Kafka's code default.
Checked with confluent-kafka (DescribeConfigs and a classic consumer group)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from kemu.testing.plugin import KemuProcess

pytestmark = [pytest.mark.integration, pytest.mark.process]

DELAY = "group.initial.rebalance.delay.ms"
TIMEOUT = 30.0


def describe_delay(bootstrap: str) -> tuple[str, int]:
    """(value, source) as the broker reports them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1")
    entry = admin.describe_configs([resource])[resource].result(TIMEOUT)[DELAY]
    return entry.value, entry.source


def test_new_groups_rebalance_at_once_by_default(kemu_factory: type[KemuProcess]) -> None:
    kemu = kemu_factory(brokers=1).start()
    # As a Kafka broker started with its shipped server.properties reports it.
    assert describe_delay(kemu.bootstrap) == ("0", ConfigSource.STATIC_BROKER_CONFIG.value)

    # A classic group's first join under that setting: the consumer gets its assignment and
    # the record (no assertion on time; the configured delay above is what matters).
    topic = f"defaults-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    producer.produce(topic, b"first")
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": kemu.bootstrap,
            "group.id": f"g-{topic}",
            "group.protocol": "classic",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        message = None
        for _ in range(30):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.error() is None
        assert message.value() == b"first"
        assert [p.topic for p in consumer.assignment()] == [topic]
    finally:
        consumer.close()


def test_kafkas_code_default_is_one_override_away(kemu_factory: type[KemuProcess]) -> None:
    kemu = kemu_factory(brokers=1, overrides=[f"{DELAY}=3000"]).start()
    assert describe_delay(kemu.bootstrap) == ("3000", ConfigSource.STATIC_BROKER_CONFIG.value)
