"""``--clock virtual`` moves log retention too: records older than ``retention.ms`` of virtual
time are deleted by the next retention check of virtual time, during ``advance``, and a
consumer's earliest offset moves past them (the last batch stays, as Kafka keeps the active
segment)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

TIMEOUT = 30.0


def test_retention_follows_the_virtual_clock(kemu_inprocess_factory: type[InProcessKemu]) -> None:
    kemu = kemu_inprocess_factory(brokers=1, clock="virtual").start()
    topic = f"r-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    created = admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "3600000"})])
    created[topic].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 0})
    for index in range(3):
        producer.produce(topic, b"v%d" % index, partition=0)
        assert producer.flush(TIMEOUT) == 0  # one batch each
    consumer = Consumer({"bootstrap.servers": kemu.bootstrap, "group.id": "r"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT) == (0, 3)
        kemu.control.advance("59m")
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT) == (0, 3)
        kemu.control.advance("2h")
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT) == (2, 3)
    finally:
        consumer.close()
