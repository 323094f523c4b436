"""Many client connections to one kemu (figures: ``python -m bench.connections``,
docs/reliability.md).

* kemu lifts its soft limit on open files to the hard one, as the JVM does for Kafka
  (MaxFDLimit): started with a soft limit of 1,024, it still holds 2,000 idle connections and
  answers each of them.
* The listen backlog (``socket.listen.backlog.size``, 1,024 in kemu): while kemu's event loop
  cannot run (here SIGSTOP), 600 connects complete in the kernel's queue instead of having their
  SYNs dropped, and each is answered once kemu runs again.
"""

from __future__ import annotations

import asyncio
import resource
import selectors
import signal
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from kemu.testing.plugin import KemuProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.process]

API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 7, 4) + b"many"
FRAME = struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0
IDLE = 2000
WHILE_STOPPED = 600


@pytest.fixture
def open_files() -> Iterator[int]:
    """This test process may open as many files as its hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < IDLE + 500:
        pytest.skip(f"hard limit on open files is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    yield hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def start_kemu(tmp_path: Path, soft_limit: int | None = None) -> KemuProcess:
    kemu = KemuProcess(brokers=1, log_path=tmp_path / "kemu.log")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft_limit is not None:  # the child inherits it, as from a shell with ulimit -Sn
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft_limit, hard))
    try:
        kemu.start(timeout=120)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return kemu


async def ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    writer.write(FRAME)
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return bool(struct.unpack_from(">ih", await reader.readexactly(size), 0) == (7, 0))


async def hold_and_ask(port: int, count: int) -> tuple[int, int]:
    """Open ``count`` connections (100 at a time), each answering ApiVersions; then ask every
    one of them again while all are open. Returns (answered first, answered again)."""
    gate = asyncio.Semaphore(100)
    opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def one() -> bool:
        async with gate:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                opened.append((reader, writer))
                return await asyncio.wait_for(ask(reader, writer), 120)
            except (OSError, asyncio.IncompleteReadError, TimeoutError):
                return False

    first = sum(await asyncio.gather(*(one() for _ in range(count))))

    async def again(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        async with gate:
            try:
                return await asyncio.wait_for(ask(reader, writer), 120)
            except (OSError, asyncio.IncompleteReadError, TimeoutError):
                return False

    second = sum(await asyncio.gather(*(again(r, w) for r, w in opened)))
    for _, writer in opened:
        writer.close()
    return first, second


def test_two_thousand_idle_connections_are_held_with_a_soft_limit_of_1024(
    tmp_path: Path, open_files: int
) -> None:
    kemu = start_kemu(tmp_path, soft_limit=1024)
    try:
        assert kemu.process is not None
        limits = Path(f"/proc/{kemu.process.pid}/limits").read_text()
        soft = next(line.split()[3] for line in limits.splitlines() if "open files" in line)
        assert int(soft) == open_files  # lifted to the hard limit
        first, second = asyncio.run(hold_and_ask(kemu.port, IDLE))
        assert (first, second) == (IDLE, IDLE)
        assert kemu.process.poll() is None
    finally:
        kemu.stop()


def test_connects_wait_in_the_listen_backlog_while_kemu_cannot_run(
    tmp_path: Path, open_files: int
) -> None:
    if int(Path("/proc/sys/net/core/somaxconn").read_text()) < WHILE_STOPPED:
        pytest.skip("net.core.somaxconn caps every listen backlog below the test's connects")
    kemu = start_kemu(tmp_path)
    assert kemu.process is not None
    sockets: list[socket.socket] = []
    try:
        kemu.process.send_signal(signal.SIGSTOP)
        selector = selectors.DefaultSelector()
        for _ in range(WHILE_STOPPED):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", kemu.port))
            selector.register(sock, selectors.EVENT_WRITE)
            sockets.append(sock)
        connected: set[socket.socket] = set()
        # A connect whose SYN was dropped (queue full) stays pending; one in the queue is
        # writable at once. The wait only bounds the test: nothing here is timed.
        for _ in range(50):
            for key, _ in selector.select(timeout=0.2):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                selector.unregister(sock)
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    connected.add(sock)
            if len(connected) == WHILE_STOPPED:
                break
        assert len(connected) == WHILE_STOPPED
        kemu.process.send_signal(signal.SIGCONT)
        answered = 0
        for sock in sockets:
            sock.setblocking(True)
            sock.settimeout(120)
            sock.sendall(FRAME)
            header = sock.recv(4, socket.MSG_WAITALL)
            size = struct.unpack(">i", header)[0]
            payload = sock.recv(size, socket.MSG_WAITALL)
            answered += struct.unpack_from(">ih", payload, 0) == (7, 0)
        assert answered == WHILE_STOPPED
    finally:
        kemu.process.send_signal(signal.SIGCONT)
        for sock in sockets:
            sock.close()
        kemu.stop()
