"""One scenario run by test_client.py against kemu and by test_client_kafka.py against a real
Kafka 4.4.0: consume-transform-produce with the group's offsets in the transaction
(``TransactionalProducer.send_offsets_to_transaction``, ``GroupConsumer.group_metadata``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kemu.client import (
    CommitFailedError,
    ConsumerGroupMetadata,
    ConsumerRecord,
    GroupConsumer,
    TransactionalProducer,
)

SOURCE, SINK, GROUP = "offsets-in", "offsets-out", "offsets-group"
COUNT = 6  # records in SOURCE partition 0, written by the caller


async def poll_all(consumer: GroupConsumer, count: int) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    for _ in range(60):
        records += await consumer.poll(0.5)
        if len(records) >= count:
            break
    return records


async def offsets_commit_with_the_transaction(
    bootstrap: str, committed_values: Callable[[str], Awaitable[list[Any]]]
) -> None:
    """An aborted transaction's offsets are dropped and its output hidden; a committed one's
    offsets become the group's (a member joining later starts after them) with its output
    visible; a member epoch that is not the member's current one is refused with
    CommitFailedError, and the transaction is then aborted."""
    consumer = GroupConsumer(bootstrap, GROUP, auto_offset_reset="earliest")
    producer = TransactionalProducer(bootstrap, "tx-offsets")
    try:
        await consumer.subscribe([SOURCE])
        await producer.init_transactions()
        records = await poll_all(consumer, COUNT)
        assert [r.value for r in records] == [f"in-{i}".encode() for i in range(COUNT)]
        offsets = {(SOURCE, 0): records[-1].offset + 1}

        producer.begin_transaction()
        await producer.send(SINK, b"aborted", partition=0)
        await producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        await producer.abort_transaction()
        assert await consumer.committed([(SOURCE, 0)]) == {(SOURCE, 0): None}

        producer.begin_transaction()
        for record in records:
            await producer.send(SINK, (record.value or b"").upper(), partition=0)
        await producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        await producer.commit_transaction()
        assert await consumer.committed([(SOURCE, 0)]) == {(SOURCE, 0): COUNT}
        assert await committed_values(SINK) == [f"IN-{i}".encode() for i in range(COUNT)]

        producer.begin_transaction()
        current = consumer.group_metadata()
        stale = ConsumerGroupMetadata(GROUP, current.member_id, current.generation_id + 5)
        with pytest.raises(CommitFailedError):
            await producer.send_offsets_to_transaction(offsets, stale)
        await producer.abort_transaction()
    finally:
        await producer.close()
        await consumer.close()
    successor = GroupConsumer(bootstrap, GROUP, auto_offset_reset="earliest")
    try:
        await successor.subscribe([SOURCE])
        assert await successor.poll(2.0) == []  # it starts at the committed offset
        assert successor.position(SOURCE, 0) == COUNT
    finally:
        await successor.close()
