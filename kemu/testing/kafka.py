"""A real Apache Kafka 4.4.0 (single-node KRaft, broker and controller in one JVM) for the tests
that compare kemu with it (the parity tier) and for the benchmarks (bench/servers.py).

The jars are the ones ``make bench`` fetches with Maven into the checkout's bench/.cache/lib
(``KEMU_KAFKA_LIB`` names another directory).

Fixtures:
- ``kafka_server``: a factory, ``kafka_server(KafkaConfig(...))``, returning a started Kafka for
  that configuration; one JVM per configuration per test session (per xdist worker), so that the
  modules comparing with the same Kafka share it. ``SHARED`` and ``SHARE_GROUPS`` are the two
  configurations most parity modules use; a module that needs its own (an authorizer, quota
  windows it changes) passes another. Skips when java or the jars are missing.
- ``kafka``: ``kafka_server(SHARED)``.

kemu's own suite runs the modules using one configuration on one worker (tests/conftest.py's
``SHARED_KAFKA_MODULES``), so that the JVM starts once for them.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import kemu

KAFKA_VERSION = "4.4.0"
HOST = "127.0.0.1"
READY_TIMEOUT_S = 120.0


def kafka_lib() -> Path:
    """Where Kafka's jars are: ``KEMU_KAFKA_LIB``, else the checkout's bench/.cache/lib."""
    configured = os.environ.get("KEMU_KAFKA_LIB")
    if configured:
        return Path(configured)
    return Path(kemu.__file__).resolve().parents[1] / "bench" / ".cache" / "lib"


def broker_jar() -> Path:
    return kafka_lib() / f"kafka_2.13-{KAFKA_VERSION}.jar"


def missing_prerequisite() -> str | None:
    """Why a real Kafka cannot start here (no java, no jars), or None."""
    if shutil.which("java") is None:
        return "needs java to run Kafka 4.4.0"
    if not broker_jar().exists():
        return f"needs Kafka's jars in {kafka_lib()} (make bench fetches them)"
    return None


# What bin/kafka-server-start.sh and kafka-run-class.sh give the broker by default.
BROKER_JVM_OPTS = [
    "-Xmx1G",
    "-Xms1G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]
# bin/kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh use a 512M heap.
TOOL_JVM_OPTS = ["-Xmx512M", "-server", "-XX:+UseG1GC", "-Djava.awt.headless=true"]
# A test's broker serves a few hundred requests and a tool runs a second: the C1 compiler alone
# (no C2 compiling hot code on the shared cores), the class-data archive, a serial collector.
QUICK_JVM_OPTS = [
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-XX:+UseSerialGC",
    "-Djava.awt.headless=true",
]
TEST_BROKER_JVM_OPTS = ["-Xmx512M", *QUICK_JVM_OPTS]
TEST_TOOL_JVM_OPTS = ["-Xmx256M", *QUICK_JVM_OPTS]


def java_command(
    main_class: str, args: list[str], *, jvm_opts: list[str], log4j: Path
) -> list[str]:
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java is needed to run Apache Kafka")
    return [
        java,
        *jvm_opts,
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        f"{kafka_lib()}/*",
        main_class,
        *args,
    ]


def write_log4j_config(path: Path, log_file: Path, level: str = "INFO") -> Path:
    """A log4j2 config sending everything to ``log_file`` (never to the tools' stdout)."""
    path.write_text(
        "\n".join(
            [
                f"rootLogger.level={level}",
                "rootLogger.appenderRef.file.ref=file",
                "appender.file.type=File",
                "appender.file.name=file",
                f"appender.file.fileName={log_file}",
                "appender.file.layout.type=PatternLayout",
                "appender.file.layout.pattern=[%d] %p %m (%c)%n",
                "",
            ]
        )
    )
    return path


# --- readiness ----------------------------------------------------------------------------------

API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"


def api_versions_ok(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when the server answers ApiVersions v0 with error code 0: ready (Kafka binds its
    listener long before it serves requests, so an open port alone is not enough)."""
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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


# --- servers ------------------------------------------------------------------------------------


@dataclass
class SaslSslListener:
    """A second listener, SASL_SSL with SCRAM-SHA-512, beside the PLAINTEXT one (the TLS phase).

    Both servers serve the same PEM keystore (an EC P-256 certificate for 127.0.0.1 made by
    kemu's ``--tls-self-signed`` code) and know one SCRAM user."""

    keystore: Path  # the key then the chain, PEM: what ``ssl.keystore.location`` reads
    ca: Path
    port: int = 0
    user: str = "bench"
    password: str = "bench-secret"
    mechanism: str = "SCRAM-SHA-512"

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def client_properties(self) -> str:
        """The Java client's ``--command-config`` file for this listener."""
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{self.user}" password="{self.password}";'
        )
        props = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": self.mechanism,
            "sasl.jaas.config": jaas,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca),
        }
        return "".join(f"{key}={value}\n" for key, value in props.items())


def make_sasl_ssl(directory: Path) -> SaslSslListener:
    """Certificates (made once per directory) for a SASL_SSL listener."""
    from kemu.broker.security.tls import self_signed, write_keystore

    paths = self_signed(directory)
    return SaslSslListener(keystore=write_keystore(paths), ca=paths.ca)


class Server:
    """A server process started in ``workdir`` (its output in server.out) and ready when it
    answers ApiVersions; subclasses give the command."""

    name: str

    def __init__(self, workdir: Path, partitions: int) -> None:
        self.workdir = workdir
        self.partitions = partitions
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.start_to_ready_s = 0.0
        self.notes: list[str] = []
        self.sasl_ssl: SaslSslListener | None = None  # set before start() for the TLS phase

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def _command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Work before the timed start (Kafka formats its storage)."""

    def start(self) -> None:
        self.port = free_port()
        if self.sasl_ssl is not None:
            self.sasl_ssl.port = free_port()
        self.prepare()
        out = (self.workdir / "server.out").open("wb")
        started = time.monotonic()
        self.process = subprocess.Popen(
            self._command(), stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir
        )
        out.close()
        process = self.process
        try:
            self.start_to_ready_s = wait_ready(
                HOST, self.port, started, READY_TIMEOUT_S, lambda: process.poll() is None
            )
        except Exception as error:
            self.stop()
            raise RuntimeError(
                f"{self.name} did not start ({error}); see {self.workdir}/server.out"
            ) from error

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# What the benchmark's Kafka sets beside its listeners unless it runs on code defaults: no wait
# before a new group's first assignment, as `kemu serve` (and Kafka's shipped server.properties,
# for the classic delay) choose.
ASSIGN_AT_ONCE = {
    "group.initial.rebalance.delay.ms": "0",
    "group.streams.initial.rebalance.delay.ms": "0",  # as kemu serve's default
    "group.consumer.assignment.interval.ms": "0",  # likewise
    "group.share.assignment.interval.ms": "0",
}


def kafka_timing_overrides(**extra: str) -> list[str]:
    """``--override`` values for a kemu started with ``--timing kafka`` beside a KafkaServer not
    on code defaults, so that both run the same timers: its ``ASSIGN_AT_ONCE``, then ``extra``
    (the comparison's own server properties)."""
    return [f"{key}={value}" for key, value in {**ASSIGN_AT_ONCE, **extra}.items()]


def cluster_id(seed: str) -> str:
    """A KRaft cluster id (a Kafka Uuid: 16 bytes, base64url without padding) derived from
    ``seed``, in Python rather than a JVM running ``kafka-storage random-uuid``; never starting
    with '-', which the storage tool would read as an option."""
    digest = seed.encode()
    while True:
        digest = hashlib.sha256(digest).digest()
        text = base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class KafkaServer(Server):
    """A single-node KRaft Apache Kafka (broker and controller in one JVM).

    ``code_defaults``: leave every group timer at Kafka's code default (no ``ASSIGN_AT_ONCE``);
    ``features``: extra ``--feature NAME=LEVEL`` for the storage format (``streams.version=1``);
    ``properties``: extra server properties; ``quick``: the JVM options of a short test run
    (``TEST_BROKER_JVM_OPTS``) instead of those of ``kafka-server-start.sh``."""

    name = "kafka"

    def __init__(
        self,
        workdir: Path,
        partitions: int,
        *,
        code_defaults: bool = False,
        features: tuple[str, ...] = (),
        properties: dict[str, str] | None = None,
        quick: bool = False,
    ) -> None:
        super().__init__(workdir, partitions)
        self.code_defaults = code_defaults
        self.features = features
        self.extra_properties = dict(properties or {})
        self.quick = quick

    def prepare(self) -> None:
        self.controller_port = free_port()
        self.log_dir = self.workdir / "kafka-logs"
        self.properties = self.workdir / "server.properties"
        self.properties.write_text(self._server_properties())
        self.log4j = write_log4j_config(
            self.workdir / "log4j2.properties", self.workdir / "server.log"
        )
        scram = []
        if self.sasl_ssl is not None:
            # KRaft keeps SCRAM credentials in the metadata log: the format step writes them.
            user, password = self.sasl_ssl.user, self.sasl_ssl.password
            scram = ["--add-scram", f"{self.sasl_ssl.mechanism}=[name={user},password={password}]"]
        # share.version=1 is already the default of a 4.4 format (it is bound to 4.2-IV0); it is
        # named so that share groups stay on whatever the default becomes. Kafka 4.4 has no
        # group.share.enable any more: the feature level alone turns share groups on.
        features = self.features
        if not any(feature.startswith("share.version=") for feature in features):
            features = ("share.version=1", *features)
        started = time.monotonic()
        self._tool(
            "kafka.tools.StorageTool",
            [
                "format",
                "--standalone",
                "-t",
                cluster_id(str(self.workdir)),
                "-c",
                str(self.properties),
                *(arg for feature in features for arg in ("--feature", feature)),
                *scram,
            ],
        )
        self.format_s = time.monotonic() - started
        self.notes.append(f"storage format took {self.format_s:.2f}s before the timed start")

    def _tool(self, main_class: str, args: list[str]) -> str:
        jvm_opts = TEST_TOOL_JVM_OPTS if self.quick else TOOL_JVM_OPTS
        command = java_command(main_class, args, jvm_opts=jvm_opts, log4j=self.log4j)
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.workdir)
        if done.returncode != 0:
            raise RuntimeError(f"{main_class} {args[0]} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def _server_properties(self) -> str:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"{HOST}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "num.partitions": str(self.partitions),
            "offsets.topic.replication.factor": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
        }
        if not self.code_defaults:
            props.update(ASSIGN_AT_ONCE)
        tls = self.sasl_ssl
        if tls is not None:
            props["listeners"] += f",SASL_SSL://{tls.bootstrap}"
            props["advertised.listeners"] += f",SASL_SSL://{tls.bootstrap}"
            props["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL"
            props["sasl.enabled.mechanisms"] = tls.mechanism
            props[f"listener.name.sasl_ssl.{tls.mechanism.lower()}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
            props["ssl.keystore.type"] = "PEM"
            props["ssl.keystore.location"] = str(tls.keystore)
        props.update(self.extra_properties)
        return "".join(f"{key}={value}\n" for key, value in props.items())

    def _command(self) -> list[str]:
        return java_command(
            "kafka.Kafka",
            [str(self.properties)],
            jvm_opts=TEST_BROKER_JVM_OPTS if self.quick else BROKER_JVM_OPTS,
            log4j=self.log4j,
        )


# --- the session fixture ------------------------------------------------------------------------


@dataclass(frozen=True)
class KafkaConfig:
    """One configuration of the test Kafka: server properties beside ``ASSIGN_AT_ONCE`` and
    storage features. ``name`` keys the session's JVMs (and the xdist group of its modules)."""

    name: str
    properties: dict[str, str] = field(default_factory=dict, hash=False)
    features: tuple[str, ...] = ()

    def kemu_overrides(self, **extra: str) -> list[str]:
        """The ``--override`` values giving a kemu (``--timing kafka``) this Kafka's timers and
        settings, then ``extra``."""
        return kafka_timing_overrides(**{**self.properties, **extra})


# The plain Kafka of the config catalogues, the group-timer and mutation-quota comparisons:
# nothing beside ASSIGN_AT_ONCE, so that every config it describes is Kafka's default.
SHARED = KafkaConfig("kafka")
# The Kafka of the share-group and transaction comparisons: the union of what they need.
SHARE_GROUPS = KafkaConfig(
    "kafka-share",
    {
        # share heartbeats every 500 ms (Kafka's 5 s makes a first assignment, which waits for
        # the share-partition state to be initialised, slow to arrive)
        "group.share.min.heartbeat.interval.ms": "500",
        "group.share.heartbeat.interval.ms": "500",
        # and consumer group (KIP-848) heartbeats too: a rebalance takes a few of them
        "group.consumer.min.heartbeat.interval.ms": "500",
        "group.consumer.heartbeat.interval.ms": "500",
        # fewer internal partitions to create and load than Kafka's 50
        "transaction.state.log.num.partitions": "3",
        "share.coordinator.state.topic.num.partitions": "3",
        # timed-out transactions aborted within a second (Kafka's default looks every 10 s)
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    },
)


class KafkaSession:
    """The test session's Kafkas, one per configuration, started on first use."""

    def __init__(self, directory: Callable[[str], Path]) -> None:
        self._directory = directory
        self._servers: dict[str, KafkaServer] = {}

    def get(self, config: KafkaConfig) -> KafkaServer:
        reason = missing_prerequisite()
        if reason is not None:
            pytest.skip(reason)
        server = self._servers.get(config.name)
        if server is not None:
            assert server.extra_properties == config.properties, config.name
            return server
        server = KafkaServer(
            self._directory(config.name),
            partitions=1,
            features=config.features,
            properties=config.properties,
            quick=True,
        )
        server.start()
        self._servers[config.name] = server
        return server

    def stop(self) -> None:
        for server in self._servers.values():
            server.stop()
        self._servers.clear()


@pytest.fixture(scope="session")
def kafka_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaSession]:
    session = KafkaSession(tmp_path_factory.mktemp)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def kafka_server(kafka_session: KafkaSession) -> Callable[[KafkaConfig], KafkaServer]:
    """``kafka_server(config)``: the session's Kafka 4.4.0 for ``config``, started once."""
    return kafka_session.get


@pytest.fixture(scope="session")
def kafka(kafka_server: Callable[[KafkaConfig], KafkaServer]) -> KafkaServer:
    """The session's plain Kafka 4.4.0 (``SHARED``)."""
    return kafka_server(SHARED)
