"""kemu's own schemas for the Kafka 4.4 versions kio lacks (``kemu.protocol.kafka44``): the
bytes follow Kafka 4.4.0's message JSONs and round-trip through kemu's codec."""

from __future__ import annotations

import uuid

from kemu.protocol import kafka44, wire
from kemu.protocol.errors import ErrorCode

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def test_the_schemas_are_the_ones_wire_serves() -> None:
    for (api_key, version), (request, response) in kafka44.SCHEMAS.items():
        assert wire.request_schema(api_key, version) is request
        assert wire.response_schema(api_key, version) is response
        assert request.__version__ == response.__version__ == version
        assert wire.known_versions(api_key) == (0, version)


def test_txn_offset_commit_v6_names_topics_by_id() -> None:
    module = wire.request_module(28, 6)
    partition = wire.build(
        module.TxnOffsetCommitRequestPartition,
        partition_index=2,
        committed_offset=10,
        committed_leader_epoch=-1,
        committed_metadata=None,
    )
    topic = wire.build(
        module.TxnOffsetCommitRequestTopic, topic_id=TOPIC_ID, partitions=(partition,)
    )
    body = wire.build(
        module.TxnOffsetCommitRequest,
        transactional_id="t",
        group_id="g",
        producer_id=5,
        producer_epoch=1,
        generation_id=3,
        member_id="m",
        group_instance_id=None,
        topics=(topic,),
    )
    raw = wire.encode_body(body)
    # ... group_instance_id null (0x00), then 1 topic (0x02): the 16 uuid bytes, no name
    assert raw.endswith(
        b"\x00\x02" + TOPIC_ID.bytes
        + b"\x02\x00\x00\x00\x02" + (10).to_bytes(8, "big") + b"\xff\xff\xff\xff\x00\x00\x00\x00"
    )  # fmt: skip
    frame = wire.encode_request_frame(body, correlation_id=3)[4:]
    assert wire.decode_request(frame).body == body


def test_txn_offset_commit_v6_response_round_trips() -> None:
    module = wire.response_module(28, 6)
    partition = wire.build(
        module.TxnOffsetCommitResponsePartition,
        partition_index=0,
        error_code=ErrorCode.unknown_topic_id,
    )
    topic = wire.build(
        module.TxnOffsetCommitResponseTopic, topic_id=TOPIC_ID, partitions=(partition,)
    )
    body = wire.build(module.TxnOffsetCommitResponse, topics=(topic,))
    payload = wire.encode_response_frame(28, 6, 9, body)[4:]
    assert wire.decode_response(28, 6, payload) == (9, body)


def test_delete_groups_v3_results_carry_a_nullable_message() -> None:
    module = wire.response_module(42, 3)
    results = (
        wire.build(module.DeletableGroupResult, group_id="a", error_code=ErrorCode.none),
        wire.build(
            module.DeletableGroupResult,
            group_id="b",
            error_code=ErrorCode.group_id_not_found,
            error_message="why",
        ),
    )
    assert results[0].error_message is None
    body = wire.build(module.DeleteGroupsResponse, results=results)
    raw = wire.encode_body(body)
    # throttle, 2 results: "a", NONE, null message, tags; "b", 69, "why", tags; tags
    assert raw == (
        b"\x00\x00\x00\x00\x03" + b"\x02a\x00\x00\x00\x00" + b"\x02b\x00\x45\x04why\x00" + b"\x00"
    )
    payload = wire.encode_response_frame(42, 3, 4, body)[4:]
    assert wire.decode_response(42, 3, payload) == (4, body)
