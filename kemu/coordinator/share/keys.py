"""Which ``__share_group_state`` partition holds a share partition's state.

Kafka 4.4 (``ShareCoordinatorService.partitionFor``):
``Utils.abs(key.asCoordinatorKey().hashCode()) % numPartitions``, where the coordinator key is
``String.format("%s:%s:%d", groupId, topicId, partition)`` with the topic id in Kafka's
``Uuid.toString`` form (URL-safe base64 of the 16 bytes, no padding), ``hashCode`` is Java's
``String.hashCode`` over UTF-16 code units, and ``Utils.abs(Integer.MIN_VALUE)`` is 0. The same
string is the FindCoordinator key for key type SHARE.
"""

from __future__ import annotations

import base64
import uuid

from kemu.coordinator.share.persister import SharePartitionKey


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString, e.g. ``AQIDBAUGBwgJCgsMDQ4PEA`` for 01020304-0506-...-0e0f10."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    padded = text + "=" * (-len(text) % 4)
    data = base64.urlsafe_b64decode(padded)
    if len(data) != 16:
        raise ValueError(f"{text!r} is not a base64 topic id")
    return uuid.UUID(bytes=data)


def coordinator_key(key: SharePartitionKey) -> str:
    return f"{key.group_id}:{kafka_uuid(key.topic_id)}:{key.partition}"


def parse_coordinator_key(text: str) -> SharePartitionKey:
    """``groupId:topicId:partition``; the group id may itself contain colons (Kafka allows it).

    Raises ValueError, as Kafka's ``SharePartitionKey.validate`` rejects the same strings."""
    group_id, separator, rest = text.rpartition(":")
    group_id, separator2, topic_text = group_id.rpartition(":")
    if not separator or not separator2 or not group_id.strip():
        raise ValueError(
            f"Invalid key format: expected - groupId:topicId:partition, found - {text}"
        )
    return SharePartitionKey(group_id, parse_kafka_uuid(topic_text), int(rest))


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 units, as an int32."""
    units = text.encode("utf-16-be")
    value = 0
    for index in range(0, len(units), 2):
        value = (value * 31 + (units[index] << 8 | units[index + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def kafka_abs(value: int) -> int:
    """Kafka's Utils.abs: |value|, but 0 for Integer.MIN_VALUE (whose negation overflows)."""
    return 0 if value == -(2**31) else abs(value)


def partition_for_key_string(key: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hash(key)) % num_partitions


def partition_for(key: SharePartitionKey, num_partitions: int) -> int:
    return partition_for_key_string(coordinator_key(key), num_partitions)
