"""kemu in the test's own process: a ``KemuServer`` on an event loop in a background thread.

Real client libraries connect to ``bootstrap`` as to a kemu started by the CLI, without the
second or two a subprocess takes to start, and a test can look inside (``runtime``, ``cluster``)
for white-box assertions, through ``call`` so that the look happens on the server's own loop.
What needs a real process (SIGKILL, a data dir reopened by another process, the CLI itself)
stays with ``kemu_factory`` (kemu/testing/plugin.py).

Fixtures (beside the plugin's): ``kemu_inprocess`` (a fresh 3-broker kemu for one test) and
``kemu_inprocess_factory`` (your own broker count and overrides).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from kemu.config.definitions import BrokerConfig
from kemu.config.timing import DEFAULT_PROFILE, profile_properties
from kemu.testing.plugin import free_port_block

if TYPE_CHECKING:
    from kemu.broker.server import KemuServer
    from kemu.cluster.context import Runtime
    from kemu.cluster.model import Cluster

T = TypeVar("T")
START_ATTEMPTS = 5  # a free port block can be taken by another process before kemu binds it


class InProcessKemu:
    """One in-process kemu; ``start`` returns it, ``stop`` closes it and ends its thread."""

    def __init__(
        self,
        brokers: int = 3,
        overrides: list[str] | tuple[str, ...] = (),
        data_dir: Path | None = None,
        timing: str = DEFAULT_PROFILE,
    ) -> None:
        self.brokers = brokers
        self.timing = timing  # as kemu serve --timing: "fast" (its default) or "kafka"
        self.overrides = list(overrides)
        self.data_dir = data_dir
        self.bootstrap = ""
        self._server: KemuServer | None = None
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
        from kemu.broker.server import KemuServer, ListenError, ServerOptions

        self._thread.start()
        config = BrokerConfig.load(None, self.overrides, base=profile_properties(self.timing))
        for attempt in range(START_ATTEMPTS):
            options = ServerOptions(
                brokers=self.brokers,
                port=free_port_block(self.brokers),
                data_dir=self.data_dir,
                config=config,
            )

            async def started(options: ServerOptions = options) -> KemuServer:
                server = KemuServer(options)
                try:
                    await server.start()
                except BaseException:
                    await server.close()
                    raise
                return server

            try:
                self._server = self.run(started())
                break
            except ListenError:
                if attempt == START_ATTEMPTS - 1:
                    raise
        self.bootstrap = self.server.bootstrap_servers
        return self

    def stop(self) -> None:
        if self._server is not None:
            self.run(self._server.close())
            self._server = None
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
        if not self._loop.is_running() and not self._loop.is_closed():
            self._loop.close()


@pytest.fixture
def kemu_inprocess_factory() -> Iterator[type[InProcessKemu]]:
    started: list[InProcessKemu] = []

    class Factory(InProcessKemu):
        def start(self) -> InProcessKemu:
            started.append(self)
            return super().start()

    yield Factory
    for kemu in started:
        kemu.stop()


@pytest.fixture
def kemu_inprocess(kemu_inprocess_factory: type[InProcessKemu]) -> InProcessKemu:
    return kemu_inprocess_factory(brokers=3).start()
