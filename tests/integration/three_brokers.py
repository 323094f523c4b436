"""A 3-broker kemu, one per test module, and what its tests share: unique names, topic creation
with confluent-kafka's admin client, raw requests to a leader.

Each module declares its own module-scoped fixture on ``three_brokers`` (kemu started from the
CLI) or ``three_brokers_in_process`` (kemu in the test's process, kemu/testing/inprocess.py), so
each starts its own kemu."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
)

from kemu.testing.inprocess import InProcessKemu
from kemu.testing.plugin import KemuProcess
from kemu.testing.wire_client import build, send_once

TIMEOUT_S = 30.0


OVERRIDES = [
    # KIP-848 groups reconcile one heartbeat at a time: beat often so the tests are quick.
    "group.consumer.heartbeat.interval.ms=500",
    "group.consumer.min.heartbeat.interval.ms=500",
]


def three_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuProcess]:
    """The body of a module's ``kemu`` fixture: ``yield from three_brokers(tmp_path_factory)``."""
    log_path = tmp_path_factory.mktemp("three-brokers") / "kemu.log"
    process = KemuProcess(brokers=3, log_path=log_path, overrides=OVERRIDES).start()
    try:
        yield process
    finally:
        process.stop()


def three_brokers_in_process() -> Iterator[InProcessKemu]:
    """As ``three_brokers``, with kemu in the test's process (a fraction of a second to start)."""
    kemu = InProcessKemu(brokers=3, overrides=OVERRIDES).start()
    try:
        yield kemu
    finally:
        kemu.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(TIMEOUT_S)


def call(address: str, api_key: int, version: int, **fields: Any) -> Any:
    return send_once(address, build(api_key, version, **fields), TIMEOUT_S, client_id="parity")


def leader_address(kemu: KemuProcess | InProcessKemu, topic: str, partition: int = 0) -> str:
    metadata = AdminClient({"bootstrap.servers": kemu.bootstrap}).list_topics(topic, TIMEOUT_S)
    leader = metadata.topics[topic].partitions[partition].leader
    broker = metadata.brokers[leader]
    return f"{broker.host}:{broker.port}"
