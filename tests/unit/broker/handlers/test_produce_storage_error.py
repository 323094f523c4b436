"""Produce through the real wire (``test_admin_handlers.Broker``) onto a log whose appends fail
with an OSError: that partition answers KAFKA_STORAGE_ERROR, the others are appended, and the
failure is logged once per partition."""

from __future__ import annotations

import datetime
import errno
from typing import Any

from structlog.testing import capture_logs

from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import BatchHeader, build_batch
from kemu.storage.log import MemoryLog
from tests.unit.broker.handlers.test_admin_handlers import Broker

PRODUCE = 0
TS = 1_700_000_000_000


class FullDiskLog(MemoryLog):
    def append(self, header: BatchHeader, batch: bytes, *, now_ms: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")


def produce(broker: Broker, partitions: list[int], version: int = 9) -> dict[int, Any]:
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
    broker = Broker()
    broker.create("disk", -1, -1, assignments={0: [1], 1: [1]})
    failing = broker.cluster.topics["disk"].partitions[0]
    failing.log = FullDiskLog()
    with capture_logs() as logs:
        first = produce(broker, [0, 1])
        second = produce(broker, [0, 1])
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
