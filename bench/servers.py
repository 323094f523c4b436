"""Start and stop the two servers under test, each writing its logs to a fresh directory."""

from __future__ import annotations

import functools
import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from bench import java
from bench.probe import Memory, cpu_seconds, free_port, memory_of, wait_ready

HOST = "127.0.0.1"
READY_TIMEOUT_S = 120.0


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


class Server(ABC):
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

    @abstractmethod
    def _command(self) -> list[str]: ...

    def prepare(self) -> None:  # noqa: B027 - only Kafka has work to do here
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
        try:
            self.start_to_ready_s = wait_ready(
                HOST, self.port, started, READY_TIMEOUT_S, lambda: self.process.poll() is None
            )
        except Exception as error:
            self.stop()
            raise RuntimeError(
                f"{self.name} did not start ({error}); see {self.workdir}/server.out"
            ) from error

    def memory(self) -> Memory:
        return memory_of(self.pid)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

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


class KafkaServer(Server):
    """A single-node KRaft Apache Kafka (broker and controller in one JVM).

    ``code_defaults``: leave every group timer at Kafka's code default (no ``ASSIGN_AT_ONCE``);
    ``features``: extra ``--feature NAME=LEVEL`` for the storage format (``streams.version=1``)."""

    name = "kafka"

    def __init__(
        self,
        workdir: Path,
        partitions: int,
        *,
        code_defaults: bool = False,
        features: tuple[str, ...] = (),
    ) -> None:
        super().__init__(workdir, partitions)
        self.code_defaults = code_defaults
        self.features = features

    def prepare(self) -> None:
        self.controller_port = free_port()
        self.log_dir = self.workdir / "kafka-logs"
        self.properties = self.workdir / "server.properties"
        self.properties.write_text(self._server_properties())
        self.log4j = java.write_log4j_config(
            self.workdir / "log4j2.properties", self.workdir / "server.log"
        )
        cluster_id = self._tool("kafka.tools.StorageTool", ["random-uuid"]).strip().splitlines()
        scram = []
        if self.sasl_ssl is not None:
            # KRaft keeps SCRAM credentials in the metadata log: the format step writes them.
            user, password = self.sasl_ssl.user, self.sasl_ssl.password
            scram = ["--add-scram", f"{self.sasl_ssl.mechanism}=[name={user},password={password}]"]
        started = time.monotonic()
        # share.version=1 is already the default of a 4.4 format (it is bound to 4.2-IV0); it is
        # named so that share groups stay on whatever the default becomes. Kafka 4.4 has no
        # group.share.enable any more: the feature level alone turns share groups on.
        self._tool(
            "kafka.tools.StorageTool",
            [
                "format",
                "--standalone",
                "-t",
                cluster_id[-1],
                "-c",
                str(self.properties),
                "--feature",
                "share.version=1",
                *(arg for feature in self.features for arg in ("--feature", feature)),
                *scram,
            ],
        )
        self.format_s = time.monotonic() - started
        self.notes.append(f"storage format took {self.format_s:.2f}s before the timed start")

    def _tool(self, main_class: str, args: list[str]) -> str:
        command = java.java_command(main_class, args, jvm_opts=java.TOOL_JVM_OPTS, log4j=self.log4j)
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
        return "".join(f"{key}={value}\n" for key, value in props.items())

    def _command(self) -> list[str]:
        return java.java_command(
            "kafka.Kafka",
            [str(self.properties)],
            jvm_opts=java.BROKER_JVM_OPTS,
            log4j=self.log4j,
        )


def _compile_kemu() -> None:
    """Write kemu's bytecode before a timed start, as an installed package has it: with
    PYTHONDONTWRITEBYTECODE set (some shells and CI images set it) an edited module is compiled
    from source at every start, which the start-to-ready figure would count."""
    import compileall

    import kemu

    compileall.compile_dir(Path(kemu.__file__).parent, quiet=1)


class KemuServer(Server):
    """``kemu serve --brokers 1`` from this venv, on disk when kemu has a segment log."""

    name = "kemu"
    in_memory = False  # bench.loadgen can measure without the disk

    def __init__(
        self,
        workdir: Path,
        partitions: int,
        overrides: tuple[str, ...] = (),
        *,
        timing: str | None = None,
    ) -> None:
        super().__init__(workdir, partitions)
        self.overrides = overrides  # extra KEY=VALUE broker properties
        # None: the benchmark's usual kemu (no classic initial delay, as its Kafka); "fast" or
        # "kafka": that timing profile and nothing else of the benchmark's own
        self.timing = timing
        _compile_kemu()

    def _command(self) -> list[str]:
        executable = kemu_executable()
        command = [
            *executable,
            "serve",
            "--brokers",
            "1",
            "--port",
            str(self.port),
            "--override",
            f"num.partitions={self.partitions}",
        ]
        if self.timing is None:
            # As the Kafka server above: ConsumerPerformance's rate includes its first join.
            command += ["--override", "group.initial.rebalance.delay.ms=0"]
        else:
            command += timing_arguments(self.timing, executable)
        for override in self.overrides:
            command += ["--override", override]
        tls = self.sasl_ssl
        if tls is not None:
            for override in (
                f"listeners=PLAINTEXT://{HOST}:{self.port},SASL_SSL://{tls.bootstrap}",
                "ssl.keystore.type=PEM",
                f"ssl.keystore.location={tls.keystore}",
                f"sasl.enabled.mechanisms={tls.mechanism}",
                f"kemu.sasl.users={tls.user}:{tls.password}",
            ):
                command += ["--override", override]
        if self.in_memory:
            pass
        elif on_disk_available():
            command += ["--data-dir", str(self.workdir / "kemu-data")]
        else:
            self.notes.append("kemu ran in memory: kemu.storage.segments is not there yet")
        return command


def kemu_executable() -> list[str]:
    """This venv's ``kemu``; KEMU_COMMAND swaps it, e.g. to A/B an older checkout of kemu."""
    launcher = os.environ.get("KEMU_COMMAND")
    return shlex.split(launcher) if launcher else [str(Path(sys.executable).with_name("kemu"))]


# Kafka 4.4.0's code defaults for the group timers kemu serve's defaults shorten (its log prints
# them at start); how a kemu without --timing runs as `--timing kafka`.
KAFKA_CODE_TIMERS = {
    "group.initial.rebalance.delay.ms": "3000",
    "group.streams.initial.rebalance.delay.ms": "3000",
    "group.consumer.assignment.interval.ms": "1000",
    "group.share.assignment.interval.ms": "1000",
    "group.streams.assignment.interval.ms": "1000",
}


@functools.cache
def has_timing_flag(executable: tuple[str, ...]) -> bool:
    """Whether this kemu's ``serve`` knows ``--timing`` (issue 20's profiles)."""
    done = subprocess.run([*executable, "serve", "--help"], capture_output=True, text=True)
    return "--timing" in done.stdout


def timing_arguments(timing: str, executable: list[str]) -> list[str]:
    """``--timing NAME``, or on a kemu without the flag the overrides that come closest: none for
    ``fast`` (its defaults are the test-friendly ones) and Kafka's code timers for ``kafka``."""
    if timing not in ("fast", "kafka"):
        raise ValueError(f"timing is fast or kafka; got {timing!r}")
    if has_timing_flag(tuple(executable)):
        return ["--timing", timing]
    if timing == "fast":
        return []
    return [
        arg
        for name, value in KAFKA_CODE_TIMERS.items()
        for arg in ("--override", f"{name}={value}")
    ]


def on_disk_available() -> bool:
    return importlib.util.find_spec("kemu.storage.segments") is not None


def kemu_version() -> str:
    from importlib.metadata import version

    described = subprocess.run(
        ["git", "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent,
    )
    commit = described.stdout.strip() if described.returncode == 0 else "unknown"
    return f"{version('kemu')} ({commit})"


def make_server(
    name: str, workdir: Path, partitions: int, *, kemu_overrides: tuple[str, ...] = ()
) -> Server:
    """``kemu_overrides``: extra broker properties for kemu alone (e.g. KIP-1289's switch)."""
    workdir.mkdir(parents=True, exist_ok=True)
    if name == "kafka":
        return KafkaServer(workdir, partitions)
    return KemuServer(workdir, partitions, kemu_overrides)
