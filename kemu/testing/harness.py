"""One in-process request harness for handler tests: a kemu cluster model in the test's own
process whose handlers are reached through encoded frames, without a socket.

``await broker.send(api_key, version, **fields)`` builds the request from the schema kemu serves,
encodes it as a client would (header, correlation id, client id), decodes it as a connection
would, calls the API's handler with a ``RequestContext`` on the chosen node, encodes the answer
and decodes it again as a client would: the codec's round trip is part of every call, so a field
a handler sets that the response schema cannot carry fails the test. ``send_body`` does the same
for a request built by hand (``request``, ``nested``); the ``*_now`` forms run one call outside
an event loop, for synchronous tests.

The clock is ``broker.now`` (milliseconds; the test moves it), ``restart()`` gives a fresh runtime
over the same cluster (every service starts again, as after a restart of kemu).
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any

from kemu.broker.handlers import REGISTRY, load_handlers
from kemu.cluster.context import RequestContext, Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.protocol import wire
from kemu.storage.log import MemoryLog

NOW_MS = 1_700_000_000_000


class HandlerHarness:
    """``brokers`` nodes on 127.0.0.1 (ports from ``first_port``; nothing listens), in-memory
    logs, broker properties ``config`` (as if in server.properties)."""

    def __init__(
        self,
        *,
        brokers: int = 3,
        config: Mapping[str, str] | None = None,
        data_dir: Path | None = None,
        now_ms: int = NOW_MS,
        cluster_id: str = "unit-cluster",
        client_id: str = "kemu",
        first_port: int = 19091,
    ) -> None:
        load_handlers()
        nodes = {i: BrokerNode(i, "127.0.0.1", first_port + i - 1) for i in range(1, brokers + 1)}
        self.cluster = Cluster(
            cluster_id=cluster_id,
            nodes=nodes,
            config=BrokerConfig(dict(config or {})),
            log_factory=lambda topic, index: MemoryLog(),
            data_dir=data_dir,
        )
        self.client_id = client_id
        self.now = now_ms
        self.correlation = 0
        self.runtime = self._runtime()
        # The *_now forms run each call in a fresh event loop, or all of them in this one when a
        # test sets it (a coordinator's timers then outlive the call that armed them).
        self.loop: asyncio.AbstractEventLoop | None = None

    def _runtime(self) -> Runtime:
        return Runtime(cluster=self.cluster, clock_ms=lambda: self.now)

    def restart(self) -> None:
        """A fresh runtime over the same cluster and data dir: every service starts again."""
        self.runtime = self._runtime()

    # --- building requests ----------------------------------------------------------------

    def request(self, api_key: int, version: int, **fields: Any) -> Any:
        return wire.build(wire.request_schema(api_key, version), **fields)

    def nested(self, api_key: int, version: int, class_name: str, /, **fields: Any) -> Any:
        """A nested structure of a request schema (e.g. a topic entry), by its class name."""
        module = sys.modules[wire.request_schema(api_key, version).__module__]
        return wire.build(getattr(module, class_name), **fields)

    # --- sending them ---------------------------------------------------------------------

    async def send(self, api_key: int, version: int, node_id: int = 1, **fields: Any) -> Any:
        """Build, round-trip and answer one request on node ``node_id``; the decoded answer."""
        return await self.send_body(self.request(api_key, version, **fields), node_id)

    async def send_body(self, body: Any, node_id: int = 1) -> Any:
        header, answer = self._handle(body, node_id)
        if inspect.isawaitable(answer):  # handlers may be coroutines or plain functions
            answer = await answer
        return self._answer(header, answer)

    def _handle(self, body: Any, node_id: int) -> tuple[Any, Any]:
        """Encode and decode ``body`` as a connection would, and call its handler: the header
        and the handler's answer (awaitable when the handler is a coroutine)."""
        self.correlation += 1
        frame = wire.encode_request_frame(body, self.correlation, client_id=self.client_id)
        decoded = wire.decode_request(frame[4:])
        header = decoded.header
        spec = REGISTRY[header.api_key]
        assert spec.min_version <= header.api_version <= spec.max_version, (
            f"api {header.api_key} v{header.api_version} is not served"
        )
        context = RequestContext(self.cluster.nodes[node_id], self.runtime, header)
        return header, spec.function(context, decoded.body)

    def _answer(self, header: Any, answer: Any) -> Any:
        """The answer encoded and decoded again, as the client reads it."""
        out = wire.encode_response_frame(
            header.api_key, header.api_version, header.correlation_id, answer
        )
        correlation, response = wire.decode_response(header.api_key, header.api_version, out[4:])
        assert correlation == self.correlation
        return response

    def send_now(self, api_key: int, version: int, node_id: int = 1, **fields: Any) -> Any:
        """``send`` for a synchronous test."""
        return self.send_body_now(self.request(api_key, version, **fields), node_id)

    def send_body_now(self, body: Any, node_id: int = 1) -> Any:
        """``send_body`` for a synchronous test. With ``loop`` set, the whole call runs in it;
        otherwise a handler that is a plain function is called directly (so this works inside
        a running loop too) and a coroutine runs to its end in a fresh loop."""
        if self.loop is not None:
            return self.loop.run_until_complete(self.send_body(body, node_id))
        header, answer = self._handle(body, node_id)
        if inspect.isawaitable(answer):
            answer = asyncio.run(_awaited(answer))
        return self._answer(header, answer)


async def _awaited(answer: Awaitable[Any]) -> Any:
    return await answer
