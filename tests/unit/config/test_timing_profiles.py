"""``kemu serve --timing fast|kafka``: the profile table (kemu.config.timing) and the flag.

``kafka`` leaves every timer at Kafka 4.4.0's code default; ``fast`` sets each row of
``FAST_TIMING`` as a static broker property, under ``--config`` and ``--override``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kemu.config.broker_catalogue import catalogue
from kemu.config.definitions import BROKER_CONFIGS, BrokerConfig, ConfigSource
from kemu.config.timing import DEFAULT_PROFILE, FAST_TIMING, profile_properties
from kemu.coordinator.group.config import GroupConfigStore, check_broker_group_configs
from tests import REPO_ROOT


def code_default(name: str) -> str | None:
    """What Kafka 4.4.0 (or kemu, for its own kemu.* configs) uses when nothing sets ``name``."""
    if name in BROKER_CONFIGS:
        return BROKER_CONFIGS[name].default
    return catalogue()[name].default


def test_each_row_names_a_known_config_once_and_changes_it() -> None:
    names = [row.name for row in FAST_TIMING]
    assert len(names) == len(set(names))
    for row in FAST_TIMING:
        assert row.fast != row.kafka, row.name
        assert row.why and "\n" not in row.why, row.name


def test_each_rows_kafka_value_is_the_code_default_kafka_timing_keeps() -> None:
    kafka = BrokerConfig.load(None, [], base=profile_properties("kafka"))
    for row in FAST_TIMING:
        assert code_default(row.name) == row.kafka, row.name
        assert kafka.get(row.name) == row.kafka, row.name
        assert kafka.source(row.name) is ConfigSource.DEFAULT_CONFIG


def test_fast_sets_every_row_as_a_static_config_and_passes_kafkas_start_checks() -> None:
    assert DEFAULT_PROFILE == "fast"
    fast = BrokerConfig.load(None, [], base=profile_properties("fast"))
    for row in FAST_TIMING:
        assert fast.get(row.name) == row.fast, row.name
        assert fast.source(row.name) is ConfigSource.STATIC_BROKER_CONFIG
    check_broker_group_configs(fast)  # intervals within their (lowered) bounds


def test_overrides_win_over_either_profile() -> None:
    for profile in ("fast", "kafka"):
        config = BrokerConfig.load(
            None,
            ["group.share.heartbeat.interval.ms=5000", "group.initial.rebalance.delay.ms=1500"],
            base=profile_properties(profile),
        )
        assert config.get_int("group.share.heartbeat.interval.ms") == 5000
        assert config.get_int("group.initial.rebalance.delay.ms") == 1500
        check_broker_group_configs(config)


def test_a_config_file_wins_over_the_profile(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("group.consumer.assignment.interval.ms=1000\n")
    config = BrokerConfig.load(properties, [], base=profile_properties("fast"))
    assert GroupConfigStore(config).value("g", "consumer.assignment.interval.ms") == "1000"


def test_kafka_timing_delays_a_new_classic_group_by_three_seconds() -> None:
    """What librdkafka's 0113 l_unsubscribe expects: both consumers' joins in one rebalance."""
    kafka = BrokerConfig.load(None, [], base=profile_properties("kafka"))
    assert kafka.get_int("group.initial.rebalance.delay.ms") == 3000
    fast = BrokerConfig.load(None, [], base=profile_properties("fast"))
    assert fast.get_int("group.initial.rebalance.delay.ms") == 0


def test_an_unknown_profile_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown timing profile 'slow'"):
        profile_properties("slow")


@pytest.mark.process  # kemu serve in a subprocess
def test_serve_refuses_a_bad_timing_value_with_one_line() -> None:
    command = [sys.executable, "-m", "kemu.cli", "serve", "--port", "0", "--timing", "slow"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "kemu: --timing slow: not a timing profile (expected fast or kafka)"
    ]
    assert "kemu ready" not in done.stdout


PAGE = REPO_ROOT / "docs" / "configuration.md"


def test_the_docs_show_every_row_with_kafkas_value_beside_it() -> None:
    text = PAGE.read_text()
    section = text[text.index("## What `--timing fast` changes") :]
    section = section[: section.index("\n## ", 1)]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert rows == [
        f"| `{row.name}` | {row.fast} | {row.kafka} | {row.why} |" for row in FAST_TIMING
    ]
