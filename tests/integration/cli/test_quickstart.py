"""The first thing a user does: start kemu, produce with confluent-kafka, read it back."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kemu.testing.plugin import KemuProcess

pytestmark = [pytest.mark.integration, pytest.mark.process]


def test_produce_then_consume_back(kemu_cluster: KemuProcess) -> None:
    producer = Producer({"bootstrap.servers": kemu_cluster.bootstrap, "enable.idempotence": False})
    for i in range(10):
        producer.produce(
            "quickstart",
            key=f"k{i}".encode(),
            value=f"v{i}".encode(),
            headers=[("h", str(i).encode())],
            timestamp=1_700_000_000_000 + i,
        )
    assert producer.flush(10) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": kemu_cluster.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("quickstart", 0, 0)])
    seen = []
    deadline = time.monotonic() + 20
    while len(seen) < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error():
            continue
        seen.append(message)
    consumer.close()
    assert [m.offset() for m in seen] == list(range(10))
    assert [m.key() for m in seen] == [f"k{i}".encode() for i in range(10)]
    assert [m.value() for m in seen] == [f"v{i}".encode() for i in range(10)]
    assert [m.headers() for m in seen] == [[("h", str(i).encode())] for i in range(10)]
    assert [m.timestamp()[1] for m in seen] == [1_700_000_000_000 + i for i in range(10)]
