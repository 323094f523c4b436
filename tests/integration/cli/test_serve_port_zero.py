"""``kemu serve --port 0``: the OS picks the ports, and the ready line and Metadata name them.

Before, port 0 was used as broker 1's port as is: broker 1 bound an ephemeral port but was
advertised as port 0, and brokers 2..N bound ports 1..N-1 (as root, that works). Checked with
confluent-kafka: Metadata lists every broker on the ports of the ready line, and a record
produced to each partition (leaders spread over the brokers) is read back.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.testing.plugin import KemuProcess

pytestmark = [pytest.mark.integration, pytest.mark.process]

TIMEOUT = 30.0


def test_port_zero_picks_a_block_of_free_ports(kemu_factory: type[KemuProcess]) -> None:
    # The plugin passes --port itself (a block it found free); the later --port 0 wins.
    kemu = kemu_factory(brokers=3, port=1, extra_args=["--port", "0"]).start()
    ports = [int(address.rpartition(":")[2]) for address in kemu.bootstrap.split(",")]
    assert all(port > 1024 for port in ports), kemu.bootstrap
    assert ports == [ports[0], ports[0] + 1, ports[0] + 2]

    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    metadata = admin.list_topics(timeout=TIMEOUT)
    assert sorted(broker.port for broker in metadata.brokers.values()) == ports

    topic = f"port-zero-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for partition in range(3):
        producer.produce(topic, f"p{partition}".encode(), partition=partition)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({"bootstrap.servers": kemu.bootstrap, "group.id": f"g-{topic}"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        values: set[bytes] = set()
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.add(message.value() or b"")
            if len(values) == 3:
                break
        assert values == {b"p0", b"p1", b"p2"}
    finally:
        consumer.close()
