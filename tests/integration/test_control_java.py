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
from test_java_clients import java_probes, run_probe  # noqa: F401  (fixture)

from kemu.testing.plugin import KemuProcess

pytestmark = [pytest.mark.integration, pytest.mark.java]

TIMEOUT = 30.0


def test_java_clients_on_a_virtual_clock(
    java_probes: Path,  # noqa: F811
    kemu_factory: type[KemuProcess],
) -> None:
    kemu = kemu_factory(
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
