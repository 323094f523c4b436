"""The simulation's network: listeners and connections in memory, with seeded faults.

A broker's ``create_server`` registers a ``Listener`` under its (host, port); a client's
``open_connection`` finds it and gets a pair of ``Pipe`` transports, each delivering what the
other writes to its protocol with ``call_at`` on the peer's process. Bytes of one direction
arrive in order; ``latency`` is drawn per write from the seeded random. Faults a test (or the
harness) applies: ``cut`` (both ends see the connection reset), ``tear`` (the peer gets only
a prefix of a write, then the reset), a broker ``down`` (its connections cut, new ones refused).
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Callable
from typing import Any

from kemu.testing.sim.loop import Process, SimLoop, current_process


class Listener:
    def __init__(
        self,
        network: SimNetwork,
        factory: Callable[[], asyncio.BaseProtocol],
        address: tuple[str, int],
        process: Process | None,
    ) -> None:
        self.network = network
        self.factory = factory
        self.address = address
        self.process = process
        self.closed = False

    # the parts of asyncio.Server that KemuServer uses
    def close(self) -> None:
        self.closed = True
        if self.network.listeners.get(self.address) is self:
            del self.network.listeners[self.address]

    async def wait_closed(self) -> None:
        return None


class Pipe(asyncio.Transport):
    """One end of an in-memory connection."""

    def __init__(self, network: SimNetwork, process: Process | None, peer: tuple[str, int]) -> None:
        super().__init__()
        self.network = network
        self.process = process
        self.peername = peer
        self.protocol: asyncio.Protocol | None = None
        self.other: Pipe | None = None
        self.closing = False
        self.lost = False
        self.reading = True
        self.held: list[bytes] = []  # arrived while reading was paused
        self.next_arrival = 0.0  # bytes of one direction arrive in order
        # What is in flight to this end, in send order: each arrival timer takes the oldest, as
        # the loop runs timers due at the same instant in no set order (its heap is not stable)
        self.arrivals: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self.tear_next = False  # the next write arrives torn, then the connection resets

    # --- asyncio.Transport ---------------------------------------------------------------------

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.peername if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self.closing or self.lost

    def write(self, data: Any) -> None:
        if self.closing or self.lost or not data:
            return
        self.network.send(self, bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(bytes(data) for data in list_of_data))

    def close(self) -> None:
        if self.closing or self.lost:
            return
        self.closing = True
        self.network.hang_up(self, reset=False)

    def abort(self) -> None:
        if self.lost:
            return
        self.closing = True
        self.network.hang_up(self, reset=True)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        if self.reading:
            return
        self.reading = True
        held, self.held = self.held, []
        for data in held:
            self._deliver(data)

    def is_reading(self) -> bool:
        return self.reading

    # --- what the network does to this end -----------------------------------------------------

    def _deliver(self, data: bytes) -> None:
        if self.lost or self.protocol is None:
            return
        if not self.reading:
            self.held.append(data)
            return
        self.protocol.data_received(data)

    def _arrive(self) -> None:
        callback, args = self.arrivals.popleft()
        callback(*args)

    def _lose(self, error: Exception | None) -> None:
        if self.lost:
            return
        self.lost = True
        self.closing = True
        self.held.clear()
        if self.protocol is not None:
            self.protocol.connection_lost(error)


class SimNetwork:
    """Every listener and open connection of the simulated world."""

    def __init__(self, loop: SimLoop, rng: random.Random) -> None:
        self.loop = loop
        loop.network = self
        self.rng = rng
        self.listeners: dict[tuple[str, int], Listener] = {}
        self.pipes: list[Pipe] = []  # the server end of each open connection
        self.max_latency_ms = 3
        self.next_client_port = 40000
        self.frames = 0
        self.bytes = 0

    # --- the loop's create_server / create_connection -----------------------------------------

    def listen(self, factory: Callable[[], asyncio.BaseProtocol], host: str, port: int) -> Listener:
        listener = Listener(self, factory, (host, port), current_process())
        self.listeners[(host, port)] = listener
        return listener

    async def connect(
        self, factory: Callable[[], asyncio.BaseProtocol], host: str, port: int
    ) -> tuple[asyncio.Transport, asyncio.BaseProtocol]:
        await asyncio.sleep(self._latency())  # a connect costs a round trip
        listener = self.listeners.get((host, port))
        if listener is None or listener.closed or (listener.process and listener.process.dead):
            raise ConnectionRefusedError(f"[Errno 111] Connect call failed ('{host}', {port})")
        self.next_client_port += 1
        client_end = Pipe(self, current_process(), (host, port))
        server_end = Pipe(self, listener.process, ("10.0.0.1", self.next_client_port))
        client_end.other, server_end.other = server_end, client_end
        client_protocol = factory()
        client_end.protocol = client_protocol  # type: ignore[assignment]
        client_protocol.connection_made(client_end)
        self.pipes.append(server_end)

        def accept() -> None:
            server_protocol = listener.factory()
            server_end.protocol = server_protocol  # type: ignore[assignment]
            server_protocol.connection_made(server_end)

        self._call(server_end, self.loop.time(), accept)
        return client_end, client_protocol

    # --- delivery ------------------------------------------------------------------------------

    def _latency(self) -> float:
        return self.rng.randint(1, max(1, self.max_latency_ms)) / 1000  # never 0: see below

    def _call(self, end: Pipe, when: float, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback`` at ``when`` on behalf of ``end``'s process (skipped once it died)."""
        context = end.process.context if end.process is not None else None
        self.loop.call_at(when, callback, *args, context=context)

    def send(self, sender: Pipe, data: bytes) -> None:
        receiver = sender.other
        if receiver is None or receiver.lost:
            return
        self.frames += 1
        self.bytes += len(data)
        when = max(self.loop.time() + self._latency(), receiver.next_arrival)
        receiver.next_arrival = when
        if sender.tear_next:
            sender.tear_next = False
            self._arrival(receiver, when, receiver._deliver, data[: max(1, len(data) // 2)])
            self._arrival(receiver, when, receiver._lose, ConnectionResetError("torn"))
            self._call(sender, when, sender._lose, ConnectionResetError("torn"))
            sender.closing = True
            self._forget(sender)
            return
        self._arrival(receiver, when, receiver._deliver, data)

    def _arrival(self, end: Pipe, when: float, callback: Callable[..., Any], *args: Any) -> None:
        """``callback`` at ``when``, after everything sent to ``end`` before it."""
        end.arrivals.append((callback, args))
        self._call(end, when, end._arrive)

    def hang_up(self, end: Pipe, *, reset: bool) -> None:
        """``end`` closed: the peer sees the end of the stream after what is in flight."""
        other = end.other
        now = self.loop.time()
        self._call(end, now, end._lose, None)
        if other is not None and not other.lost:
            if reset:  # what is in flight is lost with it
                self._call(other, now, other._lose, ConnectionResetError("reset by peer"))
            else:  # the end of the stream, after what is in flight
                self._arrival(other, max(now, other.next_arrival), other._lose, None)
        self._forget(end)

    def _forget(self, end: Pipe) -> None:
        for pipe in (end, end.other):
            if pipe in self.pipes:
                self.pipes.remove(pipe)

    # --- faults ----------------------------------------------------------------------------------

    def cut(self, server_end: Pipe) -> None:
        """Reset a connection: both ends lose it now, whatever is in flight."""
        for end in (server_end, server_end.other):
            if end is not None and not end.lost:
                self._call(end, self.loop.time(), end._lose, ConnectionResetError("cut"))
                end.closing = True
        self._forget(server_end)

    def tear(self, server_end: Pipe) -> None:
        """The next write of the broker on this connection arrives torn: a prefix, then reset."""
        server_end.tear_next = True

    def connections_of(self, process: Process) -> list[Pipe]:
        return [pipe for pipe in self.pipes if pipe.process is process]

    def process_died(self, process: Process) -> None:
        """A process died: its listeners are gone, its peers see their connections reset."""
        for address, listener in list(self.listeners.items()):
            if listener.process is process:
                listener.closed = True
                del self.listeners[address]
        for pipe in list(self.pipes):
            for end in (pipe, pipe.other):
                if end is not None and end.process is process and end.other is not None:
                    end.lost = True
                    peer = end.other
                    self._call(peer, self.loop.time(), peer._lose, ConnectionResetError("died"))
                    self._forget(pipe)
