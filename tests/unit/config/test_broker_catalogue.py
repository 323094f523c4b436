"""Kafka 4.4's broker config catalogue (generated from Kafka's ConfigDef by
``python -m conformance.broker_catalogue``) as DescribeConfigs and the alter APIs use it."""

from __future__ import annotations

from kemu.config.broker_catalogue import KEMU_DIFFERENCES, catalogue, kafka_version
from kemu.config.definitions import BROKER_CONFIGS, ConfigSource, ConfigType
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_admin_handlers import BROKER, Broker

SET = 0


def test_the_catalogue_is_kafka_4_4s_350_broker_configs() -> None:
    assert kafka_version() == "4.4.0"
    configs = catalogue()
    assert len(configs) == 350
    assert configs["log.cleaner.backoff.ms"].default == "15000"
    assert configs["log.cleaner.threads"].read_only is False
    assert configs["broker.rack"].read_only is True
    assert configs["sasl.jaas.config"].type is ConfigType.PASSWORD


def test_kemus_own_definitions_agree_with_kafkas_except_where_listed() -> None:
    configs = catalogue()
    differ = {
        name
        for name, mine in BROKER_CONFIGS.items()
        if name in configs
        and (
            mine.default != configs[name].default
            or mine.read_only != configs[name].read_only
            or mine.type != configs[name].type
        )
    }
    assert differ == set(KEMU_DIFFERENCES)
    assert sorted(n for n in BROKER_CONFIGS if n not in configs and not n.startswith("kemu.")) == [
        "group.share.enable"  # gone from Kafka 4.4 (share.version decides), kemu keeps the switch
    ]


def test_describe_lists_every_config_with_kafkas_defaults() -> None:
    broker = Broker()
    entries = {e.name: e for e in broker.describe_configs(BROKER, "1").configs}
    assert set(catalogue()) <= set(entries)
    backoff = entries["log.cleaner.backoff.ms"]
    assert (backoff.value, backoff.config_source, backoff.read_only, backoff.is_sensitive) == (
        "15000",
        ConfigSource.DEFAULT_CONFIG,
        False,  # Kafka can change it at runtime
        False,
    )
    assert backoff.config_type == ConfigType.LONG
    assert backoff.documentation == catalogue()["log.cleaner.backoff.ms"].doc
    secret = entries["sasl.jaas.config"]
    assert (secret.value, secret.is_sensitive) == (None, True)


def test_a_dynamic_kafka_config_is_stored_and_a_read_only_one_refused() -> None:
    broker = Broker()
    (ok,) = broker.incremental([(BROKER, "", [("log.cleaner.threads", SET, "2")])])
    assert ok.error_code == ErrorCode.none
    (entry,) = broker.describe_configs(BROKER, "", ("log.cleaner.threads",)).configs
    assert (entry.value, entry.config_source, entry.is_sensitive) == (
        "2",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        False,
    )
    (bad,) = broker.incremental([(BROKER, "", [("log.cleaner.threads", SET, "many")])])
    assert (bad.error_code, bad.error_message) == (
        ErrorCode.invalid_request,
        "Invalid value many for configuration log.cleaner.threads: Not a number of type INT",
    )
    (fixed,) = broker.incremental([(BROKER, "1", [("broker.rack", SET, "r1")])])
    assert (fixed.error_code, fixed.error_message) == (
        ErrorCode.invalid_request,
        "Cannot update these configs dynamically: [broker.rack]",
    )


def test_group_configs_list_their_defaults_as_default_config_synonyms() -> None:
    # As kafka-configs --describe --entity-type groups --all shows them on Kafka 4.4.
    broker = Broker()
    (set_ok,) = broker.incremental([(32, "g", [("share.auto.offset.reset", SET, "earliest")])])
    assert set_ok.error_code == ErrorCode.none
    entries = {e.name: e for e in broker.describe_configs(32, "g").configs}
    session = entries["consumer.session.timeout.ms"]
    assert [(s.name, s.value, s.source) for s in session.synonyms] == [
        ("group.consumer.session.timeout.ms", "45000", ConfigSource.DEFAULT_CONFIG)
    ]
    isolation = entries["share.isolation.level"]
    assert [(s.name, s.value, s.source) for s in isolation.synonyms] == [
        ("share.isolation.level", "read_uncommitted", ConfigSource.DEFAULT_CONFIG)
    ]
    reset = entries["share.auto.offset.reset"]
    assert [(s.name, s.value, s.source) for s in reset.synonyms] == [
        ("share.auto.offset.reset", "earliest", ConfigSource.DYNAMIC_GROUP_CONFIG),
        ("share.auto.offset.reset", "latest", ConfigSource.DEFAULT_CONFIG),
    ]
