"""Records without a key on a compacted topic, with real clients against a 3-broker kemu (in the
test's process): the batch is refused with INVALID_RECORD and per-record errors, as Kafka 4.4.0 does
(confluent-kafka's delivery report; the raw Produce response).

Where it came from: a difference from Kafka 4.4.0 found with librdkafka-based clients (issue 15)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    KafkaError,
    Producer,
)

from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch
from kemu.testing.inprocess import InProcessKemu
from kemu.testing.wire_client import nested
from tests.integration.three_brokers import (
    TIMEOUT_S,
    call,
    create_topic,
    leader_address,
    three_brokers_in_process,
    unique,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kemu() -> Iterator[InProcessKemu]:
    yield from three_brokers_in_process()


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_keyless_record_on_a_compacted_topic_fails_delivery(
    kemu: InProcessKemu, policy: str
) -> None:
    topic = unique("compacted")
    create_topic(kemu.bootstrap, topic, **{"cleanup.policy": policy})
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 0})
    reports: list[tuple[KafkaError | None, bytes | None]] = []
    producer.produce(topic, b"no key", on_delivery=lambda e, m: reports.append((e, m.key())))
    producer.flush(TIMEOUT_S)
    producer.produce(
        topic, b"keyed", key=b"k", on_delivery=lambda e, m: reports.append((e, m.key()))
    )
    producer.flush(TIMEOUT_S)
    (keyless_error, _), (keyed_error, _) = reports
    assert keyless_error is not None
    assert keyless_error.code() == KafkaError.INVALID_RECORD
    assert keyed_error is None


def test_keyless_records_get_record_errors_in_the_produce_response(kemu: InProcessKemu) -> None:
    topic = unique("compacted-raw")
    create_topic(kemu.bootstrap, topic, **{"cleanup.policy": "compact"})
    batch = build_batch(
        [(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4")],
        timestamp_ms=int(time.time() * 1000),
    )
    response = call(
        leader_address(kemu, topic),
        0,
        9,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            nested(
                0,
                9,
                "TopicProduceData",
                name=topic,
                partition_data=(nested(0, 9, "PartitionProduceData", index=0, records=batch),),
            ),
        ),
    )
    (result,) = response.responses[0].partition_responses
    assert result.error_code is ErrorCode.invalid_record
    assert result.base_offset == -1
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert [(e.batch_index, e.batch_index_error_message) for e in result.record_errors] == [
        (1, message),
        (3, message),
    ]
    assert result.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{message}'"
        f"), RecordError(batchIndex=3, message='{message}')]"
    )
