"""Produce through the real wire (``test_admin_handlers.Broker``): the answers of failing logs,
of batches too large, of keyless records on compacted topics."""

from __future__ import annotations

import datetime
import errno
from typing import Any

import pytest
from structlog.testing import capture_logs

from kemu.protocol.errors import ErrorCode
from kemu.protocol.record_reader import GZIP, ZSTD, Record, keyless_record_indexes
from kemu.protocol.records import BatchHeader, build_batch
from kemu.storage.log import MemoryLog
from tests.unit.batch_builders import client_batch
from tests.unit.broker.handlers.test_admin_handlers import Broker

PRODUCE = 0
TS = 1_700_000_000_000


class FullDiskLog(MemoryLog):
    def append(self, header: BatchHeader, batch: bytes, *, now_ms: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")


def produce_to_disk(broker: Broker, partitions: list[int], version: int = 9) -> dict[int, Any]:
    batch = build_batch([(b"k", b"v")], timestamp_ms=TS)
    data = tuple(
        broker.nested(PRODUCE, version, "PartitionProduceData", index=index, records=batch)
        for index in partitions
    )
    topic = broker.nested(PRODUCE, version, "TopicProduceData", name="disk", partition_data=data)
    request = broker.request(
        PRODUCE,
        version,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(topic,),
    )
    (answer,) = broker.send(request).responses
    return {result.index: result for result in answer.partition_responses}


def test_a_failing_log_answers_storage_error_for_its_partition_only() -> None:
    """A log whose appends fail with an OSError: that partition answers KAFKA_STORAGE_ERROR, the
    others are appended, and the failure is logged once per partition."""
    broker = Broker()
    broker.create("disk", -1, -1, assignments={0: [1], 1: [1]})
    failing = broker.cluster.topics["disk"].partitions[0]
    failing.log = FullDiskLog()
    with capture_logs() as logs:
        first = produce_to_disk(broker, [0, 1])
        second = produce_to_disk(broker, [0, 1])
    for results in (first, second):
        assert results[0].error_code == ErrorCode.kafka_storage_error
        assert results[0].base_offset == -1
        assert results[0].error_message
        assert results[1].error_code == ErrorCode.none
    assert (first[1].base_offset, second[1].base_offset) == (0, 1)
    assert failing.log.log_end_offset == 0
    failures = [entry for entry in logs if entry["event"] == "log_append_failed"]
    assert len(failures) == 1  # once per partition, not once per request
    assert (failures[0]["topic"], failures[0]["partition"]) == ("disk", 0)
    assert "No space left" in failures[0]["error"]


def test_a_batch_above_max_message_bytes_is_too_large_without_a_message() -> None:
    """A batch above the topic's ``max.message.bytes`` is MESSAGE_TOO_LARGE with a null error
    message, as Kafka answers (Kafka sends a text only for record validation failures), and
    nothing is appended."""
    broker = Broker()
    broker.create("small", 1, 1, configs={"max.message.bytes": "200"})
    batch = build_batch([(b"k", b"x" * 500)], timestamp_ms=TS)
    data = broker.nested(PRODUCE, 9, "PartitionProduceData", index=0, records=batch)
    topic = broker.nested(PRODUCE, 9, "TopicProduceData", name="small", partition_data=(data,))
    request = broker.request(
        PRODUCE,
        9,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(topic,),
    )
    (answer,) = broker.send(request).responses
    (result,) = answer.partition_responses
    assert result.error_code == ErrorCode.message_too_large
    assert result.error_message is None
    assert result.base_offset == -1
    assert broker.cluster.topics["small"].partitions[0].log.log_end_offset == 0


# keyless records on compacted topics


def records(keys: list[bytes | None]) -> list[Record]:
    return [Record(i, TS, key, b"v", ()) for i, key in enumerate(keys)]


@pytest.mark.parametrize("codec", [0, GZIP, ZSTD])
def test_keyless_record_indexes(codec: int) -> None:
    batch = client_batch(records([b"a", None, b"", None, b"e"]), codec)
    assert keyless_record_indexes(batch) == [1, 3]  # an empty key is a key


def produce(broker: Broker, topic: str, batch: bytes, version: int = 9) -> Any:
    partition = broker.cluster.topics[topic].partitions[0]
    data = broker.nested(PRODUCE, version, "PartitionProduceData", index=0, records=batch)
    request = broker.request(
        PRODUCE,
        version,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            broker.nested(PRODUCE, version, "TopicProduceData", name=topic, partition_data=(data,)),
        ),
    )
    (result,) = broker.send(request, node_id=partition.leader_id).responses[0].partition_responses
    return result


@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete,compact"])
def test_compacted_topic_refuses_keyless_records_with_record_errors(policy: str) -> None:
    """As Kafka 4.4.0 (found missing by issue 15's comparison): each keyless record of a batch
    for a compacted topic is a RecordError, and the batch is refused."""
    broker = Broker()
    broker.create("t", configs={"cleanup.policy": policy})
    keys: list[bytes | None] = [None, b"k", None, None, None]
    result = produce(broker, "t", build_batch([(k, b"v") for k in keys], timestamp_ms=TS))
    assert result.error_code is ErrorCode.invalid_record
    assert result.base_offset == -1
    assert result.log_start_offset == 0
    message = "Compacted topic cannot accept message without key in topic partition t-0"
    assert [(e.batch_index, e.batch_index_error_message) for e in result.record_errors] == [
        (i, message) for i in (0, 2, 3, 4)
    ]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i in (0, 2, 3))
    assert result.error_message == (
        "One or more records have been rejected due to 4 record errors in total, and only "
        f"showing the first three errors at most: [{shown}]"
    )
    assert broker.cluster.topics["t"].partitions[0].high_watermark == 0


def test_compacted_topic_takes_keyed_records_and_deleting_topics_take_any() -> None:
    broker = Broker()
    broker.create("compacted", configs={"cleanup.policy": "compact"})
    broker.create("deleting")
    keyed = produce(broker, "compacted", build_batch([(b"k", None)], timestamp_ms=TS))
    assert (keyed.error_code, keyed.record_errors) == (ErrorCode.none, ())
    keyless = produce(broker, "deleting", build_batch([(None, b"v")], timestamp_ms=TS))
    assert keyless.error_code is ErrorCode.none
