"""The group types' settings as the group coordinator reads them from the broker config
(kemu/coordinator/group/settings.py), where Kafka derives one from another."""

from __future__ import annotations

import pytest

from kemu.coordinator.group.service import group_coordinator
from tests.unit.broker.handlers.test_group_handlers import Broker

RETRY = "group.share.initialize.retry.interval.ms"


@pytest.mark.parametrize(
    ("configured", "effective"),
    [
        ({}, 30_000),
        ({RETRY: "9000"}, 9_000),
        # as Kafka's GroupCoordinatorConfig: never below offsets.commit.timeout.ms (5 s)
        ({RETRY: "1000"}, 5_000),
        ({RETRY: "1000", "offsets.commit.timeout.ms": "2000"}, 2_000),
    ],
)
def test_the_share_initialize_retry_interval_is_kafkas_internal_config(
    configured: dict[str, str], effective: int
) -> None:
    broker = Broker(**configured)
    settings = group_coordinator(broker.runtime).membership_settings("any")
    assert settings.initialize_retry_interval_ms == effective
