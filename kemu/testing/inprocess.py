"""kemu in the test's own process: a ``KemuServer`` on an event loop in a background thread.

Real client libraries connect to ``bootstrap`` as to a kemu started by the CLI, without the
second or two a subprocess takes to start, and a test can look inside (``runtime``, ``cluster``)
for white-box assertions, through ``call`` so that the look happens on the server's own loop.
What needs a real process (SIGKILL, a data dir reopened by another process, the CLI itself)
stays with ``kemu_factory`` (kemu/testing/plugin.py).

Its options and attributes follow ``KemuProcess`` (kemu/testing/plugin.py), so that a module moves
from one to the other by changing its fixture: ``with_control`` / ``clock="virtual"`` serve the
control API (``control_url``, ``control``, ``stop_broker``), ``listeners`` configured in the
overrides give ``listeners`` (name -> bootstrap), ``tls_self_signed`` is ``--tls-self-signed``
(``tls``: the CA and a client certificate), ``cluster_id`` is ``--cluster-id``, and ``log_path``
receives kemu's log as ``kemu serve`` writes it (``json_logs``: as with ``--json-logs``;
kemu/testing/inprocess_logs.py).

Fixtures (beside the plugin's): ``kemu_inprocess`` (a fresh 3-broker kemu for one test),
``kemu_inprocess_factory`` (your own broker count and overrides) and ``kemu_inprocess_shared``
(one 3-broker kemu for the whole session, as the plugin's ``kemu_shared``).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from kemu.config.definitions import BrokerConfig
from kemu.config.timing import DEFAULT_PROFILE, profile_properties
from kemu.control.cli import start_control, use_virtual_clock
from kemu.control.client import ControlClient
from kemu.testing import inprocess_logs
from kemu.testing.plugin import free_port_block

if TYPE_CHECKING:
    from kemu.broker.server import KemuServer
    from kemu.cluster.context import Runtime
    from kemu.cluster.model import Cluster
    from kemu.control.http import ControlServer

T = TypeVar("T")
START_ATTEMPTS = 5  # a free port block can be taken by another process before kemu binds it
CLOSE_TIMEOUT_S = 10.0  # a bound for failing, not a measurement


class InProcessKemu:
    """One in-process kemu; ``start`` returns it, ``stop`` closes it and ends its thread."""

    def __init__(
        self,
        brokers: int = 3,
        overrides: list[str] | tuple[str, ...] = (),
        data_dir: Path | None = None,
        timing: str = DEFAULT_PROFILE,
        *,
        with_control: bool = False,
        clock: str = "real",
        cluster_id: str | None = None,
        tls_self_signed: bool = False,
        log_path: Path | None = None,
        json_logs: bool = False,
    ) -> None:
        self.brokers = brokers
        self.timing = timing  # as kemu serve --timing: "fast" (its default) or "kafka"
        self.overrides = list(overrides)
        self.data_dir = data_dir
        self.with_control = with_control  # clock="virtual" implies it, as in kemu serve
        self.clock = clock
        self.cluster_id = cluster_id
        self.tls_self_signed = tls_self_signed
        self.log_path = log_path
        self.json_logs = json_logs
        self.bootstrap = ""
        self.control_url = ""
        # With ``listeners`` configured: listener name -> its bootstrap servers (first: .bootstrap)
        self.listeners: dict[str, str] = {}
        # With tls_self_signed: "ca", "client_cert", "client_key" -> PEM file paths
        self.tls: dict[str, str] = {}
        self._tls_directory: Path | None = None  # a temporary one, without a data dir
        self._server: KemuServer | None = None
        self._control: ControlServer | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="kemu-inprocess", daemon=True
        )

    @property
    def server(self) -> KemuServer:
        if self._server is None:
            raise RuntimeError("kemu is not started")
        return self._server

    @property
    def runtime(self) -> Runtime:
        return self.server.runtime

    @property
    def cluster(self) -> Cluster:
        return self.server.cluster

    @property
    def first_broker(self) -> str:
        return self.bootstrap.split(",")[0]

    @property
    def control(self) -> ControlClient:
        """The control API's client; needs ``with_control=True`` or ``clock="virtual"``."""
        if not self.control_url:
            raise RuntimeError("kemu was started without a control port: pass with_control=True")
        return ControlClient(self.control_url)

    def stop_broker(self, node_id: int) -> dict[str, Any]:
        """Stop one virtual broker (needs the control port), as ``KemuProcess.stop_broker``."""
        stopped: dict[str, Any] = self.control.broker_stop(node_id)
        return stopped

    def start_broker(self, node_id: int, *, elect_preferred: bool = False) -> dict[str, Any]:
        """Start it again as a follower; ``elect_preferred`` gives its leaderships back."""
        return self.control.broker_start(node_id, elect_preferred=elect_preferred)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        """Run ``coroutine`` on kemu's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def call(self, function: Callable[[], T], timeout: float = 60.0) -> T:
        """Call ``function`` on kemu's loop (between two of its steps) and return its result."""
        done: Future[T] = Future()

        def step() -> None:
            try:
                done.set_result(function())
            except BaseException as error:  # handed to the caller
                done.set_exception(error)

        self._loop.call_soon_threadsafe(step)
        return done.result(timeout)

    def start(self) -> InProcessKemu:
        self._thread.start()
        assert self._thread.ident is not None
        inprocess_logs.route(self._thread.ident, self.log_path, self.json_logs)
        try:
            self._start()
        except BaseException:
            self.stop()  # its thread and its log's routing too
            raise
        return self

    def _start(self) -> None:
        from kemu.broker.server import KemuServer, ListenError, ServerOptions

        config = BrokerConfig.load(None, self.overrides, base=profile_properties(self.timing))
        if self.tls_self_signed:
            self._self_signed(config)
        # as kemu serve's arguments, for the control plane's own start-up code
        serve_args = argparse.Namespace(
            clock=self.clock,
            control_port=0 if self.with_control else None,
            control_host="127.0.0.1",
        )
        for attempt in range(START_ATTEMPTS):
            options = ServerOptions(
                brokers=self.brokers,
                port=free_port_block(self.brokers * _listener_count(config)),
                data_dir=self.data_dir,
                config=config,
                cluster_id=self.cluster_id,
            )

            async def started(
                options: ServerOptions = options,
            ) -> tuple[KemuServer, ControlServer | None]:
                server = KemuServer(options)
                use_virtual_clock(server, serve_args)
                control = await start_control(server, serve_args)
                try:
                    await server.start()
                except BaseException:
                    if control is not None:
                        await control.close()
                    await server.close()
                    raise
                return server, control

            try:
                self._server, self._control = self.run(started())
                break
            except ListenError:
                if attempt == START_ATTEMPTS - 1:
                    raise
        self.bootstrap = self.server.bootstrap_servers
        if self._control is not None:
            self.control_url = self._control.url
        if config.supplied("listeners") is not None:
            self.listeners = self.server.listener_bootstraps()

    def _self_signed(self, config: BrokerConfig) -> None:
        """As ``kemu serve --tls-self-signed``: a CA and certificates (in DATA_DIR/tls, else a
        temporary directory), served where no keystore or truststore is configured."""
        from kemu.broker.security.tls import self_signed, self_signed_defaults, write_keystore

        if self.data_dir is not None:
            directory = self.data_dir / "tls"
        else:
            directory = self._tls_directory = Path(tempfile.mkdtemp(prefix="kemu-tls-"))
        paths = self_signed(directory)
        write_keystore(paths)
        for name, value in self_signed_defaults(paths).items():
            config.static.setdefault(name, value)
        config.static.setdefault("listeners", "SSL://:0")
        self.tls = {
            "ca": str(paths.ca),
            "client_cert": str(paths.client_chain),
            "client_key": str(paths.client_key),
        }

    def stop(self) -> None:
        if self._control is not None:
            self.run(self._control.close())
            self._control = None
        if self._server is not None:
            self.run(_close(self._server))
            self._server = None
        if self._thread.ident is not None:
            inprocess_logs.unroute(self._thread.ident)
        if self._tls_directory is not None:
            shutil.rmtree(self._tls_directory, ignore_errors=True)
            self._tls_directory = None
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
        if not self._loop.is_running() and not self._loop.is_closed():
            self._loop.close()


async def _close(server: KemuServer) -> None:
    """Close ``server`` as the end of its process would: every client connection cut, then the
    server closed, then what is left of its tasks cancelled (a closed loop would find them
    pending, and clients would keep connections to a kemu that is gone)."""
    from kemu.broker.faults import fault_table

    def cut() -> None:
        connections = fault_table(server.runtime).connections
        for node_id in list(connections):
            for connection in list(connections[node_id]):
                connection.abort()

    cut()
    await server.close()
    cut()  # those accepted while it closed (its listening sockets are closed now)
    current = asyncio.current_task()
    leftovers = [task for task in asyncio.all_tasks() if task is not current]
    for task in leftovers:
        task.cancel()
    if leftovers:
        await asyncio.wait(leftovers, timeout=CLOSE_TIMEOUT_S)


def _listener_count(config: BrokerConfig) -> int:
    """How many listeners ``config`` configures (each takes a block of ports, one per broker)."""
    value = config.supplied("listeners")
    if value is None:
        return 1
    return max(1, len([part for part in value.split(",") if part.strip()]))


@pytest.fixture
def kemu_inprocess_factory(tmp_path: Path) -> Iterator[type[InProcessKemu]]:
    """Start in-process kemus with your own options; each writes its log under ``tmp_path``
    unless given a ``log_path`` (as ``kemu_factory``'s do), and stops after the test."""
    started: list[InProcessKemu] = []

    class Factory(InProcessKemu):
        def start(self) -> InProcessKemu:
            if self.log_path is None:
                self.log_path = tmp_path / f"kemu-inprocess-{len(started)}.log"
            started.append(self)
            return super().start()

    yield Factory
    for kemu in started:
        kemu.stop()


@pytest.fixture
def kemu_inprocess(kemu_inprocess_factory: type[InProcessKemu]) -> InProcessKemu:
    return kemu_inprocess_factory(brokers=3).start()


@pytest.fixture(scope="session")
def kemu_inprocess_shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    """One 3-broker in-process kemu for the whole session (per worker), as ``kemu_shared``: its
    tests use unique topic and group names."""
    log_path = tmp_path_factory.mktemp("kemu-inprocess-shared") / "kemu.log"
    kemu = InProcessKemu(brokers=3, log_path=log_path).start()
    yield kemu
    kemu.stop()
