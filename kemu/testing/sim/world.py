"""The simulated kemu process: started, crashed and restarted over one data directory.

``SimKemu.boot`` runs ``KemuServer`` exactly as ``kemu serve`` does (its listeners are
``SimNetwork`` listeners, its log is the real ``SegmentLog`` on a real directory), inside a fresh
``Process``. ``crash`` kills that process at once: no callback of it runs again, its connections
reset, its descriptors close without a flush, and nothing of the old objects is reused; the next
``boot`` reads the directory through the same recovery code as a real start-up.

Storage: a process crash keeps what was written (the page cache survives a SIGKILL); a
``power_loss`` crash also loses what was not synced, in every file of the data directory and in
its directory entries (``disk.py``).
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kemu.storage.segments as segments
from kemu.broker.server import KemuServer, ServerOptions
from kemu.config.definitions import BrokerConfig
from kemu.testing.sim.disk import DiskModel
from kemu.testing.sim.loop import Process, SimLoop
from kemu.testing.sim.network import SimNetwork

BASE_PORT = 9092


class SimulatedCrash(BaseException):
    """Raised at a crash point to unwind the dying process's current callback (a BaseException,
    so that no ``except Exception`` of kemu catches it and carries on)."""


SIM_INTERNAL_SEGMENT_BYTES = 16 * 1024
SIM_DATA_SEGMENT_BYTES = 256 * 1024
SIM_COLD_SNAPSHOT_INTERVAL_MS = 2000
SIM_PRUNE_INTERVAL_MS = 1000
INTERNAL_SEGMENT_CONFIGS = (
    "offsets.topic.segment.bytes",
    "transaction.state.log.segment.bytes",
    "share.coordinator.state.topic.segment.bytes",
)


def broker_config(overrides: dict[str, str]) -> BrokerConfig:
    settings = {
        "kemu.kip1289.enable": "true",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": "3",
        "share.coordinator.state.topic.num.partitions": "3",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        # Sim only: internal topics get small segments (Kafka: 100 MiB), so that segments roll
        # within a run, the cleaner compacts __consumer_offsets and __transaction_state, share
        # state pruning deletes whole segments, and all of it happens under crashes; and so
        # that a restart replays what Kafka's would of a long-lived broker, not a whole history.
        **dict.fromkeys(INTERNAL_SEGMENT_CONFIGS, str(SIM_INTERNAL_SEGMENT_BYTES)),
        # Sim only: a simulated kemu lives a few seconds between crashes, and Kafka's defaults
        # assume a broker living far longer. Data topics get small segments (Kafka: 1 GiB), so
        # a boot after an unclean stop rescans a bounded active segment, not a partition's
        # whole history, and rolled ones are read from their recovery points and summaries.
        "log.segment.bytes": str(SIM_DATA_SEGMENT_BYTES),
        # The cold-partition snapshot (Kafka: every 5 minutes, its timer restarted by each
        # boot) is what moves a share-state log's start past a key written once; at Kafka's
        # interval it never fires in a run, and each boot reloads an unpruned state log.
        "share.coordinator.cold.partition.snapshot.interval.ms": str(SIM_COLD_SNAPSHOT_INTERVAL_MS),
        # Likewise the prune job (Kafka: every 5 minutes, from each boot): at Kafka's interval a
        # share-state log's start would never move in a run.
        "share.coordinator.state.topic.prune.interval.ms": str(SIM_PRUNE_INTERVAL_MS),
        # Sim only: a share consumer or producer that stalls (stalls.py) or dies outlives its
        # record locks (Kafka: 30 s), its member session (45 s) and its transaction (the
        # clients' timeouts, workload.py) while kemu is up, and the timed-out transaction is
        # aborted within a second (Kafka checks every 10 s): a kemu lives a few seconds
        # between crashes, and each boot releases every lock and renews every session.
        "group.share.record.lock.duration.ms": "2000",
        "group.share.min.record.lock.duration.ms": "1000",
        "group.share.session.timeout.ms": "3000",
        "group.share.min.session.timeout.ms": "1000",
        "group.share.heartbeat.interval.ms": "1000",
        "group.share.min.heartbeat.interval.ms": "100",
        "group.consumer.session.timeout.ms": "3000",
        "group.consumer.min.session.timeout.ms": "1000",
        "group.consumer.heartbeat.interval.ms": "1000",
        "group.consumer.min.heartbeat.interval.ms": "100",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
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
        undo_deletions: bool = False,
    ) -> None:
        self.loop = loop
        self.network = network
        self.data_dir = data_dir
        self.brokers = brokers
        self.overrides = overrides
        self.cluster_id = cluster_id
        self.disk = DiskModel(data_dir, undo_deletions=undo_deletions)
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
        if self.incarnation == 1:
            # The directory as the first start-up left it is the run's durable start. Later
            # boots get no such pass: what they write is durable only once they sync it, as
            # are the unsynced writes of a crashed process that they find in the page cache.
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

    def crash(self, *, power_loss: bool = False, tear: random.Random | None = None) -> int:
        """Kill the process now; returns the bytes a power loss took (0 for a process crash).
        ``tear``: a power loss may leave a torn write at a segment's end (``DiskModel._tear``)."""
        _close_descriptors(self._end_process())
        return self.disk.lose_unsynced(tear) if power_loss else 0

    async def stop(self) -> None:
        """Stop kemu as a user does (SIGTERM): ``KemuServer.close`` flushes and closes every log,
        checkpoints the recovery points and writes the clean-shutdown marker; then the process
        ends. Run in kemu's process: a crash meanwhile (a crash point on the way) ends it."""
        assert self.server is not None
        await self.server.close()
        self._end_process()

    def _end_process(self) -> KemuServer:
        """kemu's process ends: its callbacks no longer run, its peers see their connections
        reset. Returns the server it ran."""
        assert self.process is not None and self.server is not None
        self.process.dead = True
        self.network.process_died(self.process)
        server, self.server = self.server, None
        return server

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
