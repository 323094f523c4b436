"""conformance.diff's proxy and comparison (no Kafka here): address rewriting through a real
proxy in front of a fake broker, JSON conversion, normalisation, pairing and differences."""

from __future__ import annotations

import asyncio
import struct
import sys
import uuid
from typing import Any

import pytest

from tests import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))  # conformance/ is not installed

from conformance.compare import compare, differences, normalise, summarise_records, to_json
from conformance.proxy import Exchange, RecordingProxy, rewrite_addresses
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode

pytestmark = pytest.mark.client

METADATA = 3
TOPIC_ID = uuid.UUID(int=0xABCDEF)


def metadata_response(host: str, port: int, topic_id: uuid.UUID = TOPIC_ID) -> Any:
    module = wire.response_module(METADATA, 12)
    broker = wire.build(module.MetadataResponseBroker, node_id=1, host=host, port=port)
    partition = wire.build(module.MetadataResponsePartition, partition_index=0, leader_id=1)
    topic = wire.build(
        module.MetadataResponseTopic, name="t", topic_id=topic_id, partitions=(partition,)
    )
    return wire.build(
        wire.response_schema(METADATA, 12),
        brokers=(broker,),
        cluster_id="cluster-a",
        controller_id=1,
        topics=(topic,),
    )


def test_rewrite_replaces_known_broker_addresses_only() -> None:
    body = metadata_response("10.0.0.1", 9092)
    moved = rewrite_addresses(body, {("10.0.0.1", 9092): ("127.0.0.1", 40000)})
    assert (moved.brokers[0].host, int(moved.brokers[0].port)) == ("127.0.0.1", 40000)
    assert moved.topics == body.topics
    assert rewrite_addresses(body, {("10.0.0.9", 9092): ("127.0.0.1", 1)}) is body


def test_proxy_records_pairs_and_points_clients_at_itself() -> None:
    async def scenario() -> tuple[Any, list[Exchange], int]:
        async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            request = wire.decode_request(await reader.readexactly(size))
            body = metadata_response("127.0.0.1", upstream_port)
            writer.write(
                wire.encode_response_frame(METADATA, 12, request.header.correlation_id, body)
            )
            await writer.drain()

        server = await asyncio.start_server(broker, "127.0.0.1", 0)
        upstream_port = server.sockets[0].getsockname()[1]
        proxy = RecordingProxy([("127.0.0.1", upstream_port)])
        await proxy.start()
        proxy.scenario = "s"
        _, listen_port = proxy.listen[("127.0.0.1", upstream_port)]
        reader, writer = await asyncio.open_connection("127.0.0.1", listen_port)
        request = wire.build(wire.request_schema(METADATA, 12), topics=None)
        writer.write(wire.encode_request_frame(request, correlation_id=7))
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        _, answer = wire.decode_response(METADATA, 12, await reader.readexactly(size))
        writer.close()
        await proxy.stop()
        server.close()
        return answer, proxy.exchanges, listen_port

    answer, exchanges, listen_port = asyncio.run(scenario())
    assert int(answer.brokers[0].port) == listen_port  # the client keeps using the proxy
    [exchange] = exchanges
    assert (exchange.scenario, exchange.api_key, exchange.api_version) == ("s", METADATA, 12)
    assert exchange.error is None
    assert exchange.response.cluster_id == "cluster-a"  # recorded as the broker sent it


def batch(base_offset: int, producer_id: int, timestamp: int, count: int) -> bytes:
    header = struct.pack(
        ">qiibIhiqqqhii", base_offset, 49, 0, 2, 0xDEAD, 0, count - 1, timestamp, timestamp,
        producer_id, 0, 0, count,
    )  # fmt: skip
    return header  # a batch of 61 bytes: length 49 counts what follows the length field


def test_records_are_summarised_without_timestamps_crcs_or_producer_ids() -> None:
    one = summarise_records(batch(0, 1000, 111, 3))
    other = summarise_records(batch(0, 77, 222, 3))
    assert one == other
    assert one[0]["records"] == 3
    assert summarise_records(batch(5, 1, 1, 3))[0]["base_offset"] == 5


def test_normalise_hides_ids_times_and_order_but_not_errors() -> None:
    kafka = to_json(metadata_response("a", 1, uuid.UUID(int=1)))
    kemu = to_json(metadata_response("b", 2, uuid.UUID(int=2)))
    topics_kafka = {str(uuid.UUID(int=1)): "t"}
    topics_kemu = {str(uuid.UUID(int=2)): "t"}
    assert normalise(kafka, topics_kafka) == normalise(kemu, topics_kemu)
    assert normalise(kafka, topics_kafka)["topics"][0]["topic_id"] == "<id of t>"
    assert normalise({"items": [{"a": 2}, {"a": 1}]}, {}) == {"items": [{"a": 1}, {"a": 2}]}
    assert normalise({"throttle_time_ms": 5, "log_append_time_ms": -1}, {}) == {
        "throttle_time_ms": "<throttle>",
        "log_append_time_ms": -1,
    }
    assert normalise({"error_code": "none", "member_id": ""}, {}) == {
        "error_code": "none",
        "member_id": "",
    }


def test_differences_skip_messages_kafka_leaves_null() -> None:
    assert differences({"error_message": None}, {"error_message": "why"}) == []
    assert differences({"error_message": "a"}, {"error_message": "b"}) == [
        '.error_message: "a" vs "b"'
    ]
    assert differences({"x": [1, 2]}, {"x": [1]}) == [".x: 2 items vs 1"]


def exchange(sequence: int, request: Any, response: Any, scenario: str = "s") -> Exchange:
    return Exchange(scenario, 1, sequence, METADATA, 12, "c", request, response)


def test_compare_pairs_equal_requests_in_order_and_counts_the_rest() -> None:
    request = wire.build(wire.request_schema(METADATA, 12), topics=None)
    other = wire.build(
        wire.request_schema(METADATA, 12), topics=None, allow_auto_topic_creation=True
    )
    good = metadata_response("a", 1)
    module = wire.response_module(METADATA, 12)
    topic = wire.build(
        module.MetadataResponseTopic, name="t", error_code=ErrorCode.unknown_topic_or_partition
    )
    failing = wire.build(wire.response_schema(METADATA, 12), topics=(topic,))
    kafka = [exchange(0, request, good), exchange(1, request, good), exchange(2, other, good)]
    kemu = [exchange(0, request, metadata_response("b", 2)), exchange(1, request, failing)]
    result = compare(kafka, kemu)
    row = result.rows[METADATA]
    assert (row.compared, row.identical, row.differing) == (2, 1, 1)
    assert (row.unpaired_kafka, row.unpaired_kemu) == (1, 0)
    [diff] = result.diffs
    assert diff["occurrence"] == 1
    assert any("error_code" in path for path in diff["differences"])


def test_kafka_retries_and_known_differences_are_counted_apart() -> None:
    from conformance.compare import Known, is_timing, known_reason

    kafka = {"error_code": "coordinator_not_available", "node_id": -1}
    assert is_timing(kafka, {"error_code": "none", "node_id": 1})
    assert not is_timing({"error_code": "none"}, {"error_code": "coordinator_not_available"})
    rules = (Known("api_versions", r"^\.api_keys", "not served"),)
    assert known_reason("api_versions", [".api_keys: 77 items vs 68"], rules) == "not served"
    assert known_reason("api_versions", [".api_keys: 1 vs 2", ".other: 1 vs 2"], rules) is None
    assert known_reason("metadata", [".api_keys: 77 items vs 68"], rules) is None
    scoped = (Known("describe_configs", r"\.config_source", "why", request="min.insync"),)
    assert known_reason("describe_configs", [".x.config_source: 3 vs 5"], scoped, "min.insync")
    assert known_reason("describe_configs", [".x.config_source: 3 vs 5"], scoped, "other") is None


def test_a_known_difference_can_name_the_object_it_is_in() -> None:
    from conformance.compare import Known, holder, known_reason

    response = {"configs": [{"name": "a", "source": 3}, {"name": "b", "source": 3}]}
    assert holder(response, ".configs[1].source") == {"name": "b", "source": 3}
    rules = (Known("describe_configs", r"\.source$", "why", name="b"),)
    assert known_reason("describe_configs", [".configs[1].source: 3 vs 5"], rules, "", response)
    assert (
        known_reason("describe_configs", [".configs[0].source: 3 vs 5"], rules, "", response)
        is None
    )


def test_api_versions_compare_only_the_apis_both_offer() -> None:
    """The APIs only one broker offers on purpose (compare.py's KAFKA_ONLY_APIS, KEMU_ONLY_APIS)
    are left out of ApiVersions answers; the versions of every API both offer still count."""
    from conformance.compare import served_by_both

    def keys(*entries: tuple[int, int, int]) -> dict[str, Any]:
        return {
            "error_code": "none",
            "api_keys": [
                {"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in entries
            ],
        }

    kafka = keys((0, 0, 13), (18, 0, 5), (38, 1, 3), (93, 0, 0))
    kemu = keys((0, 0, 13), (18, 0, 5), (71, 0, 0), (72, 0, 0))
    assert differences(*served_by_both(18, kafka, kemu)) == []
    older = keys((0, 0, 13), (18, 0, 4), (71, 0, 0))
    assert differences(*served_by_both(18, kafka, older)) != []
    assert served_by_both(3, kafka, kemu) == (kafka, kemu)  # other APIs untouched
