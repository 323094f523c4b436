"""Start and stop the two servers under test, each writing its logs to a fresh directory."""

from __future__ import annotations

import functools
import importlib.util
import os
import shlex
import subprocess
import sys
from pathlib import Path

from bench.probe import Memory, cpu_seconds, memory_of
from kemu.testing import kafka as testing_kafka
from kemu.testing.kafka import (  # noqa: F401 - bench's names for them
    ASSIGN_AT_ONCE,
    HOST,
    READY_TIMEOUT_S,
    SaslSslListener,
    free_port,
    kafka_timing_overrides,
    make_sasl_ssl,
)


class Server(testing_kafka.Server):
    """A server under benchmark: kemu/testing/kafka.py's lifecycle, with memory and CPU probes."""

    def memory(self) -> Memory:
        return memory_of(self.pid)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)


class KafkaServer(testing_kafka.KafkaServer, Server):
    """kemu/testing/kafka.py's single-node KRaft Kafka, as the benchmark measures it."""


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
