"""What ``kemu serve --timing fast`` (the default) changes, seen by real clients (confluent-kafka
2.x) through the recording proxy of ``make conformance-diff`` (``conformance/proxy.py``): the
ORDER of what the group coordinator answers, never how long it took. Each test is a row of
``kemu.config.timing.FAST_TIMING``; where ``--timing kafka`` answers in another order, a test
shows that too.

- a share member is assigned its partitions in the answer to its first heartbeat, and the
  first ShareFetch naming them returns records (``kemu.group.share.initialize.before.answer``);
  under ``--timing kafka`` the first answer assigns nothing and records come only after a later
  heartbeat's answer assigned the partitions;
- a second share member is assigned in the answer to its join, and the first member gives
  those partitions up in the answer to its next heartbeat; when the second leaves, the first
  gets them back on its next heartbeat (``group.share.heartbeat.interval.ms`` short);
- a KIP-848 consumer group: the first member learns of the revocation on its next heartbeat,
  and the second member gets the partitions on its first heartbeat after the first member
  acknowledged (``group.consumer.heartbeat.interval.ms`` short, assignment interval 0);
- a classic group: on a virtual clock (``--clock virtual``, so nothing waits unless the test
  advances it), a lone consumer's JoinGroup is answered without the clock moving
  (``group.initial.rebalance.delay.ms=0``); under ``--timing kafka`` two consumers' JoinGroups
  wait for the 3 s delay and are answered together, in one generation (what librdkafka's
  0113 l_unsubscribe expects);
- a KIP-848 consumer subscribed with a regex: on a virtual clock that never moves, it gets the
  record of a topic created after its group's regex was resolved
  (``kemu.group.consumer.regex.refresh.min.interval.ms=0``); at Kafka's 10 s it gets it only
  once the clock passed them.

The streams rows (initial delay, assignment interval) are in ``test_timing_fast_streams.py``.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))  # conformance/ is not installed
from conformance.proxy import Exchange, ProxyThread, RecordingProxy
from kemu.config.timing import FAST_CONSUMER_HEARTBEAT_MS, FAST_HEARTBEAT_MS
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

PARTITIONS = 3
RECORDS = 30
WAIT_S = 30.0  # a bound for failing, not a measurement
SHARE_HEARTBEAT, SHARE_FETCH, CONSUMER_HEARTBEAT, JOIN_GROUP = 76, 78, 68, 11

Partitions = frozenset[tuple[Any, int]]


@contextmanager
def recorded(kemu: InProcessKemu) -> Iterator[RecordingProxy]:
    upstreams = []
    for address in kemu.bootstrap.split(","):
        host, _, port = address.rpartition(":")
        upstreams.append((host, int(port)))
    with ProxyThread(upstreams) as proxy:
        yield proxy


def topic_with_records(bootstrap: str, share_group: str | None = None) -> str:
    """A topic of PARTITIONS partitions holding RECORDS records; a share group named reads it
    from the earliest offset (share.auto.offset.reset=earliest; its default is latest)."""
    topic = f"timing-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(WAIT_S)
    if share_group is not None:
        earliest = ConfigEntry(
            "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
        )
        resource = ConfigResource(ResourceType.GROUP, share_group, incremental_configs=[earliest])
        admin.incremental_alter_configs([resource])[resource].result(WAIT_S)
    producer = Producer({"bootstrap.servers": bootstrap})
    for index in range(RECORDS):
        producer.produce(topic, value=b"v%d" % index, partition=index % PARTITIONS)
    assert producer.flush(WAIT_S) == 0
    return topic


def answered(proxy: RecordingProxy, api_key: int) -> list[Exchange]:
    """The exchanges of ``api_key`` answered so far, in the order their requests arrived."""
    return [e for e in list(proxy.exchanges) if e.api_key == api_key and e.answered is not None]


def assigned(response: Any) -> Partitions | None:
    """A heartbeat answer's assignment as (topic id, partition) pairs; None if it has none."""
    if response.assignment is None:
        return None
    return frozenset(
        (topic.topic_id, index)
        for topic in response.assignment.topic_partitions
        for index in topic.partitions
    )


def has_records(fetch: Exchange) -> bool:
    return any(
        partition.records
        for topic in fetch.response.responses
        for partition in topic.partitions
        if partition.records is not None
    )


def names_partitions(fetch: Exchange) -> bool:
    return any(topic.partitions for topic in fetch.request.topics)


def until(what: str, found: Callable[[], Any], *polled: Any) -> Any:
    """Poll the consumers until ``found()`` is truthy; its value."""
    deadline = time.monotonic() + WAIT_S
    while True:
        value = found()
        if value:
            return value
        assert time.monotonic() < deadline, what
        for consumer in polled:
            consumer.poll(0.05)


def share_consumer(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    return consumer


def first_records(consumer: ShareConsumer) -> list[Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        messages = [m for m in consumer.poll(0.1) if m.error() is None]
        if messages:
            return messages
    raise AssertionError("no records")


def member_heartbeats(proxy: RecordingProxy, api_key: int, member_id: str) -> list[Exchange]:
    return [e for e in answered(proxy, api_key) if e.request.member_id == member_id]


def first_change_after(
    proxy: RecordingProxy, api_key: int, member_id: str, event: Exchange
) -> Exchange | None:
    """The member's first heartbeat answered after ``event``'s request reached the broker whose
    answer carries an assignment (None while there is none yet). Heartbeats of the member
    answered before it may only have reached the broker before ``event`` was answered (handled
    before it, perhaps); one sent after that must see what ``event`` changed."""
    assert event.answered is not None
    candidates = [
        h
        for h in member_heartbeats(proxy, api_key, member_id)
        if h.answered is not None and h.answered > event.sequence
    ]
    for index, heartbeat in enumerate(candidates):
        if assigned(heartbeat.response):
            for earlier in candidates[:index]:
                assert earlier.sequence < event.answered, "a later heartbeat saw no change"
            return heartbeat
    assert all(c.sequence < event.answered for c in candidates), "a later heartbeat saw nothing"
    return None


# --- share groups ------------------------------------------------------------------------------


def test_a_share_member_is_assigned_by_its_first_heartbeat_and_reads_at_once(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(brokers=1).start()
    group = f"sg-{uuid.uuid4().hex[:8]}"
    topic = topic_with_records(kemu.bootstrap, group)
    with recorded(kemu) as proxy:
        consumer = share_consumer(proxy.bootstrap, group, topic)
        try:
            assert first_records(consumer)
        finally:
            consumer.close()
    joined = answered(proxy, SHARE_HEARTBEAT)[0]
    assert joined.request.member_epoch == 0
    partitions = assigned(joined.response)
    assert partitions is not None and len(partitions) == PARTITIONS
    assert joined.response.heartbeat_interval.total_seconds() * 1000 == int(FAST_HEARTBEAT_MS)
    fetches = [f for f in answered(proxy, SHARE_FETCH) if names_partitions(f)]
    assert joined.answered is not None and fetches[0].sequence > joined.answered
    assert has_records(fetches[0])  # the first ShareFetch naming them finds records


def test_under_kafka_timing_a_share_member_is_assigned_by_a_later_heartbeat(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    """Kafka 4.4.0's order: the join's answer assigns nothing (the share partitions' state is
    initialized after it); a later heartbeat's answer assigns them; only then come records."""
    kemu = kemu_inprocess_factory(
        brokers=1,
        timing="kafka",
        overrides=[  # so that the later heartbeat comes in half a second, not 5 s
            "group.share.min.heartbeat.interval.ms=500",
            "group.share.heartbeat.interval.ms=500",
        ],
    ).start()
    group = f"sg-{uuid.uuid4().hex[:8]}"
    topic = topic_with_records(kemu.bootstrap, group)
    with recorded(kemu) as proxy:
        consumer = share_consumer(proxy.bootstrap, group, topic)
        try:
            assert first_records(consumer)
        finally:
            consumer.close()
    heartbeats = answered(proxy, SHARE_HEARTBEAT)
    assert heartbeats[0].request.member_epoch == 0
    assert assigned(heartbeats[0].response) == frozenset()
    assigning = next(h for h in heartbeats if assigned(h.response))
    assert assigning is not heartbeats[0]
    with_records = [f for f in answered(proxy, SHARE_FETCH) if has_records(f)]
    assert with_records and with_records[0].sequence > assigning.answered  # type: ignore[operator]


def test_a_second_share_member_is_assigned_at_once_and_the_first_yields_on_its_next_heartbeat(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(brokers=1).start()
    group = f"sg-{uuid.uuid4().hex[:8]}"
    topic = topic_with_records(kemu.bootstrap, group)
    with recorded(kemu) as proxy:
        first = share_consumer(proxy.bootstrap, group, topic)
        second: ShareConsumer | None = None
        try:
            assert first_records(first)
            first_id = answered(proxy, SHARE_HEARTBEAT)[0].request.member_id
            everything = assigned(answered(proxy, SHARE_HEARTBEAT)[0].response)
            assert everything is not None and len(everything) == PARTITIONS

            second = share_consumer(proxy.bootstrap, group, topic)
            join = until(
                "the second member's join answered",
                lambda: [
                    h
                    for h in answered(proxy, SHARE_HEARTBEAT)
                    if h.request.member_id != first_id and h.request.member_epoch == 0
                ],
                first,
                second,
            )[0]
            second_id = join.request.member_id
            theirs = assigned(join.response)
            assert theirs, "the second member is assigned in the answer to its join"
            yielded = until(
                "the first member's next heartbeat",
                lambda: first_change_after(proxy, SHARE_HEARTBEAT, first_id, join),
                first,
                second,
            )
            mine = assigned(yielded.response)
            assert mine is not None and mine | theirs == everything and not mine & theirs

            second.close()
            left = next(
                h
                for h in member_heartbeats(proxy, SHARE_HEARTBEAT, second_id)
                if h.request.member_epoch == -1
            )
            regained = until(
                "the first member's next heartbeat after the leave",
                lambda: first_change_after(proxy, SHARE_HEARTBEAT, first_id, left),
                first,
            )
            assert assigned(regained.response) == everything
        finally:
            first.close()


# --- KIP-848 consumer groups -------------------------------------------------------------------


def test_a_consumer_group_rebalances_on_the_next_heartbeats(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    """A second member joins: the first is told to revoke on its next heartbeat, acknowledges,
    and the second gets the revoked partitions on its first heartbeat after that."""
    kemu = kemu_inprocess_factory(brokers=1).start()
    topic = topic_with_records(kemu.bootstrap)
    group = f"g-{topic}"
    with recorded(kemu) as proxy:
        settings = {
            "bootstrap.servers": proxy.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
        first, second = Consumer(settings), Consumer(settings)
        try:
            first.subscribe([topic])
            until("the first member's assignment", lambda: len(first.assignment()) == 3, first)
            first_id = answered(proxy, CONSUMER_HEARTBEAT)[0].response.member_id
            interval = answered(proxy, CONSUMER_HEARTBEAT)[0].response.heartbeat_interval
            assert interval.total_seconds() * 1000 == int(FAST_CONSUMER_HEARTBEAT_MS)

            second.subscribe([topic])
            join = until(
                "the second member's join answered",
                lambda: [
                    h
                    for h in answered(proxy, CONSUMER_HEARTBEAT)
                    if h.request.member_epoch == 0 and h.response.member_id != first_id
                ],
                first,
                second,
            )[0]
            second_id = join.response.member_id
            told = until(
                "the first member's next heartbeat",
                lambda: first_change_after(proxy, CONSUMER_HEARTBEAT, first_id, join),
                first,
                second,
            )
            kept = assigned(told.response)
            assert kept is not None and 0 < len(kept) < PARTITIONS, "told to revoke some"

            def acknowledged() -> Exchange | None:
                for heartbeat in member_heartbeats(proxy, CONSUMER_HEARTBEAT, first_id):
                    owned = heartbeat.request.topic_partitions or ()
                    pairs = frozenset((t.topic_id, i) for t in owned for i in t.partitions)
                    if heartbeat.sequence > told.answered and pairs == kept:
                        return heartbeat
                return None

            ack = until("the first member's acknowledgement", acknowledged, first, second)
            given = until(
                "the second member's next heartbeat",
                lambda: first_change_after(proxy, CONSUMER_HEARTBEAT, second_id, ack),
                first,
                second,
            )
            before = [
                assigned(h.response)
                for h in member_heartbeats(proxy, CONSUMER_HEARTBEAT, second_id)
                if h.sequence < given.sequence
            ]
            assert all(not partitions for partitions in before), "nothing owned given early"
            theirs = assigned(given.response)
            assert theirs is not None and len(theirs) + len(kept) == PARTITIONS
        finally:
            first.close()
            second.close()


# --- classic groups ----------------------------------------------------------------------------


def classic(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "classic",
            "auto.offset.reset": "earliest",
        }
    )


def test_a_classic_group_is_formed_without_waiting_for_the_clock(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(brokers=1, clock="virtual").start()
    topic = topic_with_records(kemu.bootstrap)
    consumer = classic(kemu.bootstrap, f"g-{topic}")
    still = kemu.control.clock()["now_ms"]
    try:
        consumer.subscribe([topic])
        message = until(
            "a record, the clock standing still",
            lambda: [m for m in [consumer.poll(0.1)] if m is not None and m.error() is None],
        )
        assert message
        assert kemu.control.clock()["now_ms"] == still
    finally:
        consumer.close()


def test_under_kafka_timing_two_classic_consumers_join_one_generation(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    """Kafka's group.initial.rebalance.delay.ms (3 s) holds the first rebalance until the clock
    passes it (and once more, as a member joined during it): both consumers are then answered
    in one generation, each assigned once."""
    kemu = kemu_inprocess_factory(brokers=1, clock="virtual", timing="kafka").start()
    topic = topic_with_records(kemu.bootstrap)
    group = f"g-{topic}"
    calls = {"a": 0, "b": 0}
    with recorded(kemu) as proxy:
        consumers = {name: classic(proxy.bootstrap, group) for name in calls}
        try:
            for name, consumer in consumers.items():

                def on_assign(_consumer: Any, _partitions: Any, name: str = name) -> None:
                    calls[name] += 1

                consumer.subscribe([topic], on_assign=on_assign)

            def joins_with_member_ids() -> list[Exchange]:
                return [
                    e
                    for e in list(proxy.exchanges)
                    if e.api_key == JOIN_GROUP and e.request is not None and e.request.member_id
                ]

            waiting = until(
                "both consumers' JoinGroups at the coordinator",
                lambda: (
                    len({e.request.member_id for e in joins_with_member_ids()}) == 2
                    and joins_with_member_ids()
                ),
                *consumers.values(),
            )
            assert all(e.answered is None for e in waiting), "the clock has not moved"
            for _ in range(10):  # a bound for failing: two delays are enough
                if all(count for count in calls.values()):
                    break
                kemu.control.advance(3000)
                for consumer in consumers.values():
                    consumer.poll(0.2)
            until("both assigned", lambda: all(calls.values()), *consumers.values())
            generations = {
                e.response.generation_id
                for e in answered(proxy, JOIN_GROUP)
                if e.response.error_code == 0
            }
            assert len(generations) == 1
        finally:
            for consumer in consumers.values():
                consumer.close()
    assert calls == {"a": 1, "b": 1}


# --- KIP-848 regex subscriptions -----------------------------------------------------------------


def regex_consumer(bootstrap: str, prefix: str) -> Consumer:
    """A KIP-848 consumer subscribed to ``^<prefix>-.*`` (resolved by the group coordinator)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": prefix,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([f"^{prefix}-.*"])
    return consumer


def topic_of_one_record(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(WAIT_S)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=topic.encode())
    assert producer.flush(WAIT_S) == 0


def values_until(consumer: Consumer, wanted: bytes, bound_s: float = WAIT_S) -> bool:
    """Poll until a record of value ``wanted`` arrives (True) or ``bound_s`` passed (False)."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is not None and message.error() is None and message.value() == wanted:
            return True
    return False


def test_a_regex_consumer_gets_a_topic_created_after_it_joined_without_the_clock(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    """``kemu.group.consumer.regex.refresh.min.interval.ms=0``: the group's regex is resolved
    again as soon as a topic is created, on a virtual clock that never moves."""
    kemu = kemu_inprocess_factory(brokers=1, clock="virtual").start()
    prefix = f"rx{uuid.uuid4().hex[:8]}"
    topic_of_one_record(kemu.bootstrap, f"{prefix}-a")
    still = kemu.control.clock()["now_ms"]
    consumer = regex_consumer(kemu.bootstrap, prefix)
    try:
        assert values_until(consumer, f"{prefix}-a".encode())
        topic_of_one_record(kemu.bootstrap, f"{prefix}-b")  # created after the resolution
        assert values_until(consumer, f"{prefix}-b".encode())
        assert kemu.control.clock()["now_ms"] == still
    finally:
        consumer.close()


def test_at_kafkas_minimum_interval_the_new_topic_waits_for_the_clock(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    """The row at Kafka's value (10 s, a constant in Kafka): the topic created after the
    resolution is not resolved while the clock stands still, and is once it passed 10 s."""
    kemu = kemu_inprocess_factory(
        brokers=1,
        clock="virtual",
        overrides=["kemu.group.consumer.regex.refresh.min.interval.ms=10000"],
    ).start()
    prefix = f"rx{uuid.uuid4().hex[:8]}"
    topic_of_one_record(kemu.bootstrap, f"{prefix}-a")
    consumer = regex_consumer(kemu.bootstrap, prefix)
    try:
        assert values_until(consumer, f"{prefix}-a".encode())
        topic_of_one_record(kemu.bootstrap, f"{prefix}-b")
        # a dozen heartbeats at the fast interval, none of them resolving it again
        assert not values_until(consumer, f"{prefix}-b".encode(), bound_s=1.0)
        kemu.control.advance(10_001)
        assert values_until(consumer, f"{prefix}-b".encode())
    finally:
        consumer.close()
