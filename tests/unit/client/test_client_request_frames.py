"""The request frames kemu's client writes: its connection encodes each message's header once
and then only puts each request's correlation id in it, so every frame here must be the bytes
the protocol layer gives for the whole header and body (flexible headers and the older ones, a
KIP-1289 message sent under another key, a client id of more than ASCII)."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from kemu.client.connection import SIZE, BrokerConnection, ConnectionClosed
from kemu.client.producer import TXN_SHARE_ACKNOWLEDGE
from kemu.protocol import wire


class Capture:
    """A stream writer keeping what is written; its drain fails, which ends the call."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    async def drain(self) -> None:
        raise ConnectionResetError("captured")

    def close(self) -> None:
        pass


def protocol_frame(
    api_key: int, version: int, correlation_id: int, client_id: str, wire_key: int, **fields: Any
) -> bytes:
    schema = wire.request_schema(api_key, version)
    header = wire.build(
        schema.__header_schema__,
        request_api_key=wire_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    payload = wire.encode_message(header, wire.build(schema, **fields))
    return SIZE.pack(len(payload)) + payload


REQUESTS: list[tuple[int, int, int | None, dict[str, Any]]] = [
    (18, 3, None, {"client_software_name": "kemu-client", "client_software_version": "0.1.0"}),
    (3, 12, None, {"topics": (), "allow_auto_topic_creation": False}),
    (3, 4, None, {"topics": None, "allow_auto_topic_creation": True}),  # a v1 header
    (10, 4, None, {"key_type": 1, "coordinator_keys": ("tx-1",)}),
    (
        0,
        3,
        None,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout": datetime.timedelta(seconds=1),
            "topic_data": (),
        },
    ),
    (TXN_SHARE_ACKNOWLEDGE, 0, 77, {}),  # under the key a broker serves it at
]


@pytest.mark.parametrize("client_id", ["kemu-client", "clïent-ü"])
def test_each_frame_is_the_protocol_layers_bytes(client_id: str) -> None:
    async def scenario() -> list[bytes]:
        connection = BrokerConnection("127.0.0.1", 1, client_id)
        connection._loop = asyncio.get_running_loop()
        writer = Capture()
        connection._writer = writer  # type: ignore[assignment]
        for api_key, version, wire_key, fields in REQUESTS * 2:  # the second time: cached
            connection._closed = False
            with pytest.raises(ConnectionClosed):
                await connection.call(api_key, version, wire_key=wire_key, **fields)
        return writer.written

    written = asyncio.run(scenario())
    expected = [
        protocol_frame(
            key, version, correlation_id, client_id, key if served is None else served, **f
        )
        for correlation_id, (key, version, served, f) in enumerate(REQUESTS * 2, start=1)
    ]
    assert written == expected
