"""Where coordinators live: the leader of the internal-topic partition a key hashes to.

Kafka creates the internal topic on the first lookup (``__consumer_offsets`` for groups,
``__transaction_state`` for transactional ids) with its configured partition count and a
replication factor capped by the broker count, compacted, with the topic's own segment size
(``offsets.topic.segment.bytes``, ``transaction.state.log.segment.bytes``); so does kemu. The
partition is ``Utils.abs(key.hashCode()) % partitions`` as in Kafka.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass

from kemu.cluster.model import Cluster, Topic, TopicError
from kemu.cluster.partition import Partition
from kemu.coordinator.group.hashing import partition_for

GROUP, TRANSACTION, SHARE = 0, 1, 2


@dataclass(frozen=True, slots=True)
class InternalTopic:
    name: str
    partitions_config: str
    replication_config: str
    segment_config: str


INTERNAL_TOPICS = {
    GROUP: InternalTopic(
        "__consumer_offsets",
        "offsets.topic.num.partitions",
        "offsets.topic.replication.factor",
        "offsets.topic.segment.bytes",
    ),
    TRANSACTION: InternalTopic(
        "__transaction_state",
        "transaction.state.log.num.partitions",
        "transaction.state.log.replication.factor",
        "transaction.state.log.segment.bytes",
    ),
}
# SHARE keys are placed by the share coordinator (kemu.coordinator.share.service), which owns
# ``__share_group_state`` and its configs.


def internal_topic(cluster: Cluster, key_type: int) -> Topic:
    """The internal topic behind ``key_type``, created (compacted) on first use."""
    spec = INTERNAL_TOPICS[key_type]
    found = cluster.topics.get(spec.name)
    if found is not None:
        return found
    config = cluster.config
    partitions = config.get_int(spec.partitions_config)
    replication = min(config.get_int(spec.replication_config), len(cluster.nodes))
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": str(config.get_int(spec.segment_config)),
    }
    try:
        return cluster.create_topic(spec.name, partitions, replication, configs)
    except TopicError:
        return cluster.topics[spec.name]  # created concurrently by another lookup


def coordinator_partition(cluster: Cluster, key_type: int, key: str) -> Partition:
    topic = internal_topic(cluster, key_type)
    return topic.partitions[partition_for(key, len(topic.partitions))]


def share_coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's ``SharePartitionKey.asCoordinatorKey``: ``groupId:topicId:partition``."""
    return f"{group_id}:{to_kafka_uuid(topic_id)}:{partition}"


def parse_share_coordinator_key(key: str) -> tuple[str, uuid.UUID, int] | None:
    """``groupId:topicId:partition`` parts, or None when Kafka would refuse the key."""
    parts = key.split(":")
    if len(parts) != 3 or not parts[0].strip():
        return None
    group_id, topic_text, partition_text = parts
    topic_id = from_kafka_uuid(topic_text)
    if topic_id is None:
        return None
    try:
        partition = int(partition_text)
    except ValueError:
        return None
    if partition < 0:
        return None
    return group_id, topic_id, partition


def to_kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def from_kafka_uuid(text: str) -> uuid.UUID | None:
    """Kafka's ``Uuid.fromString``, or None for text that is not 16 bytes of base64."""
    if len(text) > 24:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return uuid.UUID(bytes=raw) if len(raw) == 16 else None
