"""What happens to one request between its frame and its answer: a pipeline of small stages.

``Pipeline.accept`` takes a frame the connection read and leaves one slot per request on the
connection (a ready frame, None for no answer, or the task of a handler still running), or says
the connection must close. The stages, in order:

1. security (``security.py``): on a SASL listener, what may pass before authentication;
2. decode: what is not served is refused before its body is decoded, as Kafka does;
3. quotas (``quotas.py``): under client quotas, a Fetch's bytes are capped;
4. faults (``faults.py``): a fault rule the control plane installed, and the idempotent batches
   an injected Produce error refused;
5. handler (``handler.py``): the one dispatch path; quotas see its time and answer (throttle,
   mute) on the way back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from kemu.broker.handlers import REGISTRY, HandlerSpec, is_enabled, moved_keys
from kemu.broker.pipeline.faults import FaultStage, Verdict
from kemu.broker.pipeline.handler import CutFrame, HandlerStage, Slot
from kemu.broker.pipeline.quotas import QuotaStage
from kemu.broker.pipeline.security import SecurityStage
from kemu.cluster.context import RequestContext
from kemu.protocol import wire
from kemu.protocol.wire import MalformedFrame, UnsupportedRequest

if TYPE_CHECKING:
    from kemu.broker.connection import Connection

__all__ = ["CutFrame", "Pipeline", "Slot"]

log = structlog.get_logger("kemu.connection")


class Pipeline:
    """The stages of one connection's requests."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        runtime = connection.runtime
        # KIP-1289 APIs configured to other keys: wire key -> registered key (None: not served)
        self.moved_keys = moved_keys(runtime.cluster.config)
        self.quotas = QuotaStage(connection)
        self.handler = HandlerStage(connection, self.quotas)
        self.faults = FaultStage(connection, self.handler)
        self.security = SecurityStage(connection)

    def accept(self, frame: bytes) -> bool:
        """Take one frame; False means the connection must close."""
        session = self.connection.session
        if session is not None and session.intercepts:
            return self.security.accept(frame, session, self._accept_request)
        return self._accept_request(frame)

    def closed(self) -> None:
        self.quotas.closed()

    def _accept_request(self, frame: bytes) -> bool:
        connection = self.connection
        try:
            api_key, api_version, correlation_id = wire.peek_header(frame)
            served_key: int | None = api_key
            if api_key in self.moved_keys:
                served_key = self.moved_keys[api_key]
            spec = None if served_key is None else REGISTRY.get(served_key)
            if (
                spec is None
                or not spec.min_version <= api_version <= self._max(spec)
                or not is_enabled(connection.runtime, spec.api_key)
            ):
                return self._unsupported(api_key, api_version, correlation_id)
            request = wire.decode_request(frame, spec.api_key)
        except UnsupportedRequest as unsupported:
            return self._unsupported(
                unsupported.api_key, unsupported.api_version, unsupported.correlation_id
            )
        except MalformedFrame as malformed:
            log.warning("malformed_frame", peer=connection.peer, reason=str(malformed))
            return False
        context = RequestContext(
            connection.node,
            connection.runtime,
            request.header,
            connection.client_host,
            connection.hooks,
            connection.session,
        )
        quotas = self.quotas
        if quotas.store.quotas:
            request = quotas.cap(context, request)
        faults = self.faults
        if faults.refused.by_partition or spec.api_key in faults.rules:
            verdict = faults.intercept(spec, context, request, len(frame))
            if verdict is Verdict.CLOSE:
                return False
            if verdict is not Verdict.PASS:
                connection.slots.append(verdict)
                return True
        connection.slots.append(self.handler.dispatch(spec, context, request, len(frame)))
        return True

    def _max(self, spec: HandlerSpec) -> int:
        caps = self.connection.runtime.max_versions
        if caps is None:
            return spec.max_version
        return min(spec.max_version, caps.get(spec.api_key, -1))

    def _unsupported(self, api_key: int, api_version: int, correlation_id: int) -> bool:
        connection = self.connection
        if api_key == wire.API_VERSIONS_KEY:
            from kemu.broker.handlers.api_versions import unsupported_version_frame

            connection.slots.append(unsupported_version_frame(connection.runtime, correlation_id))
            return True
        # Kafka cannot parse such a request either and closes the connection.
        log.warning(
            "unsupported_request",
            peer=connection.peer,
            api_key=api_key,
            api=wire.api_name(api_key),
            api_version=api_version,
        )
        return False
