"""``kemu ctl broker stop N`` / ``start N`` against a 3-broker kemu, seen on the wire: the port
refuses, Metadata moves the stopped broker's leaderships to other replicas with a new leader
epoch and leaves it out of the brokers and the in-sync replicas, an RF 1 partition on it is
offline (leader -1, LEADER_NOT_AVAILABLE) and its records come back with it, a preferred-leader
election (ElectLeaders, as kafka-leader-election.sh sends it) refuses while the preferred
replica is stopped and brings the leaderships back once it runs; a consumer group's committed
offsets survive their coordinator's move."""

from __future__ import annotations

import socket
import subprocess
import sys
from typing import Any

import pytest
from confluent_kafka import Consumer, ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.client.cluster import ClusterClient
from kemu.protocol.errors import ErrorCode
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

TIMEOUT = 30.0
METADATA, GROUP_COORDINATOR = 3, 0


async def metadata(kemu: InProcessKemu, node: int, topic: str) -> Any:
    """Metadata v12 of ``topic`` from broker ``node``."""
    cluster = ClusterClient(kemu.bootstrap.split(",")[node - 1])
    try:
        connection = await cluster.connection(node)
        return await connection.call(
            METADATA,
            12,
            topics=(cluster.nested(METADATA, 12, "MetadataRequestTopic", name=topic),),
            allow_auto_topic_creation=False,
        )
    finally:
        await cluster.close()


def refused(kemu: InProcessKemu, node: int) -> bool:
    host, port = kemu.bootstrap.split(",")[node - 1].rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def ctl(kemu: InProcessKemu, *words: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "kemu.cli", "ctl", "--control", kemu.control_url, *words],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_stop_and_start_one_broker(kemu_inprocess_factory: type[InProcessKemu]) -> None:
    kemu = kemu_inprocess_factory(brokers=3, with_control=True).start()
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    futures = admin.create_topics([NewTopic("rf3", 3, 3), NewTopic("rf1", 1, 1)])
    for future in futures.values():
        future.result(TIMEOUT)
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for topic in ("rf3", "rf1"):
        producer.produce(topic, b"before", partition=0)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(
        {"bootstrap.servers": kemu.bootstrap, "group.id": "g-stop", "auto.offset.reset": "earliest"}
    )
    consumer.assign([TopicPartition("rf3", 0)])
    assert consumer.poll(TIMEOUT) is not None
    consumer.commit(asynchronous=False)
    consumer.close()
    cluster = ClusterClient(kemu.bootstrap)
    try:
        coordinator = await cluster.coordinator(GROUP_COORDINATOR, "g-stop")
    finally:
        await cluster.close()
    [single] = (await metadata(kemu, 1, "rf1")).topics[0].partitions
    victim = single.leader_id  # the broker holding the RF 1 partition
    other = next(n for n in (1, 2, 3) if n != victim)
    before = {
        p.partition_index: p for p in (await metadata(kemu, other, "rf3")).topics[0].partitions
    }
    [led] = [i for i, p in before.items() if p.leader_id == victim]  # one of 3, round-robin
    successor = next(r for r in before[led].replica_nodes if r != victim)

    assert not refused(kemu, victim)
    assert '"stopped": true' in ctl(kemu, "broker", "stop", str(victim))
    assert refused(kemu, victim)
    after = await metadata(kemu, other, "rf3")
    assert sorted(b.node_id for b in after.brokers) == sorted({1, 2, 3} - {victim})
    partitions = {p.partition_index: p for p in after.topics[0].partitions}
    assert partitions[led].leader_id == successor  # the next replica in replica order
    assert partitions[led].leader_epoch == before[led].leader_epoch + 1
    for index, partition in partitions.items():
        assert victim not in partition.isr_nodes
        if index != led:
            assert partition.leader_epoch == before[index].leader_epoch  # not moved
    [offline] = (await metadata(kemu, other, "rf1")).topics[0].partitions
    assert offline.leader_id == -1 and offline.error_code == ErrorCode.leader_not_available
    assert list(offline.isr_nodes) == [victim] == list(offline.offline_replicas)  # as Kafka

    # the group's offsets are where its (maybe moved) coordinator loaded them from
    again = Consumer({"bootstrap.servers": kemu.bootstrap, "group.id": "g-stop"})
    [committed] = again.committed([TopicPartition("rf3", 0)], timeout=TIMEOUT)
    again.close()
    assert committed.offset == 1, f"coordinator was broker {coordinator}"

    election = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("rf3", led)])
    preferred = before[led].replica_nodes[0] == victim
    if preferred:
        [outcome] = election.result(TIMEOUT).values()  # the preferred replica is stopped
        assert outcome is not None and outcome.code() == ErrorCode.preferred_leader_not_available

    kemu.start_broker(victim)
    assert not refused(kemu, victim)
    partitions = {
        p.partition_index: p for p in (await metadata(kemu, victim, "rf3")).topics[0].partitions
    }
    assert partitions[led].leader_id == successor  # a follower until an election
    assert sorted(partitions[led].isr_nodes) == [1, 2, 3]
    [back] = (await metadata(kemu, victim, "rf1")).topics[0].partitions
    assert back.leader_id == victim and back.error_code == ErrorCode.none
    if preferred:
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("rf3", led)]).result(TIMEOUT)
        [moved] = [
            p
            for p in (await metadata(kemu, other, "rf3")).topics[0].partitions
            if p.partition_index == led
        ]
        assert moved.leader_id == victim and moved.leader_epoch == before[led].leader_epoch + 2

    reader = Consumer(
        {"bootstrap.servers": kemu.bootstrap, "group.id": "g-read", "auto.offset.reset": "earliest"}
    )
    reader.assign([TopicPartition("rf1", 0)])
    record = reader.poll(TIMEOUT)
    reader.close()
    assert record is not None and record.value() == b"before"  # nothing lost
