"""pytest plugin: start kemu the way a user does (the CLI, in a subprocess) and hand tests its
bootstrap servers.

Fixtures:
- ``kemu_cluster``: a fresh 3-broker in-memory kemu for one test.
- ``kemu_shared``: one 3-broker kemu shared by a whole test session (use unique topic names).
- ``kemu_factory``: start kemu with your own options (``data_dir``, ``brokers``, overrides),
  and SIGKILL / restart it.

Every kemu started here runs ``kemu serve``'s default timing profile (``--timing fast``: short
group timers, docs/configuration.md, "What `--timing fast` changes"); ``timing="kafka"`` starts
it with Kafka 4.4.0's code defaults instead, for tests that compare kemu with a real Kafka.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kemu.control.client import ControlClient

READY_PREFIX = "kemu ready bootstrap="
# Bounds for failing, not measurements: a loaded machine running tests on several workers can
# take many seconds to start a Python process.
START_TIMEOUT_S = 60.0
PORT_ATTEMPTS = 3
LISTENER_PREFIX = "kemu listener "  # "kemu listener NAME bootstrap=host:port,..."
TLS_PREFIX = "kemu tls "  # "kemu tls ca=PATH client_cert=PATH client_key=PATH"


def _listener_count(overrides: list[str]) -> int:
    """How many listeners an override list configures (each takes a block of ports)."""
    for override in overrides:
        key, _, value = override.partition("=")
        if key.strip() == "listeners":
            return max(1, len([part for part in value.split(",") if part.strip()]))
    return 1


# Ports for kemus started here come from below Linux's ephemeral range (32768-60999 by
# default), so no client's outgoing connection can take a port a kemu is about to bind, or to
# bind again when it restarts on the same ports after a kill; under pytest-xdist each worker
# draws from its own slice, so parallel workers never pick the same block either.
PORT_RANGE = (20000, 32700)


def _port_slice() -> tuple[int, int]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker) if worker.isdigit() else 0
    span = (PORT_RANGE[1] - PORT_RANGE[0]) // max(workers, 1)
    low = PORT_RANGE[0] + (index % max(workers, 1)) * span
    return low, low + span


_next_port: dict[tuple[int, int], int] = {}


def free_port_block(count: int) -> int:
    """A first port such that ``count`` consecutive ports are free on 127.0.0.1, taken in turn
    from this process's slice of PORT_RANGE (starting where the process id says, so two test
    sessions side by side start apart), never the same block twice in a row."""
    low, high = _port_slice()
    for _ in range(200):
        first = _next_port.get((low, high), low + os.getpid() % max(high - low - count, 1))
        if first + count > high:
            first = low
        _next_port[(low, high)] = first + count
        sockets = []
        try:
            for port in range(first, first + count):
                candidate = socket.socket()
                sockets.append(candidate)
                candidate.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for candidate in sockets:
                candidate.close()
    raise RuntimeError("no block of free ports found")


class _ExitedBeforeReady(RuntimeError):
    """kemu exited before its ready line (e.g. its port was taken)."""


@dataclass
class KemuProcess:
    brokers: int = 3
    data_dir: Path | None = None
    overrides: list[str] = field(default_factory=list)
    extra_args: list[str] = field(default_factory=list)
    port: int = 0
    process: subprocess.Popen[str] | None = None
    bootstrap: str = ""
    log_path: Path | None = None
    env: dict[str, str] = field(default_factory=dict)  # e.g. KEMU_CRASH_AT for crash tests
    # The control API (docs/control.md): with_control serves it on a free port; clock="virtual"
    # implies it. ``.control`` is then a ControlClient (add_fault, advance, share_state, ...).
    with_control: bool = False
    clock: str = "real"
    control_url: str = ""
    # With ``listeners`` configured: listener name -> its bootstrap servers (first is .bootstrap)
    listeners: dict[str, str] = field(default_factory=dict)
    # With --tls-self-signed: "ca", "client_cert", "client_key" -> PEM file paths
    tls: dict[str, str] = field(default_factory=dict)
    timing: str = "fast"  # kemu serve --timing: "fast" (its default) or "kafka"

    def start(self, timeout: float = START_TIMEOUT_S) -> KemuProcess:
        if self.port:
            return self._start(timeout)
        # A free block can be taken between the probe and kemu's bind (another test's kemu, a
        # client's outgoing connection): a kemu that exits before it is ready gets a new block.
        for attempt in range(PORT_ATTEMPTS):
            # A listener written with port 0 takes the block after the previous one's.
            self.port = free_port_block(self.brokers * _listener_count(self.overrides))
            try:
                return self._start(timeout)
            except _ExitedBeforeReady:
                if attempt == PORT_ATTEMPTS - 1:
                    raise
                self.port = 0
        raise AssertionError("unreachable")

    def _start(self, timeout: float) -> KemuProcess:
        command = [
            sys.executable,
            "-m",
            "kemu.cli",
            "serve",
            "--brokers",
            str(self.brokers),
            "--port",
            str(self.port),
            "--timing",
            self.timing,
        ]
        if self.data_dir is not None:
            command += ["--data-dir", str(self.data_dir)]
        for override in self.overrides:
            command += ["--override", override]
        if self.with_control:
            command += ["--control-port", "0"]
        if self.clock != "real":
            command += ["--clock", self.clock]
        command += self.extra_args
        stderr = open(self.log_path, "a") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
        )
        ready = threading.Event()
        lines: list[str] = []

        def watch() -> None:
            assert self.process is not None and self.process.stdout is not None
            for line in self.process.stdout:
                lines.append(line)
                if line.startswith(LISTENER_PREFIX):
                    name, _, bootstrap = line[len(LISTENER_PREFIX) :].partition(" bootstrap=")
                    self.listeners[name] = bootstrap.strip()
                elif line.startswith(TLS_PREFIX):
                    for item in line[len(TLS_PREFIX) :].split():
                        key, _, value = item.partition("=")
                        self.tls[key] = value
                if line.startswith(READY_PREFIX):
                    fields = line[len(READY_PREFIX) :].split()
                    self.bootstrap = fields[0]
                    for extra in fields[1:]:
                        if extra.startswith("control="):
                            self.control_url = extra[len("control=") :]
                    ready.set()

        threading.Thread(target=watch, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.05):
            exited = self.process.poll() is not None
            if exited or time.monotonic() > deadline:
                self.stop()
                why = "exited" if exited else f"not ready after {timeout:.0f} s"
                error = _ExitedBeforeReady if exited else RuntimeError
                raise error(
                    f"kemu did not become ready ({why}): {''.join(lines)}{self._log_tail()}"
                )
        return self

    def _log_tail(self, lines: int = 5) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "".join(self.log_path.read_text(errors="replace").splitlines(True)[-lines:])

    def kill(self) -> None:
        """SIGKILL: no chance to flush or close anything."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def restart(self) -> KemuProcess:
        self.kill()
        return self.start()

    @property
    def control(self) -> ControlClient:
        """The control API's client; needs ``with_control=True`` or ``clock="virtual"``."""
        if not self.control_url:
            raise RuntimeError("kemu was started without a control port: pass with_control=True")
        return ControlClient(self.control_url)

    def stop_broker(self, node_id: int) -> dict[str, Any]:
        """Stop one virtual broker (needs the control port): its port refuses, its leaderships
        and coordinators move to the others (docs/control.md, "Stopping a broker")."""
        stopped: dict[str, Any] = self.control.broker_stop(node_id)
        return stopped

    def start_broker(self, node_id: int, *, elect_preferred: bool = False) -> dict[str, Any]:
        """Start it again as a follower; ``elect_preferred`` gives its leaderships back."""
        return self.control.broker_start(node_id, elect_preferred=elect_preferred)

    @property
    def first_broker(self) -> str:
        return self.bootstrap.split(",")[0]


@pytest.fixture
def kemu_factory(tmp_path: Path) -> Iterator[type[KemuProcess]]:
    started: list[KemuProcess] = []

    class Factory(KemuProcess):
        def start(self, timeout: float = START_TIMEOUT_S) -> KemuProcess:
            if self.log_path is None:
                self.log_path = tmp_path / f"kemu-{len(started)}.log"
            started.append(self)
            return super().start(timeout)

    yield Factory
    for process in started:
        process.stop()


@pytest.fixture
def kemu_cluster(kemu_factory: type[KemuProcess]) -> KemuProcess:
    return kemu_factory(brokers=3).start()


@pytest.fixture(scope="session")
def kemu_shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuProcess]:
    log_path = tmp_path_factory.mktemp("kemu-shared") / "kemu.log"
    process = KemuProcess(brokers=3, log_path=log_path).start()
    yield process
    process.stop()
