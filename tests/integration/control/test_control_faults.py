"""Fault rules of the control API (docs/control.md) reaching confluent-kafka (librdkafka) clients
against a kemu (in the test's process) serving its control API: an injected error code is retried or
surfaced as against Kafka, dropped connections and torn frames make the client reconnect and
retry, a broker down sends clients to the others, a moved leader is followed via Metadata."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.control.client import ControlError
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

TIMEOUT = 30.0


@pytest.fixture
def kemu(kemu_inprocess_factory: type[InProcessKemu]) -> InProcessKemu:
    return kemu_inprocess_factory(brokers=3, with_control=True).start()


def make_topic(kemu: InProcessKemu, partitions: int = 1) -> str:
    topic = f"f-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(TIMEOUT)
    return topic


def produce(kemu: InProcessKemu, topic: str, count: int, **config: Any) -> list[Any]:
    """Produce ``count`` records; the delivery reports' errors (None when delivered)."""
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": kemu.bootstrap, **config})
    for index in range(count):
        producer.produce(
            topic, value=b"v%d" % index, partition=0, on_delivery=lambda e, m: errors.append(e)
        )
    assert producer.flush(TIMEOUT) == 0
    return errors


def read_all(kemu: InProcessKemu, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": kemu.bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        while True:
            message = consumer.poll(TIMEOUT)
            assert message is not None, f"timed out after {values}"
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF and len(values) >= expected:
                    return values
                continue
            values.append(message.value())
    finally:
        consumer.close()


def fired(kemu: InProcessKemu, rule_id: int) -> int:
    for rule in kemu.control.faults():
        if rule["id"] == rule_id:
            return int(rule["fired"])
    return -1  # used up: the rule is gone


def test_retriable_error_is_retried(kemu: InProcessKemu) -> None:
    topic = make_topic(kemu)
    rule = kemu.control.add_fault(
        api="produce", error="NOT_LEADER_OR_FOLLOWER", count=2, topic=topic
    )
    assert rule["error_code"] == 6
    errors = produce(kemu, topic, 1)
    assert errors == [None], (errors, kemu.control.faults())
    assert fired(kemu, rule["id"]) == -1  # both injections happened, then the rule expired
    assert kemu.control.faults() == []
    assert read_all(kemu, topic, 1) == [b"v0"]


def test_fatal_error_reaches_the_application(kemu: InProcessKemu) -> None:
    topic = make_topic(kemu)
    kemu.control.add_fault(api="produce", error="TOPIC_AUTHORIZATION_FAILED", count=1)
    (error,) = produce(kemu, topic, 1)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_rule_for_another_topic_does_not_fire(kemu: InProcessKemu) -> None:
    topic, other = make_topic(kemu), make_topic(kemu)
    rule = kemu.control.add_fault(
        api="produce", error="TOPIC_AUTHORIZATION_FAILED", count=1, topic=other
    )
    assert produce(kemu, topic, 2) == [None, None]
    assert fired(kemu, rule["id"]) == 0


def produce_one_by_one(kemu: InProcessKemu, topic: str, count: int, **config: Any) -> list[Any]:
    """Produce ``count`` records, each flushed before the next: one Produce request (and its
    retries) per record, so that a rule's fraction is drawn at least ``count`` times. Stops at
    the first record not delivered."""
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 0, **config})
    for index in range(count):
        producer.produce(
            topic, value=b"v%d" % index, partition=0, on_delivery=lambda e, m: errors.append(e)
        )
        assert producer.flush(TIMEOUT) == 0
        if errors[-1] is not None:
            break  # a rule that fires every time: fail now, not after ``count`` timeouts
    return errors


def test_fraction_and_client_id(kemu: InProcessKemu) -> None:
    """A fraction 0.5 rule for one client id fires on some of that client's requests (2**-20 that
    20 requests draw none), lets the others through (the retried records all arrive before the
    producer's message timeout, which a rule firing on every request would exhaust), and never
    fires for another client id (2**-10 that a broken match would miss all 10 requests)."""
    topic = make_topic(kemu)
    rule = kemu.control.add_fault(
        api="produce",
        error="NOT_ENOUGH_REPLICAS",
        count=None,
        fraction=0.5,
        client_id="flaky-app",
    )
    flaky = {"client.id": "flaky-app", "message.timeout.ms": 20_000}
    assert produce_one_by_one(kemu, topic, 20, **flaky) == [None] * 20
    fired_for_flaky = fired(kemu, rule["id"])
    assert fired_for_flaky >= 1  # still installed: count None keeps it until cleared
    assert produce_one_by_one(kemu, topic, 10, **{"client.id": "other-app"}) == [None] * 10
    assert fired(kemu, rule["id"]) == fired_for_flaky
    assert len(read_all(kemu, topic, 30)) == 30
    assert kemu.control.clear_faults()["removed"] == 1


@pytest.mark.parametrize("kind", ["drop_before", "drop_after", "torn"])
def test_connection_faults_are_retried_without_duplicates(kemu: InProcessKemu, kind: str) -> None:
    """The idempotent producer reconnects and retries; the request applied before the drop
    (drop_after, torn) is deduplicated by its sequence number."""
    topic = make_topic(kemu)
    rule = kemu.control.add_fault(kind=kind, api="produce", count=1, topic=topic)
    assert produce(kemu, topic, 3, **{"enable.idempotence": True}) == [None, None, None]
    assert fired(kemu, rule["id"]) == -1
    assert sorted(read_all(kemu, topic, 3)) == [b"v0", b"v1", b"v2"]


def test_torn_metadata_frame_makes_the_client_reconnect(kemu: InProcessKemu) -> None:
    rule = kemu.control.add_fault(kind="torn", api="metadata", count=1)
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    assert topic in admin.list_topics(timeout=TIMEOUT).topics
    assert fired(kemu, rule["id"]) == -1


def test_latency(kemu: InProcessKemu) -> None:
    topic = make_topic(kemu)
    rule = kemu.control.add_fault(kind="latency", api="produce", latency_ms=300, count=1)
    assert produce(kemu, topic, 2) == [None, None]
    assert fired(kemu, rule["id"]) == -1


def test_broker_down_clients_use_another_broker(kemu: InProcessKemu) -> None:
    topic = make_topic(kemu, partitions=3)
    assert kemu.control.broker_down(1)["down"] is True
    assert [b["down"] for b in kemu.control.brokers()] == [True, False, False]
    # The first bootstrap server refuses: metadata comes from another one.
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    metadata = admin.list_topics(timeout=TIMEOUT)
    assert topic in metadata.topics
    # A partition led by broker 2 or 3 is served.
    led = next(p for p, m in metadata.topics[topic].partitions.items() if m.leader != 1)
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    errors: list[Any] = []
    producer.produce(topic, b"x", partition=led, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(TIMEOUT) == 0 and errors == [None]
    kemu.control.broker_up(1)
    single = AdminClient({"bootstrap.servers": kemu.first_broker})
    assert topic in single.list_topics(timeout=TIMEOUT).topics


def test_moved_leader_is_followed(kemu: InProcessKemu) -> None:
    topic = make_topic(kemu)
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    before = admin.list_topics(timeout=TIMEOUT).topics[topic].partitions[0].leader
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 0})
    errors: list[Any] = []
    producer.produce(topic, b"a", partition=0, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(TIMEOUT) == 0
    target = before % 3 + 1
    moved = kemu.control.move_leader(topic, 0, target)
    assert (moved["leader"], moved["previous_leader"]) == (target, before)
    # The producer still talks to the old leader: NOT_LEADER_OR_FOLLOWER, Metadata, retry.
    producer.produce(topic, b"b", partition=0, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(TIMEOUT) == 0
    assert errors == [None, None]
    assert admin.list_topics(timeout=TIMEOUT).topics[topic].partitions[0].leader == target
    assert read_all(kemu, topic, 2) == [b"a", b"b"]


def test_bad_rules_change_nothing(kemu: InProcessKemu) -> None:
    topic = make_topic(kemu)
    control = kemu.control
    for rule, message in [
        ({"api": "nope", "error": "NOT_LEADER_OR_FOLLOWER"}, "unknown API"),
        ({"api": "produce", "error": "NO_SUCH_ERROR"}, "unknown error"),
        ({"api": "produce", "error": "NONE"}, "not an error"),
        ({"api": "produce"}, "needs error (a name"),
        ({"api": "produce", "kind": "explode"}, "kind must be"),
        ({"api": "produce", "kind": "latency"}, "latency_ms"),
        ({"api": "produce", "error_code": 6, "topic": "missing"}, "unknown topic"),
        ({"api": "produce", "error_code": 6, "topic": topic, "partition": 5}, "no partition 5"),
        ({"api": "produce", "error_code": 6, "fraction": 2}, "fraction"),
        ({"api": "produce", "error_code": 6, "broker": 9}, "no broker 9"),
        ({"api": "produce", "error_code": 6, "colour": "red"}, "unknown rule fields"),
    ]:
        with pytest.raises(ControlError) as refused:
            control.add_fault(**rule)
        assert refused.value.status == 400
        assert message in refused.value.message, (rule, refused.value.message)
    # a list is all or nothing
    with pytest.raises(ControlError):
        control.call("add-fault", body=[{"api": "produce", "error_code": 6}, {"api": "x"}])
    assert control.faults() == []
    for verb, args, status in [
        ("broker-down", (7,), 404),
        ("move-leader", ("missing", 0), 404),
        ("move-leader", (topic, 3), 404),
        ("delete-fault", (42,), 404),
    ]:
        with pytest.raises(ControlError) as refused:
            control.call(verb, *args, body={"broker": 2} if verb == "move-leader" else None)
        assert refused.value.status == status, (verb, refused.value.message)
    with pytest.raises(ControlError) as refused:
        control.move_leader(topic, 0, 9)
    assert refused.value.status == 404
    assert produce(kemu, topic, 1) == [None]
