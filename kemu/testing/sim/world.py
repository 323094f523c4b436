"""The simulated kemu process: started, crashed and restarted over one data directory.

``SimKemu.boot`` runs ``KemuServer`` exactly as ``kemu serve`` does (its listeners are
``SimNetwork`` listeners, its log is the real ``SegmentLog`` on a real directory), inside a fresh
``Process``. ``crash`` kills that process at once: no callback of it runs again, its connections
reset, its descriptors close without a flush, and nothing of the old objects is reused; the next
``boot`` reads the directory through the same recovery code as a real start-up.

Storage: a process crash keeps what was written (the page cache survives a SIGKILL); a
``power_loss`` crash also loses every segment's unsynced tail. ``DiskModel`` learns what is
durable by wrapping the segment log's ``datasync``: at each sync it notes the file's size by
inode (a cleaned segment renamed into place keeps its inode, so its synced size follows it), and
a power loss cuts every ``.log`` file back to its last synced size (0 for one never synced).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kemu.storage.segment_cleaning as segment_cleaning
import kemu.storage.segments as segments
from kemu.broker.server import KemuServer, ServerOptions
from kemu.config.definitions import BrokerConfig
from kemu.testing.sim.loop import Process, SimLoop
from kemu.testing.sim.network import SimNetwork

BASE_PORT = 9092


class SimulatedCrash(BaseException):
    """Raised at a crash point to unwind the dying process's current callback (a BaseException,
    so that no ``except Exception`` of kemu catches it and carries on)."""


class DiskModel:
    """Which bytes of each segment file a power loss would keep (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.synced: dict[tuple[int, int], int] = {}  # (device, inode) -> durable size
        self.syncs = 0
        self._original: list[tuple[Any, Callable[[int], None]]] = []

    def install(self) -> None:
        # every module of the segment log that syncs, each holding its own name for it
        for module in (segments, segment_cleaning):
            self._original.append((module, module.datasync))
            module.datasync = self._datasync  # type: ignore[attr-defined]

    def uninstall(self) -> None:
        for module, original in self._original:
            module.datasync = original
        self._original = []

    def _datasync(self, descriptor: int) -> None:
        self.syncs += 1
        status = os.fstat(descriptor)
        self.synced[(status.st_dev, status.st_ino)] = status.st_size

    def _segment_files(self) -> list[Path]:
        return sorted(self.root.rglob("*.log"))

    def baseline(self) -> None:
        """After a start-up: everything on disk now is durable."""
        for path in self._segment_files():
            status = path.stat()
            self.synced[(status.st_dev, status.st_ino)] = status.st_size

    def lose_unsynced(self) -> int:
        """Cut every segment back to its synced size; returns the bytes lost."""
        lost = 0
        for path in self._segment_files():
            status = path.stat()
            durable = self.synced.get((status.st_dev, status.st_ino), 0)
            if status.st_size > durable:
                lost += status.st_size - durable
                os.truncate(path, durable)
        return lost


def broker_config(overrides: dict[str, str]) -> BrokerConfig:
    settings = {
        "kemu.kip1289.enable": "true",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": "3",
        "share.coordinator.state.topic.num.partitions": "3",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        **overrides,
    }
    return BrokerConfig(settings)


class SimKemu:
    """The kemu process of the simulation: N virtual brokers over one data directory."""

    def __init__(
        self,
        loop: SimLoop,
        network: SimNetwork,
        data_dir: Path,
        brokers: int,
        overrides: dict[str, str],
        cluster_id: str,
    ) -> None:
        self.loop = loop
        self.network = network
        self.data_dir = data_dir
        self.brokers = brokers
        self.overrides = overrides
        self.cluster_id = cluster_id
        self.disk = DiskModel(data_dir)
        self.server: KemuServer | None = None
        self.process: Process | None = None
        self.incarnation = 0
        self.on_boot: list[Callable[[KemuServer], None]] = []

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{BASE_PORT + i}" for i in range(self.brokers))

    @property
    def up(self) -> bool:
        return self.server is not None and self.process is not None and not self.process.dead

    async def boot(self) -> None:
        self.incarnation += 1
        process = Process(f"kemu#{self.incarnation}")
        self.process = process
        task = self.loop.create_task(self._start(), context=process.context)
        self.server = await task
        self.disk.baseline()

    async def _start(self) -> KemuServer:
        options = ServerOptions(
            brokers=self.brokers,
            port=BASE_PORT,
            data_dir=self.data_dir,
            config=broker_config(self.overrides),
            cluster_id=self.cluster_id,
        )
        server = KemuServer(options)
        await server.start()
        for hook in self.on_boot:
            hook(server)
        return server

    def crash(self, *, power_loss: bool = False) -> int:
        """Kill the process now; returns the bytes a power loss took (0 for a process crash)."""
        assert self.process is not None and self.server is not None
        self.process.dead = True
        self.network.process_died(self.process)
        server, self.server = self.server, None
        _close_descriptors(server)
        return self.disk.lose_unsynced() if power_loss else 0

    def runtime(self) -> Any:
        return None if self.server is None else self.server.runtime


def _close_descriptors(server: KemuServer) -> None:
    """What the kernel does for a killed process: every descriptor closes, nothing is synced."""
    for partition in server.cluster.all_partitions():
        log = partition.log
        if isinstance(log, segments.SegmentLog):
            for descriptor in (log._active_fd, *log._readers.values(), *log._unsynced):
                if descriptor >= 0:
                    with contextlib.suppress(OSError):
                        os.close(descriptor)
            log._active_fd = -1
            log._readers.clear()
            log._unsynced.clear()
    lock = server._lock
    if lock is not None:
        lock.release()
