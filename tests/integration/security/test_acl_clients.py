"""ACLs met by confluent-kafka (librdkafka 2.16) on the APIs clients use most: a consumer group's
offset commits and fetches (group READ, topic READ / DESCRIBE), a share consumer (group READ,
topic READ on ShareFetch) and DescribeConfigs (DESCRIBE_CONFIGS on the topic, the broker's on the
cluster), against kemu over SASL_PLAINTEXT with StandardAuthorizer semantics. Unit-level checks of
every handler family are in ``tests/unit/broker/handlers/test_acl_handlers.py``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

TIMEOUT = 15.0
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class Setup:
    def __init__(self, process: InProcessKemu) -> None:
        self.process = process
        self.admin_config = self.config("admin")
        self.alice = self.config("alice")
        self.admin = AdminClient(self.admin_config)

    def config(self, user: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.process.listeners["SASL_PLAINTEXT"],
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": f"{user}-secret",
        }

    def allow(self, resource: ResourceType, name: str, *operations: AclOperation) -> None:
        bindings = [
            AclBinding(
                resource,
                name,
                ResourcePatternType.LITERAL,
                "User:alice",
                "*",
                operation,
                AclPermissionType.ALLOW,
            )
            for operation in operations
        ]
        for future in self.admin.create_acls(bindings).values():
            future.result(TIMEOUT)

    def topic(self, name: str, records: int, partitions: int = 1) -> None:
        for future in self.admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(TIMEOUT)
        producer = Producer(self.admin_config)
        for index in range(records):
            producer.produce(name, b"v%d" % index)
        assert producer.flush(TIMEOUT) == 0

    def denials(self, **match: str) -> list[dict[str, Any]]:
        assert self.process.log_path is not None
        found = []
        for line in self.process.log_path.read_text().splitlines():
            if line.startswith("{"):
                entry = json.loads(line)
                if entry.get("event") == "authorization_denied" and all(
                    entry.get(k) == v for k, v in match.items()
                ):
                    found.append(entry)
        return found


@pytest.fixture
def setup(kemu_inprocess_factory: type[InProcessKemu]) -> Iterator[Setup]:
    process = kemu_inprocess_factory(
        brokers=2,
        overrides=[
            "listeners=SASL_PLAINTEXT://:0",
            "kemu.sasl.users=admin:admin-secret,alice:alice-secret",
            f"authorizer.class.name={STANDARD}",
            "super.users=User:admin",
        ],
        json_logs=True,
    ).start()
    yield Setup(process)


def error_code(future: Any) -> int | None:
    try:
        future.result(TIMEOUT)
    except KafkaException as error:
        return int(error.args[0].code())
    return None


def test_consumer_group_commit_and_fetch(setup: Setup) -> None:
    setup.topic("readable", 2)
    setup.topic("hidden", 2)
    setup.topic("invisible", 2)
    setup.allow(ResourceType.GROUP, "app", AclOperation.READ)
    setup.allow(ResourceType.TOPIC, "readable", AclOperation.READ)
    setup.allow(ResourceType.TOPIC, "hidden", AclOperation.DESCRIBE)  # DESCRIBE is not READ
    consumer = Consumer({**setup.alice, "group.id": "app", "enable.auto.commit": False})
    try:
        committed = consumer.commit(
            offsets=[TopicPartition("readable", 0, 2), TopicPartition("hidden", 0, 1)],
            asynchronous=False,
        )
        errors = {tp.topic: tp.error for tp in committed or []}
        assert errors.get("readable") is None
    except KafkaException as raised:
        # librdkafka raises on the first partition error, with the partitions in the answer
        assert raised.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert setup.denials(principal="User:alice", operation="READ", resource="TOPIC:hidden")

    fetched = consumer.committed(
        [TopicPartition("readable", 0), TopicPartition("hidden", 0)], timeout=TIMEOUT
    )
    by_topic = {tp.topic: tp for tp in fetched}
    assert by_topic["readable"].offset == 2 and by_topic["readable"].error is None
    assert by_topic["hidden"].offset < 0  # never committed
    consumer.close()

    # Without DESCRIBE on a group its offsets stay hidden (FindCoordinator already refuses it;
    # OffsetFetch's own group check is in test_acl_handlers)
    alice_admin = AdminClient(setup.alice)
    (other,) = alice_admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("other")]
    ).values()
    assert error_code(other) == KafkaError.GROUP_AUTHORIZATION_FAILED

    # An admin sees every commit of the group; alice's listing leaves out what it may not see
    admin_consumer = Consumer({**setup.admin_config, "group.id": "app"})
    admin_consumer.commit(
        offsets=[TopicPartition("hidden", 0, 1), TopicPartition("invisible", 0, 1)],
        asynchronous=False,
    )
    admin_consumer.close()
    (listing,) = alice_admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("app")]
    ).values()
    seen = {(tp.topic, tp.offset) for tp in listing.result(TIMEOUT).topic_partitions}
    assert seen == {("readable", 2), ("hidden", 1)}  # DESCRIBE on hidden, none on invisible
    (deleted,) = alice_admin.delete_consumer_groups(["app"]).values()
    assert error_code(deleted) == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_share_consumer_needs_group_and_topic_read(setup: Setup) -> None:
    setup.topic("queue", 4)
    setup.topic("locked", 4)
    for group in ("sg", "sg-locked"):
        resource = ConfigResource(
            ResourceType.GROUP,
            group,
            incremental_configs=[
                ConfigEntry(
                    "share.auto.offset.reset",
                    "earliest",
                    incremental_operation=AlterConfigOpType.SET,
                )
            ],
        )
        setup.admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    setup.allow(ResourceType.GROUP, "sg", AclOperation.READ)
    setup.allow(ResourceType.GROUP, "sg-locked", AclOperation.READ)
    setup.allow(ResourceType.TOPIC, "queue", AclOperation.READ)
    setup.allow(ResourceType.TOPIC, "locked", AclOperation.DESCRIBE)

    def consume(group: str, topic: str, wanted: int, seconds: float) -> list[bytes]:
        share = ShareConsumer({**setup.alice, "group.id": group})
        share.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + seconds
        try:
            while len(values) < wanted and time.monotonic() < deadline:
                for message in share.poll(0.2):
                    if message.error() is None:
                        values.append(message.value())
        finally:
            share.close()
        return values

    assert sorted(consume("sg", "queue", 4, TIMEOUT)) == [b"v0", b"v1", b"v2", b"v3"]
    # READ on the group but only DESCRIBE on the topic: ShareFetch answers the partitions
    # TOPIC_AUTHORIZATION_FAILED, which librdkafka raises from poll
    with pytest.raises(KafkaException) as refused:
        consume("sg-locked", "locked", 1, TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert setup.denials(principal="User:alice", operation="READ", resource="TOPIC:locked")


def test_describe_configs(setup: Setup) -> None:
    setup.topic("configured", 0)
    setup.topic("secret", 0)
    setup.allow(ResourceType.TOPIC, "configured", AclOperation.DESCRIBE_CONFIGS)
    alice = AdminClient(setup.alice)
    wanted = {
        "configured": ConfigResource(ResourceType.TOPIC, "configured"),
        "secret": ConfigResource(ResourceType.TOPIC, "secret"),
        "broker": ConfigResource(ResourceType.BROKER, "1"),
    }
    futures = alice.describe_configs(list(wanted.values()))
    by_name = {name: futures[resource] for name, resource in wanted.items()}
    configs = by_name["configured"].result(TIMEOUT)
    assert configs["cleanup.policy"].value == "delete"
    assert error_code(by_name["secret"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert error_code(by_name["broker"]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    setup.allow(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE_CONFIGS)
    (broker_configs,) = alice.describe_configs([wanted["broker"]]).values()
    assert "log.retention.hours" in broker_configs.result(TIMEOUT)
    # DESCRIBE_CONFIGS does not let alice change anything
    change = ConfigResource(
        ResourceType.TOPIC,
        "configured",
        incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (altered,) = alice.incremental_alter_configs([change]).values()
    assert error_code(altered) == KafkaError.TOPIC_AUTHORIZATION_FAILED
