"""Readiness and memory probes that treat both servers alike.

Ready means a completed ApiVersions v0 round trip, the first thing every client does: an open
port alone is not enough (Kafka binds its listener long before it serves requests).
"""

from __future__ import annotations

import os
import socket
import struct
import time
from dataclasses import dataclass
from pathlib import Path

API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"


def api_versions_ok(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when the server answers ApiVersions v0 with error code 0."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
            size = struct.unpack(">i", _read_exactly(sock, 4))[0]
            payload = _read_exactly(sock, size)
    except (OSError, struct.error):
        return False
    correlation_id, error_code = struct.unpack_from(">ih", payload, 0)
    return bool(correlation_id == 1 and error_code == 0)


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            raise ConnectionError("closed mid-response")
        chunks += chunk
    return bytes(chunks)


def wait_ready(host: str, port: int, started: float, timeout: float, alive: object) -> float:
    """Seconds from ``started`` (a monotonic time) to the first good ApiVersions answer.

    ``alive`` is a callable telling whether the server process still runs, so a crashed start
    fails fast instead of waiting out the timeout.
    """
    deadline = started + timeout
    while time.monotonic() < deadline:
        if api_versions_ok(host, port, timeout=0.5):
            return time.monotonic() - started
        if callable(alive) and not alive():
            raise RuntimeError("server exited before it was ready")
        time.sleep(0.01)
    raise TimeoutError(f"no ApiVersions answer on {host}:{port} within {timeout:.0f}s")


@dataclass(frozen=True)
class Memory:
    rss_mb: float  # resident now
    peak_mb: float  # high-water mark of resident memory


def memory_of(pid: int) -> Memory:
    fields: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024  # kB -> MiB
    return Memory(fields.get("VmRSS", 0.0), fields.get("VmHWM", 0.0))


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used so far."""
    user, system = cpu_split(pid)
    return user + system


def cpu_split(pid: int) -> tuple[float, float]:
    """User and system CPU seconds the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick  # utime, stime: fields 14 and 15


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
