"""Java kafka-clients 4.4.0 across one broker's stop and start (``kemu.probe.FailoverProbe``, see
its javadoc): a transactional producer, a read_committed KIP-848 consumer group committing its
offsets and an implicit-mode share consumer keep working while the broker hosting the consumer
group's coordinator is stopped (its leaderships and coordinators move and load from the log) and
after it starts again with a preferred-leader election; nothing is lost."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kemu.client.cluster import ClusterClient
from kemu.testing.inprocess import InProcessKemu
from tests.integration.clients.test_java_clients import java_probes, run_probe  # noqa: F401  (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.java]

TIMEOUT = 30.0
GROUP_COORDINATOR = 0


async def group_coordinator(kemu: InProcessKemu, group: str) -> int:
    cluster = ClusterClient(kemu.bootstrap)
    try:
        return await cluster.coordinator(GROUP_COORDINATOR, group)
    finally:
        await cluster.close()


def test_java_clients_across_a_broker_stop_and_start(
    java_probes: Path,  # noqa: F811
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(brokers=3, with_control=True).start()
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    for topic in ("fo-data", "fo-share"):
        admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(TIMEOUT)
    resource = ConfigResource(
        ResourceType.GROUP,
        "fo-share-group",
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    stop = asyncio.run(group_coordinator(kemu, "fo-group"))

    run = run_probe(
        "FailoverProbe", kemu.bootstrap, "--control", kemu.control_url, "--stop", str(stop)
    )

    result = run.one("failover")
    assert result["consumed"] == 30 and result["shared"] == 30  # nothing lost
    assert result["consumed_twice"] == 0  # offsets committed after every poll survive the move
    assert result["committed_offsets"] == result["end_offsets"]
    assert run.returncode == 0
    brokers = {b["node_id"]: b for b in kemu.control.brokers()}
    assert not brokers[stop]["stopped"]
