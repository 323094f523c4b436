"""The handler stage: the one dispatch path from a decoded request to its answer's frame.

A plain-function handler's answer is encoded at once; a coroutine handler runs as a task whose
result is the frame. Under client quotas (``quotas.py``) the handler's time and answer are
recorded on the way back, which may throttle the answer and mute the connection; a coroutine
handler's request then holds the frames behind it until its throttle is known, as Kafka reads a
connection's next request only once the one before is answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

import structlog

from kemu.broker.handlers import HandlerSpec
from kemu.broker.pipeline.trace import request_trace
from kemu.broker.throttling import TimedCoroutine
from kemu.cluster.context import RequestContext
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.wire import DecodedRequest

if TYPE_CHECKING:
    from kemu.broker.connection import Connection
    from kemu.broker.pipeline.quotas import QuotaStage

log = structlog.get_logger("kemu.connection")

# One slot per request, in arrival order: a ready frame, None (no answer, acks=0), or the task
# of a handler that is still running.
Slot = bytes | None | asyncio.Task[bytes | None]


class CutFrame(bytes):
    """What a fault rule sends instead of an answer (nothing, or a torn frame): the connection
    closes once it is written."""


class HandlerStage:
    def __init__(self, connection: Connection, quotas: QuotaStage) -> None:
        self.connection = connection
        self.quotas = quotas
        self.quota_store = quotas.store
        self.stats = connection.stats
        self.trace = request_trace(connection.runtime)  # None unless kemu.debug.request.log

    def dispatch(
        self, spec: HandlerSpec, context: RequestContext, request: DecodedRequest, size: int = 0
    ) -> Slot:
        """The answer now when the handler finishes without awaiting, else its running task
        (``size``: the request's frame, as client quotas count it)."""
        metered = bool(self.quota_store.quotas)
        started = perf_counter_ns()
        # Encoding sits inside the try: an answer that cannot be encoded must still become an
        # error answer, or the requests queued behind it would wait forever.
        try:
            outcome = spec.function(context, request.body)
            if asyncio.iscoroutine(outcome):
                return self._spawn(outcome, metered, context, request, size, started)
            if metered:
                handler_ns = perf_counter_ns() - started
                return self._answer(context, request, outcome, size, started, handler_ns)
            frame = encode(request, outcome)  # ``_answer`` inline: the path without quotas
            header = request.header
            self.stats.answered(
                header.api_key, header.api_version, outcome, perf_counter_ns() - started
            )
            if self.trace is not None:
                self.trace.answered(self.connection.peer, header, request.body, outcome, started)
            return frame
        except Exception:
            return self._failed(request)

    def _spawn(
        self,
        outcome: Coroutine[Any, Any, Any],
        metered: bool,
        context: RequestContext,
        request: DecodedRequest,
        size: int,
        started: int,
    ) -> asyncio.Task[bytes | None]:
        if metered:
            # The frames behind it wait for its throttle, as on Kafka (muted, not read).
            self.connection.hold()
        task = asyncio.get_running_loop().create_task(
            self._finish(outcome, metered, context, request, size, started)
        )
        task.add_done_callback(self.connection.task_done)
        # a task cancelled before its first step never awaits the handler's coroutine: closing
        # it spares a "never awaited" warning (a no-op once it has run)
        task.add_done_callback(lambda _: outcome.close())
        return task

    async def _finish(
        self,
        outcome: Coroutine[Any, Any, Any],
        metered: bool,
        context: RequestContext,
        request: DecodedRequest,
        size: int,
        started: int,
    ) -> bytes | None:
        try:
            handler_ns: int | None = None
            if metered:
                timed = TimedCoroutine(outcome)
                body = await timed
                handler_ns = timed.ns
            else:
                body = await outcome
            return self._answer(context, request, body, size, started, handler_ns)
        except Exception:
            return self._failed(request)
        finally:
            if metered:
                self.connection.release()  # after the mute: what waits stays unread until it ends

    def _answer(
        self,
        context: RequestContext,
        request: DecodedRequest,
        body: Any,
        size: int,
        started: int,
        handler_ns: int | None,
    ) -> bytes | None:
        """Encode ``body``; first, under client quotas (``handler_ns``: the time the handler
        ran, None when unmetered), record it, which may throttle it and mute the connection."""
        throttle_ms = 0
        if handler_ns is not None:
            body, throttle_ms = self.quotas.record(context, request, body, size, handler_ns)
        frame = encode(request, body)
        header = request.header
        self.stats.answered(header.api_key, header.api_version, body, perf_counter_ns() - started)
        if self.trace is not None:
            self.trace.answered(self.connection.peer, header, request.body, body, started)
        if throttle_ms > 0:
            self.quotas.mute(throttle_ms)
        return frame

    def _failed(self, request: DecodedRequest) -> bytes:
        header = request.header
        self.stats.error(header.api_key, int(ErrorCode.unknown_server_error))
        log.exception(
            "handler_failed",
            api=wire.api_name(header.api_key),
            api_version=header.api_version,
            peer=self.connection.peer,
        )
        body = wire.error_response(request, ErrorCode.unknown_server_error)
        return wire.encode_response_frame(
            header.api_key, header.api_version, header.correlation_id, body
        )


def encode(request: DecodedRequest, body: Any) -> bytes | None:
    if body is None:
        return None  # e.g. Produce with acks=0 gets no response
    if isinstance(body, bytes):
        return body  # a handler that encoded its own frame
    header = request.header
    return wire.encode_response_frame(
        header.api_key, header.api_version, header.correlation_id, body
    )
