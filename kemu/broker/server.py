"""The process: N virtual brokers on consecutive ports over one shared cluster model."""

from __future__ import annotations

import asyncio
import importlib
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from kemu.broker.connection import Connection
from kemu.broker.endpoints import LISTENER_NODES
from kemu.broker.failover import NODE_LISTENERS, install_failover
from kemu.broker.handlers import handler_module_names, register_placeholders
from kemu.broker.ports import free_port_block
from kemu.cluster import seeded
from kemu.cluster.context import Runtime
from kemu.cluster.crash_points import crash_point
from kemu.cluster.listeners import (
    Listener,
    configured_listeners,
    listen_backlog,
    unserved_controller_listeners,
)
from kemu.cluster.model import SHARE_STATE_TOPIC, TRANSACTION_STATE_TOPIC, BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.storage.lock import DataDirLock
from kemu.storage.log import MemoryLog, PartitionLog
from kemu.storage.recovery_points import RecoveryPoints

if TYPE_CHECKING:
    from kemu.broker.security.acceptor import TlsServer

log = structlog.get_logger("kemu.server")

HANDLER_WARM_DELAY_S = 0.05  # lets a client's first ApiVersions and Metadata through first


# kemu's data files besides the topic catalogue (read above), each read by a service built on
# first use: (file, module, function that builds the service or reads the file). A file present
# is read at start, so that a damaged one stops kemu before it listens rather than failing every
# request that needs it; an absent one loads nothing (a fresh start imports no coordinator).
DATA_FILE_READERS = (
    ("kemu-group-configs.json", "kemu.coordinator.group.config", "group_config_store"),
    ("kemu-share-groups.json", "kemu.coordinator.group.share.legacy", "check_share_groups_file"),
    ("kemu-acls.json", "kemu.broker.security.acls", "acl_store"),
    ("kemu-scram-credentials.json", "kemu.broker.security.credentials", "credentials"),
    ("kemu-client-metrics.json", "kemu.cluster.client_metrics", "client_metrics_store"),
    ("kemu-client-quotas.json", "kemu.cluster.client_quotas", "client_quotas"),
)


def read_data_files(runtime: Runtime) -> None:
    """Build the service of each data file the data dir holds; raises ``DataFileError``."""
    data_dir = runtime.cluster.data_dir
    if data_dir is None:
        return
    for file_name, module, reader in DATA_FILE_READERS:
        if (data_dir / file_name).exists():
            getattr(importlib.import_module(module), reader)(runtime)


class ListenError(Exception):
    """A broker's listener could not bind (the port is in use, the address is not local, ...)."""


@dataclass
class ServerOptions:
    brokers: int = 3
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    data_dir: Path | None = None
    config: BrokerConfig = field(default_factory=BrokerConfig)
    max_versions: dict[int, int] | None = None
    cluster_id: str | None = None


def _log_factory(
    options: ServerOptions, recovery_points: RecoveryPoints | None
) -> Callable[[str, int], PartitionLog]:
    data_dir = options.data_dir
    if data_dir is None or recovery_points is None:
        return lambda topic, index: MemoryLog()
    config = options.config
    segment_bytes = config.get_int("log.segment.bytes")
    flush_always = config.get("kemu.log.flush") == "always"

    def make(topic: str, index: int) -> PartitionLog:
        # Imported with the first partition, not at start: a fresh data dir has none yet.
        from kemu.storage.segments import SegmentLog

        return SegmentLog(
            data_dir / f"{topic}-{index}",
            segment_bytes=segment_bytes,
            flush_every_append=flush_always,
            crash_point=crash_point,
            recovery_point=recovery_points.for_partition(topic, index),
            clean_shutdown=recovery_points.clean_shutdown,
        )

    return make


class KemuServer:
    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        register_placeholders()  # handler modules are imported after the listeners are up
        self._lock: DataDirLock | None = None
        if options.data_dir is not None:
            options.data_dir.mkdir(parents=True, exist_ok=True)
            # Before anything is read: a second process on the same directory is refused here.
            self._lock = DataDirLock.acquire(options.data_dir)
        try:
            self._load(options)
        except BaseException:  # a damaged data file, a bad config: nothing stays open
            runtime: Runtime | None = getattr(self, "runtime", None)
            for partition in runtime.cluster.all_partitions() if runtime is not None else ():
                partition.log.close()
            if self._lock is not None:
                self._lock.release()
            raise

    def _load(self, options: ServerOptions) -> None:
        """Everything of ``__init__`` after the data dir is locked: the data dir's files are
        read here, so a damaged one is refused (``DataFileError``) before kemu listens."""
        # read before any log opens: where each one may skip its recovery scan
        self._recovery_points = (
            RecoveryPoints(options.data_dir) if options.data_dir is not None else None
        )
        # One listener (PLAINTEXT on --host/--port) unless ``listeners`` is configured; each one
        # is a block of consecutive ports, one per broker (kemu/cluster/listeners.py).
        self.listeners = configured_listeners(
            options.config, options.host, options.port, options.brokers, options.advertised_host
        )
        if options.port == 0:
            # --port 0: the OS picks a block with room for every listener's brokers (without
            # this, brokers 2..N would bind ports 1..N-1).
            first = free_port_block(options.host, options.brokers * len(self.listeners))
            self.listeners = configured_listeners(
                options.config, options.host, first, options.brokers, options.advertised_host
            )
        for listener in self.listeners:
            listen_backlog(options.config, listener.name)  # a bad value fails before any bind
        for name in unserved_controller_listeners(options.config):
            log.info(
                "controller_listener_ignored",
                listener=name,
                reason="in controller.listener.names: kemu runs no KRaft controller, so it is "
                "neither bound nor advertised",
            )
        self._secured = options.config.supplied("listeners") is not None
        listener_nodes = {
            listener.name: {
                node_id: BrokerNode(
                    node_id,
                    listener.advertised_host,
                    listener.advertised_port + node_id - 1,
                )
                for node_id in range(1, options.brokers + 1)
            }
            for listener in self.listeners
        }
        cluster = Cluster(
            cluster_id=options.cluster_id or _cluster_id(),
            nodes=listener_nodes[self.listeners[0].name],
            config=options.config,
            log_factory=_log_factory(options, self._recovery_points),
            data_dir=options.data_dir,
        )
        cluster.load_metadata()
        self.runtime = Runtime(cluster=cluster, max_versions=options.max_versions)
        if self._recovery_points is not None:
            from kemu.broker.housekeeping import RECOVERY_POINTS

            self.runtime.services.provide(RECOVERY_POINTS, self._recovery_points)
        if self._secured:
            self.runtime.services.provide(LISTENER_NODES, listener_nodes)
        # Before any request: the share coordinator replays __share_group_state (including the
        # transaction markers that resolve KIP-1289 staged records). Without that topic there is
        # nothing to replay, and the coordinator (its modules a tenth of a fresh start) is
        # created on first use.
        if SHARE_STATE_TOPIC in cluster.topics:
            from kemu.coordinator.share.service import share_coordinator

            share_coordinator(self.runtime)
        read_data_files(self.runtime)
        self.servers: list[asyncio.Server] = []
        self._tls_servers: list[TlsServer] = []  # SSL and SASL_SSL ports
        self._node_servers: dict[int, list[asyncio.Server | TlsServer]] = {}
        self._background: list[asyncio.Task[None]] = []

    @property
    def cluster(self) -> Cluster:
        return self.runtime.cluster

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{n.host}:{n.port}" for n in self.cluster.nodes.values())

    def listener_bootstraps(self) -> dict[str, str]:
        """Listener name -> its advertised bootstrap servers, in ``listeners`` order."""
        return {
            listener.name: ",".join(
                f"{listener.advertised_host}:{listener.advertised_port + i}"
                for i in range(self.options.brokers)
            )
            for listener in self.listeners
        }

    async def start(self) -> None:
        # One event loop both accepts and serves (Kafka has an acceptor thread of its own), so
        # a burst of connects waits in the kernel's queue while requests are served: a queue
        # too short drops SYNs, and each dropped client retries a second or more later.
        for listener in self.listeners:
            backlog = listen_backlog(self.cluster.config, listener.name)
            factory = self._listener_factory(listener)
            context = self._tls_context(listener)  # a bad keystore fails start-up here
            for node_id in self.cluster.node_ids:
                try:
                    await self._bind(listener, node_id, factory, context, backlog)
                except ListenError:
                    for opened in self.servers:
                        opened.close()
                    for tls in self._tls_servers:
                        tls.close()
                    raise
        self.runtime.services.provide(NODE_LISTENERS, self)  # failover stops/starts nodes
        install_failover(self.runtime)
        from kemu.broker.housekeeping import start_housekeeping

        self._background.extend(start_housekeeping(self.runtime))
        if TRANSACTION_STATE_TOPIC in self.cluster.topics:
            from kemu.coordinator.transaction.service import start_transactions

            start_transactions(self.runtime)  # finishes or times out transactions a restart left
        if self.cluster.config.get_bool("kemu.kip1289.enable"):
            from kemu.broker.share.txn_acks import txn_share_acks

            txn_share_acks(self.runtime)  # staged share acks complete on their markers
        self._warm_handlers()
        log.info(
            "started",
            bootstrap=self.bootstrap_servers,
            cluster_id=self.cluster.cluster_id,
            data_dir=str(self.options.data_dir) if self.options.data_dir else None,
            seed=seeded.current_seed(),  # kemu serve --seed N replays this run's random choices
        )

    async def _bind(
        self,
        listener: Listener,
        node_id: int,
        factory: Callable[[int], Callable[[], Connection]],
        context: ssl.SSLContext | None,
        backlog: int,
    ) -> None:
        """Listen on ``listener``'s port for ``node_id``."""
        port = listener.port + node_id - 1
        opened: list[asyncio.Server | TlsServer] = self._node_servers.setdefault(node_id, [])
        try:
            if context is not None:
                from kemu.broker.security.acceptor import TlsServer

                tls = await TlsServer.start(
                    listener, context, factory(node_id), listener.host, port, backlog
                )
                self._tls_servers.append(tls)
                opened.append(tls)
                return
            server = await asyncio.get_running_loop().create_server(
                factory(node_id), listener.host, port, reuse_address=True, backlog=backlog
            )
        except OSError as error:
            reason = os.strerror(error.errno) if error.errno else str(error)
            # Kafka's SocketServer words it the same way.
            raise ListenError(
                f"Socket server failed to bind to {listener.host}:{port}: {reason}."
            ) from None
        self.servers.append(server)
        opened.append(server)

    def stop_listening(self, node_id: int) -> None:
        """Close ``node_id``'s listening sockets (a connect is refused); its connections are
        the caller's to close."""
        for server in self._node_servers.pop(node_id, []):
            server.close()
            if server in self.servers:  # an asyncio (or uvloop) server
                self.servers.remove(server)
            else:
                self._tls_servers.remove(server)  # type: ignore[arg-type]

    async def listen(self, node_id: int) -> None:
        """Listen again on every listener's port for ``node_id`` (after ``stop_listening``)."""
        if node_id in self._node_servers:
            return
        for listener in self.listeners:
            backlog = listen_backlog(self.cluster.config, listener.name)
            factory = self._listener_factory(listener)
            await self._bind(listener, node_id, factory, self._tls_context(listener), backlog)

    def _warm_handlers(self) -> None:
        """Import the handler modules one per loop turn, shortly after start, so that the first
        request of each kind does not pay for it and requests are served in between."""
        loop = asyncio.get_running_loop()
        names = handler_module_names()

        def step(index: int) -> None:
            if index >= len(names):
                return
            try:
                importlib.import_module(names[index])
            except Exception:
                log.exception("handler_import_failed", module=names[index])
            loop.call_soon(step, index + 1)

        loop.call_later(HANDLER_WARM_DELAY_S, step, 0)

    def _connection_factory(self, node: BrokerNode) -> Callable[[], Connection]:
        return lambda: Connection(node, self.runtime)

    def _listener_factory(self, listener: Listener) -> Callable[[int], Callable[[], Connection]]:
        """Per node id, the protocol factory of ``listener``'s port for that node."""
        if not self._secured:
            return lambda node_id: self._connection_factory(self.cluster.nodes[node_id])
        nodes = self.runtime.services.get(LISTENER_NODES)[listener.name]
        runtime = self.runtime

        def make(node_id: int) -> Callable[[], Connection]:
            node = nodes[node_id]
            return lambda: Connection(node, runtime, listener)

        return make

    def _tls_context(self, listener: Listener) -> ssl.SSLContext | None:
        if not listener.uses_tls:
            return None
        from kemu.broker.security.tls import server_context

        return server_context(self.cluster.config, listener)

    async def close(self) -> None:
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        from kemu.broker.share.manager import SHARE_PARTITIONS
        from kemu.coordinator.share.service import SHARE_PERSISTER, ShareCoordinatorService

        share_leaders = self.runtime.services.built(SHARE_PARTITIONS)  # created on first use only
        if share_leaders is not None:
            await share_leaders.stop()  # its lock timers must not fire into a closing loop

        share_state = self.runtime.services.built(SHARE_PERSISTER)  # created on first use only
        if isinstance(share_state, ShareCoordinatorService):
            share_state.close()  # its cold-partition timer must not append to closed logs
        for server in self.servers:
            server.close()
        for tls in self._tls_servers:
            tls.close()
        for server in self.servers:
            await server.wait_closed()
        for partition in self.cluster.all_partitions():
            partition.log.flush()
            partition.log.close()
        if self._recovery_points is not None:
            from kemu.broker.housekeeping import checkpoint_recovery_points

            # every log is synced and closed: the next start needs no recovery scan
            checkpoint_recovery_points(self.runtime)
            self._recovery_points.mark_clean_shutdown()
        if self._lock is not None:
            self._lock.release()


def _cluster_id() -> str:
    import base64

    return base64.urlsafe_b64encode(seeded.new_uuid().bytes).decode().rstrip("=")


def raise_open_file_limit() -> int:
    """Lift this process's soft limit on open files to its hard limit, as the JVM does for
    Kafka (HotSpot's MaxFDLimit, on by default): every client connection and every open
    segment is a descriptor, and a soft limit of 1,024 would turn connections away long
    before memory runs short. Returns the soft limit now in force."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (OSError, ValueError):  # e.g. an unlimited hard limit above the kernel's nr_open
            return soft
    return hard
