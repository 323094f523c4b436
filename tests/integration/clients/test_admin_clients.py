"""Admin clients against a 3-broker kemu: confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient create, describe, alter and delete topics, grow partitions, delete records and
describe the cluster and configs, and the changes they make are seen by producers and
consumers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic
from kafka.errors import InvalidPartitionsError, TopicAlreadyExistsError

from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration
TIMEOUT = 15


@pytest.fixture
def admin(kemu_inprocess: InProcessKemu) -> AdminClient:
    return AdminClient({"bootstrap.servers": kemu_inprocess.bootstrap})


@pytest.fixture
def kp_admin(kemu_inprocess: InProcessKemu) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=kemu_inprocess.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def wait_all(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {key: future.result(TIMEOUT) for key, future in futures.items()}


def failure(future: Any) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(TIMEOUT)
    error: KafkaError = raised.value.args[0]
    return error


def describe_topic(admin: AdminClient, name: str) -> Any:
    futures = admin.describe_topics(TopicCollection([name]))
    return futures[name].result(TIMEOUT)


def topic_configs(admin: AdminClient, name: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    configs: dict[str, Any] = admin.describe_configs([resource])[resource].result(TIMEOUT)
    return configs


# --- confluent-kafka -------------------------------------------------------------------------


def test_confluent_topic_lifecycle(admin: AdminClient, kemu_inprocess: InProcessKemu) -> None:
    created = admin.create_topics(
        [
            NewTopic("ck-orders", 3, 2, config={"retention.ms": "3600000"}),
            NewTopic("ck-manual", 2, replica_assignment=[[3, 1], [2, 3]]),
        ]
    )
    assert wait_all(created) == {"ck-orders": None, "ck-manual": None}

    again = admin.create_topics([NewTopic("ck-orders", 1, 1), NewTopic("ck bad", 1, 1)])
    assert failure(again["ck-orders"]).code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert failure(again["ck bad"]).code() == KafkaError.TOPIC_EXCEPTION
    too_wide = admin.create_topics([NewTopic("ck-wide", 1, 4)])
    assert failure(too_wide["ck-wide"]).code() == KafkaError.INVALID_REPLICATION_FACTOR
    bad_config = admin.create_topics([NewTopic("ck-cfg", 1, 1, config={"retention.ms": "x"})])
    assert failure(bad_config["ck-cfg"]).code() == KafkaError.INVALID_CONFIG

    orders = describe_topic(admin, "ck-orders")
    assert len(orders.partitions) == 3
    assert all(len(p.replicas) == 2 and len(p.isr) == 2 for p in orders.partitions)
    manual = describe_topic(admin, "ck-manual")
    assert [[r.id for r in p.replicas] for p in manual.partitions] == [[3, 1], [2, 3]]
    assert [p.leader.id for p in manual.partitions] == [3, 2]

    configs = topic_configs(admin, "ck-orders")
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value

    grown = admin.create_partitions([NewPartitions("ck-orders", 5)])
    assert wait_all(grown) == {"ck-orders": None}
    assert len(describe_topic(admin, "ck-orders").partitions) == 5
    shrink = admin.create_partitions([NewPartitions("ck-orders", 2)])
    assert failure(shrink["ck-orders"]).code() == KafkaError.INVALID_PARTITIONS

    deleted = admin.delete_topics(["ck-orders", "ck-manual"])
    assert wait_all(deleted) == {"ck-orders": None, "ck-manual": None}
    missing = admin.delete_topics(["ck-orders"])
    assert failure(missing["ck-orders"]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_incremental_alter_takes_effect(
    admin: AdminClient, kemu_inprocess: InProcessKemu
) -> None:
    wait_all(admin.create_topics([NewTopic("ck-live", 1, 1)]))
    resource = ConfigResource(
        ResourceType.TOPIC,
        "ck-live",
        incremental_configs=[
            ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "message.timestamp.type",
                "LogAppendTime",
                incremental_operation=AlterConfigOpType.SET,
            ),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
        ],
    )
    assert wait_all(admin.incremental_alter_configs([resource])) == {resource: None}
    configs = topic_configs(admin, "ck-live")
    assert configs["max.message.bytes"].value == "2000"
    assert configs["cleanup.policy"].value == "delete,compact"

    bad = ConfigResource(
        ResourceType.TOPIC,
        "ck-live",
        incremental_configs=[
            ConfigEntry("retention.ms", "never", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    assert failure(admin.incremental_alter_configs([bad])[bad]).code() == (
        KafkaError.INVALID_CONFIG
    )

    producer = Producer({"bootstrap.servers": kemu_inprocess.bootstrap})
    outcomes: list[KafkaError | None] = []
    # keyed: the topic is compacted now, and Kafka refuses keyless records there
    producer.produce(
        "ck-live", key=b"k", value=b"x" * 5000, on_delivery=lambda e, m: outcomes.append(e)
    )
    assert producer.flush(TIMEOUT) == 0  # its own batch: the small one must not share it
    producer.produce(
        "ck-live",
        key=b"k",
        value=b"small",
        timestamp=1_000,
        on_delivery=lambda e, m: outcomes.append(e),
    )
    assert producer.flush(TIMEOUT) == 0
    assert outcomes[0] is not None and outcomes[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert outcomes[1] is None

    consumer = Consumer(
        {"bootstrap.servers": kemu_inprocess.bootstrap, "group.id": "ck-live-reader"}
    )
    consumer.assign([TopicPartition("ck-live", 0, 0)])
    message = None
    deadline = time.monotonic() + TIMEOUT
    while message is None and time.monotonic() < deadline:
        polled = consumer.poll(0.5)
        if polled is not None and not polled.error():
            message = polled
    consumer.close()
    assert message is not None and message.value() == b"small"
    _, timestamp = message.timestamp()
    assert timestamp != 1_000  # the broker's append time replaced the producer's


def test_confluent_delete_records(admin: AdminClient, kemu_inprocess: InProcessKemu) -> None:
    wait_all(admin.create_topics([NewTopic("ck-trim", 2, 3)]))
    producer = Producer({"bootstrap.servers": kemu_inprocess.bootstrap})
    for i in range(10):
        producer.produce("ck-trim", value=str(i).encode(), partition=1)
    assert producer.flush(TIMEOUT) == 0

    trimmed = admin.delete_records([TopicPartition("ck-trim", 1, 6)])
    (result,) = wait_all(trimmed).values()
    assert result.low_watermark == 6
    everything = admin.delete_records([TopicPartition("ck-trim", 1, -1)])
    (result,) = wait_all(everything).values()
    assert result.low_watermark == 10
    beyond = admin.delete_records([TopicPartition("ck-trim", 1, 50)])
    (future,) = beyond.values()
    assert failure(future).code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_confluent_describe_cluster_and_broker_configs(
    admin: AdminClient, kemu_inprocess: InProcessKemu
) -> None:
    cluster = admin.describe_cluster().result(TIMEOUT)
    assert sorted(node.id for node in cluster.nodes) == [1, 2, 3]
    assert cluster.controller is not None and cluster.controller.id in (1, 2, 3)
    assert cluster.cluster_id

    broker = ConfigResource(ResourceType.BROKER, "2")
    configs = admin.describe_configs([broker])[broker].result(TIMEOUT)
    assert configs["node.id"].value == "2"
    assert configs["num.partitions"].value == "1"
    assert configs["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["delete.topic.enable"].is_read_only

    per_broker = ConfigResource(
        ResourceType.BROKER,
        "2",
        incremental_configs=[
            ConfigEntry("message.max.bytes", "2000000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    assert wait_all(admin.incremental_alter_configs([per_broker])) == {per_broker: None}
    configs = admin.describe_configs([broker])[broker].result(TIMEOUT)
    assert configs["message.max.bytes"].value == "2000000"
    assert configs["message.max.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    read_only = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry("delete.topic.enable", "false", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    error = failure(admin.incremental_alter_configs([read_only])[read_only])
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically" in error.str()


# --- kafka-python ----------------------------------------------------------------------------


def test_kafka_python_admin(kp_admin: KafkaAdminClient) -> None:
    response = kp_admin.create_topics(
        [KpNewTopic("kp-topic", 2, 2, topic_configs={"retention.ms": "5555"})]
    )
    (created,) = response["topics"]
    assert (created["name"], created["error_code"]) == ("kp-topic", 0)
    assert created["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics([KpNewTopic("kp-topic", 1, 1)])

    cluster = kp_admin.describe_cluster()
    assert sorted(b["broker_id"] for b in cluster["brokers"]) == [1, 2, 3]
    assert cluster["controller_id"] in (1, 2, 3)

    described = kp_admin.describe_configs(
        [
            KpConfigResource(KpConfigResourceType.TOPIC, "kp-topic"),
            KpConfigResource(KpConfigResourceType.BROKER, "1"),
        ],
        config_filter="all",
    )
    topic_view = described["topic"]["kp-topic"]
    assert topic_view["retention.ms"]["value"] == "5555"
    assert topic_view["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert topic_view["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
    assert described["broker"]["1"]["node.id"]["value"] == "1"

    per_broker = KpConfigResource(
        KpConfigResourceType.BROKER, "1", configs={"log.retention.ms": "7200000"}
    )
    assert kp_admin.alter_configs([per_broker]) == {"broker": {"1": "OK"}}
    broker_view = kp_admin.describe_configs([KpConfigResource(KpConfigResourceType.BROKER, "1")])
    retention = broker_view["broker"]["1"]["log.retention.ms"]
    assert (retention["value"], retention["config_source"]) == (
        "7200000",
        "DYNAMIC_BROKER_CONFIG",
    )

    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_partitions({"kp-topic": KpNewPartitions(1)})

    deleted = kp_admin.delete_topics(["kp-topic"])
    assert [(r["name"], r["error_code"]) for r in deleted["topics"]] == [("kp-topic", 0)]
    assert "kp-topic" not in kp_admin.list_topics()
