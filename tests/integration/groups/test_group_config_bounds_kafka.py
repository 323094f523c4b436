"""A group config's bounds against a real Kafka 4.4.0 (bench's jars; skipped without them): the
same IncrementalAlterConfigs on a GROUP resource is accepted or refused alike, with the same
message, and an accepted value is described alike. ``share.partition.max.record.locks`` = 3000
is the case kemu once refused (its broker ceiling, ``group.share.max.partition.max.record.locks``,
had a fallback of 2000 where Kafka's default is 4000)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kemu.protocol import wire
from kemu.testing.kafka import KafkaServer
from kemu.testing.plugin import KemuProcess
from tests.integration.config_describe import call, describe_configs
from tests.integration.parity import kafka_timing_overrides

pytestmark = [pytest.mark.integration, pytest.mark.parity]
GROUP = 32
INCREMENTAL_ALTER_CONFIGS = 44
SET = 0

# (group config, value): each is set on a group of its own, validated for real.
CASES = [
    ("share.partition.max.record.locks", "3000"),
    ("share.partition.max.record.locks", "4000"),
    ("share.partition.max.record.locks", "4001"),
    ("share.partition.max.record.locks", "100"),
    ("share.partition.max.record.locks", "99"),
    ("share.record.lock.duration.ms", "14999"),
    ("share.record.lock.duration.ms", "60000"),
    ("share.record.lock.duration.ms", "60001"),
    ("share.delivery.count.limit", "10"),
    ("share.delivery.count.limit", "11"),
    ("share.delivery.count.limit", "1"),
    ("share.session.timeout.ms", "61000"),
    ("share.heartbeat.interval.ms", "16000"),
    ("consumer.session.timeout.ms", "44999"),
    ("consumer.heartbeat.interval.ms", "15000"),
    ("streams.num.standby.replicas", "2"),
    ("streams.num.standby.replicas", "3"),
    ("share.assignment.interval.ms", "15001"),
]


def set_group_config(address: str, group: str, name: str, value: str) -> tuple[int, str | None]:
    module = wire.request_module(INCREMENTAL_ALTER_CONFIGS, 1)
    config = wire.build(module.AlterableConfig, name=name, config_operation=SET, value=value)
    resource = wire.build(
        module.AlterConfigsResource, resource_type=GROUP, resource_name=group, configs=(config,)
    )
    body = wire.build(
        wire.request_schema(INCREMENTAL_ALTER_CONFIGS, 1),
        resources=(resource,),
        validate_only=False,
    )
    answer = call(address, INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0]
    return answer.error_code, answer.error_message


def answers(address: str) -> dict[tuple[str, str], Any]:
    """Per case: the error code and message, and the value then described."""
    found: dict[tuple[str, str], Any] = {}
    for index, (name, value) in enumerate(CASES):
        group = f"bounds-{index}"
        error = set_group_config(address, group, name, value)
        found[(name, value)] = (
            *error,
            described(address, group, name, value if not error[0] else None),
        )
    return found


def described(address: str, group: str, name: str, accepted: str | None) -> str:
    """The group config's described value; an accepted one once it shows (Kafka applies a group
    config through its metadata log, so a describe at once may still see the old value)."""
    for _ in range(100):
        value: str = describe_configs(address, GROUP, group)[name].value
        if accepted is None or value == accepted:
            return value
        time.sleep(0.1)
    return value


@pytest.fixture(scope="module")
def kafka_answers(kafka: KafkaServer) -> dict[Any, Any]:
    return answers(kafka.bootstrap)


def test_group_config_bounds_are_kafkas(kafka_answers: dict[Any, Any], tmp_path: Path) -> None:
    # Kafka's timers (the bounds the cases probe), with what the bench Kafka server sets of them
    kemu = KemuProcess(
        brokers=1,
        log_path=tmp_path / "kemu.log",
        timing="kafka",
        overrides=kafka_timing_overrides(),
    ).start()
    try:
        mine = answers(kemu.first_broker)
    finally:
        kemu.stop()
    assert kafka_answers[("share.partition.max.record.locks", "3000")] == (0, None, "3000")
    assert {
        case: (kafka_answers[case], mine[case])
        for case in CASES
        if kafka_answers[case] != mine[case]
    } == {}
