"""Broker properties kemu knows only from Kafka's catalogue (``kafka_broker_catalogue.json``:
Kafka 4.4's own names, stored and described, some of them not acted on) given with --override or
--config: accepted without the unknown-config warning and under --strict-config, their values
checked against Kafka's type, while a real typo still warns."""

from __future__ import annotations

import pytest

from kemu.cli import _unknown_configs
from kemu.config.definitions import BrokerConfig, InvalidConfig
from kemu.testing.plugin import KemuProcess

pytestmark = pytest.mark.process

CATALOGUE_ONLY = ["quota.window.num=3", "log.cleaner.threads=2", "num.network.threads=4"]


def test_catalogue_configs_are_known_and_typos_are_not() -> None:
    config = BrokerConfig.load(None, [*CATALOGUE_ONLY, "quota.windw.num=3", "num.partitions=2"])
    assert _unknown_configs(config) == ["quota.windw.num"]


def test_a_catalogue_config_with_a_bad_value_is_refused_with_kafkas_message() -> None:
    with pytest.raises(InvalidConfig) as refused:
        BrokerConfig.load(None, ["quota.window.size.seconds=soon"])
    assert str(refused.value) == (
        "Invalid value soon for configuration quota.window.size.seconds: Not a number of type INT"
    )


def test_strict_config_starts_with_catalogue_configs(kemu_factory: type[KemuProcess]) -> None:
    process = kemu_factory(brokers=1, overrides=CATALOGUE_ONLY, extra_args=["--strict-config"])
    assert process.start().bootstrap
    process.stop()
    assert process.log_path is not None
    assert "isn't a known config" not in process.log_path.read_text()
