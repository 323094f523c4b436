"""A connection closed while a request is still in ``drain`` (the simulation found it with a
stalled client, seed 12 x 10,000 at step 5991): the call raises ConnectionClosed, and the
response future the reader failed is not left "never retrieved"."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from kemu.client.connection import BrokerConnection, ConnectionClosed

API_VERSIONS = 18


async def test_a_close_during_drain_leaves_no_unretrieved_future() -> None:
    async def close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.close()

    server = await asyncio.start_server(close_at_once, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    connection = BrokerConnection("127.0.0.1", port, "test")
    connection._reader, connection._writer = await asyncio.open_connection("127.0.0.1", port)
    connection._loop = loop
    reading = loop.create_task(connection._read_responses())

    async def drain_after_the_close() -> None:
        await reading  # the reader has failed the pending future by now
        raise ConnectionResetError("reset")

    connection._writer.drain = drain_after_the_close  # type: ignore[method-assign]
    with pytest.raises(ConnectionClosed):
        await connection.call(
            API_VERSIONS, 3, client_software_name="t", client_software_version="0"
        )
    connection.close()
    server.close()
    await server.wait_closed()
    gc.collect()
    await asyncio.sleep(0)
    assert [c["message"] for c in reported] == []
