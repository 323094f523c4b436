"""``--port 0``: a block of consecutive free ports chosen by the operating system.

kemu's brokers listen on consecutive ports (broker i on ``port + i - 1``, one block per
listener), so port 0 cannot be handed to each bind as Kafka's ``listeners=PLAINTEXT://:0`` does
for its one broker: the first port is asked of the OS and the ones after it are checked free.
"""

from __future__ import annotations

import socket

ATTEMPTS = 200


def free_port_block(host: str, count: int) -> int:
    """A first port such that ``count`` consecutive ports are free to bind on ``host``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    bind_host = host or ("::" if family == socket.AF_INET6 else "0.0.0.0")
    for _ in range(ATTEMPTS):
        with socket.socket(family) as probe:
            probe.bind((bind_host, 0))
            first: int = probe.getsockname()[1]
        if first + count > 65535:
            continue
        if _all_free(family, bind_host, range(first, first + count)):
            return first
    raise OSError(f"no block of {count} free consecutive ports on {bind_host}")


def _all_free(family: socket.AddressFamily, host: str, ports: range) -> bool:
    opened: list[socket.socket] = []
    try:
        for port in ports:
            candidate = socket.socket(family)
            opened.append(candidate)
            candidate.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            candidate.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        for candidate in opened:
            candidate.close()
