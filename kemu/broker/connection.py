"""One client connection: read frames, dispatch them concurrently, answer in request order.

Requests are pipelined: each one is dispatched as soon as it is read, and responses go out
strictly in the order the requests arrived, as Kafka guarantees. A frame that cannot be a Kafka
request closes this connection only, with one structured log line.

The connection is an ``asyncio.Protocol`` rather than a pair of streams because this is the hot
path: every frame in a received chunk is decoded and dispatched in one callback, and the answers
that are ready leave in one write, which saves a loopback send per pipelined request. A handler
may be a plain function (its answer is written without a task) or a coroutine function (it runs
as a task; a long-poll Fetch or a coordinator wait holds back the answers behind it).
"""

from __future__ import annotations

import asyncio
from collections import deque
from time import monotonic, perf_counter_ns
from typing import TYPE_CHECKING, Any, cast

import structlog

from kemu.broker.acceptors import Ticket, connection_acceptors
from kemu.broker.faults import FaultRule, fault_table
from kemu.broker.handlers import REGISTRY, HandlerSpec, is_enabled, moved_keys
from kemu.broker.refused_batches import PRODUCE_KEY, RefusedBatches
from kemu.broker.stats import request_stats
from kemu.broker.throttling import TimedCoroutine, cap_fetch_bytes, throttle
from kemu.cluster.client_quotas import client_quotas
from kemu.cluster.connection_quotas import normalize_ip
from kemu.cluster.context import ConnectionHooks, RequestContext, Runtime
from kemu.cluster.model import BrokerNode
from kemu.cluster.quota_enforcement import client_throttles
from kemu.protocol import wire
from kemu.protocol.error_responses import error_response_for
from kemu.protocol.errors import ErrorCode
from kemu.protocol.wire import DecodedRequest, MalformedFrame, UnsupportedRequest

if TYPE_CHECKING:
    from kemu.broker.security.session import SecuritySession
    from kemu.cluster.clock import TimerHandle
    from kemu.cluster.listeners import Listener

log = structlog.get_logger("kemu.connection")

WRITE_BUFFER_HIGH_WATER = 1 << 20  # stop reading requests while this much is unsent

# One slot per request, in arrival order: a ready frame, None (no answer, acks=0), or the task
# of a handler that is still running.
Slot = bytes | None | asyncio.Task[bytes | None]


class CutFrame(bytes):
    """What a fault rule sends instead of an answer (nothing, or a torn frame): the connection
    closes once it is written."""


class Connection(asyncio.Protocol):
    def __init__(
        self, node: BrokerNode, runtime: Runtime, listener: Listener | None = None
    ) -> None:
        self.node = node
        self.runtime = runtime
        self.peer = "unknown"
        self.client_host = "127.0.0.1"
        self.client_ip = "127.0.0.1"  # as connection quotas key it (kemu/broker/acceptors.py)
        self.max_request_bytes = runtime.cluster.config.get_int("socket.request.max.bytes")
        self.transport: asyncio.Transport | None = None
        self._partial = bytearray()  # the start of a frame not yet received whole
        self._slots: deque[Slot] = deque()
        self._closing = False
        self._flush_scheduled = False
        self.hooks = ConnectionHooks()  # e.g. share sessions opened here end with it
        # KIP-1289 APIs configured to other keys: wire key -> registered key (None: not served)
        self.moved_keys = moved_keys(runtime.cluster.config)
        self.faults = fault_table(runtime)
        self._rules = self.faults.by_key  # api key -> fault rules; empty unless a test set some
        self.stats = request_stats(runtime)
        # A listener configured with ``listeners``: its authentication (None: the default
        # PLAINTEXT listener, every request served as before).
        self.listener = listener
        self.session: SecuritySession | None = None
        # Client quotas (kemu/broker/throttling.py): nothing is measured while none is stored.
        self._quotas = client_quotas(runtime)
        self._muted_until = 0  # clock ms: a throttled client's next request is read then
        self._unmute_timer: TimerHandle | None = None
        self._write_paused = False
        # Requests not yet handled that later frames wait behind, as Kafka reads one request of
        # a connection at a time: a faulted request (a later Produce must not be applied first)
        # and, under client quotas, a coroutine handler's request (its throttle, known only
        # when it finishes, must mute what the client pipelined behind it).
        self._held = 0
        # Idempotent batches an injected Produce error refused (kemu/broker/refused_batches.py).
        self._refused = RefusedBatches()
        # Connection quotas (kemu/broker/acceptors.py): "arriving" while the listener's acceptor
        # decides, "queued" (frames held) until it takes the connection, then "admitted" with
        # the ticket that counts it, or "throttled" (unread until closed).
        self._admission = "arriving"
        self.ticket: Ticket | None = None
        self._close_timer: TimerHandle | None = None
        self._last_active = monotonic()

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.client_host = peer[0] if isinstance(peer, tuple) else "127.0.0.1"
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH_WATER)
        self.faults.opened(self.node.node_id, self)
        self.stats.connections_accepted += 1
        if self.node.node_id in self.faults.down:
            self.abort()  # accepted just before the listener closed: the broker is down
        if self.listener is not None:
            from kemu.broker.security.session import open_session

            self.session = open_session(self.listener, self.runtime, transport, self.peer)
        if self._closing:
            return
        self.client_ip = normalize_ip(self.client_host)
        acceptors = connection_acceptors(self.runtime, self.node.node_id)
        acceptors.acceptor(self.listener.name if self.listener else None).arrive(self)
        if self._admission == "arriving":  # its listener's acceptor takes it later
            self._admission = "queued"
            self._hold_frames()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._last_active = monotonic()
        self.stats.bytes_in += len(data)
        try:
            self._receive(data)
        except Exception:
            log.exception("connection_failed", node_id=self.node.node_id, peer=self.peer)
            self._close()

    def eof_received(self) -> bool:
        if len(self._partial) >= wire.SIZE.size:
            log.warning("malformed_frame", peer=self.peer, reason="truncated frame")
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        # The peer is gone: nobody will read pending answers (long polls).
        self._closing = True
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()
        if self._close_timer is not None:
            self._close_timer.cancel()
        if self.ticket is not None:
            self.ticket.release()
        self._cancel_pending()
        try:
            self.hooks.closed()
        except Exception:
            log.exception("close_hook_failed", node_id=self.node.node_id, peer=self.peer)

    def pause_writing(self) -> None:
        # The client is not reading its answers: stop taking requests until it catches up.
        self._write_paused = True
        if self.transport is not None and not self._closing:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if (
            self.transport is not None
            and not self._closing
            and not self._muted_until
            and not self._held
        ):
            self.transport.resume_reading()

    # --- connection quotas: what the listener's acceptor decided (kemu/broker/acceptors.py) ----

    def admitted(self, ticket: Ticket) -> None:
        self.ticket = ticket
        queued = self._admission == "queued"
        self._admission = "admitted"
        if self._closing:  # the client left while it waited: Kafka counts it, then closes it
            ticket.release()
        elif queued:
            self._release_held_frames()

    def throttled(self, close_at_ms: int) -> None:
        """Over its IP's connection_creation_rate: never read, closed at ``close_at_ms``."""
        if self._admission == "arriving":
            self._hold_frames()
        self._admission = "throttled"
        if not self._closing:
            self._close_timer = self.runtime.clock.call_at(close_at_ms, self._close_throttled)

    def _close_throttled(self) -> None:
        self._close_timer = None
        self._closing = True
        if self.transport is not None:
            self.transport.close()

    def refused(self) -> None:
        """Past max.connections.per.ip: closed at once."""
        self._admission = "refused"
        self._closing = True
        if self.transport is not None:
            self.transport.close()

    def last_active(self) -> float:
        return self._last_active

    def close_least_recently_used(self) -> None:
        """Closed to make room under max.connections (unsent answers dropped, as Kafka)."""
        self.abort()

    # --- client quotas: a throttled connection is muted (kemu/broker/throttling.py) -----------

    def _mute(self, throttle_ms: int) -> None:
        """Read no further request until ``throttle_ms`` have passed, as Kafka mutes the channel."""
        until = self.runtime.clock_ms() + throttle_ms
        if until <= self._muted_until or self._closing:
            return
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()
        self._muted_until = until
        self._unmute_timer = self.runtime.clock.call_at(until, self._unmute)
        if self.transport is not None:
            self.transport.pause_reading()

    def _unmute(self) -> None:
        self._muted_until = 0
        self._unmute_timer = None
        self._read_waiting_frames()

    def _read_waiting_frames(self) -> None:
        """Take requests again after a mute or a held faulted request ended."""
        if self._closing or self.transport is None or self._muted_until or self._held:
            return
        if not self._write_paused:
            self.transport.resume_reading()
        if self._partial:  # requests that arrived while muted or held
            try:
                self._receive(b"")
            except Exception:
                log.exception("connection_failed", node_id=self.node.node_id, peer=self.peer)
                self._close()

    # --- frames -------------------------------------------------------------------------------

    def _receive(self, data: bytes) -> None:
        partial = self._partial
        buffer: bytes | bytearray
        if partial:
            partial += data
            buffer = partial
        else:
            buffer = data
        end = len(buffer)
        position = 0
        size_struct = wire.SIZE
        while end - position >= 4:
            if self._muted_until or self._held:
                break  # throttled, or behind a faulted request: the rest waits
            size = size_struct.unpack_from(buffer, position)[0]
            if size < wire.HEADER_PREFIX.size or size > self.max_request_bytes:
                log.warning(
                    "malformed_frame",
                    peer=self.peer,
                    reason=f"frame size {size}",
                    limit=self.max_request_bytes,
                )
                self._close()
                return
            start = position + 4
            if end - start < size:
                break
            position = start + size
            if not self._accept(bytes(buffer[start:position])):
                self._close()
                return
        if partial:
            del partial[:position]
        elif position < end:
            partial += memoryview(data)[position:]
        self._flush()

    def _accept(self, frame: bytes) -> bool:
        """Dispatch one frame; False means the connection must close."""
        session = self.session
        if session is not None and session.intercepts:
            return self._accept_secured(frame, session)
        return self._accept_request(frame)

    def _accept_secured(self, frame: bytes, session: SecuritySession) -> bool:
        """A frame on a SASL listener before (or between) authentications."""
        now_ms = self.runtime.clock_ms()
        if session.raw:  # after SaslHandshake v0: a bare SASL token, answered bare
            reply = session.raw_token(frame, now_ms)
            if reply is None:
                return False
            self._slots.append(reply)
            return True
        try:
            api_key = wire.peek_header(frame)[0]
        except MalformedFrame as malformed:
            log.warning("malformed_frame", peer=self.peer, reason=str(malformed))
            return False
        reason = session.refusal(api_key, wire.api_name(api_key), now_ms)
        if reason is not None:
            log.warning(
                "sasl_request_refused",
                peer=self.peer,
                listener=session.listener.name,
                api=wire.api_name(api_key),
                reason=reason,
            )
            return False
        # The SASL handlers answer at once; a refusal closes once the answer is out.
        return self._accept_request(frame) and not session.close_requested

    def _accept_request(self, frame: bytes) -> bool:
        try:
            # What is not served is refused before its body is decoded, as Kafka does.
            api_key, api_version, correlation_id = wire.peek_header(frame)
            served_key: int | None = api_key
            if api_key in self.moved_keys:
                served_key = self.moved_keys[api_key]
            spec = None if served_key is None else REGISTRY.get(served_key)
            if (
                spec is None
                or not spec.min_version <= api_version <= self._max(spec)
                or not is_enabled(self.runtime, spec.api_key)
            ):
                return self._unsupported(api_key, api_version, correlation_id)
            request = wire.decode_request(frame, spec.api_key)
        except UnsupportedRequest as unsupported:
            return self._unsupported(
                unsupported.api_key, unsupported.api_version, unsupported.correlation_id
            )
        except MalformedFrame as malformed:
            log.warning("malformed_frame", peer=self.peer, reason=str(malformed))
            return False
        context = RequestContext(
            self.node, self.runtime, request.header, self.client_host, self.hooks, self.session
        )
        if self._quotas.quotas:
            request = cap_fetch_bytes(client_throttles(self.runtime), context, request)
        if self._refused.by_partition and spec.api_key == PRODUCE_KEY:
            refusal = self._refused.refusal_for(request.body)
            if refusal is not None:
                error, rule_id = refusal
                self._slots.append(
                    self._injected_error(request, error, f"injected by kemu fault rule {rule_id}")
                )
                return True
        rules = self._rules.get(spec.api_key)
        if rules is not None:
            rule = self.faults.match(rules, self.node.node_id, request)
            if rule is not None:
                return self._inject(rule, spec, context, request, len(frame))
        self._slots.append(self._dispatch(spec, context, request, len(frame)))
        return True

    # --- fault rules (kemu/broker/faults.py) --------------------------------------------------

    def _inject(
        self,
        rule: FaultRule,
        spec: HandlerSpec,
        context: RequestContext,
        request: DecodedRequest,
        size: int,
    ) -> bool:
        if rule.kind == "drop_before" and not rule.latency_ms:
            return False  # closes; the answers ready before it still go out
        self._hold_frames()
        task = asyncio.get_running_loop().create_task(
            self._faulted(rule, spec, context, request, size)
        )
        task.add_done_callback(self._task_done)
        self._slots.append(task)
        return True

    async def _faulted(
        self,
        rule: FaultRule,
        spec: HandlerSpec,
        context: RequestContext,
        request: DecodedRequest,
        size: int,
    ) -> bytes | None:
        if rule.latency_ms:
            await asyncio.sleep(rule.latency_ms / 1000)
        kind = rule.kind
        if kind == "drop_before":
            return CutFrame()  # the frames behind it are never read: the connection closes
        if kind == "error":
            error = ErrorCode(rule.error_code)
            if request.header.api_key == PRODUCE_KEY:
                self._refused.note(request.body, error, rule.id)
            refused = self._injected_error(request, error, f"injected by kemu fault rule {rule.id}")
            self._release_held_frames()
            return refused
        slot = self._dispatch(spec, context, request, size)
        if kind not in ("drop_after", "torn"):
            # Applied: the requests behind it may go on (their answers still queue in order).
            # After a drop or a torn answer the connection closes, and what the client sent
            # behind it is never read, as on Kafka, which reads a connection's next request
            # only once the answer before it is out.
            self._release_held_frames()
        frame = await slot if isinstance(slot, asyncio.Task) else slot
        if kind == "drop_after":
            return CutFrame()
        if kind == "torn":
            return CutFrame(frame[: max(1, len(frame) // 2)] if frame else b"")
        return frame

    def _injected_error(self, request: DecodedRequest, error: ErrorCode, message: str) -> bytes:
        header = request.header
        body = error_response_for(request, error, message)
        self.stats.answered(header.api_key, header.api_version, body, 0)
        return wire.encode_response_frame(
            header.api_key, header.api_version, header.correlation_id, body
        )

    def _hold_frames(self) -> None:
        """Read no further frame until ``_release_held_frames`` (one release per hold)."""
        self._held += 1
        if self.transport is not None:
            self.transport.pause_reading()

    def _release_held_frames(self) -> None:
        self._held -= 1
        self._read_waiting_frames()

    def abort(self) -> None:
        """Close now, unsent answers dropped (the broker went down)."""
        self._closing = True
        self._cancel_pending()
        if self.transport is not None:
            self.transport.abort()

    def _max(self, spec: HandlerSpec) -> int:
        caps = self.runtime.max_versions
        if caps is None:
            return spec.max_version
        return min(spec.max_version, caps.get(spec.api_key, -1))

    def _unsupported(self, api_key: int, api_version: int, correlation_id: int) -> bool:
        if api_key == wire.API_VERSIONS_KEY:
            from kemu.broker.handlers.api_versions import unsupported_version_frame

            self._slots.append(unsupported_version_frame(self.runtime, correlation_id))
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

    # --- handlers -----------------------------------------------------------------------------

    def _dispatch(
        self, spec: HandlerSpec, context: RequestContext, request: DecodedRequest, size: int = 0
    ) -> Slot:
        """The answer now when the handler finishes without awaiting, else its running task."""
        if self._quotas.quotas:
            return self._dispatch_throttled(spec, context, request, size)
        # Encoding sits inside the try: an answer that cannot be encoded must still become an
        # error answer, or the requests queued behind it would wait forever.
        started = perf_counter_ns()
        try:
            outcome = spec.function(context, request.body)
            if asyncio.iscoroutine(outcome):
                task = asyncio.get_running_loop().create_task(
                    self._finish(outcome, request, started)
                )
                task.add_done_callback(self._task_done)
                # a task cancelled before its first step never awaits the handler's coroutine:
                # closing it spares a "never awaited" warning (a no-op once it has run)
                task.add_done_callback(lambda _: outcome.close())
                return task
            frame = self._encode(request, outcome)
        except Exception:
            return self._failed(request)
        header = request.header
        self.stats.answered(
            header.api_key, header.api_version, outcome, perf_counter_ns() - started
        )
        return frame

    async def _finish(self, outcome: Any, request: DecodedRequest, started: int) -> bytes | None:
        try:
            body = await outcome
            frame = self._encode(request, body)
        except Exception:
            return self._failed(request)
        header = request.header
        self.stats.answered(header.api_key, header.api_version, body, perf_counter_ns() - started)
        return frame

    def _dispatch_throttled(
        self, spec: HandlerSpec, context: RequestContext, request: DecodedRequest, size: int
    ) -> Slot:
        """``_dispatch`` recording the request on the client's quotas (``size``: its frame)."""
        started = perf_counter_ns()
        try:
            outcome = spec.function(context, request.body)
            if asyncio.iscoroutine(outcome):
                timed = TimedCoroutine(outcome)
                # The frames behind it wait for its throttle, as on Kafka (muted, not read).
                self._hold_frames()
                task = asyncio.get_running_loop().create_task(
                    self._finish_throttled(timed, context, request, size, started)
                )
                task.add_done_callback(self._task_done)
                task.add_done_callback(lambda _: outcome.close())  # as in ``_dispatch``
                return task
            body, throttle_ms = throttle(
                client_throttles(self.runtime),
                context,
                request,
                outcome,
                size,
                perf_counter_ns() - started,
            )
            frame = self._encode(request, body)
        except Exception:
            return self._failed(request)
        header = request.header
        self.stats.answered(header.api_key, header.api_version, body, perf_counter_ns() - started)
        if throttle_ms > 0:
            self._mute(throttle_ms)
        return frame

    async def _finish_throttled(
        self,
        timed: TimedCoroutine,
        context: RequestContext,
        request: DecodedRequest,
        size: int,
        started: int,
    ) -> bytes | None:
        try:
            return await self._throttled_answer(timed, context, request, size, started)
        finally:
            self._release_held_frames()  # after the mute: what waits stays unread until it ends

    async def _throttled_answer(
        self,
        timed: TimedCoroutine,
        context: RequestContext,
        request: DecodedRequest,
        size: int,
        started: int,
    ) -> bytes | None:
        try:
            body = await timed
            body, throttle_ms = throttle(
                client_throttles(self.runtime), context, request, body, size, timed.ns
            )
            frame = self._encode(request, body)
        except Exception:
            return self._failed(request)
        header = request.header
        self.stats.answered(header.api_key, header.api_version, body, perf_counter_ns() - started)
        if throttle_ms > 0:
            self._mute(throttle_ms)
        return frame

    def _failed(self, request: DecodedRequest) -> bytes:
        header = request.header
        self.stats.error(header.api_key, int(ErrorCode.unknown_server_error))
        log.exception(
            "handler_failed",
            api=wire.api_name(header.api_key),
            api_version=header.api_version,
            peer=self.peer,
        )
        body = wire.error_response(request, ErrorCode.unknown_server_error)
        return wire.encode_response_frame(
            header.api_key, header.api_version, header.correlation_id, body
        )

    @staticmethod
    def _encode(request: DecodedRequest, body: Any) -> bytes | None:
        if body is None:
            return None  # e.g. Produce with acks=0 gets no response
        if isinstance(body, bytes):
            return body  # a handler that encoded its own frame
        header = request.header
        return wire.encode_response_frame(
            header.api_key, header.api_version, header.correlation_id, body
        )

    def _task_done(self, _task: asyncio.Task[bytes | None]) -> None:
        # Tasks started by one chunk of requests finish in the same loop iteration; flushing
        # once after all of their callbacks sends their answers in a single write.
        if not self._flush_scheduled and not self._closing:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        if not self._closing:
            self._flush()

    # --- answers ------------------------------------------------------------------------------

    def _flush(self) -> None:
        """Send every answer that is ready, in request order, in one write."""
        slots = self._slots
        frames: list[bytes] = []
        while slots:
            head = slots[0]
            frame: bytes | None
            if isinstance(head, asyncio.Task):
                if not head.done():
                    break
                frame = None if head.cancelled() else head.result()
            else:
                frame = head
            slots.popleft()
            if frame is not None:
                if frame.__class__ is CutFrame:
                    self._cut(frames, frame)
                    return
                frames.append(frame)
        transport = self.transport
        if not frames or transport is None or transport.is_closing():
            return
        if len(frames) == 1:
            self.stats.bytes_out += len(frames[0])
            transport.write(frames[0])
        else:
            self.stats.bytes_out += sum(map(len, frames))
            transport.writelines(frames)

    def _cut(self, frames: list[bytes], cut: bytes) -> None:
        """Write what is ready and ``cut`` (a torn frame, or nothing), then close."""
        transport = self.transport
        self._closing = True
        self._cancel_pending()
        if transport is None or transport.is_closing():
            return
        if cut:
            frames.append(cut)
        if frames:
            transport.writelines(frames)
        transport.close()

    def _cancel_pending(self) -> None:
        for slot in self._slots:
            if isinstance(slot, asyncio.Task):
                slot.cancel()
        self._slots.clear()

    def _close(self) -> None:
        """Send what is ready, drop what is pending, and close after the last byte is out."""
        if self._closing:
            return
        self._flush()
        self._closing = True
        self._cancel_pending()
        if self.transport is not None:
            self.transport.close()
