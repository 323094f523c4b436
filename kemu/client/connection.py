"""One TCP connection to one broker: framing, correlation ids and ApiVersions.

Requests are pipelined: each gets a correlation id and a future, and one reader task hands every
response frame to the future waiting for its id. Bodies are encoded and decoded with kemu's own
protocol layer (``kemu.protocol.wire``); a message's schema is looked up by its *logical* api key
while the header carries the *wire* key, so a KIP-1289 message moved to another key by the broker
(``kemu.kip1289.txn.share.ack.api.key``) is still encoded with its own schema.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from dataclasses import dataclass, field
from typing import Any

from kemu.client.errors import KafkaError
from kemu.protocol import fastwrite, wire
from kemu.protocol.errors import ErrorCode

API_VERSIONS = 18
API_VERSIONS_VERSION = 3
SIZE = struct.Struct(">i")
CORRELATION = struct.Struct(">i")
HEADER_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id


class ConnectionClosed(ConnectionError):
    """The broker closed the connection (or it could not be opened); retriable elsewhere."""


@dataclass
class BrokerFeatures:
    """What a broker answered to ApiVersions: version range per api key, finalized features."""

    versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    finalized: dict[str, int] = field(default_factory=dict)

    def highest(self, api_key: int, wanted: int) -> int | None:
        """The highest version both sides speak, at most ``wanted``; None when there is none."""
        theirs = self.versions.get(api_key)
        ours = wire.known_versions(api_key)
        if theirs is None or ours is None:
            return None
        top = min(theirs[1], ours[1], wanted)
        bottom = max(theirs[0], ours[0])
        return top if top >= bottom else None


class BrokerConnection:
    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self.features = BrokerFeatures()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._next_correlation = 1
        self._read_task: asyncio.Task[None] | None = None
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop of its streams
        # per (api key, version, wire key): the request header's bytes before and after its
        # correlation id (see _header)
        self._headers: dict[tuple[int, int, int], tuple[bytes, bytes]] = {}

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._closed

    async def connect(self, timeout: float = 10.0) -> None:
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), timeout
            )
        except (OSError, TimeoutError) as exc:
            self._closed = True
            raise ConnectionClosed(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        self._loop = asyncio.get_running_loop()
        self._read_task = self._loop.create_task(self._read_responses())
        response = await self.call(
            API_VERSIONS,
            API_VERSIONS_VERSION,
            client_software_name="kemu-client",
            client_software_version="0.1.0",
        )
        if response.error_code != ErrorCode.none:
            raise KafkaError(response.error_code, "ApiVersions")
        self.features.versions = {
            int(entry.api_key): (int(entry.min_version), int(entry.max_version))
            for entry in response.api_keys
        }
        self.features.finalized = {
            str(entry.name): int(entry.max_version_level) for entry in response.finalized_features
        }

    async def call(
        self,
        api_key: int,
        version: int,
        *,
        wire_key: int | None = None,
        wait_s: float = 30.0,
        **fields: Any,
    ) -> Any:
        """Send one request (fields of ``api_key``'s schema at ``version``) and await its
        response body. ``wire_key`` is the key put in the header when the broker serves the
        message under another key."""
        if self._writer is None or self._closed or self._loop is None:
            raise ConnectionClosed(f"connection to {self.host}:{self.port} is closed")
        schema = wire.request_schema(api_key, version)
        body = fastwrite.encode_chunks(wire.build(schema, **fields))
        correlation_id = self._next_correlation
        self._next_correlation = (self._next_correlation + 1) & 0x7FFFFFFF
        before, after = self._header(schema, api_key, version, wire_key)
        size = len(before) + CORRELATION.size + len(after) + sum(map(len, body))
        request = [SIZE.pack(size), before, CORRELATION.pack(correlation_id), after, *body]
        future: asyncio.Future[bytes] = self._loop.create_future()
        self._pending[correlation_id] = future
        try:
            self._writer.write(b"".join(request))
            await self._writer.drain()
            frame = await asyncio.wait_for(future, wait_s)
        except (OSError, TimeoutError) as exc:
            self.close()
            raise ConnectionClosed(
                f"{wire.api_name(api_key)} to {self.host}:{self.port}: {exc}"
            ) from exc
        finally:
            self._pending.pop(correlation_id, None)
            if future.done() and not future.cancelled():
                # closed while this call was not awaiting it yet (in drain, or cancelled): its
                # ConnectionClosed is this call's to raise or drop, not a "never retrieved"
                future.exception()
        _, response = wire.decode_response(api_key, version, frame)
        return response

    def _header(
        self, schema: type[Any], api_key: int, version: int, wire_key: int | None
    ) -> tuple[bytes, bytes]:
        """The bytes of the request header of ``schema`` (``api_key`` at ``version``) before
        and after its correlation id (an int32 after the api key and version, in every header
        version): encoded once per connection and message, by the protocol layer."""
        key = (api_key, version, api_key if wire_key is None else wire_key)
        found = self._headers.get(key)
        if found is None:
            header = wire.build(
                schema.__header_schema__,
                request_api_key=key[2],
                request_api_version=version,
                correlation_id=0,
                client_id=self.client_id,
            )
            encoded = b"".join(fastwrite.encode_chunks(header))
            start, end = HEADER_PREFIX.size - CORRELATION.size, HEADER_PREFIX.size
            found = self._headers[key] = (encoded[:start], encoded[end:])
        return found

    async def _read_responses(self) -> None:
        assert self._reader is not None
        try:
            while True:
                size = SIZE.unpack(await self._reader.readexactly(4))[0]
                frame = await self._reader.readexactly(size)
                correlation_id = CORRELATION.unpack_from(frame, 0)[0]
                future = self._pending.pop(correlation_id, None)
                if future is not None and not future.done():
                    future.set_result(frame)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._closed = True
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(
                        ConnectionClosed(f"{self.host}:{self.port} closed the connection")
                    )
            self._pending.clear()

    def close(self) -> None:
        self._closed = True
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        if self._read_task is not None:
            self._read_task.cancel()
