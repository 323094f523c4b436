"""A record acquired again for the same member while the consumer still holds it (its lock
expired while the application was paused, and the fetch in flight acquired it anew) is not
handed out again: the acknowledgement the application makes of it names its offset, so the
broker applies it to the new acquisition. Found by the simulation's stalls (seed 2): the
reader's ACCEPT was confirmed, then the same records came at delivery 2."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from kemu.client import ShareConsumer
from kemu.client.cluster import TopicIdPartition
from kemu.client.share_types import AcknowledgeType, ShareRecord, ShareSession, held_again

TP = TopicIdPartition(uuid.UUID(int=7), "input", 1)


def answer(*spans: tuple[int, int, int]) -> Any:
    """A ShareFetch answer's partition acquiring (first, last, delivery count) spans."""
    acquired = [
        SimpleNamespace(first_offset=a, last_offset=b, delivery_count=c) for a, b, c in spans
    ]
    return SimpleNamespace(
        partition_index=TP.partition,
        error_code=0,
        acknowledge_error_code=0,
        acquired_records=acquired,
        records=None,
    )


def record(offset: int, delivery_count: int) -> ShareRecord:
    return ShareRecord(
        TP.topic, TP.partition, offset, None, b"v", 0, (), delivery_count, TP.topic_id, TP
    )


def test_only_held_offsets_inside_the_acquired_spans_are_held_again() -> None:
    pending = {TP: {10: int(AcknowledgeType.ACCEPT), 20: int(AcknowledgeType.ACCEPT)}}
    delivered = {(TP, 12): record(12, 1), (TP, 30): record(30, 1)}
    found = held_again(TP, answer((10, 15, 2)), [pending], delivered)
    assert found == {(TP, 10), (TP, 12)}


async def test_a_record_acquired_again_while_held_is_not_handed_out_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer = ShareConsumer("localhost:9092", "readers", acknowledgement_mode="explicit")
    first = record(5, 1)
    consumer._delivered[(TP, 5)] = first
    consumer.acknowledge(first, AcknowledgeType.ACCEPT)  # pending, not sent yet
    partition = answer((5, 6, 2))
    response = SimpleNamespace(
        responses=[SimpleNamespace(topic_id=TP.topic_id, partitions=[partition])]
    )
    consumer.cluster.topic_names[TP.topic_id] = TP.topic
    monkeypatch.setattr(consumer, "_records_in", lambda tp, p: [record(5, 2), record(6, 1)])
    consumer._take_in(consumer._acquired(response, ShareSession()))
    # offset 5 is settled by the pending ACCEPT; offset 6 is new to this consumer
    assert [(r.offset, r.delivery_count) for r in consumer._buffer] == [(6, 1)]
    assert consumer._pending == {TP: {5: int(AcknowledgeType.ACCEPT)}}
    assert not consumer._reacquired
