"""Start and stop the two servers under test, each writing its logs to a fresh directory."""

from __future__ import annotations

import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from pathlib import Path

from bench import java
from bench.probe import Memory, cpu_seconds, free_port, memory_of, wait_ready

HOST = "127.0.0.1"
READY_TIMEOUT_S = 120.0


class Server(ABC):
    name: str

    def __init__(self, workdir: Path, partitions: int) -> None:
        self.workdir = workdir
        self.partitions = partitions
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.start_to_ready_s = 0.0
        self.notes: list[str] = []

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


class KafkaServer(Server):
    """A single-node KRaft Apache Kafka (broker and controller in one JVM)."""

    name = "kafka"

    def prepare(self) -> None:
        self.controller_port = free_port()
        self.log_dir = self.workdir / "kafka-logs"
        self.properties = self.workdir / "server.properties"
        self.properties.write_text(self._server_properties())
        self.log4j = java.write_log4j_config(
            self.workdir / "log4j2.properties", self.workdir / "server.log"
        )
        cluster_id = self._tool("kafka.tools.StorageTool", ["random-uuid"]).strip().splitlines()
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
            "group.initial.rebalance.delay.ms": "0",
        }
        return "".join(f"{key}={value}\n" for key, value in props.items())

    def _command(self) -> list[str]:
        return java.java_command(
            "kafka.Kafka",
            [str(self.properties)],
            jvm_opts=java.BROKER_JVM_OPTS,
            log4j=self.log4j,
        )


class KemuServer(Server):
    """``kemu serve --brokers 1`` from this venv, on disk when kemu has a segment log."""

    name = "kemu"
    in_memory = False  # bench.loadgen can measure without the disk

    def __init__(self, workdir: Path, partitions: int, overrides: tuple[str, ...] = ()) -> None:
        super().__init__(workdir, partitions)
        self.overrides = overrides  # extra KEY=VALUE broker properties

    def _command(self) -> list[str]:
        # KEMU_COMMAND swaps the executable, e.g. to A/B an older checkout of kemu.
        launcher = os.environ.get("KEMU_COMMAND")
        executable = (
            shlex.split(launcher) if launcher else [str(Path(sys.executable).with_name("kemu"))]
        )
        command = [
            *executable,
            "serve",
            "--brokers",
            "1",
            "--port",
            str(self.port),
            "--override",
            f"num.partitions={self.partitions}",
            # As the Kafka server above: ConsumerPerformance's rate includes its first join.
            "--override",
            "group.initial.rebalance.delay.ms=0",
        ]
        for override in self.overrides:
            command += ["--override", override]
        if self.in_memory:
            pass
        elif on_disk_available():
            command += ["--data-dir", str(self.workdir / "kemu-data")]
        else:
            self.notes.append("kemu ran in memory: kemu.storage.segments is not there yet")
        return command


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


def make_server(name: str, workdir: Path, partitions: int) -> Server:
    workdir.mkdir(parents=True, exist_ok=True)
    if name == "kafka":
        return KafkaServer(workdir, partitions)
    return KemuServer(workdir, partitions)
