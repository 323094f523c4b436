"""TransactionalProducer.send_share_acknowledgements_to_transaction when the leader answers
UNKNOWN_TOPIC_OR_PARTITION (kemu and Kafka: no share partition loaded there).

Found by the exactly-once crash harness (``bench/eos_crash.py``): after kemu restarted in the
middle of a transaction, the restarted leader had no share partition until the next ShareFetch,
and the client retried TxnShareAcknowledge for its whole request timeout (30 s), as long as the
transaction timeout: the transaction timed out and the worker was fenced, every worker at once.
The records the member had acquired were lost with the leader's memory, so no retry could stage
them. Now a leader moved is still retried after a metadata refresh, but the same leader saying it
again is an abortable error at once. A partition whose stage write the share coordinator
refused (COORDINATOR_NOT_AVAILABLE & co.) is sent again. No broker: the wire calls are
stand-ins."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from kemu.client import KafkaError, TransactionalProducer
from kemu.client.cluster import TopicIdPartition
from kemu.client.producer import _State
from kemu.client.share_types import (
    ShareAcknowledgementBatch,
    ShareAcknowledgements,
    ShareGroupMetadata,
)
from kemu.protocol.errors import ErrorCode

TOPIC_ID = uuid.uuid4()
TP = TopicIdPartition(TOPIC_ID, "src", 0)
ACKS = ShareAcknowledgements({TP: [ShareAcknowledgementBatch(0, 4, (1,))]})
METADATA = ShareGroupMetadata("g", "member", 1)


class Leaders:
    """The partition's leader per metadata refresh, and each TxnShareAcknowledge's answer."""

    def __init__(self, leaders: list[int], answers: list[ErrorCode]) -> None:
        self.leaders, self.answers = leaders, answers
        self.refreshes = 0
        self.calls: list[int] = []

    async def leader(self, topic: str, partition: int) -> int:
        return self.leaders[min(self.refreshes, len(self.leaders) - 1)]

    async def forget_leaders(self) -> None:
        self.refreshes += 1

    async def call(self, node: int, key: Any, version: int, **fields: Any) -> Any:
        self.calls.append(node)
        code = self.answers[len(self.calls) - 1]
        partition = SimpleNamespace(partition_index=0, error_code=code, error_message=None)
        topic = SimpleNamespace(topic_id=TOPIC_ID, partitions=[partition])
        return SimpleNamespace(error_code=ErrorCode.none, responses=[topic])


def producer_in_transaction(monkeypatch: pytest.MonkeyPatch, leaders: Leaders) -> Any:
    producer = TransactionalProducer("127.0.0.1:1", "t", share_acknowledgement_form="one-rpc")
    producer._state = _State.IN_TRANSACTION
    producer.producer_id, producer.producer_epoch = 1000, 1

    async def served(*args: Any) -> None:
        return None

    monkeypatch.setattr(producer, "_require_served", served)
    for name in ("leader", "forget_leaders", "call"):
        monkeypatch.setattr(producer.cluster, name, getattr(leaders, name))
    return producer


async def test_a_leader_without_the_share_partition_is_abortable_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    leaders = Leaders([1], [ErrorCode.unknown_topic_or_partition] * 50)
    producer = producer_in_transaction(monkeypatch, leaders)
    with pytest.raises(KafkaError) as raised:
        await producer.send_share_acknowledgements_to_transaction(ACKS, METADATA)
    assert raised.value.error == ErrorCode.unknown_topic_or_partition
    assert leaders.calls == [1, 1]  # once more after a metadata refresh, not until the timeout
    assert producer._state is _State.ABORTABLE


async def test_a_leader_that_moved_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    leaders = Leaders([1, 2], [ErrorCode.unknown_topic_or_partition, ErrorCode.none])
    producer = producer_in_transaction(monkeypatch, leaders)
    await producer.send_share_acknowledgements_to_transaction(ACKS, METADATA)
    assert leaders.calls == [1, 2]
    assert producer._state is _State.IN_TRANSACTION


@pytest.mark.parametrize(
    "refusal",
    [
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
    ],
)
async def test_a_refused_stage_write_is_sent_again_to_the_same_leader(
    monkeypatch: pytest.MonkeyPatch, refusal: ErrorCode
) -> None:
    """KIP-1289 §7: the share coordinator could not take the stage's write, the leader took the
    stage back (the records are still the member's): the draft client retries the partition,
    without a metadata refresh, and the retry stages it."""
    leaders = Leaders([1], [refusal, ErrorCode.none])
    producer = producer_in_transaction(monkeypatch, leaders)
    await producer.send_share_acknowledgements_to_transaction(ACKS, METADATA)
    assert leaders.calls == [1, 1] and leaders.refreshes == 0
    assert producer._state is _State.IN_TRANSACTION
