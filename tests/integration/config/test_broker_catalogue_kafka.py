"""kemu's broker configs against a real Kafka 4.4.0's DescribeConfigs (bench's jars; skipped
without them): every config Kafka describes, kemu describes, with the same type, read-only flag
and, where both report the default, the same value and documentation, except the differences
listed in kemu/config/broker_catalogue.py (KEMU_DIFFERENCES)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kemu.config.broker_catalogue import KEMU_DIFFERENCES
from kemu.testing.kafka import KafkaServer
from kemu.testing.plugin import KemuProcess
from tests.integration.config_describe import describe_configs

pytestmark = [pytest.mark.integration, pytest.mark.parity]
BROKER, DEFAULT_CONFIG = 4, 5
# Per-broker settings that differ by deployment, not by definition.
DEPLOYMENT = {"listeners", "advertised.listeners", "log.dirs", "node.id", "broker.id"}


def describe_broker(address: str) -> dict[str, Any]:
    return describe_configs(address, BROKER, "1", check_error=False)


@pytest.fixture(scope="module")
def kafka_configs(kafka: KafkaServer) -> dict[str, Any]:
    return describe_broker(kafka.bootstrap)


def test_kemu_describes_every_broker_config_as_kafka_does(
    kafka_configs: dict[str, Any], tmp_path: Path
) -> None:
    kemu = KemuProcess(brokers=1, log_path=tmp_path / "kemu.log", timing="kafka").start()
    try:
        mine = describe_broker(kemu.first_broker)
    finally:
        kemu.stop()
    assert len(kafka_configs) == 350
    assert set(kafka_configs) - set(mine) == set()
    compared = [n for n in kafka_configs if n not in set(KEMU_DIFFERENCES) | DEPLOYMENT]
    assert {
        n: (kafka_configs[n].config_type, mine[n].config_type)
        for n in compared
        if kafka_configs[n].config_type != mine[n].config_type
    } == {}
    assert {
        n: (kafka_configs[n].read_only, mine[n].read_only)
        for n in compared
        if kafka_configs[n].read_only != mine[n].read_only
    } == {}
    both_default = [
        n
        for n in compared
        if kafka_configs[n].config_source == DEFAULT_CONFIG
        and mine[n].config_source == DEFAULT_CONFIG
    ]
    assert len(both_default) > 300
    assert {
        n: (kafka_configs[n].value, mine[n].value)
        for n in both_default
        if kafka_configs[n].value != mine[n].value
    } == {}
    assert {
        n for n in both_default if kafka_configs[n].documentation != mine[n].documentation
    } == set()
