"""A KIP-848 member switching from a resolved regex to a new one, as Kafka 4.4.0 handles it:
the switch bumps no group epoch (the heartbeat recomputes the metadata hash only with a bump or
when a subscribed topic changed), the new regex is resolved on a later heartbeat (the dropped
one's resolution still counts as the last while the switch runs), and that resolution bumps it
(tests/integration/groups/test_group_record_order_kafka.py compares the records with Kafka)."""

from __future__ import annotations

from tests.unit.broker.handlers.test_group_handlers import Broker
from tests.unit.coordinator.group.consumer.test_regex_records import (
    CURRENT,
    MEMBER,
    Members,
    types,
)

REGULAR_EXPRESSION, GROUP_EPOCH = 16, 3


def switching_group() -> tuple[Broker, Members]:
    broker = Broker()
    broker.cluster.create_topic("rx-a", 1, 1)
    broker.cluster.create_topic("ry-a", 1, 1)
    members = Members(broker)
    members.beat("a", "rx-.*")
    members.resolve()
    members.beat("a")  # assigned rx-a
    members.beat("a")  # and owning it
    return broker, members


async def test_the_switch_bumps_nothing_and_the_resolution_does() -> None:
    broker, members = switching_group()
    epoch = members.group().group_epoch
    rx_a = broker.cluster.topics["rx-a"].topic_id
    assert members.owned["a"] == frozenset({(rx_a, 0)})
    count = len(members.written())

    switched = members.beat("a", "ry-.*")
    assert switched.assignment == frozenset()  # rx-a taken away with the answer
    assert members.group().group_epoch == epoch
    assert types(members.written()[count:]) == [MEMBER, REGULAR_EXPRESSION, CURRENT]
    members.resolve()
    assert members.group().group_epoch == epoch  # not due: rx-.* resolved under 10 s ago

    members.beat("a")  # the revocation acknowledged; the resolution due now
    count = len(members.written())
    members.resolve()
    assert types(members.written()[count:]) == [REGULAR_EXPRESSION, GROUP_EPOCH]
    assert members.group().group_epoch == epoch + 1
    ry_a = broker.cluster.topics["ry-a"].topic_id
    assert members.beat("a").assignment == frozenset({(ry_a, 0)})
    assert members.epochs["a"] == epoch + 1


async def test_a_subscribed_topic_growing_still_bumps_the_epoch() -> None:
    broker, members = switching_group()
    epoch = members.group().group_epoch
    members.beat("a")
    assert members.group().group_epoch == epoch  # nothing changed
    broker.cluster.add_partitions("rx-a", 2)
    members.beat("a")
    assert members.group().group_epoch == epoch + 1
