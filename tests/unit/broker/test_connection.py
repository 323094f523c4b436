"""The connection protocol: framing across chunks, answers in request order, one write per batch
of ready answers, handler failures, oversize frames and a peer that goes away.

Driven through ``asyncio.Protocol`` calls with a recording transport; what real clients see is
covered by the integration tests.
"""

from __future__ import annotations

import asyncio
import gc
import struct
import warnings
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

API_VERSIONS = 18
VERSION = 3
NODE = BrokerNode(1, "127.0.0.1", 19092)


def make_connection() -> tuple[Connection, RecordingTransport]:
    load_handlers()
    cluster = Cluster(
        cluster_id="unit",
        nodes={1: NODE},
        config=BrokerConfig(),
        log_factory=lambda topic, index: MemoryLog(),
    )
    connection = Connection(NODE, Runtime(cluster=cluster))
    transport = RecordingTransport()
    connection.connection_made(transport)
    return connection, transport


def api_versions_frame(correlation_id: int) -> bytes:
    body = wire.build(
        wire.request_schema(API_VERSIONS, VERSION),
        client_software_name="unit",
        client_software_version="1",
    )
    return wire.encode_request_frame(body, correlation_id)


def correlation_ids(written: bytes) -> list[int]:
    """Correlation ids of the size-prefixed response frames in ``written``, in order."""
    ids = []
    position = 0
    while position < len(written):
        size, correlation_id = struct.unpack_from(">ii", written, position)
        ids.append(correlation_id)
        position += 4 + size
    assert position == len(written)
    return ids


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_frames_split_across_chunks_are_reassembled() -> None:
    connection, transport = make_connection()
    stream = api_versions_frame(1) + api_versions_frame(2)
    for index in range(len(stream)):
        connection.data_received(stream[index : index + 1])
    await settle()
    assert correlation_ids(b"".join(transport.writes)) == [1, 2]


async def test_answers_ready_together_leave_in_one_write() -> None:
    connection, transport = make_connection()
    connection.data_received(b"".join(api_versions_frame(n) for n in range(1, 6)))
    await settle()
    assert len(transport.writes) == 1
    assert correlation_ids(transport.writes[0]) == [1, 2, 3, 4, 5]


async def test_a_slow_handler_holds_back_the_answers_behind_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = asyncio.Event()
    original = REGISTRY[API_VERSIONS]

    async def slow_first(ctx: RequestContext, request: Any) -> Any:
        if ctx.header.correlation_id == 1:
            await release.wait()
        return await original.function(ctx, request)

    monkeypatch.setitem(
        REGISTRY,
        API_VERSIONS,
        HandlerSpec(API_VERSIONS, original.min_version, original.max_version, slow_first, "t"),
    )
    connection, transport = make_connection()
    connection.data_received(api_versions_frame(1) + api_versions_frame(2))
    await settle()
    assert transport.writes == []
    release.set()
    await settle()
    assert correlation_ids(b"".join(transport.writes)) == [1, 2]


async def test_a_plain_function_handler_answers_without_a_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = REGISTRY[API_VERSIONS]

    def answer_now(ctx: RequestContext, request: Any) -> Any:
        return ctx.respond(error_code=ErrorCode.none, api_keys=())

    monkeypatch.setitem(
        REGISTRY,
        API_VERSIONS,
        HandlerSpec(API_VERSIONS, original.min_version, original.max_version, answer_now, "t"),
    )
    connection, transport = make_connection()
    connection.data_received(api_versions_frame(7))
    # No loop turn needed: the answer was written inside data_received.
    assert correlation_ids(b"".join(transport.writes)) == [7]


async def test_a_failing_handler_answers_unknown_server_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = REGISTRY[API_VERSIONS]

    async def broken(ctx: RequestContext, request: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setitem(
        REGISTRY,
        API_VERSIONS,
        HandlerSpec(API_VERSIONS, original.min_version, original.max_version, broken, "t"),
    )
    connection, transport = make_connection()
    connection.data_received(api_versions_frame(3))
    await settle()
    written = b"".join(transport.writes)
    assert correlation_ids(written) == [3]
    _, body = wire.decode_response(API_VERSIONS, VERSION, written[4:])
    assert body.error_code == ErrorCode.unknown_server_error
    assert not transport.closed


async def test_an_oversize_frame_closes_after_the_ready_answers() -> None:
    connection, transport = make_connection()
    oversize = struct.pack(">i", connection.max_request_bytes + 1)
    connection.data_received(api_versions_frame(1))
    await settle()
    connection.data_received(oversize + b"\x00" * 16)
    assert transport.closed
    assert correlation_ids(b"".join(transport.writes)) == [1]


async def test_a_peer_that_leaves_cancels_pending_handlers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()
    original = REGISTRY[API_VERSIONS]

    async def never(ctx: RequestContext, request: Any) -> Any:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    monkeypatch.setitem(
        REGISTRY,
        API_VERSIONS,
        HandlerSpec(API_VERSIONS, original.min_version, original.max_version, never, "t"),
    )
    connection, transport = make_connection()
    connection.data_received(api_versions_frame(1))
    await started.wait()
    connection.connection_lost(None)
    await settle()
    assert cancelled.is_set()
    assert transport.writes == []


async def test_a_peer_that_leaves_before_a_handler_starts_leaves_no_unawaited_coroutine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = REGISTRY[API_VERSIONS]

    async def never_started(ctx: RequestContext, request: Any) -> Any:
        raise AssertionError("cancelled before its first step")

    monkeypatch.setitem(
        REGISTRY,
        API_VERSIONS,
        HandlerSpec(API_VERSIONS, original.min_version, original.max_version, never_started, "t"),
    )
    gc.collect()  # what earlier tests in this worker left behind warns now, not below
    connection, transport = make_connection()
    connection.data_received(api_versions_frame(1))
    connection.connection_lost(None)  # in the same loop iteration: the task never ran
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await settle()
        gc.collect()
    # only this handler's coroutine counts: another test's leftovers may be collected here too
    unawaited = [str(w.message) for w in caught if "never awaited" in str(w.message)]
    assert not [message for message in unawaited if "never_started" in message]
    assert transport.writes == []


async def test_writing_backpressure_pauses_reading() -> None:
    connection, transport = make_connection()
    connection.pause_writing()
    assert not transport.reading
    connection.resume_writing()
    assert transport.reading
