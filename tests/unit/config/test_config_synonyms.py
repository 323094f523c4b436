"""Broker properties with older synonyms in other units, as Kafka resolves and describes them.

Kafka (``KafkaConfig.logRetentionTimeMillis``, ``ConfigHelper.configSynonyms``): the first of
``log.retention.ms``, ``log.retention.minutes``, ``log.retention.hours`` that is set wins, else
``log.retention.hours``' default of 168. Described synonyms are listed by source first (dynamic
per-broker, dynamic cluster-wide, static, default), then in synonym order, and everything before
the first entry named like the property itself is dropped. So a topic's ``retention.ms`` lists
no broker synonym while only ``log.retention.hours=168`` applies (``kafka-configs --describe
--all`` prints ``retention.ms=604800000 sensitive=false synonyms={}``).
"""

from __future__ import annotations

import pytest

from kemu.cluster.config_resources import topic_config_entries
from kemu.config.definitions import BrokerConfig, ConfigSource, TopicConfig
from kemu.config.timing import profile_properties
from tests.unit.broker.handlers.test_admin_handlers import BROKER, Broker, configs_by_name

LONG_MAX = "9223372036854775807"
STATIC, DEFAULT = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG
DYNAMIC_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
TOPIC_OVERRIDE = ConfigSource.DYNAMIC_TOPIC_CONFIG


Described = tuple[str | None, ConfigSource, list[tuple[str, str | None, ConfigSource]]]


def described(
    broker: BrokerConfig, name: str, overrides: dict[str, str] | None = None
) -> Described:
    (entry,) = [e for e in topic_config_entries(broker, overrides or {}) if e.name == name]
    return entry.value, entry.source, [(s.name, s.value, s.source) for s in entry.synonyms]


@pytest.mark.parametrize(
    ("static", "retention_ms"),
    [
        ({}, "604800000"),
        ({"log.retention.hours": "24"}, "86400000"),
        ({"log.retention.minutes": "30", "log.retention.hours": "24"}, "1800000"),
        ({"log.retention.ms": "5000", "log.retention.minutes": "30"}, "5000"),
        ({"log.retention.hours": "-1"}, "-1"),  # any negative retention is unlimited
        ({"log.retention.ms": "-7"}, "-1"),
    ],
)
def test_retention_resolves_through_minutes_and_hours(
    static: dict[str, str], retention_ms: str
) -> None:
    broker = BrokerConfig(static)
    assert broker.get("log.retention.ms") == retention_ms
    assert TopicConfig(broker).get("retention.ms") == retention_ms


def test_dynamic_retention_ms_beats_static_hours() -> None:
    broker = BrokerConfig({"log.retention.hours": "24"})
    broker.dynamic["log.retention.ms"] = "7000"
    assert TopicConfig(broker).get("retention.ms") == "7000"


@pytest.mark.parametrize(
    ("static", "name", "value"),
    [
        ({}, "log.roll.ms", "604800000"),
        ({"log.roll.hours": "2"}, "log.roll.ms", "7200000"),
        ({"log.roll.ms": "900", "log.roll.hours": "2"}, "log.roll.ms", "900"),
        ({}, "log.roll.jitter.ms", "0"),
        ({"log.roll.jitter.hours": "1"}, "log.roll.jitter.ms", "3600000"),
        ({}, "log.flush.interval.ms", LONG_MAX),
        ({"log.flush.scheduler.interval.ms": "2000"}, "log.flush.interval.ms", "2000"),
        ({"log.roll.hours": "2"}, "log.roll.hours", "2"),  # a synonym read by its own name
    ],
)
def test_other_chains(static: dict[str, str], name: str, value: str) -> None:
    assert BrokerConfig(static).get(name) == value


@pytest.mark.parametrize("name", ["retention.ms", "segment.ms", "segment.jitter.ms", "flush.ms"])
def test_only_an_older_synonyms_default_applies_so_none_is_listed(name: str) -> None:
    value, source, synonyms = described(BrokerConfig(), name)
    assert value == {"segment.jitter.ms": "0", "flush.ms": LONG_MAX}.get(name, "604800000")
    assert (source, synonyms) == (DEFAULT, [])


def test_topic_override_is_the_only_retention_synonym_by_default() -> None:
    assert described(BrokerConfig(), "retention.ms", {"retention.ms": "123"}) == (
        "123",
        TOPIC_OVERRIDE,
        [("retention.ms", "123", TOPIC_OVERRIDE)],
    )


def test_static_hours_alone_is_dropped_with_the_default() -> None:
    value, source, synonyms = described(BrokerConfig({"log.retention.hours": "24"}), "retention.ms")
    assert (value, source, synonyms) == ("86400000", DEFAULT, [])


def test_retention_chain_by_source_then_synonym_order() -> None:
    broker = BrokerConfig({"log.retention.ms": "5000", "log.retention.hours": "24"})
    assert described(broker, "retention.ms") == (
        "5000",
        STATIC,
        [
            ("log.retention.ms", "5000", STATIC),
            ("log.retention.hours", "24", STATIC),
            ("log.retention.hours", "168", DEFAULT),
        ],
    )
    broker.dynamic["log.retention.ms"] = "7000"
    assert described(broker, "retention.ms", {"retention.ms": "1"})[2] == [
        ("retention.ms", "1", TOPIC_OVERRIDE),
        ("log.retention.ms", "7000", DYNAMIC_DEFAULT),
        ("log.retention.ms", "5000", STATIC),
        ("log.retention.hours", "24", STATIC),
        ("log.retention.hours", "168", DEFAULT),
    ]


def test_single_synonyms_are_unchanged() -> None:
    assert described(BrokerConfig(), "retention.bytes") == (
        "-1",
        DEFAULT,
        [("log.retention.bytes", "-1", DEFAULT)],
    )


def test_broker_resource_lists_each_property_from_its_own_name_on() -> None:
    """Kafka's DynamicBrokerReconfigurationTest: with static log.retention.ms and
    log.retention.hours, log.retention.ms lists [ms static, hours static, hours default] and
    log.retention.hours [hours static, hours default]."""
    broker = Broker(**{"log.retention.ms": "1680000000", "log.retention.hours": "168"})
    configs = configs_by_name(broker.describe_configs(BROKER, "1"))

    def synonyms(name: str) -> list[tuple[str, ConfigSource]]:
        return [(s.name, s.source) for s in configs[name].synonyms]

    assert synonyms("log.retention.ms") == [
        ("log.retention.ms", STATIC),
        ("log.retention.hours", STATIC),
        ("log.retention.hours", DEFAULT),
    ]
    assert synonyms("log.retention.hours") == [
        ("log.retention.hours", STATIC),
        ("log.retention.hours", DEFAULT),
    ]
    assert synonyms("log.roll.hours") == [("log.roll.hours", DEFAULT)]
    assert configs["log.retention.hours"].read_only
    assert not configs["log.retention.ms"].read_only


def test_broker_resource_retention_ms_has_no_default() -> None:
    configs = configs_by_name(Broker().describe_configs(BROKER, "1"))
    retention = configs["log.retention.ms"]
    assert (retention.value, retention.config_source, retention.synonyms) == (None, DEFAULT, ())
    hours = configs["log.retention.hours"]
    assert (hours.value, [(s.name, s.source) for s in hours.synonyms]) == (
        "168",
        [("log.retention.hours", DEFAULT)],
    )


def test_kemu_serves_defaults_are_static_over_kafkas_code_default() -> None:
    """kemu serve starts from its timing profile's values: reported as a Kafka broker started with
    them in its server.properties reports them, static over the code default."""
    broker = Broker(**BrokerConfig.load(None, [], base=profile_properties("fast")).static)
    configs = configs_by_name(broker.describe_configs(BROKER, "1"))
    entry = configs["group.initial.rebalance.delay.ms"]
    assert (entry.value, entry.config_source) == ("0", STATIC)
    assert [(s.value, s.source) for s in entry.synonyms] == [("0", STATIC), ("3000", DEFAULT)]
    restored = BrokerConfig.load(
        None, ["group.initial.rebalance.delay.ms=3000"], base=profile_properties("fast")
    )
    assert restored.get_int("group.initial.rebalance.delay.ms") == 3000
