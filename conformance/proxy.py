"""A recording Kafka proxy on kemu.protocol: one listening port per broker port behind it.

Every request is forwarded unchanged; every response is decoded (``kemu.protocol.wire``) and
recorded with its request as an :class:`Exchange`. Responses that name brokers (Metadata,
FindCoordinator, DescribeCluster, and the NodeEndpoints of Produce, Fetch, ShareFetch and
ShareAcknowledge — any struct with ``host`` and ``port`` fields) are rewritten so that a
broker's address becomes the proxy port standing for it, and clients keep talking through the
proxy. A response with no broker address is passed on byte for byte. Each request and response
is also encoded again from what was decoded and compared with the bytes received
(:func:`roundtrip_table`): a frame with bytes left over or a field read differently from how it
is written shows up there.

The proxy runs on its own event loop in a daemon thread (:class:`ProxyThread`), so synchronous
clients (confluent-kafka, a JVM in a subprocess) can be driven from the main thread while it
records. ``scenario`` names what the driver is doing; each exchange is tagged with the scenario
current when its request arrived.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any

from kemu.protocol import wire

HOST = "127.0.0.1"
SIZE = struct.Struct(">i")


@dataclass
class Exchange:
    """One request and its response as the proxy saw them (bodies are kio messages)."""

    scenario: str
    connection: int
    sequence: int  # order of the request's arrival among the run's arrivals and answers
    api_key: int
    api_version: int
    client_id: str | None
    request: Any = None
    response: Any = None
    error: str | None = None  # why a side could not be decoded, or that no answer came
    # Whether each side, decoded, encodes back to the bytes that crossed the wire (None: not
    # decoded, or no answer yet); the wire check of ``make conformance-franz ARGS=--wire-check``.
    request_identical: bool | None = None
    response_identical: bool | None = None
    # Order of the response's arrival, on the same count as ``sequence`` (None: no answer yet),
    # so that a test can tell what a broker answered before another request reached it.
    answered: int | None = None


def rewrite_addresses(body: Any, addresses: dict[tuple[str, int], tuple[str, int]]) -> Any:
    """``body`` with every (host, port) found in ``addresses`` replaced; the same object when
    nothing was replaced (so the caller can forward the original bytes)."""
    if isinstance(body, tuple):
        items = tuple(rewrite_addresses(item, addresses) for item in body)
        return body if all(a is b for a, b in zip(items, body, strict=True)) else items
    if not dataclasses.is_dataclass(body) or isinstance(body, type):
        return body
    changes: dict[str, Any] = {}
    names = {field.name for field in dataclasses.fields(body)}
    if {"host", "port"} <= names:
        port = body.port  # type: ignore[attr-defined]
        target = addresses.get((body.host, int(port)))  # type: ignore[attr-defined]
        if target is not None and target != (body.host, int(port)):  # type: ignore[attr-defined]
            changes["host"] = target[0]
            changes["port"] = type(port)(target[1])
    for name in names - {"host", "port"}:
        value = getattr(body, name)
        if isinstance(value, tuple) or dataclasses.is_dataclass(value):
            new = rewrite_addresses(value, addresses)
            if new is not value:
                changes[name] = new
    return dataclasses.replace(body, **changes) if changes else body


def response_header_length(api_key: int, api_version: int, payload: bytes) -> int | None:
    """Bytes of the response header, or None when it carries tagged fields (not rewritten)."""
    flexible = wire.response_schema(api_key, api_version).__flexible__
    if not flexible or api_key == wire.API_VERSIONS_KEY:
        return 4
    return 5 if len(payload) > 4 and payload[4] == 0 else None


class RecordingProxy:
    """Listens on one port per upstream broker and records what passes through."""

    def __init__(self, upstreams: list[tuple[str, int]]) -> None:
        self.upstreams = upstreams
        self.listen: dict[tuple[str, int], tuple[str, int]] = {}  # upstream -> proxy address
        self.exchanges: list[Exchange] = []
        self.scenario = ""
        self._servers: list[asyncio.Server] = []
        self._connections = itertools.count(1)
        self._sequence = itertools.count()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in self.listen.values())

    async def start(self) -> None:
        for upstream in self.upstreams:
            server = await asyncio.start_server(
                functools.partial(self._serve, upstream=upstream), HOST, 0
            )
            port = server.sockets[0].getsockname()[1]
            self.listen[upstream] = (HOST, port)
            self._servers.append(server)

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for writer in list(self._writers):
            writer.close()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: tuple[str, int]
    ) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*upstream)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        connection = next(self._connections)
        inflight: dict[int, Exchange] = {}
        await asyncio.gather(
            self._requests(reader, up_writer, inflight, connection),
            self._responses(up_reader, writer, inflight),
            return_exceptions=True,
        )
        for exchange in inflight.values():
            exchange.error = exchange.error or "no response (connection closed)"
        for w in (writer, up_writer):
            self._writers.discard(w)
            w.close()

    async def _requests(
        self,
        reader: asyncio.StreamReader,
        out: asyncio.StreamWriter,
        inflight: dict[int, Exchange],
        connection: int,
    ) -> None:
        try:
            while True:
                frame = await _read_frame(reader)
                if frame is None:
                    break
                key, version, correlation_id = wire.peek_header(frame)
                exchange = Exchange(
                    self.scenario, connection, next(self._sequence), key, version, None
                )
                try:
                    decoded = wire.decode_request(frame)
                    exchange.request = decoded.body
                    exchange.client_id = decoded.header.client_id
                    exchange.request_identical = wire.reencodes_identically(frame, decoded.schema)
                except Exception as exc:  # an unknown key or version: recorded, forwarded
                    exchange.error = f"request: {exc}"
                self.exchanges.append(exchange)
                inflight[correlation_id] = exchange
                out.write(SIZE.pack(len(frame)) + frame)
                await out.drain()
        finally:
            out.close()

    async def _responses(
        self, reader: asyncio.StreamReader, out: asyncio.StreamWriter, inflight: dict[int, Exchange]
    ) -> None:
        try:
            while True:
                frame = await _read_frame(reader)
                if frame is None:
                    break
                (correlation_id,) = SIZE.unpack_from(frame, 0)
                exchange = inflight.pop(correlation_id, None)
                if exchange is not None:
                    frame = self._record_response(exchange, frame)
                    exchange.answered = next(self._sequence)
                out.write(SIZE.pack(len(frame)) + frame)
                await out.drain()
        finally:
            out.close()

    def _record_response(self, exchange: Exchange, frame: bytes) -> bytes:
        version = exchange.api_version
        try:
            _, body = wire.decode_response(exchange.api_key, version, frame)
        except Exception as exc:
            if exchange.api_key != wire.API_VERSIONS_KEY:
                exchange.error = f"response: {exc}"
                return frame
            try:  # a version the broker does not serve is answered in v0 (KIP-511)
                version = 0
                _, body = wire.decode_response(exchange.api_key, version, frame)
            except Exception:
                exchange.error = f"response: {exc}"
                return frame
        exchange.response = body
        exchange.response_identical = wire.reencodes_identically(
            frame, wire.response_schema(exchange.api_key, version)
        )
        rewritten = rewrite_addresses(body, self.listen)
        if rewritten is body:
            return frame
        header = response_header_length(exchange.api_key, exchange.api_version, frame)
        if header is None:
            return frame
        return frame[:header] + wire.encode_body(rewritten)


def roundtrip_table(exchanges: list[Exchange]) -> tuple[str, bool]:
    """A Markdown table per API of how many requests and responses were seen, re-encoded
    byte-identical, differed or did not decode; and whether every one seen was identical."""
    rows: dict[str, list[int]] = {}
    for exchange in exchanges:
        row = rows.setdefault(wire.api_name(exchange.api_key), [0] * 6)
        request_ok = exchange.request_identical
        row[0 if request_ok else 1 if request_ok is False else 2] += 1
        response_ok = exchange.response_identical
        if exchange.response is not None or (exchange.error or "").startswith("response"):
            row[3 if response_ok else 4 if response_ok is False else 5] += 1
    lines = [
        "| API | requests identical | differ | undecoded | responses identical | differ "
        "| undecoded |",
        "|---|---|---|---|---|---|---|",
    ]
    totals = [0] * 6
    for name, row in sorted(rows.items()):
        lines.append(f"| {name} | " + " | ".join(map(str, row)) + " |")
        totals = [a + b for a, b in zip(totals, row, strict=True)]
    lines.append("| **all** | " + " | ".join(f"**{n:,}**" for n in totals) + " |")
    clean = totals[1] == totals[2] == totals[4] == totals[5] == 0
    return "\n".join(lines), clean


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        (size,) = SIZE.unpack(await reader.readexactly(4))
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


class ProxyThread:
    """A :class:`RecordingProxy` on an event loop of its own, in a daemon thread."""

    def __init__(self, upstreams: list[tuple[str, int]]) -> None:
        self.proxy = RecordingProxy(upstreams)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self.loop).result(10)
        return self.proxy

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.stop(), self.loop).result(10)
        time.sleep(0.2)  # let the closed connections' tasks end
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
