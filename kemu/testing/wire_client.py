"""A blocking client that speaks the Kafka wire protocol with kemu's own codec: any request of
any version, built from its schema by field names, to a chosen broker, for tests that need a
request no client library sends (a draft API, a malformed combination, one exact version), and
for comparing kemu with a real Kafka request by request.

``WireClient(bootstrap).call(node_id, api_key, version, **fields)`` keeps one socket per broker
(node ids are positions in ``bootstrap``, from 1); ``send_once(address, body)`` opens a socket for
one request built with ``build`` / ``nested``. The client id is the caller's.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kemu.protocol import wire


def build(api_key: int, version: int, **fields: Any) -> Any:
    """A request body of ``api_key`` at ``version``."""
    return wire.build(wire.request_schema(api_key, version), **fields)


def nested(api_key: int, version: int, class_name: str, /, **fields: Any) -> Any:
    """A nested structure of a request schema (e.g. a topic entry), by its class name."""
    return wire.build(getattr(wire.request_module(api_key, version), class_name), **fields)


def exchange(
    sock: socket.socket, body: Any, correlation: int, client_id: str | None = "kemu-test"
) -> Any:
    """Send one request on ``sock`` and read its decoded response."""
    schema = type(body)
    api_key, version = schema.__api_key__, schema.__version__
    sock.sendall(wire.encode_request_frame(body, correlation, client_id))
    (size,) = struct.unpack(">i", read_exactly(sock, 4))
    answered, response = wire.decode_response(api_key, version, read_exactly(sock, size))
    assert answered == correlation, f"correlation id {answered}, expected {correlation}"
    return response


def read_exactly(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return bytes(data)


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def send_once(
    address: str, body: Any, timeout: float = 30.0, client_id: str | None = "kemu-test"
) -> Any:
    """A built request on a fresh connection to ``address``; its decoded response."""
    with socket.create_connection(split_address(address), timeout=timeout) as sock:
        return exchange(sock, body, 1, client_id)


class WireClient:
    """Blocking requests to the brokers of ``bootstrap``, one socket per broker."""

    def __init__(
        self, bootstrap: str, client_id: str | None = "kemu-test", timeout: float = 15.0
    ) -> None:
        self.addresses = {
            index + 1: split_address(address) for index, address in enumerate(bootstrap.split(","))
        }
        self.client_id = client_id
        self.timeout = timeout
        self.sockets: dict[int, socket.socket] = {}
        self.correlation = 0

    def call(self, node_id: int, api_key: int, version: int, **fields: Any) -> Any:
        return self.send_body(node_id, build(api_key, version, **fields))

    def send_body(self, node_id: int, body: Any) -> Any:
        sock = self.sockets.get(node_id)
        if sock is None:
            sock = self.sockets[node_id] = socket.create_connection(
                self.addresses[node_id], timeout=self.timeout
            )
        self.correlation += 1
        return exchange(sock, body, self.correlation, self.client_id)

    def nested(self, api_key: int, version: int, class_name: str, /, **fields: Any) -> Any:
        return nested(api_key, version, class_name, **fields)

    def close(self) -> None:
        for sock in self.sockets.values():
            sock.close()
        self.sockets.clear()
