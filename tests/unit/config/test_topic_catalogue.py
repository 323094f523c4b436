"""Topic configs against Kafka's own LogConfig (kemu/config/kafka_topic_catalogue.json, made by
``python -m conformance.config_catalogues``): kemu defines the same 37 with the same types,
defaults, ranges and broker synonyms, and describes them with Kafka's documentation. The whole
DescribeConfigs answer is compared with a real Kafka 4.4.0's in
tests/integration/config/test_topic_catalogue_kafka.py."""

from __future__ import annotations

import pytest

from kemu.config.catalogues import topic_catalogue
from kemu.config.definitions import TOPIC_CONFIGS, InvalidConfig, validate_topic_configs


def test_every_kafka_topic_config_is_defined_as_kafka_defines_it() -> None:
    kafka = topic_catalogue()
    assert len(kafka) == 37
    assert set(TOPIC_CONFIGS) == set(kafka)
    for name, config in kafka.items():
        mine = TOPIC_CONFIGS[name]
        assert (mine.type, mine.default or "", mine.broker_synonym) == (
            config.type,
            config.default or "",
            config.broker_synonym,
        ), name
        assert (mine.minimum, mine.maximum) == (config.minimum, config.maximum) or (
            config.minimum is None and config.maximum is None
        ), name


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("local.retention.ms", "-3", "Value must be at least -2"),
        ("remote.copy.lag.bytes", "-2", "Value must be at least -1"),
        ("max.decompressed.message.bytes", "2147483640", "Value must be no more than 2147483639"),
    ],
)
def test_kafkas_ranges_are_checked(name: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfig) as refused:
        validate_topic_configs({name: value})
    assert str(refused.value) == f"Invalid value {value} for configuration {name}: {message}"
