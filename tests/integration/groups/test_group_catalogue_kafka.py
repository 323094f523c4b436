"""kemu's group configs against a real Kafka 4.4.0's DescribeConfigs (bench's jars; skipped
without them): the same 21 names, with the same types, values, documentation and DEFAULT_CONFIG
synonyms (the broker config supplying each default), as generated into
kemu/config/kafka_group_catalogue.json by ``python -m conformance.config_catalogues``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kemu.testing.kafka import KafkaServer
from kemu.testing.plugin import KemuProcess
from tests.integration.config_describe import describe_configs, summary
from tests.integration.parity import kafka_timing_overrides

pytestmark = [pytest.mark.integration, pytest.mark.parity]
GROUP = 32


def describe_group(address: str, group: str) -> dict[str, Any]:
    return describe_configs(address, GROUP, group)


@pytest.fixture(scope="module")
def kafka_groups(kafka: KafkaServer) -> dict[str, Any]:
    return describe_group(kafka.bootstrap, "catalogue-group")


def test_kemu_describes_every_group_config_as_kafka_does(
    kafka_groups: dict[str, Any], tmp_path: Path
) -> None:
    # Kafka's timers, with what the bench Kafka server sets of them
    kemu = KemuProcess(
        brokers=1,
        log_path=tmp_path / "kemu.log",
        timing="kafka",
        overrides=kafka_timing_overrides(),
    ).start()
    try:
        mine = describe_group(kemu.first_broker, "catalogue-group")
    finally:
        kemu.stop()
    assert len(kafka_groups) == 21
    assert sorted(mine) == sorted(kafka_groups)
    assert {
        name: (summary(kafka_groups[name]), summary(mine[name]))
        for name in kafka_groups
        if summary(kafka_groups[name]) != summary(mine[name])
    } == {}
    assert {
        name
        for name in kafka_groups
        if kafka_groups[name].documentation != mine[name].documentation
    } == set()
