"""``/metrics`` of the control API: Prometheus text (parsed back with prometheus_client's own
parser) counting requests, errors (injected ones included), bytes and latencies, and reporting
share records by state, transactions by state, connections, log start/end offsets and
consumer- and share-group lag, after real clients worked."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from prometheus_client.parser import text_string_to_metric_families

from kemu.client import Admin
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

TIMEOUT = 30.0


def samples(kemu: InProcessKemu) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(kemu.control.metrics()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_after_a_scenario(kemu_inprocess_factory: type[InProcessKemu]) -> None:
    kemu = kemu_inprocess_factory(brokers=3, with_control=True).start()
    topic, group = f"m-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    kemu.control.add_fault(api="produce", error="NOT_LEADER_OR_FOLLOWER", count=1)
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for index in range(5):
        producer.produce(topic, b"v%d" % index, partition=0)
    assert producer.flush(TIMEOUT) == 0
    transactional = Producer({"bootstrap.servers": kemu.bootstrap, "transactional.id": "m-tx"})
    transactional.init_transactions(TIMEOUT)
    transactional.begin_transaction()
    transactional.produce(topic, b"open", partition=0)
    assert transactional.flush(TIMEOUT) == 0
    consumer = ShareConsumer({"bootstrap.servers": kemu.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + TIMEOUT
    while got < 5 and time.monotonic() < deadline:
        got += len(consumer.poll(0.2))  # read_uncommitted: the open record may come too
    committer = Consumer({"bootstrap.servers": kemu.bootstrap, "group.id": "m-cg"})
    committer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    committer.close()
    try:
        found = samples(kemu)
        produced = sum(
            v
            for (name, labels), v in found.items()
            if name == "kafka_network_requests_total" and ("api", "produce") in labels
        )
        assert produced >= 3  # the injected error, the retry, the transactional batch
        assert value(found, "kafka_network_request_errors_total", api="produce",
                     error="NOT_LEADER_OR_FOLLOWER") == 1  # fmt: skip
        assert value(found, "kemu_faults_injected_total", kind="error") == 1
        assert value(found, "kafka_server_bytes_in_total") > 0
        assert value(found, "kafka_server_bytes_out_total") > 0
        assert value(found, "kafka_network_request_latency_seconds_count", api="produce") >= 2
        assert value(found, "kafka_share_records", group=group, topic=topic,
                     state="ACQUIRED") >= 5  # fmt: skip
        assert value(found, "kafka_transactions", state="Ongoing") == 1
        partition = {"topic": topic, "partition": "0"}
        assert value(found, "kafka_log_log_logstartoffset", **partition) == 0
        assert value(found, "kafka_log_log_logendoffset", **partition) == 6  # 5 + the open one
        assert value(found, "kafka_consumergroup_current_offset", consumergroup="m-cg",
                     **partition) == 2  # fmt: skip
        assert value(found, "kafka_consumergroup_lag", consumergroup="m-cg", **partition) == 4
        assert value(found, "kafka_sharegroup_start_offset", sharegroup=group, **partition) == 0
        share_lag = value(found, "kafka_sharegroup_lag", sharegroup=group, **partition)
        assert share_lag == 6  # nothing acknowledged yet
        assert share_lag == asyncio.run(described_lag(kemu.bootstrap, group, topic))
        connections = sum(v for (name, _), v in found.items() if name == "kafka_server_connections")
        assert connections >= 1
    finally:
        consumer.close()


async def described_lag(bootstrap: str, group: str, topic: str) -> int:
    """The lag DescribeShareGroupOffsets answers (what kafka-share-groups.sh shows)."""
    async with Admin(bootstrap) as admin:
        return await admin.share_group_lag(group, topic)
