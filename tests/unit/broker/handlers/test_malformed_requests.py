"""Requests that decode but make no sense (a null topic name, the zero topic id, a null array
inside a topic): each gets Kafka's error code instead of UNKNOWN_SERVER_ERROR from a handler that
raised. Each request is sent as built (encoded, decoded as a broker decodes it, answered by the
registered handler, the answer encoded).

Where they came from: regression tests for what ``bench.fuzz`` found."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.testing.harness import HandlerHarness

METADATA, FETCH = 3, 1
ZERO_UUID = uuid.UUID(int=0)


class Broker(HandlerHarness):
    def __init__(self) -> None:
        super().__init__(brokers=1, cluster_id="fuzz-findings")
        self.cluster.create_topic("t", 1, 1)

    def build(
        self, api_key: int, version: int, class_name: str | None = None, **fields: Any
    ) -> Any:
        if class_name is None:
            return self.request(api_key, version, **fields)
        return self.nested(api_key, version, class_name, **fields)


def test_metadata_v10_v11_with_a_null_name_or_a_topic_id_is_an_invalid_request() -> None:
    # kemu answered with a null topic name, which v10/v11 cannot encode (handler_failed)
    broker = Broker()
    topic_id = broker.cluster.topics["t"].topic_id
    for version in (10, 11):
        for name, wanted_id in ((None, ZERO_UUID), ("t", topic_id), (None, topic_id)):
            entry = broker.build(METADATA, version, "MetadataRequestTopic", name=name)
            entry = type(entry)(name=name, topic_id=wanted_id)
            response = broker.send_body_now(
                broker.build(METADATA, version, topics=(entry,), allow_auto_topic_creation=False)
            )
            assert [(t.name, t.error_code) for t in response.topics] == [
                (name or "", ErrorCode.invalid_request)
            ]
            assert response.brokers == ()
        # names alone are served as before
        entry = broker.build(METADATA, version, "MetadataRequestTopic", name="t")
        response = broker.send_body_now(broker.build(METADATA, version, topics=(entry,)))
        assert [(t.name, t.error_code) for t in response.topics] == [("t", ErrorCode.none)]


def test_fetch_by_the_zero_topic_id_is_unknown_topic_id() -> None:
    # kio decodes the zero uuid as None; a session keyed by it failed an assertion
    broker = Broker()
    for version in (13, 16, 18):
        partition = broker.build(
            FETCH, version, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=1024
        )
        topic = broker.build(
            FETCH, version, "FetchTopic", topic_id=ZERO_UUID, partitions=(partition,)
        )
        forgotten = broker.build(
            FETCH, version, "ForgottenTopic", topic_id=ZERO_UUID, partitions=(1,)
        )
        for epoch in (0, -1):  # a new session, and no session
            response = broker.send_body_now(
                broker.build(
                    FETCH,
                    version,
                    max_bytes=1 << 20,
                    session_id=0,
                    session_epoch=epoch,
                    topics=(topic,),
                    forgotten_topics_data=(forgotten,),
                )
            )
            assert response.error_code == ErrorCode.none
            codes = [p.error_code for t in response.responses for p in t.partitions]
            assert codes == [ErrorCode.unknown_topic_id]


def test_a_null_partitions_array_inside_electleaders_topics_is_malformed() -> None:
    # ElectLeaders v1 (legacy): TopicPartitions is nullable, each entry's Partitions is not; the
    # null check skipped the elements of a nullable array and the handler iterated None
    frame = bytes.fromhex(
        "00000027002b0001000033fa000466757a7a0000000001000666757a7a2d62ffffffffffffffff00000064"
    )
    with pytest.raises(wire.MalformedFrame, match="null array"):
        wire.decode_request(frame[4:])
    # the same in v2 (flexible: compact count 0 is null)
    body = (
        b"\x00"  # election type
        + b"\x02"  # one topic
        + b"\x07fuzz-b"
        + b"\x00"  # partitions: null
        + b"\x00"  # the topic's tags
        + struct.pack(">i", 100)  # timeout
        + b"\x00"  # tags
    )
    header = struct.pack(">hhih", 43, 2, 1, 4) + b"fuzz" + b"\x00"
    with pytest.raises(wire.MalformedFrame, match="null array"):
        wire.decode_request(header + body)
    # a null TopicPartitions (every partition) is still served
    broker = Broker()
    response = broker.send_body_now(broker.build(43, 1, topic_partitions=None))
    assert response.error_code == ErrorCode.none
