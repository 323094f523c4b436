"""One client connection: frames in, answers out in request order.

Requests are pipelined: each one is dispatched as soon as it is read, and responses go out
strictly in the order the requests arrived, as Kafka guarantees. A frame that cannot be a Kafka
request closes this connection only, with one structured log line. What happens to a request
between its frame and its answer (SASL, fault rules, client quotas, the handler) is the request
pipeline's (``kemu/broker/pipeline``); this module keeps frames, ordered slots and flushing.

The connection is an ``asyncio.Protocol`` rather than a pair of streams because this is the hot
path: every frame in a received chunk is decoded and dispatched in one callback, and the answers
that are ready leave in one write, which saves a loopback send per pipelined request. A handler
may be a plain function (its answer is written without a task) or a coroutine function (it runs
as a task; a long-poll Fetch or a coordinator wait holds back the answers behind it).
"""

from __future__ import annotations

import asyncio
from collections import deque
from time import monotonic
from typing import TYPE_CHECKING, cast

import structlog

from kemu.broker.faults import fault_table
from kemu.broker.pipeline import CutFrame, Pipeline, Slot
from kemu.broker.pipeline.quotas import Admission
from kemu.broker.stats import request_stats
from kemu.cluster.context import ConnectionHooks, Runtime
from kemu.cluster.model import BrokerNode
from kemu.protocol import wire

if TYPE_CHECKING:
    from kemu.broker.acceptors import Ticket
    from kemu.broker.security.session import SecuritySession
    from kemu.cluster.listeners import Listener

log = structlog.get_logger("kemu.connection")

WRITE_BUFFER_HIGH_WATER = 1 << 20  # stop reading requests while this much is unsent


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
        self.slots: deque[Slot] = deque()
        self._slots = self.slots  # the name the unit tests read
        self._closing = False
        self._flush_scheduled = False
        self.hooks = ConnectionHooks()  # e.g. share sessions opened here end with it
        self.faults = fault_table(runtime)
        self.stats = request_stats(runtime)
        # A listener configured with ``listeners``: its authentication (None: the default
        # PLAINTEXT listener, every request served as before).
        self.listener = listener
        self.session: SecuritySession | None = None
        self._write_paused = False
        # Holds on reading (Kafka reads one request of a connection at a time): a faulted request,
        # a client-quota mute, a coroutine handler's request under client quotas (see pipeline).
        self._held = 0
        self.admission = Admission(self)  # connection quotas (kemu/broker/acceptors.py)
        self.pipeline = Pipeline(self)
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
        if not self._closing:
            self.admission.arrive()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._last_active = monotonic()
        self.stats.bytes_in += len(data)
        self._receive_safely(data)

    def eof_received(self) -> bool:
        if len(self._partial) >= wire.SIZE.size:
            log.warning("malformed_frame", peer=self.peer, reason="truncated frame")
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        # The peer is gone: nobody will read pending answers (long polls).
        self._closing = True
        self.pipeline.closed()
        self.admission.closed()
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
        if self.transport is not None and not self._closing and not self._held:
            self.transport.resume_reading()

    # --- what the listener's acceptor calls (connection quotas) ---------------------------------

    def admitted(self, ticket: Ticket) -> None:
        self.admission.admitted(ticket)

    def throttled(self, close_at_ms: int) -> None:  # over its IP's connection creation rate
        self.admission.throttled(close_at_ms)

    def refused(self) -> None:  # past max.connections.per.ip: closed at once
        self.admission.refused()

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def ticket(self) -> Ticket | None:
        return self.admission.ticket

    def last_active(self) -> float:
        return self._last_active

    def close_least_recently_used(self) -> None:
        """Closed to make room under max.connections (unsent answers dropped, as Kafka)."""
        self.abort()

    # --- reading: frames, and holds on reading ------------------------------------------------

    def hold(self) -> None:
        """Read no further frame until ``release`` (one release per hold)."""
        self._held += 1
        if self.transport is not None:
            self.transport.pause_reading()

    def release(self) -> None:
        """End one hold; the last one reads the requests that arrived meanwhile."""
        self._held -= 1
        if self._closing or self.transport is None or self._held:
            return
        if not self._write_paused:
            self.transport.resume_reading()
        if self._partial:
            self._receive_safely(b"")

    def _receive_safely(self, data: bytes) -> None:
        try:
            self._receive(data)
        except Exception:
            log.exception("connection_failed", node_id=self.node.node_id, peer=self.peer)
            self.close()

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
        accept = self.pipeline.accept
        while end - position >= 4:
            if self._held:
                break  # muted, or behind a held request: the rest waits
            size = size_struct.unpack_from(buffer, position)[0]
            if size < wire.HEADER_PREFIX.size or size > self.max_request_bytes:
                log.warning(
                    "malformed_frame",
                    peer=self.peer,
                    reason=f"frame size {size}",
                    limit=self.max_request_bytes,
                )
                self.close()
                return
            start = position + 4
            if end - start < size:
                break
            position = start + size
            if not accept(bytes(buffer[start:position])):
                self.close()
                return
        if partial:
            del partial[:position]
        elif position < end:
            partial += memoryview(data)[position:]
        self.flush()

    # --- answers: one slot per request, sent in order -----------------------------------------

    def task_done(self, _task: asyncio.Task[bytes | None]) -> None:
        # Tasks started by one chunk of requests finish in the same loop iteration; flushing
        # once after all of their callbacks sends their answers in a single write.
        if not self._flush_scheduled and not self._closing:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        if not self._closing:
            self.flush()

    def flush(self) -> None:
        """Send every answer that is ready, in request order, in one write."""
        slots = self.slots
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
        for slot in self.slots:
            if isinstance(slot, asyncio.Task):
                slot.cancel()
        self.slots.clear()

    def close(self) -> None:
        """Send what is ready, drop what is pending, and close after the last byte is out."""
        if self._closing:
            return
        self.flush()
        self._closing = True
        self._cancel_pending()
        if self.transport is not None:
            self.transport.close()

    def close_now(self) -> None:  # a connection quota's verdict: nothing is flushed
        self._closing = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Close now, unsent answers dropped (the broker went down)."""
        self._closing = True
        self._cancel_pending()
        if self.transport is not None:
            self.transport.abort()
