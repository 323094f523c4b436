"""Share-aware and transaction verbs of the control API, and the virtual clock, with
confluent-kafka clients against kemu in the test's process.

- an acquisition lock expired by the verb redelivers the record to another consumer at once
  (the lock would hold it for ten minutes);
- release/archive of a record range and kicking a member;
- listing, committing and aborting open transactions;
- with ``--clock virtual``: a 60 s lock expiry and a 15 min transaction timeout happen on
  ``advance``, with the clients connected and no waiting.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    ShareConsumer,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kemu.control.client import ControlError
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

TIMEOUT = 30.0
LONG_LOCK = [
    # Without the verbs a record would stay locked for the whole test.
    "group.share.max.record.lock.duration.ms=3600000",
    "group.share.record.lock.duration.ms=600000",
]


def queue(kemu: InProcessKemu, records: int) -> tuple[str, str]:
    topic, group = f"q-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for index in range(records):
        producer.produce(topic, value=b"v%d" % index, partition=0)
    assert producer.flush(TIMEOUT) == 0
    return topic, group


@pytest.fixture
def share_consumers() -> Iterator[list[ShareConsumer]]:
    opened: list[ShareConsumer] = []
    yield opened
    for consumer in opened:
        consumer.close()


def share_consumer(
    kemu: InProcessKemu, group: str, topic: str, opened: list[ShareConsumer]
) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": kemu.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    opened.append(consumer)
    return consumer


def poll(consumer: ShareConsumer, wanted: int, timeout: float = TIMEOUT) -> list[Message]:
    """Poll until ``wanted`` records came. Implicit acknowledgement: a poll accepts what the
    previous one returned, so a consumer that stops polling keeps its records ACQUIRED."""
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < wanted and time.monotonic() < deadline:
        for message in consumer.poll(0.2):
            assert message.error() is None, message.error()
            got.append(message)
    return got


def spans(kemu: InProcessKemu, group: str, topic: str) -> list[dict[str, Any]]:
    state: list[dict[str, Any]] = kemu.control.share_state(group, topic, 0)["spans"]
    return state


def test_expired_lock_redelivers_to_another_consumer(
    kemu_inprocess_factory: type[InProcessKemu], share_consumers: list[ShareConsumer]
) -> None:
    kemu = kemu_inprocess_factory(brokers=3, with_control=True, overrides=LONG_LOCK).start()
    topic, group = queue(kemu, 1)
    first = share_consumer(kemu, group, topic, share_consumers)
    (held,) = poll(first, 1)
    (span,) = spans(kemu, group, topic)
    assert span["state"] == "ACQUIRED" and span["delivery_count"] == 1
    assert span["member_id"] and span["lock_deadline_ms"] > 0
    second = share_consumer(kemu, group, topic, share_consumers)
    assert poll(second, 1, timeout=3.0) == []  # locked by the first consumer
    expired = kemu.control.expire_locks(group, topic, 0, member_id=span["member_id"])
    assert expired["expired_records"] == 1
    (again,) = poll(second, 1)
    assert again.value() == held.value() == b"v0"
    assert again.delivery_count() == 2
    (span,) = spans(kemu, group, topic)
    assert span["state"] == "ACQUIRED" and span["delivery_count"] == 2


def test_release_archive_and_kick(
    kemu_inprocess_factory: type[InProcessKemu], share_consumers: list[ShareConsumer]
) -> None:
    kemu = kemu_inprocess_factory(brokers=3, with_control=True, overrides=LONG_LOCK).start()
    topic, group = queue(kemu, 5)
    first = share_consumer(kemu, group, topic, share_consumers)
    assert len(poll(first, 5)) == 5
    control = kemu.control
    assert control.archive(group, topic, 0, 0, 1)["moved_records"] == 2
    assert control.release(group, topic, 0, 2, 3)["moved_records"] == 2
    states = [(s["first_offset"], s["last_offset"], s["state"]) for s in spans(kemu, group, topic)]
    assert states == [(2, 3, "AVAILABLE"), (4, 4, "ACQUIRED")]  # 0-1 archived: SPSO moved to 2
    second = share_consumer(kemu, group, topic, share_consumers)
    assert sorted(m.value() for m in poll(second, 2)) == [b"v2", b"v3"]
    # kick the first member: its record 4 is released to the second consumer
    member = next(s["member_id"] for s in spans(kemu, group, topic) if s["first_offset"] == 4)
    (listed,) = [g for g in control.share_groups() if g["group"] == group]
    assert member in [m["member_id"] for m in listed["members"]]
    # assignments name their topic beside its id
    assigned = [a for m in listed["members"] for a in m["assigned"]]
    assert {(a["topic"], a["partition"]) for a in assigned} == {(topic, 0)}
    assert all(len(a["topic_id"]) == 36 for a in assigned)
    control.kick(group, member)
    (listed,) = [g for g in control.share_groups() if g["group"] == group]
    assert member not in [m["member_id"] for m in listed["members"]]
    assert [m.value() for m in poll(second, 1)] == [b"v4"]
    # bad input: 4xx, nothing changed
    before = spans(kemu, group, topic)
    for call, status in [
        (lambda: control.release(group, topic, 0, 100, 200), 409),
        (lambda: control.archive(group, topic, 0, 3, 2), 409),
        (lambda: control.share_state("no-such-group", topic, 0), 404),
        (lambda: control.share_state(group, "no-such-topic", 0), 404),
        (lambda: control.share_state(group, topic, 7), 404),
        (lambda: control.kick(group, "no-such-member"), 404),
        (lambda: control.call("expire-locks", group, topic, 0, body={"member": "x"}), 400),
    ]:
        with pytest.raises(ControlError) as refused:
            call()
        assert refused.value.status == status, refused.value.message
    assert spans(kemu, group, topic) == before


def transactional_producer(kemu: InProcessKemu, transactional_id: str, **extra: Any) -> Producer:
    producer = Producer(
        {"bootstrap.servers": kemu.bootstrap, "transactional.id": transactional_id, **extra}
    )
    producer.init_transactions(TIMEOUT)
    return producer


def committed_values(kemu: InProcessKemu, topic: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": kemu.bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        while True:
            message = consumer.poll(TIMEOUT)
            assert message is not None
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return values
                continue
            values.append(message.value())
    finally:
        consumer.close()


def test_transactions_listed_committed_and_aborted(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(brokers=3, with_control=True).start()
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    committer = transactional_producer(kemu, "tx-commit")
    aborter = transactional_producer(kemu, "tx-abort")
    for producer, value in ((committer, b"kept"), (aborter, b"dropped")):
        producer.begin_transaction()
        producer.produce(topic, value, partition=0)
        assert producer.flush(TIMEOUT) == 0
    listed = {t["transactional_id"]: t for t in kemu.control.transactions()}
    assert set(listed) == {"tx-commit", "tx-abort"}
    assert listed["tx-commit"]["state"] == "Ongoing"
    assert listed["tx-commit"]["partitions"] == [[topic, 0]]
    assert kemu.control.commit_transaction("tx-commit")["result"] == "committed"
    assert kemu.control.abort_transaction("tx-abort")["result"] == "aborted"
    assert kemu.control.transactions() == []
    assert committed_values(kemu, topic) == [b"kept"]
    # the aborted producer was fenced, as by a transaction timeout
    with pytest.raises(KafkaException):
        aborter.commit_transaction(TIMEOUT)
    with pytest.raises(ControlError) as refused:
        kemu.control.abort_transaction("tx-commit")  # not Ongoing any more
    assert refused.value.status == 409
    with pytest.raises(ControlError) as refused:
        kemu.control.abort_transaction("never-seen")
    assert refused.value.status == 404


def test_virtual_clock_runs_a_60s_lock_and_a_15min_transaction_timeout(
    kemu_inprocess_factory: type[InProcessKemu], share_consumers: list[ShareConsumer]
) -> None:
    kemu = kemu_inprocess_factory(
        brokers=3,
        clock="virtual",
        overrides=[
            "group.share.record.lock.duration.ms=60000",
            # sessions outlive the advance, so the lock expiry (not a departure) frees the record
            "group.share.max.session.timeout.ms=600000",
            "group.share.session.timeout.ms=600000",
        ],
    ).start()
    control = kemu.control
    assert control.clock()["kind"] == "virtual"
    # --- a 60 s acquisition lock ---
    topic, group = queue(kemu, 1)
    first = share_consumer(kemu, group, topic, share_consumers)
    assert len(poll(first, 1)) == 1
    second = share_consumer(kemu, group, topic, share_consumers)
    assert poll(second, 1, timeout=3.0) == []
    control.advance("59s")
    assert poll(second, 1, timeout=2.0) == []  # 59 s of virtual time: still locked
    control.advance("2s")
    (again,) = poll(second, 1)
    assert again.delivery_count() == 2
    # --- a 15 min transaction timeout ---
    txn_topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(txn_topic, 1, 1)])[txn_topic].result(TIMEOUT)
    producer = transactional_producer(kemu, "slow-tx", **{"transaction.timeout.ms": 900000})
    producer.begin_transaction()
    producer.produce(txn_topic, b"never", partition=0)
    assert producer.flush(TIMEOUT) == 0
    control.advance("14m")
    (open_txn,) = control.transactions()
    assert open_txn["transactional_id"] == "slow-tx" and open_txn["state"] == "Ongoing"
    control.advance("61s")
    assert control.transactions() == []  # aborted by the coordinator's timeout
    assert committed_values(kemu, txn_topic) == []
    with pytest.raises(KafkaException):
        producer.commit_transaction(TIMEOUT)
    with pytest.raises(ControlError) as refused:
        control.advance("-1s")
    assert refused.value.status == 400


def test_lock_expiries_and_delivery_limit_archives_are_counted(
    kemu_inprocess_factory: type[InProcessKemu], share_consumers: list[ShareConsumer]
) -> None:
    """``/metrics``: a record whose lock expires twice with a delivery limit of 2 counts two
    lock expiries and one delivery-limit archive."""
    from tests.integration.control.test_control_metrics import samples, value

    kemu = kemu_inprocess_factory(
        brokers=3,
        with_control=True,
        overrides=[*LONG_LOCK, "group.share.delivery.count.limit=2"],
    ).start()
    topic, group = queue(kemu, 1)
    first = share_consumer(kemu, group, topic, share_consumers)
    assert len(poll(first, 1)) == 1
    assert kemu.control.expire_locks(group, topic, 0)["expired_records"] == 1
    second = share_consumer(kemu, group, topic, share_consumers)
    (again,) = poll(second, 1)
    assert again.delivery_count() == 2
    assert kemu.control.expire_locks(group, topic, 0)["expired_records"] == 1
    assert spans(kemu, group, topic) == []  # archived at the limit: gone past the start
    found = samples(kemu)
    labels = {"group": group, "topic": topic}
    assert value(found, "kafka_share_acquisition_lock_expiries_total", **labels) == 2
    assert value(found, "kafka_share_delivery_limit_archives_total", **labels) == 1
