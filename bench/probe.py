"""Readiness and memory probes that treat both servers alike.

Ready means a completed ApiVersions v0 round trip, the first thing every client does: an open
port alone is not enough (Kafka binds its listener long before it serves requests).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kemu.testing.kafka import (  # noqa: F401 - bench's names for them
    api_versions_ok,
    free_port,
    wait_ready,
)


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
