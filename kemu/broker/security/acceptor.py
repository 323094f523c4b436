"""The listening side of an SSL or SASL_SSL port: accept, TLS handshake, then a ``Connection``.

kemu accepts the TCP connection itself and runs the handshake with
``loop.connect_accepted_socket(..., ssl=...)``, which raises when the handshake fails. Passing
``ssl=`` to ``create_server`` would drop such failures silently (asyncio and uvloop log them
only in debug mode); here each one is a log line with the peer and the reason — a plaintext
client on a TLS port, an untrusted or missing client certificate, a timeout — and only that
connection is closed, after the client was sent OpenSSL's fatal alert (``tls_alert``, which
neither asyncio nor uvloop sends), as Kafka does. ``TlsServer`` offers what ``KemuServer`` uses
of ``asyncio.Server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable

import structlog

from kemu.broker.connection import Connection
from kemu.broker.security.tls_alert import accept_tls, supported
from kemu.cluster.listeners import Listener

log = structlog.get_logger("kemu.tls")

HANDSHAKE_TIMEOUT_S = 10
ALERTS = supported()  # a failed handshake sends the client its TLS alert (tls_alert.py)


class TlsServer:
    def __init__(
        self,
        listener: Listener,
        context: ssl.SSLContext,
        make: Callable[[], Connection],
        sock: socket.socket,
    ) -> None:
        self.listener = listener
        self.context = context
        self.make = make
        self.sock = sock
        self._handshakes: set[asyncio.Task[None]] = set()
        self._accepting = asyncio.get_running_loop().create_task(self._accept())

    @classmethod
    async def start(
        cls,
        listener: Listener,
        context: ssl.SSLContext,
        make: Callable[[], Connection],
        host: str,
        port: int,
        backlog: int,
    ) -> TlsServer:
        """Bind ``host:port`` (OSError as ``create_server`` raises it) and start accepting;
        ``backlog`` is ``socket.listen.backlog.size``."""
        sock = socket.create_server((host, port), backlog=backlog)
        sock.setblocking(False)
        return cls(listener, context, make, sock)

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                client, address = await loop.sock_accept(self.sock)
            except OSError as error:
                if self.sock.fileno() < 0:
                    return
                log.warning("accept_failed", listener=self.listener.name, reason=str(error))
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._handshake(client, address))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, client: socket.socket, address: object) -> None:
        peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
        loop = asyncio.get_running_loop()
        try:
            if ALERTS:
                await accept_tls(loop, self.make, client, self.context, HANDSHAKE_TIMEOUT_S)
            else:
                await loop.connect_accepted_socket(
                    self.make, client, ssl=self.context, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S
                )
        except (ssl.SSLError, OSError, ConnectionError, TimeoutError) as error:
            log.warning(
                "tls_handshake_failed",
                peer=peer,
                listener=self.listener.name,
                reason=str(error) or type(error).__name__,
            )
            client.close()

    def close(self) -> None:
        self._accepting.cancel()
        for task in self._handshakes:
            task.cancel()
        with contextlib.suppress(OSError):
            self.sock.close()

    async def wait_closed(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await self._accepting
