"""A handler whose answer cannot be encoded still gets an answer, and the connection goes on.

Driven through ``Connection``'s protocol callbacks with a recording transport, so the failure
can be planted exactly (no real handler should ever produce such an answer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from kemu.broker.connection import Connection
from kemu.broker.handlers import REGISTRY, HandlerSpec, load_handlers
from kemu.cluster.context import RequestContext, Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.storage.log import MemoryLog
from kemu.testing.transport import RecordingTransport

NODE = BrokerNode(1, "127.0.0.1", 19092)
DESCRIBE_CLUSTER = 60  # any API whose answer has a top-level error code


def unencodable(ctx: RequestContext, request: Any) -> Any:
    # A number field holding a string: no encoder can write it.
    return ctx.respond(error_code=ErrorCode.none, cluster_id="c", controller_id="one")


async def unencodable_later(ctx: RequestContext, request: Any) -> Any:
    await asyncio.sleep(0)
    return unencodable(ctx, request)


@pytest.fixture
def connection() -> Iterator[tuple[Connection, RecordingTransport]]:
    load_handlers()
    cluster = Cluster(
        cluster_id="unit",
        nodes={1: NODE},
        config=BrokerConfig(),
        log_factory=lambda topic, index: MemoryLog(),
    )
    conn = Connection(NODE, Runtime(cluster=cluster))
    transport = RecordingTransport(peer=("127.0.0.1", 40000))
    conn.connection_made(transport)
    yield conn, transport


def request_frame(api_key: int, version: int, correlation_id: int) -> bytes:
    body = wire.build(wire.request_schema(api_key, version))
    return wire.encode_request_frame(body, correlation_id, "unit")


def api_versions_frame(correlation_id: int) -> bytes:
    body = wire.build(
        wire.request_schema(18, 3), client_software_name="unit", client_software_version="1"
    )
    return wire.encode_request_frame(body, correlation_id, "unit")


@pytest.mark.parametrize("function", [unencodable, unencodable_later])
async def test_unencodable_answer_becomes_an_error_and_later_requests_are_answered(
    connection: tuple[Connection, RecordingTransport],
    monkeypatch: pytest.MonkeyPatch,
    function: Any,
) -> None:
    conn, transport = connection
    monkeypatch.setitem(
        REGISTRY, DESCRIBE_CLUSTER, HandlerSpec(DESCRIBE_CLUSTER, 0, 1, function, "test")
    )
    conn.data_received(request_frame(DESCRIBE_CLUSTER, 1, 1) + api_versions_frame(2))
    for _ in range(10):
        await asyncio.sleep(0)
    frames = transport.frames()
    assert len(frames) == 2
    correlation_id, failed = wire.decode_response(DESCRIBE_CLUSTER, 1, frames[0])
    assert correlation_id == 1
    assert failed.error_code is ErrorCode.unknown_server_error
    correlation_id, answered = wire.decode_response(18, 3, frames[1])
    assert correlation_id == 2
    assert answered.error_code is ErrorCode.none
    assert not transport.closed
