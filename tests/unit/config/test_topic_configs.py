"""Topic configs as Kafka 4.4.0 validates, lists and describes them, and the cluster-wide
``min.insync.replicas`` Kafka 4.4's controller writes with ELR enabled; through
``kemu.config.definitions`` and the real wire (``test_admin_handlers.Broker``).

Where they came from: differences from Kafka 4.4.0 that ``make conformance-diff`` found
(docs/conformance.md)."""

from __future__ import annotations

import pytest

from kemu.cluster.config_resources import topic_config_entries
from kemu.config.definitions import (
    TOPIC_CONFIGS,
    BrokerConfig,
    InvalidConfig,
    TopicConfig,
    validate_topic_configs,
)
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_admin_handlers import Broker


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("cleanup.policy", "-1", "String must be one of: compact, delete"),
        ("compression.lz4.level", "-1", "Value must be at least 1"),
        ("compression.lz4.level", "18", "Value must be no more than 17"),
        ("min.cleanable.dirty.ratio", "-1", "Value must be at least 0"),
        ("max.decompressed.message.bytes", "-1", "Value must be at least 1"),
        ("remote.copy.lag.ms", "-7x", "Not a number of type LONG"),
    ],
)
def test_topic_config_values_are_refused_with_kafkas_messages(
    name: str, value: str, message: str
) -> None:
    with pytest.raises(InvalidConfig) as refused:
        validate_topic_configs({name: value})
    shown = "-1.0" if name == "min.cleanable.dirty.ratio" else value
    assert str(refused.value) == f"Invalid value {shown} for configuration {name}: {message}"


def test_throttled_replica_lists_are_checked_as_kafka_does() -> None:
    name = "leader.replication.throttled.replicas"
    for good in ("", "*", "0:1", "0:1,1:2"):
        validate_topic_configs({name: good})
    with pytest.raises(InvalidConfig) as refused:
        validate_topic_configs({name: "0:1,x"})
    assert str(refused.value) == (
        f"Invalid value [0:1, x] for configuration {name}: {name} must be the literal '*' or a "
        "list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:"
        "[brokerId],..."
    )


def test_kafka_4_4_topic_configs_are_all_listed() -> None:
    assert {"max.decompressed.message.bytes", "remote.copy.lag.bytes", "remote.copy.lag.ms"} <= set(
        TOPIC_CONFIGS
    )
    assert len(TOPIC_CONFIGS) == 37  # as many as Kafka 4.4.0's CreateTopics answer lists
    config = TopicConfig(BrokerConfig())
    assert config.get("max.decompressed.message.bytes") == "2147483639"
    assert (config.get("remote.copy.lag.bytes"), config.get("remote.copy.lag.ms")) == ("-1", "0")


def test_replication_factor_refusal_and_decompressed_size_synonym_are_kafkas() -> None:
    broker = Broker()
    [refused] = broker.create("rf", replication=4).topics
    assert refused.error_message.endswith(
        "only 3 broker(s) are registered or some brokers have all their log directories cordoned."
    )
    [created] = broker.create("ok").topics
    assert created.error_code is ErrorCode.none
    entries = topic_config_entries(broker.cluster.config, {})
    [entry] = [e for e in entries if e.name == "max.decompressed.message.bytes"]
    assert [(s.name, s.value) for s in entry.synonyms] == [
        ("max.decompressed.message.bytes", "2147483639")
    ]


def test_min_insync_replicas_is_the_cluster_wide_dynamic_default_kafka_4_4_writes() -> None:
    """Kafka 4.4's controller, with ELR enabled, writes a cluster-wide min.insync.replicas (its
    static value) when it first starts, so a topic lists it from DYNAMIC_DEFAULT_BROKER_CONFIG
    with the default below it."""
    from kemu.config.definitions import ConfigSource

    for static, value in (({}, "1"), ({"min.insync.replicas": "2"}, "2")):
        broker = Broker(**static)
        broker.create("t")
        (result,) = broker.describe_configs(2, "t", ("min.insync.replicas",)).configs
        assert (result.value, result.config_source) == (
            value,
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        )
        assert [(s.value, s.source) for s in result.synonyms] == [
            (value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            *([(value, ConfigSource.STATIC_BROKER_CONFIG)] if static else []),
            ("1", ConfigSource.DEFAULT_CONFIG),
        ]


def test_elr_keeps_min_insync_replicas_cluster_wide() -> None:
    """With eligible.leader.replicas.version 1 finalized, as kemu and Kafka 4.4 do, the
    controller refuses a broker-level min.insync.replicas and the removal of the cluster-level
    one (ConfigurationControlManager), with INVALID_CONFIG; the cluster-level value may change."""
    broker = Broker()
    broker_type = 4
    (per_node,) = broker.incremental([(broker_type, "1", [("min.insync.replicas", 0, "2")])])
    assert (per_node.error_code, per_node.error_message) == (
        ErrorCode.invalid_config,
        "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
    )
    (removal,) = broker.incremental([(broker_type, "", [("min.insync.replicas", 1, None)])])
    assert (removal.error_code, removal.error_message) == (
        ErrorCode.invalid_config,
        "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
    )
    # the legacy AlterConfigs replaces the whole set: leaving it out removes it
    legacy = broker.alter(broker_type, "", {"log.retention.ms": "1000"})
    assert legacy.error_code == ErrorCode.invalid_config
    (changed,) = broker.incremental([(broker_type, "", [("min.insync.replicas", 0, "2")])])
    assert changed.error_code == ErrorCode.none
    assert broker.cluster.config.dynamic == {"min.insync.replicas": "2"}
    (other,) = broker.incremental([(broker_type, "1", [("message.max.bytes", 0, "5000")])])
    assert other.error_code == ErrorCode.none
