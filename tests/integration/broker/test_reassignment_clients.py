"""Reassignments, leader elections and log dirs with real admin clients on a 3-broker kemu:
kafka-python moves a partition's replicas and leader while a confluent-kafka producer writes to
it; the producer follows the new leader (NOT_LEADER_OR_FOLLOWER, then Metadata) and every record
is read back once; confluent-kafka's elect_leaders moves the leader back to the preferred
replica; describe_log_dirs reports the partition's real size."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka._model import ElectionType
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient

from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration
TIMEOUT = 15
TOPIC = "moving"


@pytest.fixture
def kp_admin(kemu_inprocess: InProcessKemu) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=kemu_inprocess.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def leader_and_replicas(admin: AdminClient) -> tuple[int, list[int]]:
    partition = admin.list_topics(TOPIC, timeout=TIMEOUT).topics[TOPIC].partitions[0]
    return partition.leader, list(partition.replicas)


def wait_for(admin: AdminClient, expected: tuple[int, list[int]]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while leader_and_replicas(admin) != expected:
        assert time.monotonic() < deadline, leader_and_replicas(admin)
        time.sleep(0.1)


def test_producer_follows_a_reassignment_and_an_election(
    kemu_inprocess: InProcessKemu, kp_admin: KafkaAdminClient
) -> None:
    admin = AdminClient({"bootstrap.servers": kemu_inprocess.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1]])])[TOPIC].result(TIMEOUT)
    producer = Producer(
        {"bootstrap.servers": kemu_inprocess.bootstrap, "enable.idempotence": True, "linger.ms": 0}
    )
    failed: list[object] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failed.append(error)

    def produce(start: int) -> None:
        for i in range(start, start + 50):
            producer.produce(TOPIC, str(i).encode(), on_delivery=delivered)
        assert producer.flush(TIMEOUT) == 0

    produce(0)
    kp_admin.alter_partition_reassignments({TopicPartition(TOPIC, 0): [3, 1]})
    assert kp_admin.list_partition_reassignments() == {}
    wait_for(admin, (1, [3, 1]))  # leader 1 is still a replica: it stays
    produce(50)
    kp_admin.alter_partition_reassignments({TopicPartition(TOPIC, 0): [2]})
    wait_for(admin, (2, [2]))  # leader 1 left the replica set: 2 leads
    produce(100)
    kp_admin.alter_partition_reassignments({TopicPartition(TOPIC, 0): [3, 2]})
    elected = admin.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition(TOPIC, 0)])
    assert elected.result(TIMEOUT) == {CkTopicPartition(TOPIC, 0): None}
    wait_for(admin, (3, [3, 2]))
    produce(150)
    assert failed == []

    consumer = Consumer(
        {
            "bootstrap.servers": kemu_inprocess.bootstrap,
            "group.id": "follow",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([TOPIC])
    seen: list[int] = []
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < 200 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(int(message.value()))
    consumer.close()
    assert seen == list(range(200))

    dirs = kp_admin.describe_log_dirs({TOPIC: [0]}, brokers=[3])
    sizes = [
        p["partition_size"]
        for broker in dirs
        for log_dir in broker["log_dirs"]
        for topic in log_dir["topics"]
        for p in topic["partitions"]
    ]
    assert len(sizes) == 1 and sizes[0] > 200
