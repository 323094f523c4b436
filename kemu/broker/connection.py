"""One client connection: read frames, dispatch them concurrently, answer in request order.

Requests are pipelined: each one is dispatched as soon as it is read, and a writer loop sends
the responses strictly in the order the requests arrived, as Kafka guarantees. A frame that
cannot be a Kafka request closes this connection only, with one structured log line.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from kemu.broker.cluster import BrokerNode
from kemu.broker.context import RequestContext, Runtime
from kemu.broker.handlers import REGISTRY, HandlerSpec
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.wire import DecodedRequest, MalformedFrame, UnsupportedRequest

log = structlog.get_logger("kemu.connection")

_CLOSE = object()
WRITE_BUFFER_HIGH_WATER = 1 << 20


class Connection:
    def __init__(
        self,
        node: BrokerNode,
        runtime: Runtime,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.node = node
        self.runtime = runtime
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.client_host = peer[0] if isinstance(peer, tuple) else "127.0.0.1"
        self.max_request_bytes = runtime.cluster.config.get_int("socket.request.max.bytes")
        self.responses: asyncio.Queue[Any] = asyncio.Queue()
        self.in_flight: set[asyncio.Task[bytes | None]] = set()

    async def serve(self) -> None:
        writer_task = asyncio.get_running_loop().create_task(self._write_loop())
        try:
            await self._read_loop()
        finally:
            # The peer is gone or misbehaved: nobody will read pending answers (long polls).
            for task in self.in_flight:
                task.cancel()
            self.responses.put_nowait(_CLOSE)
            try:
                await writer_task
            finally:
                self.writer.close()

    async def _read_loop(self) -> None:
        reader = self.reader
        while True:
            try:
                size_bytes = await reader.readexactly(4)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            size = wire.SIZE.unpack(size_bytes)[0]
            if size < wire.HEADER_PREFIX.size or size > self.max_request_bytes:
                log.warning(
                    "malformed_frame",
                    peer=self.peer,
                    reason=f"frame size {size}",
                    limit=self.max_request_bytes,
                )
                return
            try:
                frame = await reader.readexactly(size)
            except (asyncio.IncompleteReadError, ConnectionError):
                log.warning("malformed_frame", peer=self.peer, reason="truncated frame")
                return
            if not self._accept(frame):
                return

    def _accept(self, frame: bytes) -> bool:
        """Dispatch one frame; False means the connection must close."""
        try:
            # What is not served is refused before its body is decoded, as Kafka does.
            api_key, api_version, correlation_id = wire.peek_header(frame)
            spec = REGISTRY.get(api_key)
            if spec is None or not spec.min_version <= api_version <= self._max(spec):
                return self._unsupported(api_key, api_version, correlation_id)
            request = wire.decode_request(frame)
        except UnsupportedRequest as unsupported:
            return self._unsupported(
                unsupported.api_key, unsupported.api_version, unsupported.correlation_id
            )
        except MalformedFrame as malformed:
            log.warning("malformed_frame", peer=self.peer, reason=str(malformed))
            return False
        header = request.header
        context = RequestContext(self.node, self.runtime, header, self.client_host)
        task = asyncio.get_running_loop().create_task(self._dispatch(spec, context, request))
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)
        self.responses.put_nowait(task)
        return True

    def _max(self, spec: HandlerSpec) -> int:
        caps = self.runtime.max_versions
        if caps is None:
            return spec.max_version
        return min(spec.max_version, caps.get(spec.api_key, -1))

    def _unsupported(self, api_key: int, api_version: int, correlation_id: int) -> bool:
        if api_key == wire.API_VERSIONS_KEY:
            from kemu.broker.handlers.api_versions import unsupported_version_frame

            self.responses.put_nowait(unsupported_version_frame(self.runtime, correlation_id))
            return True
        # Kafka cannot parse such a request either and closes the connection.
        log.warning(
            "unsupported_request",
            peer=self.peer,
            api_key=api_key,
            api=wire.api_name(api_key),
            api_version=api_version,
        )
        return False

    async def _dispatch(
        self, spec: HandlerSpec, context: RequestContext, request: DecodedRequest
    ) -> bytes | None:
        header = request.header
        try:
            body = await spec.function(context, request.body)
        except Exception:
            log.exception(
                "handler_failed",
                api=wire.api_name(header.api_key),
                api_version=header.api_version,
                peer=self.peer,
            )
            body = wire.error_response(request, ErrorCode.unknown_server_error)
        if body is None:
            return None  # e.g. Produce with acks=0 gets no response
        if isinstance(body, bytes):
            return body  # a handler that encoded its own frame
        return wire.encode_response_frame(
            header.api_key, header.api_version, header.correlation_id, body
        )

    async def _write_loop(self) -> None:
        writer = self.writer
        while True:
            item = await self.responses.get()
            if item is _CLOSE:
                return
            if isinstance(item, bytes):
                frame: bytes | None = item
            else:
                try:
                    frame = await item
                except asyncio.CancelledError:
                    continue
            if frame is None:
                continue
            if writer.is_closing():
                continue
            writer.write(frame)
            if self.responses.empty() or writer.transport.get_write_buffer_size() > (
                WRITE_BUFFER_HIGH_WATER
            ):
                try:
                    await writer.drain()
                except ConnectionError:
                    return
