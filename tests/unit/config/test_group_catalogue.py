"""Group configs from Kafka's own GroupConfig (kemu/config/kafka_group_catalogue.json, made by
``python -m conformance.config_catalogues``): kemu defines every one Kafka describes, with its
type, default, floor, broker synonym and documentation, and checks values as Kafka's
GroupConfig.validate does (the messages are Kafka's). The whole DescribeConfigs answer is compared
with a real Kafka 4.4.0's in tests/integration/groups/test_group_catalogue_kafka.py."""

from __future__ import annotations

import pytest

from kemu.config.catalogues import group_catalogue
from kemu.config.definitions import BrokerConfig, InvalidConfig
from kemu.coordinator.group.config import GROUP_CONFIGS, GroupConfigStore

NEW_IN_CATALOGUE = {
    "consumer.assignment.interval.ms",
    "share.assignment.interval.ms",
    "streams.assignment.interval.ms",
    "streams.assignor.name",
    "streams.initial.rebalance.delay.ms",
    "streams.rack.aware.assignment.tags",
}


def test_every_kafka_group_config_is_defined_as_kafka_defines_it() -> None:
    kafka = group_catalogue()
    assert len(kafka) == 21
    assert set(kafka) >= NEW_IN_CATALOGUE
    # Kafka's internal group configs are settable but not described (not in the catalogue).
    assert {n for n, d in GROUP_CONFIGS.items() if not d.internal} == set(kafka)
    for name, config in kafka.items():
        mine = GROUP_CONFIGS[name]
        assert (mine.type, mine.default, mine.broker_synonym, mine.doc) == (
            config.type,
            config.default or "",
            config.broker_synonym,
            config.doc,
        ), name
        if config.minimum is not None:
            assert mine.minimum == config.minimum, name


def store(**broker: str) -> GroupConfigStore:
    return GroupConfigStore(BrokerConfig({k.replace("_", "."): v for k, v in broker.items()}))


def refusal(overrides: dict[str, str], configs: GroupConfigStore | None = None) -> str:
    with pytest.raises(InvalidConfig) as refused:
        (configs or store()).validate(overrides)
    return str(refused.value)


def test_defaults_come_from_the_broker_synonyms() -> None:
    configs = store()
    assert configs.value("g", "consumer.assignment.interval.ms") == "1000"
    assert configs.value("g", "streams.initial.rebalance.delay.ms") == "3000"
    assert configs.value("g", "streams.assignor.name") == "sticky"  # the first registered
    assert configs.value("g", "streams.rack.aware.assignment.tags") == ""
    tuned = store(group_streams_assignors="custom,sticky", group_share_assignment_interval_ms="7")
    assert tuned.value("g", "streams.assignor.name") == "custom"
    assert tuned.value("g", "share.assignment.interval.ms") == "7"


def test_assignment_intervals_must_lie_within_the_broker_bounds() -> None:
    assert refusal({"consumer.assignment.interval.ms": "20000"}) == (
        "consumer.assignment.interval.ms must be in the range 0 to 15000 inclusive."
    )
    assert refusal({"streams.assignment.interval.ms": "-1"}) == (
        "Invalid value -1 for configuration streams.assignment.interval.ms: Value must be at "
        "least 0"
    )
    store().validate({"share.assignment.interval.ms": "15000"})


def test_streams_assignor_must_be_registered_and_tags_distinct() -> None:
    assert refusal({"streams.assignor.name": "fancy"}) == (
        "streams.assignor.name 'fancy' is not a registered task assignor. Registered assignors "
        "are: [sticky]."
    )
    store().validate({"streams.assignor.name": "sticky"})
    assert refusal({"streams.rack.aware.assignment.tags": "zone, rack ,zone"}) == (
        "streams.rack.aware.assignment.tags must not contain duplicate tag keys."
    )
    store().validate({"streams.rack.aware.assignment.tags": "zone,rack"})
    assert refusal({"streams.initial.rebalance.delay.ms": "-5"}).endswith(
        "Value must be at least 0"
    )
