"""``python -m bench.soak --minutes 30``: a long mixed workload against one ``kemu serve
--data-dir``, SIGKILLed and restarted every few minutes, watching memory, descriptors, errors and
acknowledged records.

    .venv/bin/python -m bench.soak --minutes 30                 # the published run
    .venv/bin/python -m bench.soak --minutes 1 --kill-every 30  # the short mode make test runs

The workload runs in threads of this process, with confluent-kafka (librdkafka) clients:

* an idempotent producer (acks=all) writing numbered keys to ``soak-data`` at ``--rate``;
* a classic consumer group and a KIP-848 consumer group (``group.protocol=consumer``) reading it
  and committing, and a share group (confluent-kafka's ShareConsumer, implicit acknowledgement);
* a transactional producer committing 10-record transactions to ``soak-txn``;
* topic churn: create a topic, produce to it, delete it, again and again.

Every ``--kill-every`` seconds kemu gets SIGKILL and is restarted from the same data dir and
ports; the lives alternate ``kemu.log.flush`` between its default (``interval``) and ``always``.
A sampler reads kemu's RSS and open file descriptors from /proc every few seconds.

At the end the writers stop, the consumers drain, kemu is SIGKILLed and restarted once more, and
a reader checks that every record acknowledged with acks=all and every committed transaction is
in the log (read_committed for the transactions; records of aborted transactions must not be
visible), and that each group was delivered every acknowledged record at least once.

Client errors are counted by when they happen: around a restart (from the kill to
``--grace`` seconds after kemu is ready again: connection refused, coordinator moves, retried
requests) and in steady state, which must stay at 0 as must every loss.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DATA, TXN = "soak-data", "soak-txn"
PARTITIONS = 6
FLUSH_MODES = ("interval", "always")  # kemu.log.flush, alternating per life
TIMEOUT = 60.0


@dataclass
class Life:
    """One run of kemu between two kills."""

    flush: str
    started_s: float  # since the soak began
    pid: int = 0
    ready_s: float = 0.0  # seconds from spawn to ready
    rss_mb: list[tuple[float, float]] = field(default_factory=list)  # (age s, MiB)
    fds: list[tuple[float, int]] = field(default_factory=list)  # (age s, open fds)


@dataclass
class Figures:
    minutes: float
    kill_every_s: float
    rate: int
    lives: list[Life] = field(default_factory=list)
    kills: int = 0
    produced_acked: int = 0
    delivery_failures: int = 0
    txn_committed: int = 0  # transactions
    txn_aborted: int = 0
    txn_uncertain: int = 0  # commit failed without a clear outcome: keys not counted either way
    churned_topics: int = 0
    churn_topics_left: int = 0  # churn topics still there at the end (deleted ones came back)
    consumed: dict[str, int] = field(default_factory=dict)  # group -> records delivered
    lost: int = 0  # acked data records missing from the log
    txn_lost: int = 0  # committed transactional records missing (read_committed)
    aborted_visible: int = 0  # records of aborted transactions a read_committed reader saw
    undelivered: dict[str, int] = field(default_factory=dict)  # group -> acked keys never seen
    errors_steady: Counter[str] = field(default_factory=Counter)
    errors_restart: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return (
            self.lost == 0
            and self.txn_lost == 0
            and self.aborted_visible == 0
            and self.delivery_failures == 0
            and not any(self.undelivered.values())
            and not self.errors_steady
            and self.churn_topics_left <= 1  # the one being churned when the writers stopped
        )


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        from kemu.testing.plugin import KemuProcess

        self.args = args
        self.run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="soak-"))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.kemu = KemuProcess(
            brokers=1, data_dir=self.run_dir / "data", log_path=self.run_dir / "kemu.log"
        )
        self.figures = Figures(args.minutes, args.kill_every, args.rate)
        self.began = time.monotonic()
        self.lock = threading.Lock()
        self.stop_writers = threading.Event()
        self.stop_readers = threading.Event()
        self.stop_sampler = threading.Event()
        # (kill time, ready time or None while down), monotonic: errors inside +grace are
        # counted as restart errors
        self.outages: list[tuple[float, float | None]] = []
        self.acked: set[bytes] = set()
        self.txn_committed: set[bytes] = set()
        self.txn_aborted: set[bytes] = set()
        self.seen: dict[str, set[bytes]] = {}
        self.threads: list[threading.Thread] = []

    # --- bookkeeping ---------------------------------------------------------------------------

    def log(self, text: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} +{time.monotonic() - self.began:6.0f}s {text}"
        print(line, flush=True)
        with open(self.run_dir / "soak.log", "a") as out:
            out.write(line + "\n")

    def error(self, where: str, what: object) -> None:
        now = time.monotonic()
        near_restart = any(
            killed <= now and (ready is None or now <= ready + self.args.grace)
            for killed, ready in self.outages
        )
        name = f"{where}: {_error_name(what)}"
        with self.lock:
            if near_restart:
                self.figures.errors_restart[name] += 1
            else:
                self.figures.errors_steady[name] += 1
                self.log(f"steady-state error {name} ({what})")

    def common(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.kemu.bootstrap,
            "reconnect.backoff.max.ms": 1000,
            "error_cb": lambda error: self.error("client", error),
        }

    # --- kemu ----------------------------------------------------------------------------------

    def start_kemu(self) -> None:
        life = Life(FLUSH_MODES[len(self.figures.lives) % 2], time.monotonic() - self.began)
        self.kemu.overrides = [f"kemu.log.flush={life.flush}", f"num.partitions={PARTITIONS}"]
        spawned = time.monotonic()
        self.kemu.start(timeout=180)
        life.ready_s = time.monotonic() - spawned
        assert self.kemu.process is not None
        life.pid = self.kemu.process.pid
        with self.lock:
            self.figures.lives.append(life)
            if self.outages and self.outages[-1][1] is None:
                self.outages[-1] = (self.outages[-1][0], time.monotonic())
        self.log(
            f"kemu ready in {life.ready_s:.1f}s (life {len(self.figures.lives)}, "
            f"kemu.log.flush={life.flush})"
        )

    def kill_kemu(self) -> None:
        with self.lock:
            self.outages.append((time.monotonic(), None))
        self.kemu.kill()
        self.figures.kills += 1
        self.log(f"SIGKILL kemu (#{self.figures.kills})")

    def sampler(self) -> None:
        while not self.stop_sampler.wait(self.args.sample_every):
            process = self.kemu.process
            if process is None or process.poll() is not None or not self.figures.lives:
                continue
            life = self.figures.lives[-1]
            if life.pid != process.pid:  # a new kemu starting: its life is not in the list yet
                continue
            age = time.monotonic() - self.began - life.started_s
            with contextlib.suppress(OSError):
                rss = _rss_mb(process.pid)
                fds = len(os.listdir(f"/proc/{process.pid}/fd"))
                if process.poll() is not None:  # killed while being read: not a sample
                    continue
                life.rss_mb.append((round(age, 1), round(rss, 1)))
                life.fds.append((round(age, 1), fds))

    # --- workload ------------------------------------------------------------------------------

    def setup(self) -> None:
        from confluent_kafka.admin import (
            AdminClient,
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            NewTopic,
            ResourceType,
        )

        admin = AdminClient({"bootstrap.servers": self.kemu.bootstrap})
        for topic in (DATA, TXN):
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(TIMEOUT)
        resource = ConfigResource(
            ResourceType.GROUP,
            "soak-share",
            incremental_configs=[
                ConfigEntry(
                    "share.auto.offset.reset",
                    "earliest",
                    incremental_operation=AlterConfigOpType.SET,
                )
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)

    def producer(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {
                **self.common(),
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "delivery.timeout.ms": 600_000,  # outlives any restart: nothing is given up
            }
        )

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                with self.lock:
                    self.acked.add(message.key())
            else:
                with self.lock:
                    self.figures.delivery_failures += 1
                self.error("produce", error)

        sequence = 0
        interval = 1.0 / self.args.rate
        next_at = time.monotonic()
        while not self.stop_writers.is_set():
            key = b"d-%09d" % sequence
            try:
                producer.produce(DATA, key=key, value=key * 8, on_delivery=delivered)
                sequence += 1
            except BufferError:
                producer.poll(0.1)
                continue
            producer.poll(0)
            next_at += interval
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:
                next_at = time.monotonic()  # behind (kemu down): do not burst to catch up
        left = producer.flush(self.args.drain_timeout)
        if left:
            self.error("produce", f"{left} records not delivered at the end")

    def consumer(self, group: str, protocol: str) -> None:
        from confluent_kafka import Consumer

        config = {
            **self.common(),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 1000,
        }
        if protocol == "consumer":
            config["group.protocol"] = "consumer"
        consumer = Consumer(config)
        consumer.subscribe([DATA])
        seen = self.seen.setdefault(group, set())
        try:
            while not self.stop_readers.is_set():
                for message in consumer.consume(500, 0.5):
                    if message.error() is not None:
                        self.error(group, message.error())
                        continue
                    seen.add(message.key())
                    with self.lock:
                        self.figures.consumed[group] = self.figures.consumed.get(group, 0) + 1
        finally:
            with contextlib.suppress(Exception):
                consumer.close()

    def share_consumer(self, group: str) -> None:
        from confluent_kafka import ShareConsumer

        consumer = ShareConsumer({**self.common(), "group.id": group})
        consumer.subscribe([DATA])
        seen = self.seen.setdefault(group, set())
        try:
            while not self.stop_readers.is_set():
                try:
                    messages = consumer.poll(0.5)
                except Exception as error:
                    self.error(group, error)
                    time.sleep(0.5)
                    continue
                for message in messages:
                    if message.error() is not None:
                        self.error(group, message.error())
                        continue
                    seen.add(message.key())
                    with self.lock:
                        self.figures.consumed[group] = self.figures.consumed.get(group, 0) + 1
        finally:
            with contextlib.suppress(Exception):
                consumer.close()

    def transactions(self) -> None:
        from confluent_kafka import KafkaException, Producer

        def fresh() -> Any:
            producer = Producer(
                {
                    **self.common(),
                    "transactional.id": "soak-txn",
                    "transaction.timeout.ms": 60_000,
                    "linger.ms": 5,
                }
            )
            while not self.stop_writers.is_set():
                try:
                    producer.init_transactions(TIMEOUT)
                    return producer
                except KafkaException as error:
                    self.error("txn.init", error.args[0])
                    time.sleep(1)
            return None

        producer = fresh()
        number = 0
        while producer is not None and not self.stop_writers.is_set():
            keys = [b"t-%07d-%d" % (number, i) for i in range(10)]
            number += 1
            outcome = "uncertain"
            try:
                producer.begin_transaction()
                for key in keys:
                    producer.produce(TXN, key=key, value=key, partition=number % PARTITIONS)
                outcome = self._commit(producer)
            except KafkaException as error:
                self.error("txn", error.args[0])
                outcome = "aborted" if self._abort(producer) else "uncertain"
            with self.lock:
                if outcome == "committed":
                    self.figures.txn_committed += 1
                    self.txn_committed.update(keys)
                elif outcome == "aborted":
                    self.figures.txn_aborted += 1
                    self.txn_aborted.update(keys)
                else:
                    self.figures.txn_uncertain += 1
            if outcome == "uncertain":
                producer = fresh()  # a new instance fences the old one and ends its transaction
            time.sleep(0.2)

    def _commit(self, producer: Any) -> str:
        from confluent_kafka import KafkaException

        for _ in range(10):
            try:
                producer.commit_transaction(TIMEOUT)
                return "committed"
            except KafkaException as error:
                failure = error.args[0]
                self.error("txn.commit", failure)
                if failure.txn_requires_abort():
                    return "aborted" if self._abort(producer) else "uncertain"
                if not failure.retriable():
                    return "uncertain"
                time.sleep(1)
        return "uncertain"

    def _abort(self, producer: Any) -> bool:
        from confluent_kafka import KafkaException

        for _ in range(10):
            try:
                producer.abort_transaction(TIMEOUT)
                return True
            except KafkaException as error:
                self.error("txn.abort", error.args[0])
                if not error.args[0].retriable():
                    return False
                time.sleep(1)
        return False

    def churn(self) -> None:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(self.common())
        number = 0
        while not self.stop_writers.wait(self.args.churn_every):
            topic = f"soak-churn-{number}"
            number += 1
            try:
                admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(TIMEOUT)
                # A producer per topic, gone before the delete: a producer that still knows a
                # deleted topic asks Metadata for it with auto-creation and, with Kafka's
                # auto.create.topics.enable=true, creates it again (as on Kafka).
                producer = Producer({**self.common(), "acks": "all"})
                for index in range(10):
                    producer.produce(topic, value=b"%d" % index, partition=index % 2)
                left = producer.flush(TIMEOUT)
                del producer
                if left:
                    self.error("churn", "produce to a fresh topic not delivered")
                admin.delete_topics([topic])[topic].result(TIMEOUT)
                with self.lock:
                    self.figures.churned_topics += 1
            except Exception as error:
                self.error("churn", error)

    # --- the run -------------------------------------------------------------------------------

    def spawn(self, name: str, target: Any, *args: Any) -> None:
        def run() -> None:
            try:
                target(*args)
            except Exception as error:  # a worker that dies is an error, not a hang
                self.error(name, f"worker died: {error!r}")

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def run(self) -> Figures:
        self.start_kemu()
        self.setup()
        threading.Thread(target=self.sampler, daemon=True).start()
        readers = [
            ("soak-classic", self.consumer, "soak-classic", "classic"),
            ("soak-848", self.consumer, "soak-848", "consumer"),
            ("soak-share", self.share_consumer, "soak-share"),
        ]
        for name, target, *args in readers:
            self.spawn(name, target, *args)
        writers_began = len(self.threads)
        self.spawn("producer", self.producer)
        self.spawn("transactions", self.transactions)
        self.spawn("churn", self.churn)
        end = self.began + self.args.minutes * 60
        next_kill = time.monotonic() + self.args.kill_every
        while time.monotonic() < end:
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
            if time.monotonic() >= next_kill and end - time.monotonic() > 15:
                self.kill_kemu()
                time.sleep(self.args.down_for)
                self.start_kemu()
                next_kill = time.monotonic() + self.args.kill_every
            if self.kemu.process is not None and self.kemu.process.poll() is not None:
                self.error("kemu", f"exited by itself with {self.kemu.process.returncode}")
                with self.lock:
                    self.outages.append((time.monotonic(), None))
                self.start_kemu()
        self.log("stopping the writers")
        self.stop_writers.set()
        for thread in self.threads[writers_began:]:
            thread.join(self.args.drain_timeout + 30)
        self.drain()
        self.stop_readers.set()
        for thread in self.threads[:writers_began]:
            thread.join(60)
        self.stop_sampler.set()
        self.kill_kemu()  # the last SIGKILL: what is read back below survived it
        self.start_kemu()
        try:
            self.verify()
        finally:
            self.kemu.stop()
        return self.figures

    def drain(self) -> None:
        """Let each group catch up with every acknowledged record (or time out)."""
        deadline = time.monotonic() + self.args.drain_timeout
        while time.monotonic() < deadline:
            with self.lock:
                behind = {g: len(self.acked - seen) for g, seen in self.seen.items()}
            if not any(behind.values()):
                break
            time.sleep(1)
        with self.lock:
            self.figures.undelivered = {g: len(self.acked - s) for g, s in self.seen.items()}
        self.log(f"drained: {self.figures.undelivered} acked keys not delivered per group")

    def verify(self) -> None:
        data = _read_keys(self.kemu.bootstrap, DATA, "read_uncommitted")
        committed = _read_keys(self.kemu.bootstrap, TXN, "read_committed")
        figures = self.figures
        figures.produced_acked = len(self.acked)
        figures.lost = len(self.acked - data)
        figures.txn_lost = len(self.txn_committed - committed)
        figures.aborted_visible = len(self.txn_aborted & committed)
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.kemu.bootstrap})
        topics = admin.list_topics(timeout=TIMEOUT)
        figures.churn_topics_left = sum(name.startswith("soak-churn-") for name in topics.topics)
        self.log(
            f"read back {len(data)} data and {len(committed)} committed transactional records: "
            f"lost {figures.lost}, transactional lost {figures.txn_lost}, "
            f"aborted visible {figures.aborted_visible}"
        )


def _read_keys(bootstrap: str, topic: str, isolation: str) -> set[bytes]:
    """Every key of ``topic`` up to its end offsets as of now."""
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"soak-verify-{topic}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    ends: dict[int, int] = {}
    for partition in range(PARTITIONS):
        _, high = reader.get_watermark_offsets(TopicPartition(topic, partition), TIMEOUT)
        ends[partition] = high
    reader.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    keys: set[bytes] = set()
    done: set[int] = {p for p, high in ends.items() if high == 0}
    deadline = time.monotonic() + 600
    while len(done) < PARTITIONS and time.monotonic() < deadline:
        for message in reader.consume(1000, 1.0):
            error = message.error()
            if error is not None:
                if error.code() == error._PARTITION_EOF:
                    done.add(message.partition())
                continue
            keys.add(message.key())
            if message.offset() + 1 >= ends[message.partition()]:
                done.add(message.partition())
    reader.close()
    if len(done) < PARTITIONS:
        raise RuntimeError(f"{topic}: could not read up to {ends}")
    return keys


def _error_name(what: object) -> str:
    name = getattr(what, "name", None)
    if callable(name):
        return str(name())
    if isinstance(what, BaseException) and what.args and hasattr(what.args[0], "name"):
        return str(what.args[0].name())
    return type(what).__name__ if isinstance(what, BaseException) else str(what)[:80]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def summary(figures: Figures) -> list[str]:
    lines = [
        f"{figures.minutes:g} min, {figures.kills} SIGKILLs (every {figures.kill_every_s:g} s), "
        f"{figures.produced_acked} records acked (acks=all), {figures.txn_committed} "
        f"transactions committed, {figures.txn_aborted} aborted, {figures.txn_uncertain} "
        f"uncertain, {figures.churned_topics} topics created and deleted "
        f"({figures.churn_topics_left} left at the end)",
        f"consumed: {figures.consumed}",
        f"lost: {figures.lost} acked, {figures.txn_lost} committed transactional; aborted "
        f"visible: {figures.aborted_visible}; delivery failures: {figures.delivery_failures}; "
        f"undelivered per group: {figures.undelivered}",
        f"errors in steady state: {sum(figures.errors_steady.values())} "
        f"{dict(figures.errors_steady)}",
        f"errors around restarts: {sum(figures.errors_restart.values())} "
        f"{dict(figures.errors_restart)}",
        "life | kemu.log.flush | ready s | RSS MiB first/last | fds first/last/max",
    ]
    for number, life in enumerate(figures.lives, 1):
        rss = [value for _, value in life.rss_mb] or [0.0]
        fds = [value for _, value in life.fds] or [0]
        lines.append(
            f"{number} | {life.flush} | {life.ready_s:.1f} | {rss[0]:.0f}/{rss[-1]:.0f} | "
            f"{fds[0]}/{fds[-1]}/{max(fds)}"
        )
    return lines


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--kill-every", type=float, default=300.0, help="seconds between kills")
    parser.add_argument("--down-for", type=float, default=1.0, help="seconds kemu stays down")
    parser.add_argument("--rate", type=int, default=200, help="data records per second")
    parser.add_argument("--churn-every", type=float, default=5.0, help="seconds between topics")
    parser.add_argument("--grace", type=float, default=30.0, help="restart error window, s")
    parser.add_argument("--sample-every", type=float, default=5.0, help="RSS/fd sampling, s")
    parser.add_argument("--drain-timeout", type=float, default=120.0)
    parser.add_argument("--run-dir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    soak = Soak(args)
    soak.log(f"run dir {soak.run_dir}")
    try:
        figures = soak.run()
    finally:
        soak.kemu.stop()
    for line in summary(figures):
        soak.log(line)
    if args.json is not None:
        payload = asdict(figures)
        # asdict rebuilds a Counter from its (key, count) pairs: give the counts back as dicts
        payload["errors_steady"] = dict(figures.errors_steady)
        payload["errors_restart"] = dict(figures.errors_restart)
        payload["ok"] = figures.ok
        args.json.write_text(json.dumps(payload, indent=1))
    return 0 if figures.ok else 1


if __name__ == "__main__":
    sys.exit(main())
