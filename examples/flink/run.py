"""Run the Flink exactly-once example against a kemu started as a user starts it.

    make example-flink                                  # = .venv/bin/python examples/flink/run.py
    .venv/bin/python examples/flink/run.py --records 20000 --naming POOLING

1. Builds the Maven project beside this file (offline first; online when ~/.m2 lacks a jar).
2. Starts ``kemu serve --brokers 3 --port 0`` and reads the bootstrap servers from its ready line.
3. Creates the input topic (4 partitions) and the output topic (3 partitions), and writes
   ``--records`` records ``record-000000``... to the input with an idempotent producer.
4. Runs ``kemu.examples.flink.ExactlyOnceJob`` (a Flink MiniCluster in one JVM): KafkaSource in a
   consumer group -> upper-case map that throws once after a checkpoint -> KafkaSink with
   ``DeliveryGuarantee.EXACTLY_ONCE``; the job restarts from the checkpoint and ends when the
   bounded source has read every record.
5. Verifies with a read_committed consumer that the output holds every input, upper-cased,
   exactly once; counts what a read_uncommitted consumer sees besides (records of aborted
   transactions) and the consumer group's committed lag; stops kemu.

``--kill-kemu-at-checkpoint K`` runs kemu with a data dir, SIGKILLs it when the K-th checkpoint
notification arrives, and restarts it from that data dir on the same ports while the job runs.

``--against kafka`` runs the same steps against a single-node Apache Kafka 4.4.0 instead (the
jars ``make bench`` fetches into bench/.cache), to compare what the connector logs and counts.

Prints ``FLINK-EXAMPLE {json}`` and ``PASS`` (exit 0) or ``FAIL`` (exit 1).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
KEMU = REPO / ".venv" / "bin" / "kemu"
READY_PREFIX = "kemu ready bootstrap="
MAIN_CLASS = "kemu.examples.flink.ExactlyOnceJob"
INPUT_PARTITIONS = 4
OUTPUT_PARTITIONS = 3
TIMEOUT_S = 60.0


def build() -> None:
    """``mvn package`` + the dependencies into target/lib; offline first, as ``make java`` does."""
    maven = ["mvn", "-q", "-B", "-DskipTests", "package", "dependency:copy-dependencies"]
    maven.append("-DoutputDirectory=target/lib")
    shutil.rmtree(HERE / "target" / "lib", ignore_errors=True)
    offline = subprocess.run([*maven, "-o"], cwd=HERE, capture_output=True, text=True)
    if offline.returncode != 0:
        subprocess.run(maven, cwd=HERE, check=True)


class Kemu:
    """``kemu serve`` in a subprocess; its stderr (the logs) goes to ``log_path``."""

    def __init__(self, log_path: Path, brokers: int = 3, data_dir: Path | None = None) -> None:
        self.log_path = log_path
        self.brokers = brokers
        self.data_dir = data_dir
        self.port = 0  # --port 0 the first time; a restart takes the same ports again
        self.bootstrap = ""
        self.process: subprocess.Popen[str] | None = None
        self.kills = 0

    def start(self) -> None:
        command = [str(KEMU), "serve", "--brokers", str(self.brokers), "--port", str(self.port)]
        if self.data_dir is not None:
            command += ["--data-dir", str(self.data_dir)]
        with self.log_path.open("a") as log:
            self.process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        ready = threading.Event()

        def watch() -> None:
            assert self.process is not None and self.process.stdout is not None
            for line in self.process.stdout:
                if line.startswith(READY_PREFIX):
                    self.bootstrap = line[len(READY_PREFIX) :].split()[0]
                    ready.set()

        threading.Thread(target=watch, daemon=True).start()
        deadline = time.monotonic() + TIMEOUT_S
        while not ready.wait(0.1):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"kemu did not become ready; see {self.log_path}")
        self.port = int(self.bootstrap.split(",")[0].rpartition(":")[2])

    def kill_and_restart(self) -> None:
        """SIGKILL, then start again from the same data dir on the same ports."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(15)
        self.kills += 1
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(15)


class Kafka:
    """Apache Kafka 4.4.0 (one KRaft node), as ``make bench`` starts it."""

    def __init__(self, workdir: Path) -> None:
        sys.path.insert(0, str(REPO))
        from bench import java
        from bench.servers import KafkaServer

        java.ensure_jars()
        workdir.mkdir(parents=True, exist_ok=True)
        self.server = KafkaServer(workdir, OUTPUT_PARTITIONS)
        self.bootstrap = ""

    def start(self) -> None:
        self.server.start()
        self.bootstrap = self.server.bootstrap

    def stop(self) -> None:
        self.server.stop()


def create_topics(bootstrap: str, input_topic: str, output_topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(input_topic, INPUT_PARTITIONS, 1),
        NewTopic(output_topic, OUTPUT_PARTITIONS, 1),
    ]
    for future in admin.create_topics(topics).values():
        future.result(TIMEOUT_S)


def produce_input(bootstrap: str, topic: str, records: int) -> list[str]:
    values = [f"record-{index:06d}" for index in range(records)]
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for index, value in enumerate(values):
        producer.produce(topic, value.encode(), key=str(index).encode())
        if index % 1000 == 0:
            producer.poll(0)
    if producer.flush(TIMEOUT_S) != 0:
        raise RuntimeError("input not all delivered")
    return values


def read_all(bootstrap: str, topic: str, isolation: str, partitions: int) -> list[str]:
    """Every value of ``topic`` up to the end each partition has for ``isolation``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"verify-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    values: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + TIMEOUT_S * 2
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic} not read to its end ({isolation})")
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition() or 0)
                    continue
                raise RuntimeError(f"reading {topic}: {error}")
            values.append((message.value() or b"").decode())
    finally:
        consumer.close()
    return values


def group_lag(bootstrap: str, group: str, topic: str) -> int | None:
    """Input records past the group's committed offsets (None: the group committed nothing)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        partitions = [TopicPartition(topic, p) for p in range(INPUT_PARTITIONS)]
        committed = consumer.committed(partitions, timeout=TIMEOUT_S)
        lag = 0
        for partition in committed:
            _, high = consumer.get_watermark_offsets(partition, timeout=TIMEOUT_S)
            if partition.offset < 0:
                return None
            lag += high - partition.offset
        return lag
    finally:
        consumer.close()


def run_job(
    args: argparse.Namespace,
    bootstrap: str,
    names: dict[str, str],
    log: Path,
    during: Callable[[], None] | None = None,
) -> dict[str, object]:
    """Run the job to its end; ``during`` (if any) is called in a thread once it has started."""
    classpath = os.pathsep.join(
        [str(HERE / "target" / "classes"), str(HERE / "target" / "lib" / "*")]
    )
    command = [
        "java",
        f"-Xmx{args.heap}",
        "-cp",
        classpath,
        MAIN_CLASS,
        f"bootstrap={bootstrap}",
        f"input={names['input']}",
        f"output={names['output']}",
        f"group={names['group']}",
        f"prefix={names['prefix']}",
        f"naming={args.naming}",
        f"parallelism={args.parallelism}",
        f"checkpoint-ms={args.checkpoint_ms}",
        f"throttle-us={args.throttle_us}",
        f"fail-after={args.fail_after}",
        f"restart-attempts={args.restart_attempts}",
    ]
    result: dict[str, object] | None = None
    with log.open("w") as stderr:
        job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
        timer = threading.Timer(args.job_timeout, job.kill)
        timer.start()
        try:
            assert job.stdout is not None
            for line in job.stdout:
                if line.startswith("FLINK-CHECKPOINT "):
                    completed = int(line.split()[1])
                    if during is not None and completed == args.kill_kemu_at_checkpoint:
                        threading.Thread(target=during, daemon=True).start()
                    continue
                sys.stdout.write(line)
                if line.startswith("FLINK-JOB "):
                    result = json.loads(line[len("FLINK-JOB ") :])
            returncode = job.wait()
        finally:
            timer.cancel()
    if returncode != 0:
        raise RuntimeError(f"the Flink job failed (exit {returncode}); see {log}")
    if result is not None:
        return result
    raise RuntimeError(f"the Flink job printed no FLINK-JOB line; see {log}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--naming", choices=["INCREMENTING", "POOLING"], default="INCREMENTING")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--checkpoint-ms", type=int, default=1000)
    parser.add_argument(
        "--throttle-us", type=int, default=500, help="pause per record until the failure"
    )
    parser.add_argument(
        "--fail-after", type=int, default=50, help="records after the 2nd checkpoint, then fail"
    )
    parser.add_argument("--against", choices=["kemu", "kafka"], default="kemu")
    parser.add_argument(
        "--kill-kemu-at-checkpoint",
        type=int,
        default=0,
        help="SIGKILL kemu when this many checkpoint notifications have arrived (both subtasks"
        " count), and restart it from its data dir on the same ports; 0: never",
    )
    parser.add_argument(
        "--restart-attempts", type=int, default=3, help="Flink's fixed-delay attempts"
    )
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--job-timeout", type=float, default=600.0)
    parser.add_argument("--no-build", action="store_true", help="use target/ as it is")
    parser.add_argument("--run-dir", type=Path, help="keep kemu's and the job's logs here")
    args = parser.parse_args()

    if not args.no_build:
        build()
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="kemu-flink-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    suffix = uuid.uuid4().hex[:6]
    names = {
        "input": f"flink-input-{suffix}",
        "output": f"flink-output-{suffix}",
        "group": f"flink-example-{suffix}",
        "prefix": f"kemu-flink-{suffix}",
    }
    kills = args.kill_kemu_at_checkpoint > 0
    kemu: Kemu | Kafka = (
        Kemu(run_dir / "kemu.log", data_dir=run_dir / "data" if kills else None)
        if args.against == "kemu"
        else Kafka(run_dir / "kafka")
    )
    during = kemu.kill_and_restart if kills and isinstance(kemu, Kemu) else None
    started = time.monotonic()
    try:
        kemu.start()
        print(f"{args.against} ready: {kemu.bootstrap}", flush=True)
        create_topics(kemu.bootstrap, names["input"], names["output"])
        inputs = produce_input(kemu.bootstrap, names["input"], args.records)
        job = run_job(args, kemu.bootstrap, names, run_dir / "flink-job.log", during)
        committed = read_all(kemu.bootstrap, names["output"], "read_committed", OUTPUT_PARTITIONS)
        uncommitted = read_all(
            kemu.bootstrap, names["output"], "read_uncommitted", OUTPUT_PARTITIONS
        )
        lag = group_lag(kemu.bootstrap, names["group"], names["input"])
    finally:
        kemu.stop()

    expected = {value.upper() for value in inputs}
    counts = collections.Counter(committed)
    figures = {
        "against": args.against,
        "records": args.records,
        "naming": args.naming,
        "job_seconds": job["seconds"],
        "total_seconds": round(time.monotonic() - started, 2),
        "restarts": job["restarts"],
        "injected_failures": job["injected_failures"],
        "checkpoints_completed": job["checkpoints_completed"],
        "records_mapped": job["records_mapped"],
        "output_read_committed": len(committed),
        "lost": len(expected - counts.keys()),
        "duplicated": sum(count - 1 for count in counts.values() if count > 1),
        "unexpected": len(counts.keys() - expected),
        "aborted_records_seen_read_uncommitted": len(uncommitted) - len(committed),
        "group_lag": lag,
        "kemu_kills": kemu.kills if isinstance(kemu, Kemu) else 0,
        "run_dir": str(run_dir),
    }
    print("FLINK-EXAMPLE " + json.dumps(figures), flush=True)
    passed = (
        figures["lost"] == 0
        and figures["duplicated"] == 0
        and figures["unexpected"] == 0
        and len(committed) == args.records
        and job["injected_failures"] == 1
        and isinstance(job["restarts"], int)
        and job["restarts"] >= 1
        and (not kills or figures["kemu_kills"] == 1)
    )
    print("PASS" if passed else "FAIL", flush=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
