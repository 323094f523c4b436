"""Share-state partition choice, checked against values printed by Kafka 4.4.0 itself
(``SharePartitionKey.asCoordinatorKey()``, ``String.hashCode()``, ``Utils.abs(h) % n``)."""

from __future__ import annotations

import uuid

import pytest

from kemu.coordinator.share.keys import (
    coordinator_key,
    java_string_hash,
    kafka_abs,
    kafka_uuid,
    parse_coordinator_key,
    parse_kafka_uuid,
    partition_for,
    partition_for_key_string,
)
from kemu.coordinator.share.persister import SharePartitionKey

TOPIC = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")


def test_kafka_uuid_form() -> None:
    assert kafka_uuid(TOPIC) == "AQIDBAUGBwgJCgsMDQ4PEA"
    # Uuid.fromString("gtb2stGYRk-vWZ2zAozmoA") in Kafka's ShareGroupStateMessageFormatterTest
    assert parse_kafka_uuid("gtb2stGYRk-vWZ2zAozmoA") == uuid.UUID(
        "82d6f6b2-d198-464f-af59-9db3028ce6a0"
    )
    assert kafka_uuid(parse_kafka_uuid("gtb2stGYRk-vWZ2zAozmoA")) == "gtb2stGYRk-vWZ2zAozmoA"


@pytest.mark.parametrize(
    ("group", "partition", "java_hash", "of_50", "of_3"),
    [
        ("g1", 3, -851287136, 36, 2),
        ("share-group", 0, 358574870, 20, 2),
        ("my:group", 12, 503939099, 49, 2),
        ("grüße", 1, -1003016111, 11, 2),
    ],
)
def test_partition_matches_kafka(
    group: str, partition: int, java_hash: int, of_50: int, of_3: int
) -> None:
    key = SharePartitionKey(group, TOPIC, partition)
    text = coordinator_key(key)
    assert text == f"{group}:AQIDBAUGBwgJCgsMDQ4PEA:{partition}"
    assert java_string_hash(text) == java_hash
    assert partition_for(key, 50) == of_50
    assert partition_for(key, 3) == of_3
    assert partition_for_key_string(text, 50) == of_50


def test_hash_of_a_surrogate_pair_and_of_min_int() -> None:
    assert java_string_hash("g\U0001f600:AQIDBAUGBwgJCgsMDQ4PEA:7") == -877761468
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert kafka_abs(-(2**31)) == 0
    assert partition_for_key_string("polygenelubricants", 50) == 0
    assert kafka_abs(-5) == 5


def test_parse_coordinator_key() -> None:
    assert parse_coordinator_key("my:group:AQIDBAUGBwgJCgsMDQ4PEA:12") == SharePartitionKey(
        "my:group", TOPIC, 12
    )
    for bad in (
        "",
        "g:1",
        ":AQIDBAUGBwgJCgsMDQ4PEA:1",
        "g:notanid:1",
        "g:AQIDBAUGBwgJCgsMDQ4PEA:x",
    ):
        with pytest.raises(ValueError):
            parse_coordinator_key(bad)
