"""``kemu.debug.request.log=true`` (``kemu/broker/pipeline/trace.py``): one log line per answered
request, seen with a real client (confluent-kafka, a KIP-848 consumer reading records already
written). The lines are in the order the answers were ready, each arrived no later than it was
answered, and they show the consumer's story in order: the heartbeat that assigned its
partitions (member epoch 0 asked, every partition assigned) was answered before its first
ListOffsets and Fetch arrived. Off (the default), the log has no such line.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.testing.plugin import KemuProcess

pytestmark = pytest.mark.integration

PARTITIONS = 2
WAIT_S = 30.0  # a bound for failing, not a measurement


def read_first_record(bootstrap: str) -> str:
    """A KIP-848 consumer's client id, after it read a record already in a new topic."""
    topic = f"trace-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the topic is there
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(WAIT_S)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(PARTITIONS):
        producer.produce(topic, b"v", partition=partition)
    assert producer.flush(WAIT_S) == 0
    client_id = f"traced-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": topic,
            "group.protocol": "consumer",
            "client.id": client_id,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while True:
            assert time.monotonic() < deadline, "no record"
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                return client_id
    finally:
        consumer.close()


def request_lines(kemu: KemuProcess) -> list[dict[str, Any]]:
    assert kemu.log_path is not None
    lines = []
    for line in kemu.log_path.read_text().splitlines():
        if line.startswith("{"):
            fields = json.loads(line)
            if fields.get("event") == "request":
                lines.append(fields)
    return lines


def test_each_answered_request_is_logged_in_order_with_the_assignment(
    kemu_factory: type[KemuProcess],
) -> None:
    kemu = kemu_factory(
        brokers=1, overrides=["kemu.debug.request.log=true"], extra_args=["--json-logs"]
    ).start()
    client_id = read_first_record(kemu.bootstrap)
    kemu.stop()
    lines = request_lines(kemu)
    assert all(line["arrived"] <= line["answered"] for line in lines)
    answered = [line["answered"] for line in lines]
    assert answered == sorted(answered)  # logged as each answer is ready
    mine = [line for line in lines if line["client"] == client_id]
    assigning = next(
        line for line in mine if line["api"] == "consumer_group_heartbeat" and line.get("assigned")
    )
    assert assigning["epoch_in"] == 0 and assigning["epoch_out"] > 0
    assert assigning["assigned"] == list(range(PARTITIONS))
    assert assigning["interval_ms"] > 0
    for api in ("list_offsets", "fetch"):
        first = next(line for line in mine if line["api"] == api)
        assert first["arrived"] >= assigning["answered"], api


def test_off_by_default(kemu_factory: type[KemuProcess]) -> None:
    kemu = kemu_factory(brokers=1, extra_args=["--json-logs"]).start()
    read_first_record(kemu.bootstrap)
    kemu.stop()
    assert request_lines(kemu) == []
