"""The wire layer: framing, request headers, decode errors, response headers, ``build()``.

kafka-python's protocol package is generated from Kafka's JSON by a different implementation
than kio, so it serves here as an independent codec: requests it encodes must decode in kemu,
and responses kemu encodes must decode in it.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import uuid

import pytest
from kafka.protocol.consumer import FetchResponse, ListOffsetsResponse
from kafka.protocol.metadata import (
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import ProduceResponse

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.wire import MalformedFrame, UnsupportedRequest

METADATA = 3
API_VERSIONS = 18


def kafka_python_frame(
    message: object, version: int, correlation_id: int, client_id: str | None
) -> bytes:
    message.with_header(correlation_id=correlation_id, client_id=client_id)  # type: ignore[attr-defined]
    return bytes(message.encode(version=version, header=True, framed=True))  # type: ignore[attr-defined]


def metadata_request(topic: str = "t") -> MetadataRequest:
    return MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=True,
    )


def unframe(frame: bytes) -> bytes:
    (size,) = wire.SIZE.unpack_from(frame, 0)
    assert size == len(frame) - 4
    return frame[4:]


# --- framing and request headers -------------------------------------------------------------


def test_request_frame_is_prefixed_with_its_size() -> None:
    schema = wire.request_schema(METADATA, 12)
    body = wire.build(schema, topics=None)
    frame = wire.encode_request_frame(body, correlation_id=42, client_id="me")
    decoded = wire.decode_request(unframe(frame))
    assert decoded.header == wire.RequestHeader(METADATA, 12, 42, "me")
    assert decoded.schema is schema
    assert decoded.body == body


@pytest.mark.parametrize("version", range(0, 14))
def test_kemu_and_kafka_python_encode_metadata_requests_identically(version: int) -> None:
    theirs = kafka_python_frame(metadata_request(), version, 5, "c")
    decoded = wire.decode_request(unframe(theirs))
    assert [t.name for t in decoded.body.topics] == ["t"]
    assert wire.encode_request_frame(decoded.body, 5, "c") == theirs


@pytest.mark.parametrize(("version", "header_version"), [(4, 1), (8, 1), (9, 2), (13, 2)])
@pytest.mark.parametrize("client_id", ["a-client", "", None])
def test_request_header_v1_and_v2_with_any_client_id(
    version: int, header_version: int, client_id: str | None
) -> None:
    schema = wire.request_schema(METADATA, version)
    assert schema.__header_schema__.__module__.endswith(f"v{header_version}.header")
    frame = kafka_python_frame(metadata_request(), version, 77, client_id)
    decoded = wire.decode_request(unframe(frame))
    assert decoded.header == wire.RequestHeader(METADATA, version, 77, client_id)


def test_null_client_id_is_a_minus_one_length() -> None:
    # Header v2 keeps client_id as a classic (not compact) nullable string, then a tag buffer.
    body = wire.encode_body(
        wire.build(
            wire.request_schema(API_VERSIONS, 3),
            client_software_name="x",
            client_software_version="1",
        )
    )
    frame = struct.pack(">hhih", API_VERSIONS, 3, 9, -1) + b"\x00" + body
    decoded = wire.decode_request(frame)
    assert decoded.header.client_id is None
    assert decoded.body.client_software_name == "x"


def test_peek_header_reads_the_fixed_prefix() -> None:
    assert wire.peek_header(struct.pack(">hhi", 1, 12, -5)) == (1, 12, -5)


# --- decode errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("length", [0, 1, 7])
def test_shorter_than_a_header_is_malformed(length: int) -> None:
    with pytest.raises(MalformedFrame):
        wire.decode_request(b"\x00" * length)


@pytest.mark.parametrize(
    ("api_key", "api_version"),
    [
        (9999, 0),  # no such API
        (-1, 0),
        (4, 0),  # LeaderAndIsr: inter-broker, not in kio
        (0, 2),  # Produce v0-v2 were removed in Kafka 4
        (METADATA, 99),
        (API_VERSIONS, 6),  # Kafka 4.4 stops at v5
    ],
)
def test_unknown_key_or_version_is_unsupported(api_key: int, api_version: int) -> None:
    frame = struct.pack(">hhih", api_key, api_version, 1234, -1) + b"\x00" * 16
    with pytest.raises(UnsupportedRequest) as raised:
        wire.decode_request(frame)
    assert (raised.value.api_key, raised.value.api_version) == (api_key, api_version)
    assert raised.value.correlation_id == 1234


def test_truncated_body_is_malformed() -> None:
    frame = unframe(kafka_python_frame(metadata_request("a-long-topic-name"), 12, 1, "c"))
    for cut in (len(frame) - 1, len(frame) - 5, 12):
        with pytest.raises(MalformedFrame):
            wire.decode_request(frame[:cut])


def test_trailing_bytes_are_ignored_as_kafka_does() -> None:
    frame = unframe(kafka_python_frame(metadata_request(), 4, 1, "c"))
    assert [t.name for t in wire.decode_request(frame + b"\x00\x01").body.topics] == ["t"]


def test_librdkafka_all_topics_metadata_v13_decodes() -> None:
    # confluent-kafka 2.16.1's list_topics(): null topics, then three bytes Kafka never reads.
    frame = bytes.fromhex("0003000d00000003000772646b61666b610000000000000000")
    decoded = wire.decode_request(frame)
    assert decoded.header == wire.RequestHeader(METADATA, 13, 3, "rdkafka")
    assert decoded.body.topics is None
    assert decoded.body.allow_auto_topic_creation is False


def test_undecodable_header_is_malformed() -> None:
    # client_id length 30000 with 3 bytes behind it
    frame = struct.pack(">hhih", METADATA, 4, 1, 30000) + b"abc"
    with pytest.raises(MalformedFrame):
        wire.decode_request(frame)


def test_negative_non_null_string_length_is_malformed() -> None:
    # Metadata v4: topics array of one, topic name length -7
    frame = struct.pack(">hhih", METADATA, 4, 1, -1) + struct.pack(">ih", 1, -7) + b"\x01"
    with pytest.raises(MalformedFrame):
        wire.decode_request(frame)


def test_huge_array_count_is_malformed_not_a_memory_bomb() -> None:
    frame = struct.pack(">hhih", METADATA, 4, 1, -1) + struct.pack(">i", 2**31 - 1) + b"\x01"
    with pytest.raises(MalformedFrame):
        wire.decode_request(frame)


def test_invalid_utf8_is_malformed() -> None:
    frame = struct.pack(">hhih", METADATA, 4, 1, 2) + b"\xff\xfe" + struct.pack(">i", -1) + b"\x01"
    with pytest.raises(MalformedFrame):
        wire.decode_request(frame)


# --- response headers --------------------------------------------------------------------------


def test_non_flexible_response_has_header_v0() -> None:
    body = wire.build(wire.response_schema(METADATA, 8), brokers=(), topics=())
    frame = unframe(wire.encode_response_frame(METADATA, 8, 31, body))
    assert frame[:4] == struct.pack(">i", 31)
    assert frame[4:] == wire.encode_body(body)
    decoded = MetadataResponse.decode(frame, version=8, header=True)
    assert decoded.header.correlation_id == 31


def test_flexible_response_has_header_v1() -> None:
    body = wire.build(wire.response_schema(METADATA, 9), brokers=(), topics=())
    frame = unframe(wire.encode_response_frame(METADATA, 9, 32, body))
    assert frame[:5] == struct.pack(">iB", 32, 0)  # correlation id + empty tagged fields
    assert frame[5:] == wire.encode_body(body)
    assert MetadataResponse.decode(frame, version=9, header=True).header.correlation_id == 32


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_response_header_is_always_v0(version: int) -> None:
    cls = wire.response_schema(API_VERSIONS, version)
    assert cls.__header_schema__.__module__.endswith("v0.header")
    body = wire.build(cls, error_code=ErrorCode.none, api_keys=())
    frame = unframe(wire.encode_response_frame(API_VERSIONS, version, 33, body))
    assert frame[:4] == struct.pack(">i", 33)
    assert frame[4:] == wire.encode_body(body)
    decoded = ApiVersionsResponse.decode(frame, version=version, header=True)
    assert decoded.header.correlation_id == 33
    assert decoded.error_code == 0
    assert wire.decode_response(API_VERSIONS, version, frame) == (33, body)


def test_raw_response_frame_has_a_v0_header() -> None:
    frame = unframe(wire.encode_raw_response_frame(44, b"body"))
    assert frame == struct.pack(">i", 44) + b"body"


# --- build() across versions -------------------------------------------------------------------


def metadata_response(version: int) -> object:
    module = wire.response_module(METADATA, version)
    topic_id = uuid.UUID(int=0x1234)
    partition = wire.build(
        module.MetadataResponsePartition,
        error_code=ErrorCode.none,
        partition_index=2,
        leader_id=3,
        leader_epoch=9,
        replica_nodes=(3, 1),
        isr_nodes=(3,),
        offline_replicas=(),
    )
    topic = wire.build(
        module.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name="orders",
        topic_id=topic_id,
        partitions=(partition,),
    )
    broker = wire.build(
        module.MetadataResponseBroker, node_id=3, host="127.0.0.1", port=9094, rack=None
    )
    return wire.build(
        wire.response_schema(METADATA, version),
        brokers=(broker,),
        cluster_id="kemu-cluster",
        controller_id=1,
        topics=(topic,),
        throttle_time=datetime.timedelta(milliseconds=5),
    )


@pytest.mark.parametrize("version", [0, 13])
def test_build_refuses_a_field_no_version_has(version: int) -> None:
    """A misspelt field is an error, not a field silently missing from the answer."""
    module = wire.response_module(METADATA, version)
    with pytest.raises(wire.UnknownField, match="leader_epoc in any version"):
        wire.build(module.MetadataResponsePartition, partition_index=2, leader_epoc=9)


def test_build_still_drops_a_field_only_other_versions_have() -> None:
    module = wire.response_module(METADATA, 0)
    partition = wire.build(module.MetadataResponsePartition, partition_index=2, leader_epoch=9)
    assert partition.partition_index == 2 and not hasattr(partition, "leader_epoch")


def test_a_dropped_field_is_found_without_importing_every_version() -> None:
    """The first Fetch answer with a topic (its name is a field of v4-v12 only) used to import
    every Fetch version's modules to check the name: 0.2 s that the first fetch waited. The
    oldest version names it, so that version's modules are enough; a field of middle versions
    only looks further, a misspelling everywhere (a fresh interpreter: other tests import
    versions)."""
    import subprocess
    import sys

    probe = (
        "import sys, kemu.protocol.wire as w\n"
        "loaded = lambda: {m for m in sys.modules if m.startswith('kio.schema.fetch.v')}\n"
        "module = w.response_module(1, 16)\n"
        "before = loaded()\n"
        "w.build(module.FetchableTopicResponse, topic='t', topic_id=None, partitions=())\n"
        "assert {m.rsplit('.', 1)[0] for m in loaded() - before} <= {'kio.schema.fetch.v4', "
        "'kio.schema.fetch'}, loaded() - before\n"
        "metadata = w.response_module(3, 13)\n"
        "w.build(metadata.MetadataResponse, cluster_authorized_operations=1)\n"  # v8-v10 only
        "try:\n"
        "    w.build(module.FetchableTopicResponse, topik='t')\n"
        "except w.UnknownField:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('a misspelt field was dropped')\n"
        "assert 'kio.schema.fetch.v10.response' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)


@pytest.mark.parametrize("version", range(0, 14))
def test_build_serves_every_metadata_version_from_one_description(version: int) -> None:
    body = metadata_response(version)
    frame = unframe(wire.encode_response_frame(METADATA, version, 1, body))
    theirs = MetadataResponse.decode(frame, version=version, header=True)
    assert [(b.node_id, b.host, b.port) for b in theirs.brokers] == [(3, "127.0.0.1", 9094)]
    (topic,) = theirs.topics
    assert topic.name == "orders"
    (partition,) = topic.partitions
    assert (partition.partition_index, partition.leader_id) == (2, 3)
    assert list(partition.replica_nodes) == [3, 1]
    if version >= 2:
        assert theirs.cluster_id == "kemu-cluster"
    if version >= 1:
        assert theirs.controller_id == 1
    if version >= 3:
        assert theirs.throttle_time_ms == 5
    if version >= 7:
        assert partition.leader_epoch == 9
    if version >= 10:
        assert topic.topic_id == uuid.UUID(int=0x1234)


def test_build_fills_what_the_caller_left_out() -> None:
    module = wire.response_module(METADATA, 12)
    partition = wire.build(module.MetadataResponsePartition, partition_index=0, leader_id=1)
    assert partition.error_code is ErrorCode.none
    assert partition.leader_epoch == -1  # the schema's own default wins over a neutral 0
    assert partition.replica_nodes == ()
    topic = wire.build(module.MetadataResponseTopic)
    assert topic.name is None  # nullable at v12
    assert topic.topic_id is None or topic.topic_id == uuid.UUID(int=0)
    assert topic.partitions == ()
    response = wire.build(wire.response_schema(METADATA, 12))
    assert response.throttle_time == datetime.timedelta(0)
    assert response.controller_id == -1
    wire.encode_body(response)  # whatever build() fills in must encode


@pytest.mark.parametrize("version", [3, 7, 9, 13])
def test_build_nested_defaults_encode_for_produce(version: int) -> None:
    module = wire.response_module(0, version)
    partition = wire.build(module.PartitionProduceResponse, index=1, base_offset=10)
    topic = wire.build(module.TopicProduceResponse, name="t", partition_responses=(partition,))
    body = wire.build(wire.response_schema(0, version), responses=(topic,))
    frame = unframe(wire.encode_response_frame(0, version, 2, body))
    theirs = ProduceResponse.decode(frame, version=version, header=True)
    (their_partition,) = theirs.responses[0].partition_responses
    assert their_partition.index == 1
    assert their_partition.base_offset == 10
    assert their_partition.error_code == 0
    if version >= 2:
        assert their_partition.log_append_time_ms == -1
    if version >= 5:
        assert their_partition.log_start_offset == -1


def test_neutral_values_by_kafka_type() -> None:
    fields = {f.name: f for f in dataclasses.fields(wire.response_schema(1, 16))}
    assert wire.neutral_value(fields["error_code"]) is ErrorCode.none
    assert wire.neutral_value(fields["responses"]) == ()
    assert wire.neutral_value(fields["session_id"]) == 0


# --- error_response ----------------------------------------------------------------------------


def decoded(api_key: int, version: int) -> wire.DecodedRequest:
    schema = wire.request_schema(api_key, version)
    return wire.DecodedRequest(
        wire.RequestHeader(api_key, version, 3, "c"), wire.build(schema), schema
    )


_INDEPENDENT = {
    0: ProduceResponse,
    1: FetchResponse,
    2: ListOffsetsResponse,
    3: MetadataResponse,
    18: ApiVersionsResponse,
}


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (key, version)
        for key in _INDEPENDENT
        for version in range(wire.known_versions(key)[0], wire.known_versions(key)[1] + 1)  # type: ignore[index]
    ],
)
def test_error_response_encodes_for_every_version(api_key: int, version: int) -> None:
    request = decoded(api_key, version)
    body = wire.error_response(request, ErrorCode.unknown_server_error, "boom")
    names = {f.name for f in dataclasses.fields(body)}
    if "error_code" in names:
        assert body.error_code is ErrorCode.unknown_server_error
    if "error_message" in names:
        assert body.error_message == "boom"
    frame = unframe(wire.encode_response_frame(api_key, version, 3, body))
    assert wire.decode_response(api_key, version, frame) == (3, body)
    if api_key == API_VERSIONS and version > 0:
        return  # kafka-python reads any ApiVersions error body as v0 (Java tries both)
    theirs = _INDEPENDENT[api_key].decode(frame, version=version, header=True)
    assert theirs.header.correlation_id == 3
    if "error_code" in names:
        assert theirs.error_code == ErrorCode.unknown_server_error.value


def test_error_response_of_a_request_without_top_level_error_is_empty() -> None:
    body = wire.error_response(decoded(METADATA, 4), ErrorCode.unknown_server_error)
    assert body.topics == ()
    assert body.brokers == ()


def test_api_names() -> None:
    assert wire.api_name(0) == "produce"
    assert wire.api_name(API_VERSIONS) == "api_versions"
    assert wire.api_name(9999) == "unknown_9999"
    assert wire.known_versions(9999) is None
    assert wire.known_versions(API_VERSIONS) == (0, 5)  # v5: kemu.protocol.kafka44


@pytest.mark.process  # a fresh interpreter: nothing loaded yet
def test_kemu_schemas_load_on_first_lookup_and_are_the_ones_declared() -> None:
    import importlib
    import subprocess
    import sys

    packages = set(wire.KEMU_SCHEMA_PACKAGES.values())
    assert packages == {
        "kemu.protocol.kafka44",
        "kemu.protocol.kip1289.schemas",
        "kemu.protocol.streams_v1",
    }
    for package in packages:
        schemas = importlib.import_module(package).SCHEMAS
        declared = {key for key, name in wire.KEMU_SCHEMA_PACKAGES.items() if name == package}
        assert set(schemas) == declared, package
        for key in declared:
            assert wire.request_schema(*key) is schemas[key][0]
            assert wire.response_schema(*key) is schemas[key][1]
    assert wire.known_versions(88) == (0, 1) and wire.known_versions(89) == (0, 1)
    assert wire.known_versions(95) == (0, 0) and wire.known_versions(96) == (0, 0)
    # a fresh interpreter importing the wire imports none of them (start-up time)
    probe = (
        "import sys, kemu.protocol.wire as w\n"
        f"packages = {sorted(packages)!r}\n"
        "assert not [p for p in packages if p in sys.modules], sys.modules.keys()\n"
        "w.request_schema(88, 1); assert 'kemu.protocol.streams_v1' in sys.modules\n"
        "w.response_schema(18, 5); assert 'kemu.protocol.kafka44' in sys.modules\n"
        "w.request_schema(95, 0); assert 'kemu.protocol.kip1289.schemas' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)
