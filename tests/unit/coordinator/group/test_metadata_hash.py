"""KIP-1101's metadata hash: XXH3-64 as hash4j streams it, Kafka's topic and group hashes
(the values Kafka 4.4.0's ``Utils`` gives, checked against Kafka itself in
tests/integration/groups/test_metadata_hash_kafka.py), and how a group uses it: a new hash, for
partitions or racks, is a new group epoch, also when it changed while the group was not loaded;
and what a group's metadata record carries."""

from __future__ import annotations

import dataclasses
import uuid

from kemu.coordinator.group.consumer.group import ConsumerGroup
from kemu.coordinator.group.metadata_hash import group_hash, topic_hash, xxh3_64
from kemu.coordinator.group.modern_group import subscribed_hash
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.share.group import ShareGroup
from tests.unit.broker.handlers.test_group_handlers import Broker
from tests.unit.coordinator.group.consumer.test_consumer_group import consumer_beat

ORDERS = uuid.UUID("1b4e28ba-420f-11d2-883f-0016cb4e5ee0")


def test_xxh3_64_of_the_empty_input_and_every_length_path() -> None:
    assert xxh3_64(b"") == 0x2D06800538D394C2  # the reference implementation's value
    # Each length path (1-3, 4-8, 9-16, 17-128, 129-240, one block, several blocks) answers,
    # and one byte changed anywhere changes the hash.
    for length in (1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 1025, 3000):
        data = bytes(range(256)) * (length // 256 + 1)
        data = data[:length]
        changed = data[:-1] + bytes([data[-1] ^ 1])
        assert xxh3_64(data) != xxh3_64(changed)


def test_kafkas_topic_and_group_hashes() -> None:
    # Kafka 4.4.0's Utils.computeTopicHash / computeGroupHash for these topics.
    no_racks = topic_hash(ORDERS, "orders", [()] * 50)
    assert no_racks == -257532069829045276
    empty_racks = topic_hash(ORDERS, "orders", [("",)] * 5)
    assert empty_racks == -2753721252662452955
    racks = topic_hash(ORDERS, "orders", [("rack-a",), ("rack-b",)] * 2 + [("rack-a",)])
    assert racks == -6200704454652991147
    assert group_hash({"orders": racks}) == 2074493520886884206
    assert group_hash({}) == 0
    # Racks are hashed sorted; topics by name.
    assert topic_hash(ORDERS, "o", [("b", "a")]) == topic_hash(ORDERS, "o", [("a", "b")])
    assert group_hash({"a": 1, "b": 2}) == group_hash({"b": 2, "a": 1})
    assert group_hash({"a": 1, "b": 2}) != group_hash({"a": 2, "b": 1})


async def test_a_rack_change_is_a_new_group_epoch() -> None:
    broker = Broker()
    broker.cluster.create_topic("t", 3, 1)
    member = str(uuid.uuid4())
    joined = await consumer_beat(broker, 1, member_id=member)
    again = await consumer_beat(
        broker, 1, member_id=member, member_epoch=joined.member_epoch, subscribed_topic_names=None
    )
    assert again.member_epoch == joined.member_epoch
    node = broker.cluster.nodes[1]
    broker.cluster.nodes[1] = dataclasses.replace(node, rack="rack-a")
    moved = await consumer_beat(
        broker, 1, member_id=member, member_epoch=joined.member_epoch, subscribed_topic_names=None
    )
    assert moved.member_epoch == joined.member_epoch + 1


async def test_a_topic_grown_while_not_loaded_is_a_new_epoch_after_the_load() -> None:
    """The metadata record keeps the hash: a group loaded after its topic changed notices at
    its next heartbeat (kemu used to take the topics as they were at load, and kept the old
    target assignment)."""
    broker = Broker()
    broker.cluster.create_topic("t", 3, 1)
    member = str(uuid.uuid4())
    joined = await consumer_beat(broker, 1, member_id=member)
    group = group_coordinator(broker.runtime).registry.get("kip848")
    assert isinstance(group, ConsumerGroup)
    written = group.metadata_hash
    assert written == subscribed_hash(group.subscribed_metadata) != 0
    broker.cluster.add_partitions("t", 5)
    broker.restart()
    loaded = group_coordinator(broker.runtime).registry.get("kip848")
    assert isinstance(loaded, ConsumerGroup) and loaded.metadata_hash == written
    beat = await consumer_beat(
        broker, 1, member_id=member, member_epoch=joined.member_epoch, subscribed_topic_names=None
    )
    assert beat.member_epoch == joined.member_epoch + 1
    assert len(beat.assignment.topic_partitions[0].partitions) == 5


async def test_a_share_groups_metadata_record_carries_its_hash() -> None:
    broker = Broker()
    broker.cluster.create_topic("t", 3, 1)
    await broker.join("shares", "m1")
    service = group_coordinator(broker.runtime)
    group = service.registry.get("shares")
    assert isinstance(group, ShareGroup)
    assert group.metadata_hash == subscribed_hash(group.subscribed_metadata) != 0
    assert service._share_log.images["shares"].metadata_hash == group.metadata_hash
    broker.restart()
    loaded = group_coordinator(broker.runtime).registry.get("shares")
    assert isinstance(loaded, ShareGroup) and loaded.metadata_hash == group.metadata_hash
