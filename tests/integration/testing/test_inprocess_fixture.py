"""The in-process kemu fixture (kemu/testing/inprocess.py): real clients reach it, a test can look
inside it on its own loop, and it stops cleanly (its ports are free again)."""

from __future__ import annotations

import socket
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.testing.inprocess import InProcessKemu

TIMEOUT = 30.0


def test_a_real_client_produces_and_consumes(kemu_inprocess: InProcessKemu) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kemu_inprocess.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": kemu_inprocess.bootstrap})
    producer.produce(topic, value=b"hello", partition=1)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": kemu_inprocess.bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    try:
        message = consumer.poll(TIMEOUT)
        while message is not None and message.error():
            message = consumer.poll(TIMEOUT)
        assert message is not None and message.value() == b"hello"
    finally:
        consumer.close()
    ends = kemu_inprocess.call(
        lambda: [p.log.log_end_offset for p in kemu_inprocess.cluster.topics[topic].partitions]
    )
    assert ends == [0, 1]


def test_stop_frees_the_ports(kemu_inprocess_factory: type[InProcessKemu]) -> None:
    kemu = kemu_inprocess_factory(brokers=2).start()
    ports = [int(address.rpartition(":")[2]) for address in kemu.bootstrap.split(",")]
    kemu.stop()
    for port in ports:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", port))
