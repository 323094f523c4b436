"""Spark Structured Streaming against kemu, with a driver crash and restarts from the checkpoint.

Run by kemu's own venv (`make example-spark`); the Spark driver (stream.py) runs under
examples/spark/.venv, a separate venv with pyspark. Steps:

1. `kemu serve --brokers 3 --port 0 --data-dir ...`, as a user starts it; the ready line gives
   the bootstrap servers.
2. Topics `orders` (input) and `orders-cents` (output) with confluent-kafka's AdminClient; half
   of the input produced up front, the rest while the first driver runs.
3. Driver runs, one after the other, each from the same checkpoint: the first is SIGKILLed
   (with its JVM: the whole process group) after a few micro-batches, the second is stopped
   cleanly (`query.stop()`) after a few more, the last runs until the checkpoint's committed
   offsets reach the end of the input, then stops cleanly.
4. Checks: the output topic read with confluent-kafka and batch-read through Spark's Kafka source.
   Every input id must be there with the right transformed value. Spark's Kafka sink is
   at-least-once, so a micro-batch replayed after the crash may write records twice: duplicates
   are counted and reported, not failed on.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
READY_PREFIX = "kemu ready bootstrap="
INPUT_TOPIC = "orders"
OUTPUT_TOPIC = "orders-cents"


def expected_order(order_id: int) -> dict[str, Any]:
    """The input record for an id, and (below) what the query must make of it."""
    return {"id": order_id, "customer": f"c{order_id % 17}", "amount": amount_text(order_id)}


def amount_text(order_id: int) -> str:
    return f"{order_id % 1000}.{order_id % 100:02d}"


def expected_output(order_id: int) -> tuple[str, int]:
    return f"C{order_id % 17}", (order_id % 1000) * 100 + order_id % 100


@dataclass
class Figures:
    """What one run measured; printed as SPARK-EXAMPLE {json} and kept in figures.json."""

    records: int
    input_partitions: int
    output_partitions: int
    max_offsets_per_trigger: int
    drivers: list[dict[str, Any]] = field(default_factory=list)
    output_records: int = 0
    distinct_ids: int = 0
    missing: int = 0
    wrong_values: int = 0
    duplicates: int = 0
    spark_batch_read: dict[str, Any] = field(default_factory=dict)
    micro_batches: int = 0
    kemu_kills: int = 0
    seconds_total: float = 0.0


class Kemu:
    """`kemu serve` in a subprocess; the ready line on stdout carries the bootstrap servers."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.process: subprocess.Popen[str] | None = None
        self.bootstrap = ""
        self.port = 0  # the first start takes free ports; a restart takes the same ones

    def start(self, timeout_s: float = 120.0) -> None:
        kemu = Path(sys.executable).with_name("kemu")
        command = [
            str(kemu), "serve", "--brokers", "3", "--port", str(self.port),
            "--data-dir", str(self.workdir / "kemu-data"),
        ]  # fmt: skip
        log = (self.workdir / "kemu.log").open("a")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
        log.close()
        found = threading.Event()

        def watch() -> None:
            assert self.process is not None and self.process.stdout is not None
            for line in self.process.stdout:
                if line.startswith(READY_PREFIX):
                    self.bootstrap = line[len(READY_PREFIX) :].split()[0]
                    self.port = int(self.bootstrap.split(",")[0].rsplit(":", 1)[1])
                    found.set()

        threading.Thread(target=watch, daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while not found.wait(0.1):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"kemu did not start; see {self.workdir / 'kemu.log'}")

    def kill_and_restart(self) -> None:
        """SIGKILL, then the same ports and data dir again: what the logs kept must be there."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Kafka:
    """Apache Kafka 4.4.0 (one KRaft node) as ``make bench`` starts it, for ``--against kafka``."""

    def __init__(self, workdir: Path, partitions: int) -> None:
        sys.path.insert(0, str(REPO))
        from bench import java
        from bench.servers import KafkaServer

        java.ensure_jars()
        (workdir / "kafka").mkdir(parents=True, exist_ok=True)
        self.server = KafkaServer(workdir / "kafka", partitions)
        self.bootstrap = ""

    def start(self) -> None:
        self.server.start()
        self.bootstrap = self.server.bootstrap

    def stop(self) -> None:
        self.server.stop()


class Checkpoint:
    """What Spark's checkpoint says: committed micro-batches and the offsets they ended at."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _batch_ids(self, kind: str) -> list[int]:
        folder = self.path / kind
        if not folder.is_dir():
            return []
        return sorted(int(entry.name) for entry in folder.iterdir() if entry.name.isdigit())

    def committed_batches(self) -> int:
        return len(self._batch_ids("commits"))

    def committed_offsets(self) -> dict[int, int]:
        """Input partition -> end offset of the last committed micro-batch."""
        commits = self._batch_ids("commits")
        if not commits:
            return {}
        # offsets/N: a version line, a metadata line, then one JSON line per source.
        lines = (self.path / "offsets" / str(commits[-1])).read_text().splitlines()
        offsets: dict[int, int] = {}
        for line in lines[2:]:
            for partition, offset in json.loads(line).get(INPUT_TOPIC, {}).items():
                offsets[int(partition)] = int(offset)
        return offsets


class Driver:
    """One run of the streaming query (stream.py under the Spark venv), its own process group."""

    def __init__(self, args: argparse.Namespace, bootstrap: str, number: int) -> None:
        self.number = number
        self.stop_file = args.workdir / f"stop-{number}"
        self.log_path = args.workdir / f"driver-{number}.log"
        command = [
            str(args.spark_python), str(HERE / "stream.py"), "stream",
            "--bootstrap", bootstrap, "--input", INPUT_TOPIC, "--output", OUTPUT_TOPIC,
            "--checkpoint", str(args.workdir / "checkpoint"),
            "--stop-file", str(self.stop_file),
            "--max-offsets-per-trigger", str(args.max_offsets_per_trigger),
        ]  # fmt: skip
        log = self.log_path.open("w")
        # A new session: the SIGKILL reaches the Python driver and its JVM together, as a crash.
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self.started = time.monotonic()

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self, timeout_s: float) -> None:
        self.stop_file.touch()
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"driver {self.number} did not stop:\n{self.log_tail()}") from None
        if code != 0:
            raise RuntimeError(f"driver {self.number} exited {code}:\n{self.log_tail()}")


def create_topics(bootstrap: str, input_partitions: int, output_partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(INPUT_TOPIC, num_partitions=input_partitions, replication_factor=1),
        NewTopic(OUTPUT_TOPIC, num_partitions=output_partitions, replication_factor=1),
    ]
    for future in admin.create_topics(topics, operation_timeout=30).values():
        future.result(60)


def produce(bootstrap: str, ids: range) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for order_id in ids:
        value = json.dumps(expected_order(order_id))
        while True:
            try:
                producer.produce(INPUT_TOPIC, key=str(order_id), value=value)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("input records not delivered")


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kemu-spark-example-probe"})
    try:
        return {
            partition: consumer.get_watermark_offsets(TopicPartition(topic, partition), 30)[1]
            for partition in range(partitions)
        }
    finally:
        consumer.close()


def read_output(bootstrap: str, partitions: int) -> list[dict[str, Any]]:
    """Every record of the output topic, partition by partition, up to its end offset."""
    ends = end_offsets(bootstrap, OUTPUT_TOPIC, partitions)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "kemu-spark-example-check",
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.assign([TopicPartition(OUTPUT_TOPIC, p, 0) for p in range(partitions)])
    positions = dict.fromkeys(range(partitions), 0)
    values: list[dict[str, Any]] = []
    deadline = time.monotonic() + 300
    try:
        while any(positions[p] < ends[p] for p in positions):
            if time.monotonic() > deadline:
                raise RuntimeError(f"output not read to its end: {positions} of {ends}")
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None
            positions[partition] = offset + 1
            if offset < ends[partition]:
                record = json.loads(message.value() or b"null")
                key = message.key()
                record["_key"] = key.decode() if isinstance(key, bytes) else key
                values.append(record)
    finally:
        consumer.close()
    return values


def check_output(records: list[dict[str, Any]], total: int, figures: Figures) -> list[str]:
    problems: list[str] = []
    seen: dict[int, int] = {}
    for record in records:
        order_id = int(record["id"])
        seen[order_id] = seen.get(order_id, 0) + 1
        customer, cents = expected_output(order_id)
        if (record["customer"], record["amount_cents"], record["_key"]) != (
            customer,
            cents,
            customer,
        ):
            figures.wrong_values += 1
            if figures.wrong_values <= 5:
                problems.append(f"wrong value for id {order_id}: {record}")
    missing = [order_id for order_id in range(total) if order_id not in seen]
    unknown = [order_id for order_id in seen if not 0 <= order_id < total]
    figures.output_records = len(records)
    figures.distinct_ids = len(seen)
    figures.missing = len(missing)
    figures.duplicates = sum(count - 1 for count in seen.values())
    if missing:
        problems.append(f"{len(missing)} input ids missing from the output, e.g. {missing[:10]}")
    if unknown:
        problems.append(f"ids that were never produced: {unknown[:10]}")
    if figures.wrong_values:
        problems.append(f"{figures.wrong_values} records with a wrong transformed value")
    return problems


def wait_for(condition: Any, driver: Driver, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if not driver.alive():
            raise RuntimeError(f"driver {driver.number} died while {what}:\n{driver.log_tail()}")
        if time.monotonic() > deadline:
            driver.kill()
            raise RuntimeError(f"driver {driver.number}: timed out {what}:\n{driver.log_tail()}")
        time.sleep(0.5)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    figures = Figures(args.records, args.partitions, 3, args.max_offsets_per_trigger)
    checkpoint = Checkpoint(args.workdir / "checkpoint")
    server: Kemu | Kafka = (
        Kemu(args.workdir) if args.against == "kemu" else Kafka(args.workdir, args.partitions)
    )
    server.start()
    print(f"{args.against} ready at {server.bootstrap} (in {args.workdir})", flush=True)
    try:
        create_topics(server.bootstrap, args.partitions, 3)
        half = args.records // 2
        produce(server.bootstrap, range(half))
        late_input = threading.Thread(
            target=produce, args=(server.bootstrap, range(half, args.records))
        )
        # Each run but the last ends after `batches_per_run` more committed micro-batches.
        endings = ["kill"] * args.kills + ["stop"] * args.stops + ["finish"]
        for number, ending in enumerate(endings, start=1):
            before = checkpoint.committed_batches()
            driver = Driver(args, server.bootstrap, number)
            print(f"driver {number} started ({ending}), {before} micro-batches in", flush=True)
            if number == 1:
                late_input.start()
            if ending == "finish":
                late_input.join()
                input_ends = end_offsets(server.bootstrap, INPUT_TOPIC, args.partitions)

                def caught_up(ends: dict[int, int] = input_ends) -> bool:
                    return checkpoint.committed_offsets() == ends

                wait_for(caught_up, driver, "reading the whole input", args.timeout)
            else:
                target = before + args.batches_per_run
                wait_for(
                    lambda target=target: checkpoint.committed_batches() >= target,
                    driver,
                    f"waiting for {target} committed micro-batches",
                    args.timeout,
                )
            seconds = round(time.monotonic() - driver.started, 1)
            if ending == "kill":
                driver.kill()
            else:
                driver.stop(args.timeout)
            after = checkpoint.committed_batches()
            figures.drivers.append(
                {"run": number, "ending": ending, "seconds": seconds,
                 "micro_batches": after - before}
            )  # fmt: skip
            print(f"driver {number}: {ending} after {seconds}s, {after - before} micro-batches "
                  f"committed in this run", flush=True)  # fmt: skip
            if ending == "kill" and args.kill_kemu and isinstance(server, Kemu):
                late_input.join()  # the input complete before kemu goes down
                server.kill_and_restart()
                figures.kemu_kills += 1
                print(f"kemu SIGKILLed and restarted at {server.bootstrap}", flush=True)
        figures.micro_batches = checkpoint.committed_batches()
        problems = check_output(read_output(server.bootstrap, 3), args.records, figures)
        figures.spark_batch_read = spark_batch_read(args, server.bootstrap)
        compared = ("records", "distinct_ids", "duplicates")
        spark_view = {name: figures.spark_batch_read[name] for name in compared}
        confluent_view = {
            "records": figures.output_records,
            "distinct_ids": figures.distinct_ids,
            "duplicates": figures.duplicates,
        }
        if spark_view != confluent_view:
            problems.append(f"Spark's batch read {spark_view} != confluent-kafka {confluent_view}")
    finally:
        server.stop()
    figures.seconds_total = round(time.monotonic() - started, 1)
    (args.workdir / "figures.json").write_text(json.dumps(figures.__dict__, indent=2))
    print(f"SPARK-EXAMPLE {json.dumps({'against': args.against, **figures.__dict__})}")
    for problem in problems:
        print(f"FAIL: {problem}")
    if problems:
        return 1
    print(
        f"OK: {args.records} input records all in {OUTPUT_TOPIC} with the right values "
        f"({figures.output_records} output records, {figures.duplicates} duplicates from "
        f"at-least-once replay), {len(endings)} driver runs ({args.kills} killed, "
        f"{args.stops + 1} stopped cleanly), {figures.micro_batches} micro-batches, "
        f"{figures.seconds_total}s"
    )
    print("PASS")
    return 0


def spark_batch_read(args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    summary = args.workdir / "batch-read.json"
    log_path = args.workdir / "batch-read.log"
    with log_path.open("w") as log:
        code = subprocess.run(
            [str(args.spark_python), str(HERE / "stream.py"), "read", "--bootstrap", bootstrap,
             "--topic", OUTPUT_TOPIC, "--summary", str(summary)],
            stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout,
        ).returncode  # fmt: skip
    if code != 0:
        raise RuntimeError(f"Spark batch read failed; see {log_path}")
    result: dict[str, Any] = json.loads(summary.read_text())
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", choices=["kemu", "kafka"], default="kemu")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=4, help="of the input topic")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=2_000)
    parser.add_argument("--kills", type=int, default=1, help="driver runs ended by SIGKILL")
    parser.add_argument("--stops", type=int, default=1, help="runs ended by query.stop()")
    parser.add_argument(
        "--kill-kemu",
        action="store_true",
        help="also SIGKILL kemu after each killed driver and restart it on its data dir",
    )
    parser.add_argument("--batches-per-run", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per phase")
    parser.add_argument("--workdir", type=Path, default=HERE / ".work")
    parser.add_argument("--spark-python", type=Path, default=HERE / ".venv" / "bin" / "python")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
