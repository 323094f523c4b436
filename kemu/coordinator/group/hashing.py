"""Kafka's coordinator placement: ``Utils.abs(key.hashCode()) % partitions``.

The key's hash is Java's ``String.hashCode`` (UTF-16 code units, 31-multiplier, int32 overflow),
so kemu picks the same ``__consumer_offsets`` / ``__transaction_state`` / ``__share_group_state``
partition for a key as a real cluster with the same partition count does.
"""

from __future__ import annotations

INT32_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()`` as a signed 32-bit integer."""
    value = 0
    units = text.encode("utf-16-be")
    for index in range(0, len(units), 2):
        value = (31 * value + ((units[index] << 8) | units[index + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def kafka_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: like ``abs`` except that ``Integer.MIN_VALUE`` maps to 0."""
    return 0 if value == INT32_MIN else abs(value)


def partition_for(key: str, partitions: int) -> int:
    return kafka_abs(java_string_hash(key)) % partitions
