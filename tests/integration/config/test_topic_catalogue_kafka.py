"""kemu's topic configs against a real Kafka 4.4.0's DescribeConfigs (bench's jars; skipped
without them): a topic created with no configs of its own is described with the same 37 names,
types, values, sources, synonyms and documentation, as generated into
kemu/config/kafka_topic_catalogue.json by ``python -m conformance.config_catalogues``."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from kemu.protocol import wire
from kemu.testing.kafka import KafkaServer
from kemu.testing.plugin import KemuProcess
from tests.integration.config_describe import call, describe_configs, summary

pytestmark = [pytest.mark.integration, pytest.mark.parity]
CREATE_TOPICS, TOPIC = 19, 2
NAME = "catalogue-topic"


def describe_new_topic(address: str) -> dict[str, Any]:
    create = wire.request_module(CREATE_TOPICS, 7)
    topic = wire.build(
        create.CreatableTopic, name=NAME, num_partitions=1, replication_factor=1, configs=()
    )
    created = call(
        address,
        CREATE_TOPICS,
        7,
        wire.build(
            wire.request_schema(CREATE_TOPICS, 7),
            topics=(topic,),
            timeout=datetime.timedelta(seconds=30),
            validate_only=False,
        ),
    )
    assert created.topics[0].error_code == 0, created.topics[0].error_message
    return describe_configs(address, TOPIC, NAME)


@pytest.fixture(scope="module")
def kafka_topic(kafka: KafkaServer) -> dict[str, Any]:
    return describe_new_topic(kafka.bootstrap)


def test_kemu_describes_every_topic_config_as_kafka_does(
    kafka_topic: dict[str, Any], tmp_path: Path
) -> None:
    kemu = KemuProcess(brokers=1, log_path=tmp_path / "kemu.log", timing="kafka").start()
    try:
        mine = describe_new_topic(kemu.first_broker)
    finally:
        kemu.stop()
    assert len(kafka_topic) == 37
    assert sorted(mine) == sorted(kafka_topic)
    assert {
        name: (summary(kafka_topic[name]), summary(mine[name]))
        for name in kafka_topic
        if summary(kafka_topic[name]) != summary(mine[name])
    } == {}
    assert {
        name for name in kafka_topic if kafka_topic[name].documentation != mine[name].documentation
    } == set()
