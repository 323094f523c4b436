"""Behaviours where kemu used to differ from Kafka 4.4.0 (issue 15), each shown with a real
client against a 3-broker kemu started from the CLI.

- A record without a key on a compacted topic: the batch is refused with INVALID_RECORD and
  per-record errors (confluent-kafka's delivery report; the raw Produce response).
- Authorized operations without an authorizer: every operation of the resource's type
  (DescribeCluster, Metadata v8-v10 cluster operations, topic operations).
- A transactional producer fenced by a newer instance gets INVALID_PRODUCER_EPOCH on Produce,
  which librdkafka treats as fatal.
- KIP-848: a second consumer with an instance id held by an active member gets
  UNRELEASED_INSTANCE_ID.
- ShareFetch with MaxBytes 0 returns no records.
- KIP-848 regex subscriptions: the explicit topics are assigned first, the regex's topics on a
  later heartbeat, after the coordinator resolved the regex.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicCollection,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch
from kemu.testing.plugin import KemuProcess
from kemu.testing.wire_client import build, nested, send_once

pytestmark = pytest.mark.integration

TIMEOUT_S = 30.0
OVERRIDES = [
    # KIP-848 groups reconcile one heartbeat at a time: beat often so the tests are quick.
    "group.consumer.heartbeat.interval.ms=500",
    "group.consumer.min.heartbeat.interval.ms=500",
]


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuProcess]:
    log_path = tmp_path_factory.mktemp("parity") / "kemu.log"
    process = KemuProcess(brokers=3, log_path=log_path, overrides=OVERRIDES).start()
    yield process
    process.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(TIMEOUT_S)


# --- raw protocol ------------------------------------------------------------------------------


def call(address: str, api_key: int, version: int, **fields: Any) -> Any:
    return send_once(address, build(api_key, version, **fields), TIMEOUT_S, client_id="parity")


def leader_address(kemu: KemuProcess, topic: str, partition: int = 0) -> str:
    metadata = AdminClient({"bootstrap.servers": kemu.bootstrap}).list_topics(topic, TIMEOUT_S)
    leader = metadata.topics[topic].partitions[partition].leader
    broker = metadata.brokers[leader]
    return f"{broker.host}:{broker.port}"


# --- 1. compacted topics refuse records without a key ------------------------------------------


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_keyless_record_on_a_compacted_topic_fails_delivery(kemu: KemuProcess, policy: str) -> None:
    topic = unique("compacted")
    create_topic(kemu.bootstrap, topic, **{"cleanup.policy": policy})
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 0})
    reports: list[tuple[KafkaError | None, bytes | None]] = []
    producer.produce(topic, b"no key", on_delivery=lambda e, m: reports.append((e, m.key())))
    producer.flush(TIMEOUT_S)
    producer.produce(
        topic, b"keyed", key=b"k", on_delivery=lambda e, m: reports.append((e, m.key()))
    )
    producer.flush(TIMEOUT_S)
    (keyless_error, _), (keyed_error, _) = reports
    assert keyless_error is not None
    assert keyless_error.code() == KafkaError.INVALID_RECORD
    assert keyed_error is None


def test_keyless_records_get_record_errors_in_the_produce_response(kemu: KemuProcess) -> None:
    topic = unique("compacted-raw")
    create_topic(kemu.bootstrap, topic, **{"cleanup.policy": "compact"})
    batch = build_batch(
        [(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4")],
        timestamp_ms=int(time.time() * 1000),
    )
    response = call(
        leader_address(kemu, topic),
        0,
        9,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            nested(
                0,
                9,
                "TopicProduceData",
                name=topic,
                partition_data=(nested(0, 9, "PartitionProduceData", index=0, records=batch),),
            ),
        ),
    )
    (result,) = response.responses[0].partition_responses
    assert result.error_code is ErrorCode.invalid_record
    assert result.base_offset == -1
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert [(e.batch_index, e.batch_index_error_message) for e in result.record_errors] == [
        (1, message),
        (3, message),
    ]
    assert result.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{message}'"
        f"), RecordError(batchIndex=3, message='{message}')]"
    )


# --- 3. a fenced transactional producer gets INVALID_PRODUCER_EPOCH -----------------------------


def test_fenced_transactional_producer_is_fatal_for_librdkafka(kemu: KemuProcess) -> None:
    topic = unique("fenced")
    create_topic(kemu.bootstrap, topic)
    transactional_id = unique("tid")
    config = {"bootstrap.servers": kemu.bootstrap, "transactional.id": transactional_id}
    first = Producer(config)
    first.init_transactions(TIMEOUT_S)
    first.begin_transaction()
    first.produce(topic, b"zombie", partition=0)
    first.flush(TIMEOUT_S)
    second = Producer(config)
    second.init_transactions(TIMEOUT_S)  # aborts the first's transaction, bumps the epoch
    first.produce(topic, b"late", partition=0)
    # librdkafka turns INVALID_PRODUCER_EPOCH on Produce into a fatal "fenced" error; with
    # PRODUCER_FENCED it took the transaction as merely abortable and carried on.
    with pytest.raises(KafkaException) as raised:
        first.flush(TIMEOUT_S)
    error = raised.value.args[0]
    assert error.fatal()
    assert error.code() == KafkaError._FENCED
    assert "Producer attempted an operation with an old epoch" in error.str()
    second.begin_transaction()
    second.produce(topic, b"fresh", partition=0)
    second.commit_transaction(TIMEOUT_S)


# --- 2. authorized operations without an authorizer --------------------------------------------

CLUSTER_OPERATIONS = {
    "CREATE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
    "ALTER",
    "DESCRIBE",
}
TOPIC_OPERATIONS = {
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
}


def test_admin_client_sees_every_cluster_and_topic_operation(kemu: KemuProcess) -> None:
    topic = unique("ops")
    create_topic(kemu.bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT_S)
    assert {op.name for op in cluster.authorized_operations} == CLUSTER_OPERATIONS
    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[
        topic
    ].result(TIMEOUT_S)
    assert {op.name for op in described.authorized_operations} == TOPIC_OPERATIONS


@pytest.mark.parametrize("version", [8, 10])
def test_metadata_reports_cluster_operations_up_to_v10(kemu: KemuProcess, version: int) -> None:
    response = call(
        kemu.bootstrap.split(",")[0],
        3,
        version,
        topics=(),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=False,
    )
    assert response.cluster_authorized_operations == sum(
        1 << code for code in (5, 9, 10, 11, 12, 7, 8)
    )


# --- 4. KIP-848: an instance id held by an active member is not released -----------------------


def kip848_consumer(kemu: KemuProcess, group: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": kemu.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )


def wait_for_assignment(consumer: Consumer, deadline_s: float = TIMEOUT_S) -> list[Any]:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        consumer.poll(0.2)
        if consumer.assignment():
            return list(consumer.assignment())
    raise AssertionError("no assignment")


def fatal(error: KafkaError) -> bool:
    return bool(error.fatal()) or error.code() == KafkaError._FATAL


def test_second_static_member_with_a_held_instance_id_is_refused(kemu: KemuProcess) -> None:
    topic, group = unique("static"), unique("static-group")
    create_topic(kemu.bootstrap, topic, partitions=2)
    first = kip848_consumer(kemu, group, **{"group.instance.id": "instance-1"})
    errors: list[KafkaError] = []
    second = kip848_consumer(
        kemu, group, **{"group.instance.id": "instance-1", "error_cb": errors.append}
    )
    try:
        first.subscribe([topic])
        assert len(wait_for_assignment(first)) == 2
        second.subscribe([topic])
        seen: list[KafkaError] = []
        deadline = time.monotonic() + TIMEOUT_S
        while not any(fatal(e) for e in seen) and time.monotonic() < deadline:
            try:
                message = second.poll(0.2)
            except KafkaException as raised:
                seen.append(raised.args[0])
                continue
            if message is not None and message.error() is not None:
                seen.append(message.error())
            seen += errors
        # librdkafka makes UNRELEASED_INSTANCE_ID on ConsumerGroupHeartbeat a fatal error
        (text,) = {e.str() for e in seen if fatal(e)}
        assert "ConsumerGroupHeartbeat fatal error" in text
        assert "The instance ID is still used by another member in the consumer group" in text
        assert not second.assignment()
        admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)
        assert [m.group_instance_id for m in described.members] == ["instance-1"]
        assert len(first.assignment()) == 2
    finally:
        second.close()
        first.close()


# --- 6. KIP-848 regex subscriptions: explicit topics first, the regex's after its resolution ----


def test_regex_topics_are_assigned_after_the_explicit_ones(kemu: KemuProcess) -> None:
    prefix = unique("rx")
    explicit, matched = f"{prefix}-explicit", f"{prefix}-matched"
    create_topic(kemu.bootstrap, explicit, partitions=2)
    create_topic(kemu.bootstrap, matched, partitions=2)
    consumer = kip848_consumer(kemu, unique("regex-group"))
    assigned: list[set[str]] = []  # the topics of each incremental assignment, in order
    try:
        consumer.subscribe(
            [explicit, f"^{prefix}-mat.*"],
            on_assign=lambda _, partitions: assigned.append({p.topic for p in partitions}),
        )
        deadline = time.monotonic() + TIMEOUT_S
        while len(consumer.assignment()) < 4 and time.monotonic() < deadline:
            consumer.poll(0.1)
        # As Kafka: the first assignment has the explicit topic only; the regex's topic follows
        # once the coordinator resolved the regex and bumped the group epoch.
        assert [topics for topics in assigned if topics] == [{explicit}, {matched}]
        assert len(consumer.assignment()) == 4
    finally:
        consumer.close()


# --- 5. ShareFetch with MaxBytes 0 returns no records ------------------------------------------


def test_share_consumer_with_fetch_max_bytes_zero_gets_nothing(kemu: KemuProcess) -> None:
    topic, group = unique("share-zero"), unique("share-zero-group")
    create_topic(kemu.bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for index in range(5):
        producer.produce(topic, value=b"v%d" % index, partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    config = {"bootstrap.servers": kemu.bootstrap, "group.id": group}
    starved = ShareConsumer({**config, "fetch.max.bytes": 0})
    fed = ShareConsumer(config)
    try:
        starved.subscribe([topic])
        got = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            got += [m for m in starved.poll(0.2) if m.error() is None]
        assert got == []
        # nothing was acquired (acquired records would stay locked for 30 s): another
        # consumer of the group gets all five at once
        fed.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 5 and time.monotonic() < deadline:
            got += [m for m in fed.poll(0.2) if m.error() is None]
        assert sorted(m.offset() for m in got) == [0, 1, 2, 3, 4]
    finally:
        fed.close()
        starved.close()
