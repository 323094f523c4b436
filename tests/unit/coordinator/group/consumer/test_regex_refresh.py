"""When a KIP-848 group's regexes are resolved again for a topic created since the last
resolution: not within Kafka's ``REGEX_BATCH_REFRESH_MIN_INTERVAL_MS`` (10 s) of it, a constant
in Kafka that kemu reads from ``kemu.group.consumer.regex.refresh.min.interval.ms`` (0 under
``--timing fast``, kemu/config/timing.py); and, however little changed, once
``group.consumer.regex.refresh.interval.ms`` (Kafka's internal config, 10 minutes) has passed.
``tests/integration/config/test_timing_fast.py`` shows both values with confluent-kafka."""

from __future__ import annotations

import pytest

from kemu.config.definitions import BrokerConfig, InvalidConfig
from tests.unit.broker.handlers.test_group_handlers import Broker
from tests.unit.coordinator.group.consumer.test_regex_records import GROUP_EPOCH, Members, types

REGULAR_EXPRESSION = 16
MIN_INTERVAL = "kemu.group.consumer.regex.refresh.min.interval.ms"
INTERVAL = "group.consumer.regex.refresh.interval.ms"


def resolved_group(**static: str) -> tuple[Broker, Members]:
    """A member subscribed to ``rx-.*``, its regex resolved and ``rx-a`` assigned."""
    broker = Broker(**static)
    broker.cluster.create_topic("rx-a", 1, 1)
    members = Members(broker)
    members.beat("a", "rx-.*")
    members.resolve()
    members.beat("a")
    return broker, members


def resolution_after(broker: Broker, members: Members, elapsed_ms: int) -> list[int]:
    """``rx-b`` is created, ``elapsed_ms`` pass, the member heartbeats and the resolution it
    asked for (if any) runs: the records that wrote."""
    broker.cluster.create_topic("rx-b", 1, 1)
    broker.now += elapsed_ms
    count = len(members.written())
    members.beat("a")
    members.resolve()
    return types(members.written()[count:])


async def test_kafkas_minimum_interval_holds_a_new_topic_back() -> None:
    broker, members = resolved_group()
    epoch = members.group().group_epoch
    assert resolution_after(broker, members, 10_000) == []  # not yet: 10 s is not past it
    broker.now += 1
    count = len(members.written())
    members.beat("a")
    members.resolve()
    assert types(members.written()[count:]) == [REGULAR_EXPRESSION, GROUP_EPOCH]
    assert members.group().group_epoch == epoch + 1


async def test_with_no_minimum_the_next_heartbeat_resolves_a_new_topic() -> None:
    broker, members = resolved_group(**{MIN_INTERVAL: "0"})
    epoch = members.group().group_epoch
    # in the same millisecond as the last resolution too (a virtual clock that did not move)
    assert resolution_after(broker, members, 0) == [REGULAR_EXPRESSION, GROUP_EPOCH]
    assert members.group().group_epoch == epoch + 1
    rx_b = broker.cluster.topics["rx-b"].topic_id
    assert (rx_b, 0) in members.beat("a").assignment
    # nothing new: no resolution however often it heartbeats
    broker.now += 1
    count = len(members.written())
    members.beat("a")
    members.resolve()
    assert types(members.written()[count:]) == []


async def test_the_refresh_interval_resolves_again_with_nothing_new() -> None:
    broker, members = resolved_group(**{INTERVAL: "20000"})
    broker.now += 20_000
    count = len(members.written())
    members.beat("a")
    members.resolve()
    assert types(members.written()[count:]) == []  # not past the interval yet
    broker.now += 1
    members.beat("a")
    members.resolve()
    # written again though it matches what it did: no epoch bump
    assert types(members.written()[count:]) == [REGULAR_EXPRESSION]


@pytest.mark.parametrize(
    ("name", "default", "floor"), [(MIN_INTERVAL, 10_000, 0), (INTERVAL, 600_000, 10_000)]
)
def test_the_configs_take_kafkas_default_and_floor(name: str, default: int, floor: int) -> None:
    assert BrokerConfig().get_int(name) == default
    assert BrokerConfig.load(None, [f"{name}={floor}"]).get_int(name) == floor
    with pytest.raises(InvalidConfig) as refused:
        BrokerConfig.load(None, [f"{name}={floor - 1}"])
    assert str(refused.value) == (
        f"Invalid value {floor - 1} for configuration {name}: Value must be at least {floor}"
    )
