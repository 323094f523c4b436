"""The workload both servers get: create a topic, ProducerPerformance, then a consumer run and
ShareConsumerPerformance runs (1 and 4 share consumers, each run in a fresh share group whose
``share.auto.offset.reset`` is set to ``earliest`` with ConfigCommand first).

The tools are Apache Kafka's own (org.apache.kafka.tools), run as separate JVMs; their printed
summaries are parsed here, so the numbers are the ones Kafka's users quote.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import java

MIB = 1024 * 1024

PRODUCER_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<rps>[\d.]+) records/sec \((?P<mbps>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency"
)
CONSOLE_TOTAL = re.compile(r"Processed a total of (\d+) messages")


@dataclass(frozen=True)
class Workload:
    records: int
    record_size: int
    partitions: int
    topic: str = "bench"
    consumer: str = "perf"  # "perf": ConsumerPerformance; "console": ConsoleConsumer, assigned
    producer_props: tuple[str, ...] = ()
    share_consumers: tuple[int, ...] = (1, 4)  # one ShareConsumerPerformance run per count
    share_records: int = 0  # records each share run reads; 0: all of ``records``
    cycle_records: int = 0  # records the transactional cycle moves; 0: all of ``records``
    cycle_batch: int = 500  # records per poll, hence per transaction, in that cycle

    @property
    def share_target(self) -> int:
        return self.share_records or self.records

    @property
    def cycle_target(self) -> int:
        return self.cycle_records or self.records


@dataclass
class Rate:
    records_per_s: float
    mb_per_s: float
    detail: dict[str, float] = field(default_factory=dict)


class ToolFailed(RuntimeError):
    pass


def parse_producer(output: str) -> Rate:
    """The final summary line of ProducerPerformance (the one with percentiles)."""
    summaries = [m for m in PRODUCER_SUMMARY.finditer(output)]
    if not summaries:
        raise ToolFailed("no ProducerPerformance summary in its output")
    last = summaries[-1]
    return Rate(
        float(last["rps"]),
        float(last["mbps"]),
        {
            "records": float(last["records"]),
            "avg_latency_ms": float(last["avg"]),
            "max_latency_ms": float(last["max"]),
        },
    )


def parse_consumer(output: str) -> Rate:
    """ConsumerPerformance's CSV-like header and values line (overall rates, rebalance included)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for index, line in enumerate(lines[:-1]):
        if line.startswith("start.time"):
            names = [name.strip() for name in line.split(",")]
            values = [value.strip() for value in lines[index + 1].split(",")]
            row = dict(zip(names, values, strict=False))
            try:
                return Rate(
                    float(row["nMsg.sec"]),
                    float(row["MB.sec"]),
                    {
                        "records": float(row["data.consumed.in.nMsg"]),
                        "fetch_records_per_s": float(row["fetch.nMsg.sec"]),
                        "fetch_mb_per_s": float(row["fetch.MB.sec"]),
                        "rebalance_ms": float(row["rebalance.time.ms"]),
                    },
                )
            except (KeyError, ValueError) as error:
                raise ToolFailed(f"unreadable ConsumerPerformance line: {error}") from error
    raise ToolFailed("no ConsumerPerformance result in its output")


def parse_share_consumer(output: str) -> Rate:
    """ShareConsumerPerformance's header and its share-group totals line (which comes first:
    the per-consumer lines of ``--show-consumer-stats`` are prefixed "Share consumer N")."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for index, line in enumerate(lines[:-1]):
        if line.startswith("start.time"):
            names = [name.strip() for name in line.split(",")]
            totals = [text for text in lines[index + 1 :] if text[:1].isdigit()]
            if not totals:
                break
            row = dict(zip(names, (value.strip() for value in totals[0].split(",")), strict=False))
            try:
                return Rate(
                    float(row["nMsg.sec"]),
                    float(row["MB.sec"]),
                    {
                        "records": float(row["data.consumed.in.nMsg"]),
                        "fetch_time_ms": float(row["fetch.time.ms"]),
                    },
                )
            except (KeyError, ValueError) as error:
                raise ToolFailed(f"unreadable ShareConsumerPerformance line: {error}") from error
    raise ToolFailed("no ShareConsumerPerformance result in its output")


def parse_console(output: str, elapsed_s: float, record_size: int) -> Rate:
    found = CONSOLE_TOTAL.search(output)
    if found is None:
        raise ToolFailed("no 'Processed a total of' line from ConsoleConsumer")
    count = int(found.group(1))
    return Rate(count / elapsed_s, count * record_size / MIB / elapsed_s, {"records": float(count)})


class Runner:
    def __init__(self, workdir: Path, bootstrap: str, workload: Workload) -> None:
        self.workdir = workdir
        self.bootstrap = bootstrap
        self.workload = workload
        self.log4j = java.write_log4j_config(
            workdir / "tools-log4j2.properties", workdir / "tools.log", level="WARN"
        )
        self.transcript = workdir / "tools.out"

    def _run(self, main_class: str, args: list[str], *, timeout: float) -> tuple[int, str, float]:
        command = java.java_command(main_class, args, jvm_opts=java.TOOL_JVM_OPTS, log4j=self.log4j)
        started = time.monotonic()
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout, cwd=self.workdir
            )
            code, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as expired:
            partial = expired.stdout.decode() if isinstance(expired.stdout, bytes) else ""
            code, output = -1, f"timed out after {timeout:.0f}s\n{partial}"
        elapsed = time.monotonic() - started
        with self.transcript.open("a") as transcript:
            transcript.write(f"$ {' '.join(command)}\n{output}\n[exit {code}, {elapsed:.2f}s]\n")
        return code, output, elapsed

    def create_topic(self, topic: str | None = None) -> str | None:
        """Create the topic (the workload's unless named); on failure return why (the
        producer's metadata then auto-creates it with ``num.partitions``, which both servers
        are started with)."""
        code, output, _ = self._run(
            "org.apache.kafka.tools.TopicCommand",
            [
                "--bootstrap-server",
                self.bootstrap,
                "--create",
                "--topic",
                topic or self.workload.topic,
                "--partitions",
                str(self.workload.partitions),
                "--replication-factor",
                "1",
            ],
            timeout=120,
        )
        if code == 0:
            return None
        last = [line for line in output.splitlines() if line.strip()][-1:] or ["?"]
        return f"topic creation failed ({last[0][:120]}); auto-created by the producer"

    def produce(self, over: Secured | None = None) -> Rate:
        """ProducerPerformance into the workload's topic, or ``over`` a secured listener into
        its topic."""
        w = self.workload
        secured = ["--command-config", str(over.config)] if over else []
        code, output, _ = self._run(
            "org.apache.kafka.tools.ProducerPerformance",
            [
                *secured,
                "--topic",
                over.topic if over else w.topic,
                "--num-records",
                str(w.records),
                "--record-size",
                str(w.record_size),
                "--throughput",
                "-1",
                "--command-property",
                "acks=all",
                f"bootstrap.servers={over.bootstrap if over else self.bootstrap}",
                *w.producer_props,
            ],
            timeout=1800,
        )
        if code != 0:
            raise ToolFailed(_tail("ProducerPerformance", code, output))
        return parse_producer(output)

    def consume(self, over: Secured | None = None) -> Rate:
        """A consumer over the workload's topic, or ConsumerPerformance ``over`` a secured
        listener and its topic."""
        w = self.workload
        if w.consumer == "console" and over is None:
            code, output, elapsed = self._run(
                "org.apache.kafka.tools.consumer.ConsoleConsumer",
                [
                    "--bootstrap-server",
                    self.bootstrap,
                    "--topic",
                    w.topic,
                    "--partition",
                    "0",
                    "--offset",
                    "earliest",
                    "--max-messages",
                    str(w.records),
                    "--timeout-ms",
                    "30000",
                    "--formatter-property",
                    "print.value=false",
                ],
                timeout=1800,
            )
            if code != 0:
                raise ToolFailed(_tail("ConsoleConsumer", code, output))
            return parse_console(output, elapsed, w.record_size)
        code, output, _ = self._run(
            "org.apache.kafka.tools.ConsumerPerformance",
            [
                *(["--command-config", str(over.config)] if over else []),
                "--bootstrap-server",
                over.bootstrap if over else self.bootstrap,
                "--topic",
                over.topic if over else w.topic,
                "--num-records",
                str(w.records),
                "--timeout",
                "30000",
            ],
            timeout=1800,
        )
        if code != 0:
            raise ToolFailed(_tail("ConsumerPerformance", code, output))
        return parse_consumer(output)

    def prepare_share_group(self, group: str) -> None:
        """``share.auto.offset.reset=earliest`` on the group (a GROUP config, set before any
        member joins), so that its first consumer starts at the records already produced."""
        code, output, _ = self._run(
            "org.apache.kafka.tools.ConfigCommand",
            [
                "--bootstrap-server",
                self.bootstrap,
                "--entity-type",
                "groups",
                "--entity-name",
                group,
                "--alter",
                "--add-config",
                "share.auto.offset.reset=earliest",
            ],
            timeout=120,
        )
        if code != 0:
            raise ToolFailed(_tail("ConfigCommand", code, output))

    def share_consume(self, group: str, consumers: int) -> Rate:
        """ShareConsumerPerformance: ``consumers`` KafkaShareConsumers (threads of one JVM) in
        ``group`` until they have read ``share_target`` records between them; records are
        acknowledged implicitly (ACCEPT on the next poll) and committed at the end."""
        w = self.workload
        code, output, _ = self._run(
            "org.apache.kafka.tools.ShareConsumerPerformance",
            [
                "--bootstrap-server",
                self.bootstrap,
                "--topic",
                w.topic,
                "--group",
                group,
                "--num-records",
                str(w.share_target),
                "--threads",
                str(consumers),
                "--timeout",
                "30000",
            ],
            timeout=1800,
        )
        if code != 0:
            raise ToolFailed(_tail("ShareConsumerPerformance", code, output))
        if "Exiting before consuming the expected number of records" in output:
            raise ToolFailed(
                f"ShareConsumerPerformance with {consumers} consumer(s) timed out before "
                f"{w.share_target} records"
            )
        return parse_share_consumer(output)

    def eos_cycle(self, group: str, sink: str, records: int, batch: int) -> tuple[str, float]:
        """bench/java/EosCycle.java: the consumer-group exactly-once cycle (poll, produce,
        sendOffsetsToTransaction, commit); its output (a RESULT line) and wall seconds."""
        code, output, elapsed = self._run(
            str(java.BENCH_DIR / "java" / "EosCycle.java"),  # source-file mode (JEP 330)
            [self.bootstrap, self.workload.topic, sink, group, str(records), str(batch), "900"],
            timeout=1800,
        )
        if code != 0:
            raise ToolFailed(_tail("EosCycle", code, output))
        return output, elapsed

    def python_driver(self, args: list[str], *, profile: Path | None = None) -> str:
        """``python -m bench.client_phases ARGS`` (kemu.client) against this server; its
        output. ``profile``: a cProfile of the driver is written there."""
        command = [sys.executable, "-m", "bench.client_phases", *args]
        command += ["--bootstrap", self.bootstrap]
        if profile is not None:
            command += ["--cprofile", str(profile)]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=1800,
                cwd=java.BENCH_DIR.parent,
            )
            code, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired:
            code, output = -1, "timed out after 1800s"
        with self.transcript.open("a") as transcript:
            transcript.write(f"$ {' '.join(command)}\n{output}\n[exit {code}]\n")
        if code != 0:
            raise ToolFailed(_tail(f"bench.client_phases {args[0]}", code, output))
        return output


@dataclass(frozen=True)
class Secured:
    """Where the TLS phase's tools go: a SASL_SSL bootstrap, its client config, its topic."""

    bootstrap: str
    config: Path
    topic: str


def share_group_name(consumers: int) -> str:
    return f"bench-share-{consumers}"


def _tail(tool: str, code: int, output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    interesting = [line for line in lines if "Exception" in line or "ERROR" in line][:3]
    return f"{tool} exited {code}: " + " | ".join(interesting or lines[-3:])
