"""What the client library modules that write records and read them back byte-for-byte share
(``test_aiokafka.py``, ``test_kafka_python.py``, ``test_confluent_kafka.py``): their kemu, what
each record was sent with, and the check that it came back so.

Each module makes its own records (``messages``: the shapes its client can send); what its client
reads is turned into ``Received`` (aiokafka's and kafka-python's records: ``check_records``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pytest

from kemu.testing.inprocess import InProcessKemu

PARTITIONS = 4
TIMEOUT = 30.0

Headers = TypeVar("Headers")  # as the client library sends and reads them
TupleHeaders = tuple[tuple[str, bytes], ...]


@contextmanager
def four_partition_kemu(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> Iterator[InProcessKemu]:
    """3 brokers; topics are auto-created (through Metadata) with 4 partitions."""
    log_path = tmp_path_factory.mktemp(name) / "kemu.log"
    process = InProcessKemu(
        brokers=3, log_path=log_path, overrides=[f"num.partitions={PARTITIONS}"]
    ).start()
    try:
        yield process
    finally:
        process.stop()


@dataclass(frozen=True)
class Sent(Generic[Headers]):
    partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int


@dataclass(frozen=True)
class Received(Generic[Headers]):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    create_time: bool  # the timestamp's type is CreateTime
    headers: Headers


def check_round_trip(
    received: list[Received[Headers]],
    topic: str,
    batch: list[Sent[Headers]],
    first_offset: int = 0,
) -> None:
    """Per partition: contiguous offsets from first_offset, in send order, byte-for-byte."""
    by_partition: dict[int, list[Received[Headers]]] = {}
    for record in received:
        assert record.topic == topic
        by_partition.setdefault(record.partition, []).append(record)
    expected: dict[int, list[Sent[Headers]]] = {}
    for sent in batch:
        expected.setdefault(sent.partition, []).append(sent)
    assert sorted(by_partition) == sorted(expected)
    for partition, sent_list in expected.items():
        got = by_partition[partition]
        assert [r.offset for r in got] == list(range(first_offset, first_offset + len(sent_list)))
        for record, sent in zip(got, sent_list, strict=True):
            assert record.key == sent.key
            assert record.value == sent.value
            assert record.timestamp == sent.timestamp
            assert record.create_time
            assert record.headers == sent.headers


def check_records(
    records: list[Any], topic: str, batch: list[Sent[TupleHeaders]], first_offset: int = 0
) -> None:
    """``check_round_trip`` of aiokafka's or kafka-python's ConsumerRecords."""
    received = [
        Received(
            record.topic,
            record.partition,
            record.offset,
            record.key,
            record.value,
            record.timestamp,
            record.timestamp_type == 0,
            tuple(record.headers),
        )
        for record in records
    ]
    check_round_trip(received, topic, batch, first_offset)
