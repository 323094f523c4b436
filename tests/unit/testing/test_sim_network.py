"""The simulated network keeps each direction's bytes in send order."""

from __future__ import annotations

import asyncio
import random

from kemu.testing.sim.loop import SimLoop
from kemu.testing.sim.network import SimNetwork


class _Recorder(asyncio.Protocol):
    def __init__(self) -> None:
        self.received = bytearray()
        self.lost = False

    def data_received(self, data: bytes) -> None:
        self.received += data

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


def test_writes_arrive_in_send_order_when_their_arrivals_tie() -> None:
    # Each write draws a latency of 1-3 ms but never arrives before the one sent before it, so
    # many are due at the same instant; the loop's timer heap runs those in no set order, which
    # delivered a pipelined producer's batches to the broker out of order (sequence 1 before 0).
    loop = SimLoop()
    network = SimNetwork(loop, random.Random(10))
    server = _Recorder()
    network.listen(lambda: server, "broker", 9092)
    sent = [f"frame-{i:03d};".encode() for i in range(200)]

    async def talk() -> None:
        transport, _ = await network.connect(_Recorder, "broker", 9092)
        for frame in sent:
            transport.write(frame)
            if frame.endswith(b"7;"):
                await asyncio.sleep(0.001)
        transport.close()
        await asyncio.sleep(1)

    loop.run_until_complete(talk())
    assert bytes(server.received) == b"".join(sent)
    assert server.lost  # the end of the stream came after the bytes in flight
    loop.bury()
