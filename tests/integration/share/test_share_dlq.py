"""Share-group dead-letter queues (KIP-1191) through the wire, against kemu started as a user
does and - where Kafka 4.4.0 has the behaviour - against a real Apache Kafka 4.4.0 on the same
scenario (single-node KRaft from bench/.cache/lib, formatted with share.version=2, which DLQs
need; skipped without java or the jars).

A share consumer (kemu.client, explicit mode) REJECTs records and RELEASEs others up to the
delivery-count limit; a plain consumer (confluent-kafka) then reads the DLQ topic and checks the
context headers, the copied key and value and the DLQ partition. Also: lock expiry at the
limit, the DLQ topic checks (prefix, ``errors.deadletterqueue.group.enable``, auto-creation),
the group-config error, a REJECT committed in a KIP-1289 transaction (one DLQ record, persisted
ARCHIVED), and SIGKILLs around the DLQ write (exactly one DLQ record after the restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType as RdAcknowledgeType
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka import ShareConsumer as RdShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kemu.client import AcknowledgeType, Admin, ShareConsumer, TransactionalProducer
from kemu.testing.kafka import KafkaConfig, KafkaServer
from kemu.testing.plugin import KemuProcess
from tests.integration.parity import kafka_timing_overrides

pytestmark = [pytest.mark.integration, pytest.mark.parity]

TIMEOUT = 30.0
REJECTED = "Offset rejected by client."
EXCEEDED = "Offset delivery count exceeded the threshold."
DLQ_HEADERS = [
    "__dlq.errors.topic",
    "__dlq.errors.partition",
    "__dlq.errors.offset",
    "__dlq.errors.group",
    "__dlq.errors.delivery.count",
    "__dlq.errors.message",
]


@dataclass(frozen=True, order=True)
class DlqRecord:
    partition: int  # of the DLQ topic
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> str:
        return dict(self.headers)[name]


# --- helpers (the same against kemu and Kafka) ---------------------------------------------------


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int, **configs: str) -> None:
    client = admin(bootstrap)
    client.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(TIMEOUT)


def set_group_configs(bootstrap: str, group: str, **configs: str) -> None:
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
            for name, value in configs.items()
        ],
    )
    client = admin(bootstrap)
    client.incremental_alter_configs([resource])[resource].result(TIMEOUT)


def group_config_error(bootstrap: str, group: str, name: str, value: str) -> tuple[str, str]:
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)],
    )
    client = admin(bootstrap)
    with pytest.raises(KafkaException) as raised:
        client.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    error = raised.value.args[0]
    return error.name(), error.str()


def dlq_group(bootstrap: str, group: str, dlq: str, *, limit: int = 2, copy: bool = True) -> None:
    set_group_configs(
        bootstrap,
        group,
        **{
            "share.auto.offset.reset": "earliest",
            "share.delivery.count.limit": str(limit),
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.copy.record.enable": "true" if copy else "false",
        },
    )


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(partitions):
        for index in range(per_partition):
            producer.produce(
                topic,
                key=f"k{partition}-{index}".encode(),
                value=f"v{partition}-{index}".encode(),
                partition=partition,
                headers=[("original", b"header")],
            )
    assert producer.flush(TIMEOUT) == 0


def read_dlq(bootstrap: str, topic: str, wanted: int, *, wait: float = TIMEOUT) -> list[DlqRecord]:
    """Every record of ``topic`` once ``wanted`` arrived (or ``wait`` passed), sorted."""
    metadata = admin(bootstrap).list_topics(topic, timeout=TIMEOUT)
    partitions = sorted(metadata.topics[topic].partitions)
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
        }
    )
    reader.assign([TopicPartition(topic, p, 0) for p in partitions])
    got: list[DlqRecord] = []
    deadline = time.monotonic() + wait
    try:
        while time.monotonic() < deadline and len(got) < wanted:
            message = reader.poll(0.2)
            if message is None or message.error() is not None:
                continue
            headers = tuple(
                (name, (value or b"").decode()) for name, value in (message.headers() or [])
            )
            got.append(DlqRecord(message.partition(), message.key(), message.value(), headers))
        if len(got) >= wanted:  # anything more (a duplicate) shows up within a second
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                message = reader.poll(0.2)
                if message is not None and message.error() is None:
                    headers = tuple(
                        (name, (value or b"").decode()) for name, value in (message.headers() or [])
                    )
                    got.append(
                        DlqRecord(message.partition(), message.key(), message.value(), headers)
                    )
    finally:
        reader.close()
    return sorted(got)


async def joined(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    consumer = ShareConsumer(bootstrap, group, acknowledgement_mode="explicit")
    await consumer.subscribe([topic])
    return consumer


async def lag_reaches_zero(bootstrap: str, group: str, topic: str) -> int:
    async with Admin(bootstrap) as client:
        lag = -1
        for _ in range(150):
            lag = await client.share_group_lag(group, topic)
            if lag == 0:
                break
            await asyncio.sleep(0.2)
        return lag


async def reject_and_exhaust(bootstrap: str, group: str, topic: str, partitions: int) -> int:
    """Per partition: REJECT offset 0, RELEASE offset 1 on both its deliveries (limit 2), ACCEPT
    offset 2. Returns the group's lag once it reached 0 (or the last lag seen)."""
    consumer = await joined(bootstrap, group, topic)
    releases: dict[int, int] = {}
    settled = 0
    try:
        for _ in range(200):
            for record in await consumer.poll(0.5):
                if record.offset == 0:
                    consumer.acknowledge(record, AcknowledgeType.REJECT)
                    settled += 1
                elif record.offset == 1:
                    consumer.acknowledge(record, AcknowledgeType.RELEASE)
                    releases[record.partition] = record.delivery_count
                    settled += record.delivery_count == 2
                else:
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT)
                    settled += 1
            results = await consumer.commit()
            assert all(error is None for error in results.values()), results
            if settled == 3 * partitions:
                break
        assert settled == 3 * partitions, (settled, releases)
        return await lag_reaches_zero(bootstrap, group, topic)
    finally:
        await consumer.close()


def expected_dlq(group: str, topic: str, partitions: int, dlq_partitions: int) -> list[DlqRecord]:
    out = []
    for p in range(partitions):
        for offset, count, cause in ((0, 1, REJECTED), (1, 2, EXCEEDED)):
            values = (topic, str(p), str(offset), group, str(count), cause)
            out.append(
                DlqRecord(
                    p % dlq_partitions,
                    f"k{p}-{offset}".encode(),
                    f"v{p}-{offset}".encode(),
                    tuple(zip(DLQ_HEADERS, values, strict=True)),
                )
            )
    return sorted(out)


def run_main_scenario(bootstrap: str, suffix: str = "") -> list[DlqRecord]:
    """Source topic of 3 partitions, DLQ topic of 2 (records of partition p go to p % 2)."""
    topic, group, dlq = f"orders{suffix}", f"workers{suffix}", f"dlq.orders{suffix}"
    create_topic(bootstrap, topic, 3)
    create_topic(bootstrap, dlq, 2, **{"errors.deadletterqueue.group.enable": "true"})
    dlq_group(bootstrap, group, dlq)
    produce(bootstrap, topic, 3, 3)
    assert asyncio.run(reject_and_exhaust(bootstrap, group, topic, 3)) == 0
    return read_dlq(bootstrap, dlq, 6)


def run_refused_scenario(bootstrap: str, dlq: str, suffix: str = "") -> tuple[int, int]:
    """A group whose DLQ topic Kafka refuses: REJECT archives anyway. (lag, DLQ records)."""
    topic, group = f"refused{suffix}", f"refusing{suffix}"
    create_topic(bootstrap, topic, 1)
    dlq_group(bootstrap, group, dlq)
    produce(bootstrap, topic, 1, 1)

    async def reject_all() -> int:
        consumer = await joined(bootstrap, group, topic)
        try:
            for _ in range(100):
                records = await consumer.poll(0.5)
                for record in records:
                    consumer.acknowledge(record, AcknowledgeType.REJECT)
                if records:
                    await consumer.commit()
                    break
            return await lag_reaches_zero(bootstrap, group, topic)
        finally:
            await consumer.close()

    lag = asyncio.run(reject_all())
    names = admin(bootstrap).list_topics(timeout=TIMEOUT).topics
    found = len(read_dlq(bootstrap, dlq, 1, wait=2.0)) if dlq in names else 0
    return lag, found


# --- against kemu ------------------------------------------------------------------------------


@pytest.fixture
def kemu(kemu_factory: type[KemuProcess]) -> KemuProcess:
    return kemu_factory(brokers=3).start()


def test_rejected_and_exhausted_records_go_to_the_dlq_with_kafkas_headers(
    kemu: KemuProcess,
) -> None:
    got = run_main_scenario(kemu.bootstrap)
    assert got == expected_dlq("workers", "orders", 3, 2)
    # the original headers are not copied (Kafka 4.4.0 copies key and value only)
    assert all([name for name, _ in r.headers] == DLQ_HEADERS for r in got)


def test_without_copy_record_the_dlq_record_has_the_headers_alone(kemu: KemuProcess) -> None:
    bootstrap = kemu.bootstrap
    create_topic(bootstrap, "plain", 1)
    create_topic(bootstrap, "dlq.plain", 1, **{"errors.deadletterqueue.group.enable": "true"})
    dlq_group(bootstrap, "plain-group", "dlq.plain", copy=False)
    produce(bootstrap, "plain", 1, 3)
    assert asyncio.run(reject_and_exhaust(bootstrap, "plain-group", "plain", 1)) == 0
    got = read_dlq(bootstrap, "dlq.plain", 2)
    assert [(r.key, r.value) for r in got] == [(None, None), (None, None)]
    assert [(r.header("__dlq.errors.offset"), r.header("__dlq.errors.message")) for r in got] == [
        ("0", REJECTED),
        ("1", EXCEEDED),
    ]


def test_lock_expiry_at_the_delivery_limit_dead_letters(kemu_factory: type[KemuProcess]) -> None:
    kemu = kemu_factory(
        brokers=1,
        overrides=[
            "group.share.min.record.lock.duration.ms=1000",
            "group.share.record.lock.duration.ms=1000",
        ],
    ).start()
    bootstrap = kemu.bootstrap
    create_topic(bootstrap, "slow", 1)
    create_topic(bootstrap, "dlq.slow", 1, **{"errors.deadletterqueue.group.enable": "true"})
    dlq_group(bootstrap, "sleepy", "dlq.slow")
    produce(bootstrap, "slow", 1, 1)

    async def never_acknowledge() -> int:
        consumer = await joined(bootstrap, "sleepy", "slow")
        try:
            counts = []
            for _ in range(100):
                records = await consumer.poll(0.5)
                counts += [r.delivery_count for r in records]
                consumer._delivered.clear()  # the application lost them: the locks expire
                if counts == [1, 2]:
                    break
            assert counts == [1, 2]
            return await lag_reaches_zero(bootstrap, "sleepy", "slow")
        finally:
            await consumer.close()

    assert asyncio.run(never_acknowledge()) == 0
    [record] = read_dlq(bootstrap, "dlq.slow", 1)
    assert record.header("__dlq.errors.delivery.count") == "2"
    assert record.header("__dlq.errors.message") == EXCEEDED


def test_the_dlq_topic_checks_are_kafkas(kemu_factory: type[KemuProcess]) -> None:
    kemu = kemu_factory(brokers=1).start()
    bootstrap = kemu.bootstrap
    # the only error a client sees: the group config itself
    assert group_config_error(bootstrap, "g", "errors.deadletterqueue.topic.name", "__dlq") == (
        "INVALID_CONFIG",
        "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'",
    )
    # the others are Kafka's DLQ-write checks: logged, and the records archived without a write
    create_topic(bootstrap, "not-prefixed", 1, **{"errors.deadletterqueue.group.enable": "true"})
    create_topic(bootstrap, "dlq.not-enabled", 1)
    assert run_refused_scenario(bootstrap, "not-prefixed", "-1") == (0, 0)
    assert run_refused_scenario(bootstrap, "dlq.not-enabled", "-2") == (0, 0)
    assert run_refused_scenario(bootstrap, "dlq.missing", "-3") == (0, 0)  # no auto-create
    assert kemu.log_path is not None
    logged = kemu.log_path.read_text()
    for message in (
        "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: "
        "refusing-1, topic: not-prefixed, prefix: dlq..",
        "DLQ is not enabled on configured DLQ topic for share group: refusing-2, "
        "topic: dlq.not-enabled.",
        "DLQ topic does not exist and auto create is disabled on cluster for share group: "
        "refusing-3, topic: dlq.missing.",
    ):
        assert message in logged
    assert "Failed to write to DLQ, proceeding to ARCHIVED regardless." in logged


def test_a_missing_dlq_topic_is_created_when_the_broker_allows_it(
    kemu_factory: type[KemuProcess],
) -> None:
    kemu = kemu_factory(
        brokers=1,
        overrides=[
            "errors.deadletterqueue.auto.create.topics.enable=true",
            "errors.deadletterqueue.topic.name.prefix=",
            "num.partitions=2",
        ],
    ).start()
    bootstrap = kemu.bootstrap
    assert run_refused_scenario(bootstrap, "anything-goes", "-auto") == (0, 1)
    resource = ConfigResource(ResourceType.TOPIC, "anything-goes")
    client = admin(bootstrap)
    configs = client.describe_configs([resource])[resource].result(TIMEOUT)
    assert configs["errors.deadletterqueue.group.enable"].value == "true"
    assert configs["message.timestamp.type"].value == "CreateTime"
    metadata = admin(bootstrap).list_topics("anything-goes", timeout=TIMEOUT)
    assert len(metadata.topics["anything-goes"].partitions) == 2


def reject_and_exhaust_with_librdkafka(bootstrap: str, group: str, topic: str) -> None:
    """The same decisions as ``reject_and_exhaust`` by confluent-kafka's ShareConsumer."""
    share = RdShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    share.subscribe([topic])
    settled = 0
    try:
        deadline = time.monotonic() + TIMEOUT
        while settled < 3 and time.monotonic() < deadline:
            for message in share.poll(0.2):
                assert message.error() is None, message.error()
                if message.offset() == 0:
                    share.acknowledge(message, RdAcknowledgeType.REJECT)
                    settled += 1
                elif message.offset() == 1:
                    share.acknowledge(message, RdAcknowledgeType.RELEASE)
                    settled += message.delivery_count() == 2
                else:
                    share.acknowledge(message, RdAcknowledgeType.ACCEPT)
                    settled += 1
        assert settled == 3
        results = share.commit_sync(TIMEOUT)
        assert all(error is None for error in results.values()), results
    finally:
        share.close()


def test_librdkafkas_share_consumer_rejects_and_exhausts_into_the_dlq(kemu: KemuProcess) -> None:
    bootstrap = kemu.bootstrap
    create_topic(bootstrap, "rd", 1)
    create_topic(bootstrap, "dlq.rd", 1, **{"errors.deadletterqueue.group.enable": "true"})
    dlq_group(bootstrap, "rd-group", "dlq.rd")
    produce(bootstrap, "rd", 1, 3)
    reject_and_exhaust_with_librdkafka(bootstrap, "rd-group", "rd")
    assert asyncio.run(lag_reaches_zero(bootstrap, "rd-group", "rd")) == 0
    assert read_dlq(bootstrap, "dlq.rd", 2) == expected_dlq("rd-group", "rd", 1, 1)


# --- KIP-1289: a REJECT committed in a transaction ----------------------------------------------


def decode_share_state(bootstrap: str) -> list[dict[str, Any]]:
    completed = subprocess.run(
        [sys.executable, "-m", "kemu.cli", "decode-share-state", "--bootstrap", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    return [json.loads(line) for line in completed.stdout.splitlines()]


def state_batches_of(bootstrap: str, group: str, offset: int) -> list[dict[str, Any]]:
    """The state batch holding ``offset`` in every ``__share_group_state`` record of ``group``,
    in the order written."""
    found = []
    for entry in decode_share_state(bootstrap):
        key, value = entry.get("key") or {}, entry.get("value") or {}
        if (key.get("data") or {}).get("groupId") != group:
            continue
        for batch in (value.get("data") or {}).get("stateBatches", ()):
            if batch["firstOffset"] <= offset <= batch["lastOffset"]:
                found.append(batch)
    return found


def states_of(bootstrap: str, group: str, offset: int) -> list[int]:
    """Delivery state of ``offset`` in every ``__share_group_state`` record of ``group``."""
    return [batch["deliveryState"] for batch in state_batches_of(bootstrap, group, offset)]


def start_offset(bootstrap: str, group: str) -> int:
    """The persisted share-partition start offset of ``group``'s (one) partition."""
    [state] = [
        e["state"]
        for e in decode_share_state(bootstrap)
        if e.get("state", {}).get("groupId") == group
    ]
    return int(state["startOffset"])


def archived(bootstrap: str, group: str, offset: int) -> bool:
    """Whether the persisted state has ``offset`` done with: the start offset moved past it, or
    the latest record naming it says ARCHIVED (4) (Kafka writes a start offset's move with the
    write after the one that completed the records below it)."""
    states = states_of(bootstrap, group, offset)
    return start_offset(bootstrap, group) > offset or (bool(states) and states[-1] == 4)


def test_a_transactional_reject_commit_writes_one_dlq_record_then_archives(
    kemu_factory: type[KemuProcess],
) -> None:
    """Spec §11.1 row 8 with offset 0 held in flight, so that the persisted state of the
    rejected offset 1 stays in the share-partition state: TX_PENDING (5), then ARCHIVING (3) when
    the commit resolves it, then ARCHIVED (4) once its one DLQ record is written."""
    kemu = kemu_factory(brokers=3, overrides=["kemu.kip1289.enable=true"]).start()
    bootstrap = kemu.bootstrap
    create_topic(bootstrap, "txn-in", 1)
    create_topic(bootstrap, "dlq.txn-group", 1, **{"errors.deadletterqueue.group.enable": "true"})
    dlq_group(bootstrap, "txn-group", "dlq.txn-group", limit=5)
    produce(bootstrap, "txn-in", 1, 2)

    async def reject_in_a_transaction() -> list[int]:
        consumer = await joined(bootstrap, "txn-group", "txn-in")
        producer = TransactionalProducer(bootstrap, "txn-dlq")
        try:
            await producer.init_transactions()
            records: list[Any] = []
            for _ in range(100):
                records += await consumer.poll(0.5)
                if len(records) == 2:
                    break
            held, rejected = records
            producer.begin_transaction()
            consumer.acknowledge(rejected, AcknowledgeType.REJECT)
            await producer.send_share_acknowledgements_to_transaction(
                consumer.acknowledgements_for_transaction(), consumer.share_group_metadata()
            )
            assert states_of(bootstrap, "txn-group", 1)[-1] == 5  # TX_PENDING
            await producer.commit_transaction()
            for _ in range(50):
                if states_of(bootstrap, "txn-group", 1)[-1] == 4:
                    break
                await asyncio.sleep(0.1)
            states = states_of(bootstrap, "txn-group", 1)
            consumer.acknowledge(held, AcknowledgeType.ACCEPT)
            assert all(e is None for e in (await consumer.commit()).values())
            assert await consumer.poll(1.0) == []
            assert await lag_reaches_zero(bootstrap, "txn-group", "txn-in") == 0
            return states
        finally:
            await consumer.close()
            await producer.close()

    states = asyncio.run(reject_in_a_transaction())
    # the marker's resolution may be written twice (the share coordinator settles it, and the
    # leader applies it): TX_PENDING, ARCHIVING..., ARCHIVED
    changes = [state for i, state in enumerate(states) if i == 0 or states[i - 1] != state]
    assert changes[-3:] == [5, 3, 4]
    [record] = read_dlq(bootstrap, "dlq.txn-group", 1)
    assert (record.key, record.value) == (b"k0-1", b"v0-1")
    assert record.header("__dlq.errors.offset") == "1"
    assert record.header("__dlq.errors.message") == REJECTED
    assert record.header("__dlq.errors.delivery.count") == "1"
    assert archived(bootstrap, "txn-group", 1)


# --- crashes around the DLQ write --------------------------------------------------------------


@pytest.mark.parametrize("point", ["share.archiving", "share.dead_lettered"])
def test_a_sigkill_around_the_dlq_write_still_gives_exactly_one_dlq_record(
    kemu_factory: type[KemuProcess], tmp_path: Path, point: str
) -> None:
    """share.archiving: ARCHIVING is durable, the DLQ record not written (the load writes it);
    share.dead_lettered: the DLQ record is written, ARCHIVED is not (the load finds it)."""
    data = tmp_path / "data"
    kemu = kemu_factory(brokers=3, data_dir=data, env={"KEMU_CRASH_AT": point}).start()
    bootstrap = kemu.bootstrap
    create_topic(bootstrap, "crashy", 1)
    create_topic(bootstrap, "dlq.crashy", 1, **{"errors.deadletterqueue.group.enable": "true"})
    dlq_group(bootstrap, "crash-group", "dlq.crashy")
    produce(bootstrap, "crashy", 1, 2)

    async def reject_first() -> None:
        consumer = await joined(bootstrap, "crash-group", "crashy")
        try:
            for _ in range(100):
                records = await consumer.poll(0.5)
                if records:
                    break
            for record in records:
                kind = AcknowledgeType.REJECT if record.offset == 0 else AcknowledgeType.ACCEPT
                consumer.acknowledge(record, kind)
            with pytest.raises(Exception):  # noqa: B017 - kemu dies under the acknowledgement
                results = await asyncio.wait_for(consumer.commit(), 10)
                assert all(error is None for error in results.values()), results
        finally:
            with contextlib.suppress(Exception):  # the broker is gone
                await asyncio.wait_for(consumer.close(), 5)

    asyncio.run(reject_first())
    assert kemu.process is not None
    kemu.process.wait(10)
    kemu.env = {}
    kemu.start()
    bootstrap = kemu.bootstrap

    # no consumer needed: the restarted kemu resumes the ARCHIVING record on its own
    got = read_dlq(bootstrap, "dlq.crashy", 1)
    assert [(r.key, r.header("__dlq.errors.offset")) for r in got] == [(b"k0-0", "0")]
    assert asyncio.run(lag_reaches_zero(bootstrap, "crash-group", "crashy")) == 0
    assert 3 in states_of(bootstrap, "crash-group", 0)  # it was ARCHIVING when kemu died
    assert archived(bootstrap, "crash-group", 0)  # and ARCHIVED since


# --- against Apache Kafka 4.4.0 ------------------------------------------------------------------


# share.version 2 (DLQs need it) and share heartbeats every 500 ms
DLQ_KAFKA = KafkaConfig(
    "kafka-dlq",
    {
        "group.share.min.heartbeat.interval.ms": "500",
        "group.share.heartbeat.interval.ms": "500",
        "share.coordinator.state.topic.num.partitions": "3",
    },
    features=("share.version=2",),
)


@pytest.fixture(scope="module")
def kafka(kafka_server: Callable[[KafkaConfig], KafkaServer]) -> KafkaServer:
    return kafka_server(DLQ_KAFKA)


def dlq_kafka_timing() -> list[str]:
    """The DLQ Kafka's timers, for kemu started with --timing kafka."""
    return kafka_timing_overrides(
        **{
            "group.share.min.heartbeat.interval.ms": "500",
            "group.share.heartbeat.interval.ms": "500",
        }
    )


@pytest.mark.java
def test_kafka_and_kemu_write_the_same_dlq_records(
    kafka: Any, kemu_factory: type[KemuProcess]
) -> None:
    kemu = kemu_factory(brokers=1, timing="kafka", overrides=dlq_kafka_timing()).start()
    on_kafka = run_main_scenario(kafka.bootstrap)
    on_kemu = run_main_scenario(kemu.bootstrap)
    assert on_kemu == on_kafka == expected_dlq("workers", "orders", 3, 2)


@pytest.mark.java
def test_kafka_and_kemu_refuse_the_same_dlq_configs(
    kafka: Any, kemu_factory: type[KemuProcess]
) -> None:
    kemu = kemu_factory(brokers=1, timing="kafka", overrides=dlq_kafka_timing()).start()
    for bootstrap in (kafka.bootstrap, kemu.bootstrap):
        create_topic(
            bootstrap, "cmp-unprefixed", 1, **{"errors.deadletterqueue.group.enable": "true"}
        )
        create_topic(bootstrap, "dlq.cmp-disabled", 1)
    errors = [
        [
            group_config_error(bootstrap, "cmp", "errors.deadletterqueue.topic.name", "__dlq"),
            group_config_error(
                bootstrap, "cmp", "errors.deadletterqueue.copy.record.enable", "maybe"
            ),
        ]
        for bootstrap in (kafka.bootstrap, kemu.bootstrap)
    ]
    assert errors[0] == errors[1]
    outcomes = [
        [
            run_refused_scenario(bootstrap, "cmp-unprefixed", "-a"),
            run_refused_scenario(bootstrap, "dlq.cmp-disabled", "-b"),
            run_refused_scenario(bootstrap, "dlq.cmp-missing", "-c"),
        ]
        for bootstrap in (kafka.bootstrap, kemu.bootstrap)
    ]
    assert outcomes[0] == outcomes[1] == [(0, 0)] * 3
    # the same messages in both logs
    kafka_log = (kafka.workdir / "server.log").read_text(errors="replace")
    assert kemu.log_path is not None
    kemu_log = kemu.log_path.read_text()
    for message in (
        "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: "
        "refusing-a, topic: cmp-unprefixed, prefix: dlq..",
        "DLQ is not enabled on configured DLQ topic for share group: refusing-b, "
        "topic: dlq.cmp-disabled.",
        "DLQ topic does not exist and auto create is disabled on cluster for share group: "
        "refusing-c, topic: dlq.cmp-missing.",
        "Failed to write to DLQ, proceeding to ARCHIVED regardless.",
    ):
        assert message in kafka_log, message
        assert message in kemu_log, message


def test_a_transactional_reject_whose_commit_completes_at_restart_is_dead_lettered(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    """kemu dies with the transaction PREPARE_COMMIT (txn.prepared): the restart completes the
    commit, the share coordinator resolves the staged REJECT to ARCHIVING while nothing has the
    share partition loaded, and kemu writes its one DLQ record without a consumer coming back."""
    kemu = kemu_factory(
        brokers=3,
        data_dir=tmp_path / "data",
        overrides=["kemu.kip1289.enable=true"],
        env={"KEMU_CRASH_AT": "txn.prepared"},
    ).start()
    bootstrap = kemu.bootstrap
    create_topic(bootstrap, "prepared-in", 1)
    create_topic(bootstrap, "dlq.prepared", 1, **{"errors.deadletterqueue.group.enable": "true"})
    dlq_group(bootstrap, "prepared", "dlq.prepared", limit=5)
    produce(bootstrap, "prepared-in", 1, 1)

    async def stage_and_commit() -> None:
        consumer = await joined(bootstrap, "prepared", "prepared-in")
        producer = TransactionalProducer(bootstrap, "txn-prepared")
        try:
            await producer.init_transactions()
            records: list[Any] = []
            for _ in range(100):
                records = await consumer.poll(0.5)
                if records:
                    break
            [record] = records
            producer.begin_transaction()
            consumer.acknowledge(record, AcknowledgeType.REJECT)
            await producer.send_share_acknowledgements_to_transaction(
                consumer.acknowledgements_for_transaction(), consumer.share_group_metadata()
            )
            with contextlib.suppress(Exception):  # kemu dies once PREPARE_COMMIT is written
                await asyncio.wait_for(producer.commit_transaction(), 10)
        finally:
            for closing in (consumer.close(), producer.close()):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(closing, 5)

    asyncio.run(stage_and_commit())
    assert kemu.process is not None
    kemu.process.wait(10)
    kemu.env = {}
    kemu.start()
    bootstrap = kemu.bootstrap
    [record] = read_dlq(bootstrap, "dlq.prepared", 1)
    assert (record.key, record.header("__dlq.errors.message")) == (b"k0-0", REJECTED)
    assert asyncio.run(lag_reaches_zero(bootstrap, "prepared", "prepared-in")) == 0
    assert archived(bootstrap, "prepared", 0)
