"""Java kafka-clients 4.4.0 against a kemu started with ``--clock virtual``, through
``kemu.probe.VirtualClockProbe`` (see its javadoc), which advances kemu's clock over the control
API while its clients stay connected: a 60 s acquisition lock expires and the record goes to the
other share consumer with delivery count 2; a 15 min transaction timeout aborts the open
transaction (its commit fails, read_committed sees nothing). No test waits for those times."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kemu.testing.inprocess import InProcessKemu
from tests.integration.clients.test_java_clients import java_probes, run_probe  # noqa: F401  (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.java]

TIMEOUT = 30.0


def test_java_clients_on_a_virtual_clock(
    java_probes: Path,  # noqa: F811
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(
        brokers=3,
        clock="virtual",
        overrides=[
            "group.share.record.lock.duration.ms=60000",
            "group.share.max.session.timeout.ms=600000",
            "group.share.session.timeout.ms=600000",
        ],
    ).start()
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    for topic in ("vc-share", "vc-txn"):
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    resource = ConfigResource(
        ResourceType.GROUP,
        "vc-group",
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    producer.produce("vc-share", b"held", partition=0)
    assert producer.flush(TIMEOUT) == 0

    run = run_probe("VirtualClockProbe", kemu.bootstrap, "--control", kemu.control_url)

    lock = run.one("lock_expiry")
    assert lock["first"] == [1]
    assert lock["second_before"] == [] and lock["second_after_59s"] == []
    assert lock["second_after_61s"] == [2]
    txn = run.one("txn_timeout")
    assert txn["commit"] != "committed"
    assert txn["read_committed"] == 0
    assert kemu.control.transactions() == []
    assert run.returncode == 0


def test_java_clients_retry_injected_faults(
    java_probes: Path,  # noqa: F811
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    """KafkaProducer (idempotent, acks=all) and KafkaConsumer round-trip records exactly while
    Produce answers NOT_LEADER_OR_FOLLOWER twice, a Produce is applied but its connection dropped,
    a Fetch answer is torn and a Metadata answer is an error: they retry and reconnect as they
    would against Kafka."""
    kemu = kemu_inprocess_factory(brokers=3, with_control=True).start()
    control = kemu.control
    rules = [
        control.add_fault(api="produce", error="NOT_LEADER_OR_FOLLOWER", count=2),
        control.add_fault(api="produce", kind="drop_after", count=1),
        control.add_fault(api="fetch", kind="torn", count=1),
        control.add_fault(api="metadata", error="LEADER_NOT_AVAILABLE", count=1),
    ]
    run = run_probe(
        "ProduceConsume",
        kemu.bootstrap,
        "--topic-prefix", "jf", "--partitions", "3", "--records", "40", "--codecs", "none",
    )  # fmt: skip
    line = run.one("produce_consume", codec="none")
    assert line["ok"]
    assert control.faults() == []  # every rule fired its count and went
    assert len(rules) == 4
