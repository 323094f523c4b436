"""kemu.client's wire-free parts: acknowledgement batches, Kafka's key hash, walking fetched
batches, the read_committed filter, which acquired offsets a share fetch hands out, and what
acknowledgements_for_transaction() takes."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from kemu.client import AcknowledgeType, IllegalStateError, ShareConsumer, TopicIdPartition
from kemu.client.codec import murmur2, partition_for_key, whole_batches
from kemu.client.consumer import Consumer
from kemu.client.share_types import ShareAcknowledgementBatch, to_batches
from kemu.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, build_batch, control_batch

TOPIC_ID = uuid.UUID(int=7)
TP = TopicIdPartition(TOPIC_ID, "input", 0)


def test_acknowledgement_batches_are_contiguous_runs_with_one_type_when_uniform() -> None:
    assert to_batches({5: 1, 3: 1, 4: 1, 9: 3, 10: 1}) == [
        ShareAcknowledgementBatch(3, 5, (1,)),
        ShareAcknowledgementBatch(9, 10, (3, 1)),
    ]
    assert to_batches({}) == []


def test_murmur2_matches_kafka() -> None:
    # Values from Kafka's UtilsTest.testMurmur2
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"") == 275646681
    assert 0 <= partition_for_key(b"foobar", 3) < 3


def batch(base_offset: int, values: list[bytes], **kwargs: object) -> bytes:
    built = build_batch([(None, v) for v in values], timestamp_ms=1, **kwargs)  # type: ignore[arg-type]
    return base_offset.to_bytes(8, "big") + built[8:]


def marker(base_offset: int, kind: int, producer_id: int) -> bytes:
    built = control_batch(
        kind, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0, timestamp_ms=1
    )
    return base_offset.to_bytes(8, "big") + built[8:]


def test_whole_batches_stop_at_a_cut_batch() -> None:
    data = batch(0, [b"a", b"b"]) + batch(2, [b"c"])
    assert [h.base_offset for h, _ in whole_batches(data)] == [0, 2]
    assert [h.base_offset for h, _ in whole_batches(data[:-5])] == [0]
    assert list(whole_batches(None)) == []


def test_read_committed_skips_aborted_transactions_only() -> None:
    data = (
        batch(0, [b"plain"])
        + batch(1, [b"aborted"], producer_id=5, producer_epoch=0, transactional=True)
        + batch(2, [b"committed"], producer_id=6, producer_epoch=0, transactional=True)
        + marker(3, CONTROL_ABORT, 5)
        + marker(4, CONTROL_COMMIT, 6)
        + batch(5, [b"later"], producer_id=5, producer_epoch=0, transactional=True)
    )
    partition = SimpleNamespace(
        records=data, aborted_transactions=[SimpleNamespace(producer_id=5, first_offset=1)]
    )
    consumer = Consumer("127.0.0.1:1")
    consumer.positions[("out", 0)] = 0
    values = [r.value for r in consumer._records(("out", 0), partition)]
    assert values == [b"plain", b"committed", b"later"]
    assert consumer.positions[("out", 0)] == 6


def test_only_acquired_offsets_are_handed_out_and_markers_are_gaps() -> None:
    consumer = ShareConsumer("127.0.0.1:1", "group", acknowledgement_mode="explicit")
    data = (
        batch(0, [b"a", b"b"], producer_id=5, producer_epoch=0, transactional=True)
        + marker(2, CONTROL_COMMIT, 5)
        + batch(3, [b"d"])
    )
    partition = SimpleNamespace(
        records=data,
        acquired_records=[
            SimpleNamespace(first_offset=1, last_offset=2, delivery_count=1),
            SimpleNamespace(first_offset=3, last_offset=3, delivery_count=2),
        ],
    )
    records = consumer._records_in(TP, partition)
    assert [(r.offset, r.value, r.delivery_count) for r in records] == [(1, b"b", 1), (3, b"d", 2)]
    assert consumer._pending == {TP: {2: AcknowledgeType.GAP}}


def test_acknowledgements_for_transaction_takes_accept_reject_and_gaps() -> None:
    consumer = ShareConsumer("127.0.0.1:1", "group", acknowledgement_mode="explicit")
    partition = SimpleNamespace(
        records=batch(0, [b"a", b"b", b"c"]),
        acquired_records=[SimpleNamespace(first_offset=0, last_offset=3, delivery_count=1)],
    )
    records = consumer._records_in(TP, partition)  # offset 3 has no record: a gap
    for record in records:
        consumer._delivered[(record.topic_id_partition, record.offset)] = record
    with pytest.raises(IllegalStateError):
        consumer._settle_previous_poll()  # explicit mode: nothing acknowledged yet
    consumer.acknowledge(records[0], AcknowledgeType.ACCEPT)
    consumer.acknowledge(records[1], AcknowledgeType.RELEASE)
    consumer.acknowledge(records[2], AcknowledgeType.REJECT)
    with pytest.raises(IllegalStateError):
        consumer.acknowledge(records[2], AcknowledgeType.ACCEPT)  # already acknowledged
    taken = consumer.acknowledgements_for_transaction()
    assert taken.acknowledgements == {
        TP: [ShareAcknowledgementBatch(0, 0, (1,)), ShareAcknowledgementBatch(2, 3, (3, 0))]
    }
    assert consumer._pending == {TP: {1: AcknowledgeType.RELEASE}}  # stays with the consumer
    assert consumer.acknowledgements_for_transaction().is_empty()
