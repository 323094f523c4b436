"""Regression tests for what ``bench.fuzz`` found: each request is sent as the fuzzer sent it
(encoded, decoded as a broker decodes it, answered by the registered handler, the answer
encoded), and gets Kafka's error code instead of UNKNOWN_SERVER_ERROR from a handler that
raised."""

from __future__ import annotations

import asyncio
import struct
import sys
import uuid
from typing import Any

import pytest

from kemu.broker.handlers import REGISTRY, load_handlers
from kemu.cluster.context import RequestContext, Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.storage.log import MemoryLog

METADATA, FETCH = 3, 1
ZERO_UUID = uuid.UUID(int=0)


class Broker:
    def __init__(self) -> None:
        load_handlers()
        nodes = {1: BrokerNode(1, "127.0.0.1", 19091)}
        self.cluster = Cluster(
            cluster_id="fuzz-findings",
            nodes=nodes,
            config=BrokerConfig({}),
            log_factory=lambda topic, index: MemoryLog(),
        )
        self.runtime = Runtime(cluster=self.cluster, clock_ms=lambda: 1_700_000_000_000)
        self.cluster.create_topic("t", 1, 1)

    def build(
        self, api_key: int, version: int, class_name: str | None = None, **fields: Any
    ) -> Any:
        schema = wire.request_schema(api_key, version)
        cls = schema if class_name is None else getattr(sys.modules[schema.__module__], class_name)
        return wire.build(cls, **fields)

    def send(self, body: Any) -> Any:
        frame = wire.encode_request_frame(body, 7)
        decoded = wire.decode_request(frame[4:])
        header = decoded.header
        context = RequestContext(self.cluster.nodes[1], self.runtime, header)
        answer = REGISTRY[header.api_key].function(context, decoded.body)
        if asyncio.iscoroutine(answer):
            answer = asyncio.run(answer)
        out = wire.encode_response_frame(header.api_key, header.api_version, 7, answer)
        return wire.decode_response(header.api_key, header.api_version, out[4:])[1]


def test_metadata_v10_v11_with_a_null_name_or_a_topic_id_is_an_invalid_request() -> None:
    # kemu answered with a null topic name, which v10/v11 cannot encode (handler_failed)
    broker = Broker()
    topic_id = broker.cluster.topics["t"].topic_id
    for version in (10, 11):
        for name, wanted_id in ((None, ZERO_UUID), ("t", topic_id), (None, topic_id)):
            entry = broker.build(METADATA, version, "MetadataRequestTopic", name=name)
            entry = type(entry)(name=name, topic_id=wanted_id)
            response = broker.send(
                broker.build(METADATA, version, topics=(entry,), allow_auto_topic_creation=False)
            )
            assert [(t.name, t.error_code) for t in response.topics] == [
                (name or "", ErrorCode.invalid_request)
            ]
            assert response.brokers == ()
        # names alone are served as before
        entry = broker.build(METADATA, version, "MetadataRequestTopic", name="t")
        response = broker.send(broker.build(METADATA, version, topics=(entry,)))
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
            response = broker.send(
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
    response = broker.send(broker.build(43, 1, topic_partitions=None))
    assert response.error_code == ErrorCode.none
