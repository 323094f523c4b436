"""One scenario run by test_client.py against kemu and by test_client_kafka.py against a real
Kafka 4.4.0: a transaction the coordinator aborted on timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kemu.client import KafkaError, TransactionalProducer
from kemu.protocol.errors import ErrorCode

DESCRIBE_TRANSACTIONS = 65
TOPIC = "timed-out"


async def a_timed_out_transaction_is_abortable(
    bootstrap: str, committed_values: Callable[[str], Awaitable[list[Any]]]
) -> None:
    """The next send is refused INVALID_PRODUCER_EPOCH, abortable as for Java's producer
    (KIP-588); the abort goes through with the bumped epoch and the next transaction commits.
    ``TOPIC`` must exist."""
    producer = TransactionalProducer(bootstrap, "tx-timed-out", transaction_timeout_ms=1000)
    try:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send(TOPIC, b"timed out")
        await aborted_by_timeout(producer)
        with pytest.raises(KafkaError) as refused:
            await producer.send(TOPIC, b"after the timeout")
        assert refused.value.error == ErrorCode.invalid_producer_epoch
        await producer.abort_transaction()
        producer.begin_transaction()
        await producer.send(TOPIC, b"next")
        await producer.commit_transaction()
        assert await committed_values(TOPIC) == [b"next"]
    finally:
        await producer.close()


async def aborted_by_timeout(producer: TransactionalProducer) -> None:
    """Until the coordinator has aborted the producer's transaction (DescribeTransactions)."""
    for _ in range(600):
        node = await producer.cluster.coordinator(1, producer.transactional_id)
        answer = await producer.cluster.call(
            node, DESCRIBE_TRANSACTIONS, 0, transactional_ids=(producer.transactional_id,)
        )
        if str(answer.transaction_states[0].transaction_state) == "CompleteAbort":
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the coordinator never aborted the transaction")
