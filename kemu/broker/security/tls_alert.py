"""The server side of TLS, sending the fatal alert when a handshake fails.

When OpenSSL fails a handshake (a client certificate missing or untrusted, no common protocol
version), it leaves a fatal alert in the outgoing buffer for the peer. asyncio's ``SSLProtocol``
(CPython 3.11 to 3.14, gh-98078) and uvloop's copy of it close the connection without sending
it, so the client sees the connection cut short instead of the reason: a Java client missing its
certificate retries until its timeout where Kafka's SSLEngine gets it a
``SslAuthenticationException`` at once. ``AlertingTlsProtocol`` is asyncio's protocol with the
alert flushed to the socket before the close, as later CPython versions do it; it runs on a plain
TCP transport of either loop (``loop.connect_accepted_socket(lambda: protocol, sock)``).

It leans on three of asyncio's internal names (``_on_handshake_complete``, ``_outgoing``, the
transport's ``_force_close``), stable across 3.11-3.14; ``supported()`` says whether this Python
has them, and the acceptor falls back to ``ssl=`` (no alert) where it does not.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from asyncio import sslproto
from collections.abc import Callable
from typing import Any


def supported() -> bool:
    """Whether this Python's ``SSLProtocol`` has the internals the subclass relies on."""
    needed = ("_on_handshake_complete", "_process_outgoing", "_fatal_error")
    return all(hasattr(sslproto.SSLProtocol, name) for name in needed)


class _ForceClosable:
    """A TCP transport as ``SSLProtocol`` uses it: uvloop's transports have no Python-visible
    ``_force_close``, which the protocol calls on a fatal error and a shutdown timeout."""

    def __init__(self, transport: asyncio.BaseTransport) -> None:
        inner: Any = transport
        self._inner = inner
        self.write = inner.write  # the hot path, bound once

    def _force_close(self, exc: BaseException | None) -> None:
        self._inner.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class AlertingTlsProtocol(sslproto.SSLProtocol):
    """``SSLProtocol`` for the server side, flushing the alert of a failed handshake."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(_ForceClosable(transport))  # type: ignore[arg-type]

    def _on_handshake_complete(self, handshake_exc: BaseException | None) -> None:
        transport: Any = getattr(self, "_transport", None)
        if handshake_exc is not None and transport is not None:
            alert = self._outgoing.read()  # type: ignore[attr-defined]
            if alert:
                transport.write(alert)  # a few bytes: the socket takes them at once
        super()._on_handshake_complete(handshake_exc)


async def accept_tls(
    loop: asyncio.AbstractEventLoop,
    make: Callable[[], asyncio.BaseProtocol],
    sock: socket.socket,
    context: ssl.SSLContext,
    handshake_timeout_s: int,
) -> None:
    """Run the server handshake on an accepted socket, then hand the connection to ``make()``'s
    protocol; raises what the handshake raised (after sending the peer its alert)."""
    waiter: asyncio.Future[None] = loop.create_future()
    protocol = AlertingTlsProtocol(
        loop,
        make(),
        context,
        waiter,
        server_side=True,
        ssl_handshake_timeout=handshake_timeout_s,
    )
    transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock)
    try:
        await waiter
    except BaseException:
        transport.close()
        raise
