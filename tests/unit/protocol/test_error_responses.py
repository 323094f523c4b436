"""error_response_for: the error answer of any request mirrors what the request names."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kemu.protocol import wire
from kemu.protocol.error_responses import error_response_for
from kemu.protocol.errors import ErrorCode
from kemu.protocol.wire import DecodedRequest, RequestHeader

NLF = ErrorCode.not_leader_or_follower


def _request(api_key: int, version: int, **values: Any) -> DecodedRequest:
    schema = wire.request_schema(api_key, version)
    body = wire.build(schema, **values)
    return DecodedRequest(RequestHeader(api_key, version, 7, "t"), body, schema)


def _req(api_key: int, version: int, cls_name: str, **values: Any) -> Any:
    return wire.build(getattr(wire.request_module(api_key, version), cls_name), **values)


def _roundtrip(request: DecodedRequest, body: Any) -> Any:
    header = request.header
    frame = wire.encode_response_frame(header.api_key, header.api_version, 7, body)
    return wire.decode_response(header.api_key, header.api_version, frame[4:])[1]


def test_produce_every_partition_gets_the_error() -> None:
    topic = _req(
        0,
        9,
        "TopicProduceData",
        name="orders",
        partition_data=(
            _req(0, 9, "PartitionProduceData", index=0),
            _req(0, 9, "PartitionProduceData", index=2),
        ),
    )
    request = _request(0, 9, acks=-1, timeout=30000, topic_data=(topic,))
    answer = _roundtrip(request, error_response_for(request, NLF))
    (responded,) = answer.responses
    assert responded.name == "orders"
    assert [(p.index, p.error_code, p.base_offset) for p in responded.partition_responses] == [
        (0, NLF, -1),
        (2, NLF, -1),
    ]


def test_fetch_by_topic_id_keeps_the_id() -> None:
    topic_id = uuid.uuid4()
    topic = _req(
        1,
        13,
        "FetchTopic",
        topic_id=topic_id,
        partitions=(_req(1, 13, "FetchPartition", partition=1),),
    )
    request = _request(1, 13, topics=(topic,))
    answer = _roundtrip(request, error_response_for(request, ErrorCode.unknown_topic_id))
    (responded,) = answer.responses
    assert responded.topic_id == topic_id
    (partition,) = responded.partitions
    assert (partition.partition_index, partition.error_code) == (1, ErrorCode.unknown_topic_id)
    assert partition.high_watermark == -1


def test_plain_lists_become_entities() -> None:
    request = _request(15, 5, groups=("g1", "g2"))
    answer = _roundtrip(request, error_response_for(request, ErrorCode.coordinator_not_available))
    assert [(g.group_id, g.error_code) for g in answer.groups] == [
        ("g1", ErrorCode.coordinator_not_available),
        ("g2", ErrorCode.coordinator_not_available),
    ]


def test_find_coordinator_batched_answers_every_key() -> None:
    """As Kafka's prepareErrorResponse: one coordinator per key (found by the simulation, seed
    401: an empty list made kemu.client fail to unpack it)."""
    request = _request(10, 4, key_type=0, coordinator_keys=("g1", "g2"))
    body = _roundtrip(request, error_response_for(request, ErrorCode.coordinator_not_available))
    assert [c.key for c in body.coordinators] == ["g1", "g2"]
    assert {c.error_code for c in body.coordinators} == {ErrorCode.coordinator_not_available}


def test_top_level_error() -> None:
    request = _request(22, 4, transactional_id="tx", transaction_timeout=60000)
    answer = _roundtrip(request, error_response_for(request, ErrorCode.concurrent_transactions))
    assert answer.error_code == ErrorCode.concurrent_transactions


def test_add_partitions_v3_partition_error_codes() -> None:
    topic = _req(24, 3, "AddPartitionsToTxnTopic", name="t", partitions=(0, 1))
    request = _request(24, 3, v3_and_below_topics=(topic,), v3_and_below_transactional_id="x")
    answer = _roundtrip(request, error_response_for(request, ErrorCode.concurrent_transactions))
    (result,) = answer.results_by_topic_v3_and_below
    assert [(p.partition_index, p.partition_error_code) for p in result.results_by_partition] == [
        (0, ErrorCode.concurrent_transactions),
        (1, ErrorCode.concurrent_transactions),
    ]


@pytest.mark.parametrize("api_key", [k for k in range(0, 100) if wire.known_versions(k)])
def test_every_api_version_encodes(api_key: int) -> None:
    known = wire.known_versions(api_key)
    assert known is not None
    for version in range(known[0], known[1] + 1):
        request = _request(api_key, version)
        _roundtrip(request, error_response_for(request, ErrorCode.unknown_server_error))
