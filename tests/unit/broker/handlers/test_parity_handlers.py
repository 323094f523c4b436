"""Kafka 4.4.0 behaviours kemu used to miss (issue 15), through the handlers' wire encoding."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from kemu.broker.authorization import OMITTED, SUPPORTED_OPERATIONS, ResourceType, bit_field
from kemu.protocol.errors import ErrorCode
from kemu.protocol.record_reader import GZIP, ZSTD, Record, keyless_record_indexes
from kemu.protocol.records import build_batch
from tests.unit.batch_builders import client_batch
from tests.unit.broker.handlers.test_admin_handlers import Broker

NOW = 1_700_000_000_000
PRODUCE = 0


def records(keys: list[bytes | None]) -> list[Record]:
    return [Record(i, NOW, key, b"v", ()) for i, key in enumerate(keys)]


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
    broker = Broker()
    broker.create("t", configs={"cleanup.policy": policy})
    keys: list[bytes | None] = [None, b"k", None, None, None]
    result = produce(broker, "t", build_batch([(k, b"v") for k in keys], timestamp_ms=NOW))
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
    keyed = produce(broker, "compacted", build_batch([(b"k", None)], timestamp_ms=NOW))
    assert (keyed.error_code, keyed.record_errors) == (ErrorCode.none, ())
    keyless = produce(broker, "deleting", build_batch([(None, b"v")], timestamp_ms=NOW))
    assert keyless.error_code is ErrorCode.none


# --- authorized operations (Kafka without an authorizer: every supported operation) -----------

METADATA = 3
CLUSTER_BITS = sum(1 << code for code in (5, 7, 8, 9, 10, 11, 12))
TOPIC_BITS = sum(1 << code for code in (3, 4, 5, 6, 7, 8, 10, 11))
GROUP_BITS = sum(1 << code for code in (3, 6, 8, 10, 11))


def test_supported_operations_are_kafkas() -> None:
    assert bit_field(SUPPORTED_OPERATIONS[ResourceType.CLUSTER]) == CLUSTER_BITS
    assert bit_field(SUPPORTED_OPERATIONS[ResourceType.TOPIC]) == TOPIC_BITS
    assert bit_field(SUPPORTED_OPERATIONS[ResourceType.GROUP]) == GROUP_BITS
    assert bit_field(SUPPORTED_OPERATIONS[ResourceType.TRANSACTIONAL_ID]) == (1 << 8) | (1 << 4)


def metadata(broker: Broker, version: int, names: tuple[str, ...], **fields: Any) -> Any:
    topics = tuple(broker.nested(METADATA, version, "MetadataRequestTopic", name=n) for n in names)
    return broker.send(
        broker.request(METADATA, version, topics=topics, allow_auto_topic_creation=False, **fields)
    )


@pytest.mark.parametrize("version", [8, 9, 10])
def test_metadata_cluster_operations_up_to_v10(version: int) -> None:
    broker = Broker()
    asked = metadata(broker, version, (), include_cluster_authorized_operations=True)
    assert asked.cluster_authorized_operations == CLUSTER_BITS
    unasked = metadata(broker, version, (), include_cluster_authorized_operations=False)
    assert unasked.cluster_authorized_operations == OMITTED


@pytest.mark.parametrize("version", [8, 11, 12])
def test_metadata_topic_operations_for_found_and_unknown_names(version: int) -> None:
    broker = Broker()
    broker.create("t")
    extra = {"include_cluster_authorized_operations": False} if version <= 10 else {}
    response = metadata(
        broker, version, ("t", "missing"), include_topic_authorized_operations=True, **extra
    )
    found, missing = response.topics
    assert (found.error_code, found.topic_authorized_operations) == (ErrorCode.none, TOPIC_BITS)
    assert missing.error_code is ErrorCode.unknown_topic_or_partition
    assert missing.topic_authorized_operations == TOPIC_BITS  # as Kafka: the name is a resource
    plain = metadata(broker, version, ("t",), include_topic_authorized_operations=False, **extra)
    assert plain.topics[0].topic_authorized_operations == OMITTED
