"""Group configs: Kafka's validation (names, types, floors, broker bounds, session > heartbeat),
share.auto.offset.reset forms, effective values clamped to the broker bounds, persistence."""

from __future__ import annotations

from pathlib import Path

import pytest

from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig, ConfigSource, InvalidConfig
from kemu.coordinator.group.config import (
    AutoOffsetReset,
    GroupConfigStore,
    group_config,
    group_config_store,
    parse_auto_offset_reset,
    parse_iso_duration_ms,
)
from kemu.storage.log import MemoryLog


def store(**broker: str) -> GroupConfigStore:
    return GroupConfigStore(BrokerConfig({k.replace("_", "."): v for k, v in broker.items()}))


def refused(overrides: dict[str, str], **broker: str) -> str:
    with pytest.raises(InvalidConfig) as raised:
        store(**broker).validate(overrides)
    return str(raised.value)


def test_defaults_come_from_the_broker() -> None:
    config = store().share_config("g")
    assert config.auto_offset_reset == AutoOffsetReset("latest")
    assert (config.isolation_level, config.read_committed) == ("read_uncommitted", False)
    assert config.record_lock_duration_ms == 30_000
    assert config.delivery_count_limit == 5
    assert config.partition_max_record_locks == 2000
    assert (config.session_timeout_ms, config.heartbeat_interval_ms) == (45_000, 5000)
    assert config.renew_acknowledge_enable is True
    assert (config.dlq_topic_name, config.dlq_copy_record_enable) == ("", False)
    tuned = store(group_share_record_lock_duration_ms="20000").share_config("g")
    assert tuned.record_lock_duration_ms == 20_000


def test_overrides_win() -> None:
    configs = store()
    overrides = {
        "share.auto.offset.reset": "earliest",
        "share.isolation.level": "read_committed",
        "share.record.lock.duration.ms": "15000",
        "share.delivery.count.limit": "3",
        "share.session.timeout.ms": "50000",
    }
    configs.validate(overrides)
    configs.set_overrides("g", overrides)
    config = configs.share_config("g")
    assert config.auto_offset_reset == AutoOffsetReset("earliest")
    assert config.read_committed
    assert (config.record_lock_duration_ms, config.delivery_count_limit) == (15_000, 3)
    assert config.session_timeout_ms == 50_000
    assert configs.share_config("other").auto_offset_reset.strategy == "latest"
    assert configs.source("g", "share.isolation.level") is ConfigSource.DYNAMIC_GROUP_CONFIG
    assert configs.source("g", "share.heartbeat.interval.ms") is ConfigSource.DEFAULT_CONFIG
    configs.set_overrides("g", {})
    assert configs.get_overrides("g") == {}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"no.such.config": "1"}, "Unknown group config name: no.such.config"),
        (
            {"share.session.timeout.ms": "abc"},
            "Invalid value abc for configuration share.session.timeout.ms: Not a number of type "
            "INT",
        ),
        (
            {"share.record.lock.duration.ms": "999"},
            "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at "
            "least 1000",
        ),
        (
            {"share.record.lock.duration.ms": "14999"},
            "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive.",
        ),
        (
            {"share.session.timeout.ms": "60001"},
            "share.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
        ),
        (
            {"share.heartbeat.interval.ms": "4999"},
            "share.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive.",
        ),
        (
            {"share.delivery.count.limit": "11"},
            "share.delivery.count.limit must be in the range 2 to 10 inclusive.",
        ),
        (
            {"share.delivery.count.limit": "1"},
            "Invalid value 1 for configuration share.delivery.count.limit: Value must be at "
            "least 2",
        ),
        (
            {"share.partition.max.record.locks": "4001"},
            "share.partition.max.record.locks must be in the range 100 to 4000 inclusive.",
        ),
        (
            {"consumer.session.timeout.ms": "44999"},
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
        ),
        (
            {"share.isolation.level": "READ_COMMITTED"},
            "Invalid value READ_COMMITTED for configuration share.isolation.level: String must be "
            "one of: read_committed, read_uncommitted",
        ),
        (
            {"share.renew.acknowledge.enable": "yes"},
            "Invalid value yes for configuration share.renew.acknowledge.enable: Expected value "
            "to be either true or false",
        ),
        (
            {"errors.deadletterqueue.topic.name": "__dlq"},
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'",
        ),
    ],
)
def test_invalid_values(overrides: dict[str, str], message: str) -> None:
    assert refused(overrides) == message


def test_session_timeout_must_exceed_heartbeat_interval() -> None:
    message = "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"
    broker = {
        "group_share_min_heartbeat_interval_ms": "1000",
        "group_share_max_heartbeat_interval_ms": "90000",
    }
    assert refused({"share.heartbeat.interval.ms": "50000"}, **broker) == message
    store(**broker).validate({"share.heartbeat.interval.ms": "40000"})


def test_broker_bounds_move_the_allowed_range() -> None:
    widened = store(group_share_max_record_lock_duration_ms="3600000")
    widened.validate({"share.record.lock.duration.ms": "600000"})
    assert refused({"share.partition.max.record.locks": "10000"}) != ""
    store(group_share_max_partition_max_record_locks="10000").validate(
        {"share.partition.max.record.locks": "10000"}
    )


def test_effective_values_are_clamped_when_the_bounds_shrink() -> None:
    broker = BrokerConfig({"group.share.max.record.lock.duration.ms": "60000"})
    configs = GroupConfigStore(broker)
    configs.set_overrides("g", {"share.record.lock.duration.ms": "50000"})
    broker.dynamic["group.share.max.record.lock.duration.ms"] = "40000"
    assert configs.share_config("g").record_lock_duration_ms == 40_000


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("earliest", AutoOffsetReset("earliest")),
        ("LATEST", AutoOffsetReset("latest")),
        ("by_duration:PT1H", AutoOffsetReset("by_duration", 3_600_000)),
        ("by_duration:P1DT2H3M4.5S", AutoOffsetReset("by_duration", 93_784_500)),
        ("BY_DURATION:pt0.25s", AutoOffsetReset("by_duration", 250)),
    ],
)
def test_auto_offset_reset_forms(value: str, expected: AutoOffsetReset) -> None:
    assert parse_auto_offset_reset(value) == expected
    store().validate({"share.auto.offset.reset": value})


@pytest.mark.parametrize(
    "value", ["none", "by_duration:", "by_duration:1H", "by_duration:-PT1H", "by_duration:PT", ""]
)
def test_auto_offset_reset_refusals(value: str) -> None:
    assert "The value must be either 'earliest', 'latest' or of the format" in refused(
        {"share.auto.offset.reset": value}
    )


def test_by_duration_timestamp() -> None:
    assert AutoOffsetReset("by_duration", 1000).timestamp_ms(5000) == 4000
    assert AutoOffsetReset("earliest").timestamp_ms(5000) == -2
    assert AutoOffsetReset("latest").timestamp_ms(5000) == -1


def test_iso_durations() -> None:
    assert parse_iso_duration_ms("PT-1.5S") == -1500
    assert parse_iso_duration_ms("-PT1M") == -60_000
    assert parse_iso_duration_ms("P2D") == 172_800_000
    with pytest.raises(ValueError):
        parse_iso_duration_ms("P")


def test_overrides_persist_in_the_data_dir(tmp_path: Path) -> None:
    cluster = Cluster(
        cluster_id="unit",
        nodes={1: BrokerNode(1, "127.0.0.1", 1)},
        config=BrokerConfig(),
        log_factory=lambda topic, index: MemoryLog(),
        data_dir=tmp_path,
    )
    runtime = Runtime(cluster=cluster)
    assert group_config(runtime, "g").auto_offset_reset.strategy == "latest"
    group_config_store(runtime).set_overrides("g", {"share.auto.offset.reset": "earliest"})
    reloaded = Runtime(cluster=cluster)
    assert group_config(reloaded, "g").auto_offset_reset.strategy == "earliest"
