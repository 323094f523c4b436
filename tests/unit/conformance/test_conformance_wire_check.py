"""The wire check of ``make conformance-franz ARGS=--wire-check``: the recording proxy encodes
every decoded request and response again and compares it with the bytes that crossed."""

import asyncio
import struct
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from tests import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))  # conformance/ is not installed

from conformance.franz import _parser, upstreams
from conformance.proxy import Exchange, RecordingProxy, roundtrip_table
from kemu.protocol import wire

pytestmark = pytest.mark.client

METADATA = 3


def metadata_answer(port: int) -> Any:
    module = wire.response_module(METADATA, 12)
    broker = wire.build(module.MetadataResponseBroker, node_id=1, host="127.0.0.1", port=port)
    return wire.build(wire.response_schema(METADATA, 12), brokers=(broker,), cluster_id="c")


def through_proxy(frames: list[bytes]) -> list[Exchange]:
    """Sends each request frame through a proxy to a broker that answers Metadata v12."""

    async def scenario() -> list[Exchange]:
        async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            for _ in frames:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                request = wire.decode_request(await reader.readexactly(size))
                answer = metadata_answer(upstream_port)
                correlation_id = request.header.correlation_id
                writer.write(wire.encode_response_frame(METADATA, 12, correlation_id, answer))
                await writer.drain()

        server = await asyncio.start_server(broker, "127.0.0.1", 0)
        upstream_port = server.sockets[0].getsockname()[1]
        proxy = RecordingProxy([("127.0.0.1", upstream_port)])
        await proxy.start()
        _, listen_port = proxy.listen[("127.0.0.1", upstream_port)]
        reader, writer = await asyncio.open_connection("127.0.0.1", listen_port)
        for frame in frames:
            writer.write(struct.pack(">i", len(frame)) + frame)
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            await reader.readexactly(size)
        writer.close()
        await proxy.stop()
        server.close()
        return proxy.exchanges

    return asyncio.run(scenario())


def metadata_request(correlation_id: int) -> bytes:
    body = wire.build(wire.request_schema(METADATA, 12), topics=None)
    return wire.encode_request_frame(body, correlation_id)[4:]


def test_canonical_frames_are_identical_both_ways_even_when_addresses_are_rewritten() -> None:
    [exchange] = through_proxy([metadata_request(1)])
    assert exchange.request_identical is True
    assert exchange.response_identical is True  # compared before the proxy rewrote the port
    table, clean = roundtrip_table([exchange])
    assert clean
    assert "| metadata | 1 | 0 | 0 | 1 | 0 | 0 |" in table.splitlines()


def test_bytes_after_the_body_are_a_difference() -> None:
    # Kafka's parser ignores them (and so does kemu: librdkafka sends some), but the frame is
    # not what kemu's codec would write.
    exchanges = through_proxy([metadata_request(1), metadata_request(2) + b"\x00\x00\x00"])
    assert [e.request_identical for e in exchanges] == [True, False]
    table, clean = roundtrip_table(exchanges)
    assert not clean
    assert "| **all** | **1** | **1** | **0** | **2** | **0** | **0** |" in table


def test_undecodable_sides_and_missing_answers_are_counted_apart() -> None:
    undecoded = Exchange("s", 1, 0, 99, 0, None, error="request: unknown")
    unanswered = Exchange("s", 1, 1, METADATA, 12, None, request_identical=True)
    unanswered.error = "no response (connection closed)"
    table, clean = roundtrip_table([undecoded, unanswered])
    assert not clean
    assert "| **all** | **1** | **0** | **1** | **0** | **0** | **0** |" in table


def test_the_tests_are_pointed_at_the_proxy() -> None:
    from conformance.franz import test_environment  # not at module level: pytest would collect it

    assert upstreams("127.0.0.1:9092,127.0.0.1:9093") == [("127.0.0.1", 9092), ("127.0.0.1", 9093)]
    kemu: Any = SimpleNamespace(bootstrap="127.0.0.1:9092", listeners={}, tls={})
    proxy: Any = SimpleNamespace(bootstrap="127.0.0.1:40000")
    env = test_environment(kemu, _parser().parse_args(["--wire-check"]), proxy)
    assert env["KGO_SEEDS"] == "127.0.0.1:40000"
