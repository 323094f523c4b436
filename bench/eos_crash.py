"""The exactly-once crash harness: share group -> transform -> transactional produce, while kemu
and the pipeline's workers are SIGKILLed at random points and restarted.

    .venv/bin/python -m bench.eos_crash --seed 1 --records 20000 --workers 3
    make eos-crash ARGS="--seed 1"          # the full run
    .venv/bin/python -m bench.eos_crash --short --seed 7   # what make test runs

kemu runs as a user starts it (``kemu serve --brokers 3 --data-dir DIR --override
kemu.kip1289.enable=true``). A feeder thread writes ``--records`` input records, each with a
unique id as its key, into a source topic in chunks, one chunk per chaos event. Each worker is
its own OS process (``python -m bench.eos_crash worker``) using ``kemu.client``: a ShareConsumer
in explicit mode and a TransactionalProducer whose transactional id belongs to the worker's slot
(so a restarted worker fences its predecessor and aborts what it left open); it polls,
transforms, produces to the sink topic and stages the share acknowledgements in the same
transaction, then commits. Even slots use the one-RPC form, odd slots the two-RPC form.

A seeded chaos driver plays a schedule of events: SIGKILL a worker (restarted after a short
delay, sometimes after the transaction timeout), SIGKILL kemu (restarted from the same data dir
and ports), or restart kemu with ``KEMU_CRASH_AT=<point>`` so that it SIGKILLs itself inside a
transaction or a staging (then restarted without it). Workers that exit by themselves (fenced,
or an error they do not handle) are restarted and counted.

At the end the chaos stops, the workers drain until the share group's lag is 0 on every
partition, they are stopped, kemu is SIGKILLed and restarted once more, and a read_committed
reader checks that the sink holds every input id exactly once and the lag is still 0. The
seed decides the schedule (events, victims, delays), so a failing seed replays the same chaos;
the processes' own timing still varies from run to run.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kemu.cluster.crash_points import POINTS as KEMU_CRASH_POINTS

SOURCE, SINK, GROUP = "eos-source", "eos-sink", "eos-pipeline"
# kemu's crash points this pipeline can never reach, and why; every other point of
# kemu.cluster.crash_points is picked, so a point added there is exercised here without an edit.
UNREACHABLE_CRASH_POINTS = {
    # KIP-1191: the group has no errors.deadletterqueue.topic.name, so records past the delivery
    # count limit go straight to ARCHIVED, never ARCHIVING.
    "share.archiving": "no dead-letter queue topic configured for the group",
    "share.dead_lettered": "no dead-letter queue topic configured for the group",
    # The log cleaner only cleans rolled segments: the compacted internal topics roll at 100 MiB
    # (or after 7 days) and the input and output topics are not compacted.
    "clean.cleaned_written": "no segment is ever rolled on a compacted topic",
    "clean.swap_committed": "no segment is ever rolled on a compacted topic",
    "clean.old_segments_deleted": "no segment is ever rolled on a compacted topic",
}
# Sorted: a frozenset's order changes with the string hash seed, the seed's schedule must not.
CRASH_POINTS = tuple(sorted(KEMU_CRASH_POINTS - UNREACHABLE_CRASH_POINTS.keys()))
# Where a worker restarted with EOS_DIE_AT=<point>:<n> SIGKILLs itself in its n-th transaction:
# records acquired; output produced; acknowledgements staged; committed, before the next poll.
WORKER_POINTS = ("polled", "produced", "staged", "committed")
DIE_AT = "EOS_DIE_AT"
REPO = Path(__file__).resolve().parents[1]

# Worker exit codes.
EXIT_STOPPED, EXIT_FENCED, EXIT_ERROR = 0, 3, 4


# --- the worker ---------------------------------------------------------------------------------


def transform(key: bytes, value: bytes, slot: int, delivery_count: int) -> bytes:
    return b"out:" + value.upper() + f"|slot={slot}|dc={delivery_count}".encode()


async def worker(args: argparse.Namespace) -> int:
    from kemu.client import (
        AcknowledgeType,
        IllegalStateError,
        KafkaError,
        ProducerFencedError,
        ShareConsumer,
        TransactionalProducer,
    )

    slot: int = args.slot
    form = "two-rpc" if slot % 2 else "one-rpc"
    rng = random.Random(f"{args.seed}-{slot}-{os.getpid()}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    consumer = ShareConsumer(
        args.bootstrap,
        GROUP,
        acknowledgement_mode="explicit",
        max_poll_records=args.max_poll_records,
        client_id=f"eos-worker-{slot}",
    )
    producer = TransactionalProducer(
        args.bootstrap,
        f"eos-worker-{slot}",
        transaction_timeout_ms=args.transaction_timeout_ms,
        share_acknowledgement_form=form,
        client_id=f"eos-worker-{slot}",
    )

    def say(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} worker {slot} pid {os.getpid()}: {text}", flush=True)

    committed = aborted = 0
    die_point, _, die_in = os.environ.get(DIE_AT, "").partition(":")

    def die_at(point: str) -> None:
        if point == die_point and committed + aborted + 1 == int(die_in):
            say(f"SIGKILL myself at {point}")
            os.kill(os.getpid(), signal.SIGKILL)

    try:
        await consumer.subscribe([SOURCE])
        await producer.init_transactions()
        say(f"ready ({form}, producer id {producer.producer_id} epoch {producer.producer_epoch})")
        while not stop.is_set():
            batch = await consumer.poll(timeout=1.0)
            if not batch:
                continue
            die_at("polled")
            producer.begin_transaction()
            try:
                await producer.send_many(
                    SINK,
                    [
                        (r.key, transform(r.key or b"", r.value or b"", slot, r.delivery_count))
                        for r in batch
                    ],
                )
                die_at("produced")
                for record in batch:
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT)
                await producer.send_share_acknowledgements_to_transaction(
                    consumer.acknowledgements_for_transaction(), consumer.share_group_metadata()
                )
                die_at("staged")
                if args.pause_ms:
                    await asyncio.sleep(rng.uniform(0, args.pause_ms / 1000))
                await producer.commit_transaction()
                die_at("committed")
                committed += 1
            except ProducerFencedError as exc:
                say(f"fenced: {exc}")
                return EXIT_FENCED
            except KafkaError as exc:
                say(f"aborting a transaction of {len(batch)} records: {exc}")
                try:
                    await producer.abort_transaction()
                except ProducerFencedError:
                    raise
                except KafkaError as failed:
                    say(f"abort failed, exiting (a successor fences and aborts): {failed}")
                    return EXIT_ERROR
                aborted += 1
                for record in batch:
                    with contextlib.suppress(IllegalStateError):
                        consumer.acknowledge(record, AcknowledgeType.RELEASE)
                consumer.acknowledgements_for_transaction()  # drop the aborted ACCEPTs
        say(f"stopping: {committed} transactions committed, {aborted} aborted")
        return EXIT_STOPPED
    except ProducerFencedError as exc:
        say(f"fenced: {exc}")
        return EXIT_FENCED
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(consumer.close(), 10)
        with contextlib.suppress(Exception):
            await producer.close()


# --- the driver ---------------------------------------------------------------------------------


def deal(points: tuple[str, ...], count: int, rng: random.Random) -> list[str]:
    """``count`` crash points, each of ``points`` once per round in a shuffled order: with at
    least as many kills as points, every point is tried (a random choice would leave some out)."""
    dealt: list[str] = []
    while len(dealt) < count:
        round_ = list(points)
        rng.shuffle(round_)
        dealt += round_[: count - len(dealt)]
    return dealt


@dataclass
class Figures:
    seed: int
    records: int
    workers: int
    source_partitions: int
    kemu_kills: int = 0
    kemu_crash_points: dict[str, int] = field(default_factory=dict)
    crash_points_not_reached: dict[str, int] = field(default_factory=dict)
    worker_kills: int = 0
    worker_self_kills: dict[str, int] = field(default_factory=dict)
    worker_freezes: int = 0
    worker_exits: dict[str, int] = field(default_factory=dict)
    output_records: int = 0
    distinct_ids: int = 0
    lost: int = -1
    duplicated: int = -1
    input_duplicated: int = -1
    input_missing: int = -1
    input_failed: dict[str, int] = field(default_factory=dict)
    final_lag: dict[int, int] = field(default_factory=dict)
    drain_seconds: float = 0.0
    seconds: float = 0.0
    ok: bool = False


class Harness:
    def __init__(self, args: argparse.Namespace) -> None:
        from kemu.testing.plugin import KemuProcess

        self.args = args
        self.rng = random.Random(args.seed)
        self.run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="eos-crash-"))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.figures = Figures(args.seed, args.records, args.workers, args.partitions)
        self.kemu = KemuProcess(
            brokers=3,
            data_dir=self.run_dir / "data",
            overrides=[
                "kemu.kip1289.enable=true",
                "share.coordinator.state.topic.num.partitions=3",
                "group.share.record.lock.duration.ms=15000",
                "group.share.delivery.count.limit=10",
            ],
            log_path=self.run_dir / "kemu.log",
        )
        self.procs: dict[int, subprocess.Popen[bytes] | None] = {}
        self.restart_at: dict[int, float] = {}
        self.worker_armed: dict[int, str] = {}  # slot -> EOS_DIE_AT of its next start
        self.worker_running_armed: dict[int, str] = {}
        self.frozen: dict[int, float] = {}  # slot -> when it gets SIGCONT
        self.armed: tuple[str, float] | None = None
        self.chunks: collections.deque[int] = collections.deque()
        self.feeder_done = threading.Event()
        self.feeder_error: list[BaseException] = []
        self.fed = 0

    def log(self, text: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {text}"
        print(line, flush=True)
        with open(self.run_dir / "driver.log", "a") as out:
            out.write(line + "\n")

    # --- kemu --------------------------------------------------------------------------------

    def start_kemu(self, crash_at: str | None = None) -> None:
        self.kemu.env = {"KEMU_CRASH_AT": crash_at} if crash_at else {}
        for _ in range(5):
            try:
                began = time.monotonic()
                self.kemu.start(timeout=120)
                self.log(f"kemu ready in {time.monotonic() - began:.1f} s")
                return
            except RuntimeError as exc:
                if crash_at:  # it reached the point during start-up recovery
                    self.count_crash_point(crash_at, "during start-up")
                    self.kemu.env = {}
                    crash_at = None
                    self.armed = None
                    continue
                self.log(f"kemu did not start, again: {str(exc)[-300:]}")
                time.sleep(1)
        raise RuntimeError("kemu does not start; see kemu.log")

    def count_crash_point(self, point: str, when: str) -> None:
        self.figures.kemu_crash_points[point] = self.figures.kemu_crash_points.get(point, 0) + 1
        self.log(f"kemu SIGKILLed itself at {point} {when}")

    def kill_kemu(self) -> None:
        self.kemu.kill()
        self.figures.kemu_kills += 1
        self.log(f"SIGKILL kemu (#{self.figures.kemu_kills})")

    def check_kemu(self) -> None:
        process = self.kemu.process
        if process is not None and process.poll() is not None:
            if self.armed is not None:
                self.count_crash_point(self.armed[0], "")
            else:
                self.log(f"kemu exited by itself with {process.returncode}")
                self.figures.worker_exits["kemu-unexpected"] = (
                    self.figures.worker_exits.get("kemu-unexpected", 0) + 1
                )
            self.armed = None
            self.start_kemu()
        elif self.armed is not None and time.monotonic() > self.armed[1]:
            self.log(f"{self.armed[0]} not reached in time")
            missed = self.figures.crash_points_not_reached
            missed[self.armed[0]] = missed.get(self.armed[0], 0) + 1
            self.armed = None
            self.kill_kemu()
            self.start_kemu()

    # --- workers -----------------------------------------------------------------------------

    def start_worker(self, slot: int) -> None:
        env = {**os.environ}
        env.pop(DIE_AT, None)
        armed = self.worker_armed.pop(slot, None)
        if armed:
            env[DIE_AT] = armed
            self.worker_running_armed[slot] = armed
        command = [
            sys.executable,
            "-m",
            "bench.eos_crash",
            "worker",
            "--bootstrap",
            self.kemu.bootstrap,
            "--slot",
            str(slot),
            "--seed",
            str(self.args.seed),
            "--max-poll-records",
            str(self.args.max_poll_records),
            "--transaction-timeout-ms",
            str(self.args.transaction_timeout_ms),
            "--pause-ms",
            str(self.args.pause_ms),
        ]
        out = open(self.run_dir / f"worker-{slot}.log", "ab")  # noqa: SIM115
        self.procs[slot] = subprocess.Popen(
            command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env
        )
        out.close()
        self.restart_at.pop(slot, None)

    def freeze_worker(self, slot: int, seconds: float) -> None:
        """SIGSTOP: the worker's connections stay open but it says nothing, so the locks of the
        records it acquired expire and other workers get them; then SIGCONT."""
        proc = self.procs.get(slot)
        if proc is None or proc.poll() is not None or slot in self.frozen:
            return
        proc.send_signal(signal.SIGSTOP)
        self.frozen[slot] = time.monotonic() + seconds
        self.figures.worker_freezes += 1
        self.log(f"SIGSTOP worker {slot} for {seconds:.1f} s (#{self.figures.worker_freezes})")

    def thaw(self, slot: int) -> None:
        proc = self.procs.get(slot)
        if self.frozen.pop(slot, None) is not None and proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            self.log(f"SIGCONT worker {slot}")

    def kill_worker(self, slot: int, restart_after: float) -> None:
        self.frozen.pop(slot, None)
        proc = self.procs.get(slot)
        self.worker_running_armed.pop(slot, None)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            self.figures.worker_kills += 1
            self.log(
                f"SIGKILL worker {slot} (#{self.figures.worker_kills}), back in "
                f"{restart_after:.1f} s"
            )
        self.procs[slot] = None
        self.restart_at[slot] = time.monotonic() + restart_after

    def check_workers(self) -> None:
        now = time.monotonic()
        for slot in range(self.args.workers):
            if self.frozen.get(slot, now + 1) <= now:
                self.thaw(slot)
            proc = self.procs.get(slot)
            if proc is not None and proc.poll() is not None:
                code = proc.returncode
                armed = self.worker_running_armed.pop(slot, None)
                if armed and code == -signal.SIGKILL:
                    point = armed.split(":")[0]
                    kills = self.figures.worker_self_kills
                    kills[point] = kills.get(point, 0) + 1
                    self.log(f"worker {slot} SIGKILLed itself at {armed}; restarting")
                    self.procs[slot] = None
                    self.restart_at[slot] = now + self.rng.uniform(0.2, 2.0)
                    continue
                reason = {
                    EXIT_FENCED: "fenced",
                    EXIT_STOPPED: "stopped",
                    EXIT_ERROR: "abort failed",
                }.get(code, f"exit {code}")
                self.figures.worker_exits[reason] = self.figures.worker_exits.get(reason, 0) + 1
                self.log(f"worker {slot} exited by itself ({reason}); restarting")
                self.procs[slot] = None
                self.restart_at[slot] = now + 0.5
            if self.procs.get(slot) is None and now >= self.restart_at.get(slot, 0):
                self.start_worker(slot)

    def stop_workers(self) -> None:
        for slot in list(self.frozen):
            self.thaw(slot)
        for proc in self.procs.values():
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for slot, proc in self.procs.items():
            if proc is None:
                continue
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
                self.log(f"worker {slot} did not stop on SIGTERM: killed")

    # --- input -------------------------------------------------------------------------------

    def feeder(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.kemu.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 600_000,
                "log_level": 0,  # kemu restarting is expected: no connection-refused noise
            }
        )
        failed = self.figures.input_failed

        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                failed[error.name()] = failed.get(error.name(), 0) + 1

        try:
            while True:
                if not self.chunks:
                    if self.feeder_done.is_set():
                        break
                    time.sleep(0.05)
                    continue
                count = self.chunks.popleft()
                for _ in range(count):
                    key = f"{self.fed:08d}".encode()
                    while True:
                        try:
                            producer.produce(
                                SOURCE, value=b"record-" + key, key=key, on_delivery=delivered
                            )
                            break
                        except BufferError:
                            producer.poll(0.1)
                    self.fed += 1
                    producer.poll(0)
                producer.flush(0.1)
            left = producer.flush(600)
            if left:
                raise RuntimeError(f"{left} input records not delivered")
        except BaseException as exc:
            self.feeder_error.append(exc)
            raise

    # --- the run -----------------------------------------------------------------------------

    def schedule(self) -> list[str]:
        a = self.args
        crash = deal(CRASH_POINTS, a.crash_point_kills, self.rng)
        events = ["kemu"] * a.kemu_kills + [f"crash:{p}" for p in crash]
        events += ["worker"] * a.worker_kills + ["freeze"] * a.worker_freezes
        self.rng.shuffle(events)
        return events

    def setup(self) -> None:
        """The topics, and the group's ``share.auto.offset.reset=earliest``: with Kafka's default
        (latest) a share partition starts where its leader first loads it, which a SIGKILL of
        kemu before the first fetch would put after input already written."""
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            AdminClient,
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            NewTopic,
            ResourceType,
        )

        admin = AdminClient({"bootstrap.servers": self.kemu.bootstrap})
        futures = admin.create_topics(
            [NewTopic(SOURCE, self.args.partitions, 3), NewTopic(SINK, 3, 3)]
        )
        for future in futures.values():
            future.result(timeout=60)
        earliest = ConfigEntry(
            "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
        )
        resource = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[earliest])
        admin.incremental_alter_configs([resource])[resource].result(timeout=60)

    def run(self) -> Figures:
        a = self.args
        started = time.monotonic()
        self.log(
            f"eos-crash seed={a.seed} records={a.records} workers={a.workers} "
            f"partitions={a.partitions} run dir {self.run_dir}"
        )
        self.start_kemu()
        self.setup()
        events = self.schedule()
        per_chunk = max(1, a.records // (len(events) + 1))
        planned = 0
        feeder = threading.Thread(target=self.feeder, daemon=True)
        feeder.start()
        for slot in range(a.workers):
            self.start_worker(slot)
        for event in events:
            chunk = min(per_chunk, a.records - planned)
            self.chunks.append(chunk)
            planned += chunk
            self.wait(self.rng.uniform(a.min_gap, a.max_gap))
            while self.armed is not None:
                self.wait(0.2)
            if event == "kemu":
                self.kill_kemu()
                self.start_kemu()
            elif event.startswith("crash:"):
                point = event.split(":", 1)[1]
                self.kill_kemu()
                self.log(f"restart kemu with KEMU_CRASH_AT={point}")
                self.armed = (point, time.monotonic() + a.crash_point_timeout)
                self.start_kemu(point)
            elif event == "freeze":
                self.freeze_worker(
                    self.rng.randrange(a.workers),
                    self.rng.uniform(a.freeze_seconds[0], a.freeze_seconds[1]),
                )
            else:
                slot = self.rng.randrange(a.workers)
                late = self.rng.random() < 0.15
                delay = a.transaction_timeout_ms / 1000 + 2 if late else self.rng.uniform(0.2, 3.0)
                if self.rng.random() < a.worker_point_share:
                    # the successor SIGKILLs itself at a point of one of its first transactions
                    armed = f"{self.rng.choice(WORKER_POINTS)}:{self.rng.randint(1, 3)}"
                    self.worker_armed[slot] = armed
                    self.log(f"worker {slot} restarts with {DIE_AT}={armed}")
                self.kill_worker(slot, delay)
        self.chunks.append(a.records - planned)
        self.feeder_done.set()
        while self.armed is not None:
            self.wait(0.2)
        self.log("chaos over: draining")
        drain_started = time.monotonic()
        while feeder.is_alive():
            self.wait(0.5)
        if self.feeder_error:
            raise RuntimeError(f"feeder failed: {self.feeder_error[0]}")
        self.log(f"all {self.fed} input records written")
        lag = self.wait_for_lag(drain_started + a.drain_timeout)
        self.figures.drain_seconds = round(time.monotonic() - drain_started, 1)
        self.log(f"drained: lag {lag}; stopping workers, then a last SIGKILL of kemu")
        self.stop_workers()
        self.kill_kemu()
        self.start_kemu()
        self.verify()
        self.figures.seconds = round(time.monotonic() - started, 1)
        self.kemu.stop()
        return self.figures

    def wait(self, seconds: float) -> None:
        """Sleep, restarting whatever died meanwhile."""
        deadline = time.monotonic() + seconds
        while True:
            self.check_kemu()
            self.check_workers()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(0.1, left))

    def lag(self) -> dict[int, int]:
        from kemu.client import Admin

        async def ask() -> dict[int, int]:
            async with Admin(self.kemu.bootstrap) as admin:
                offsets = await admin.share_group_offsets(GROUP, SOURCE)
                return {p: o.lag for p, o in offsets.items()}

        return asyncio.run(asyncio.wait_for(ask(), 60))

    def wait_for_lag(self, deadline: float) -> dict[int, int]:
        lag: dict[int, int] = {}
        while time.monotonic() < deadline:
            try:
                lag = self.lag()
            except Exception as exc:  # kemu restarting, a timeout: ask again
                self.log(f"lag not known yet: {exc}")
            if lag and all(v == 0 for v in lag.values()):
                return lag
            self.wait(2.0)
        self.log(f"drain timed out with lag {lag}")
        return lag

    def verify(self) -> None:
        figures = self.figures
        figures.final_lag = self.lag()
        sink = asyncio.run(self.read_all(SINK, "read_committed", self.args.records))
        source = asyncio.run(self.read_all(SOURCE, "read_uncommitted", self.args.records))
        counts = collections.Counter(sink)
        expected = {f"{i:08d}".encode() for i in range(self.args.records)}
        figures.output_records = len(sink)
        figures.distinct_ids = len(counts)
        figures.lost = len(expected - set(counts))
        figures.duplicated = sum(n - 1 for n in counts.values() if n > 1)
        strays = set(counts) - expected
        figures.input_duplicated = len(source) - len(set(source))
        figures.input_missing = len(expected - set(source))
        if figures.input_missing or figures.input_failed:
            self.log(
                f"the source lacks {figures.input_missing} input records (delivery failures "
                f"{figures.input_failed}): not the pipeline's doing"
            )
        if strays:
            self.log(f"{len(strays)} output ids not in the input, e.g. {sorted(strays)[:5]}")
        if figures.lost:
            self.log(f"lost ids, e.g. {sorted(expected - set(counts))[:10]}")
        if figures.duplicated:
            dups = sorted(k for k, n in counts.items() if n > 1)
            self.log(f"duplicated ids, e.g. {dups[:10]}")
        figures.ok = (
            figures.lost == 0
            and figures.duplicated == 0
            and not strays
            and figures.input_duplicated == 0
            and len(set(source)) == self.args.records
            and all(v == 0 for v in figures.final_lag.values())
        )

    async def read_all(self, topic: str, isolation: str, expected: int) -> list[bytes]:
        """Every key of ``topic``: until all ``expected`` distinct keys were seen and two polls
        in a row brought nothing, or nothing new came for a minute."""
        from kemu.client import Consumer

        keys: list[bytes] = []
        seen: set[bytes] = set()
        empty = 0
        last_progress = time.monotonic()
        async with Consumer(self.kemu.bootstrap, isolation_level=isolation) as reader:
            await reader.assign_topic(topic)
            while True:
                records = await reader.poll(timeout=1.0)
                if records:
                    empty = 0
                    last_progress = time.monotonic()
                    for record in records:
                        keys.append(record.key or b"")
                        seen.add(record.key or b"")
                else:
                    empty += 1
                if len(seen) >= expected and empty >= 2:
                    return keys
                if time.monotonic() - last_progress > 60:
                    return keys


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.eos_crash",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("mode", nargs="?", default="run", choices=["run", "worker"])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--short",
        action="store_true",
        help="make test's configuration: 400 records, 3 workers, 2 partitions, 4+3 kills",
    )
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4, help="source topic partitions")
    parser.add_argument("--kemu-kills", type=int, default=14, help="plain SIGKILLs of kemu")
    parser.add_argument(
        "--crash-point-kills",
        type=int,
        default=2 * len(CRASH_POINTS),
        help="kemu restarts with KEMU_CRASH_AT=<point>, dealt round by round from every point "
        "of kemu.cluster.crash_points the pipeline can reach (default: two rounds, %(default)s)",
    )
    parser.add_argument("--worker-kills", type=int, default=36)
    parser.add_argument(
        "--worker-point-share",
        type=float,
        default=0.5,
        help="share of worker kills whose successor SIGKILLs itself at a point of its cycle",
    )
    parser.add_argument(
        "--worker-freezes",
        type=int,
        default=6,
        help="SIGSTOP a worker past the record lock duration (15 s), then SIGCONT",
    )
    parser.add_argument("--freeze-seconds", type=float, nargs=2, default=(17.0, 25.0))
    parser.add_argument("--min-gap", type=float, default=1.0, help="seconds between events")
    parser.add_argument("--max-gap", type=float, default=4.0)
    parser.add_argument("--max-poll-records", type=int, default=50)
    parser.add_argument(
        "--transaction-timeout-ms",
        type=int,
        default=30_000,
        help="above the freezes, so a thawed worker meets expired locks, not a timed-out txn",
    )
    parser.add_argument(
        "--pause-ms", type=int, default=20, help="a worker waits up to this long before each commit"
    )
    parser.add_argument("--crash-point-timeout", type=float, default=30.0)
    parser.add_argument("--drain-timeout", type=float, default=600.0)
    parser.add_argument("--run-dir", default=None, help="data dir and logs (default: a tmp dir)")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    # worker only
    parser.add_argument("--bootstrap", default="")
    parser.add_argument("--slot", type=int, default=0)
    args = parser.parse_args(argv)
    if args.short:
        args.records, args.workers, args.partitions = 400, 3, 2
        args.kemu_kills, args.crash_point_kills, args.worker_kills = 1, 2, 3
        args.min_gap, args.max_gap = 0.3, 1.0
        args.transaction_timeout_ms = 6_000
        args.crash_point_timeout = 10.0
        args.worker_freezes = 0
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 31)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.mode == "worker":
        return asyncio.run(worker(args))
    harness = Harness(args)
    try:
        figures = harness.run()
    finally:
        harness.stop_workers()
        harness.kemu.stop()
    summary: dict[str, Any] = asdict(figures)
    text = json.dumps(summary)
    if args.json:
        Path(args.json).write_text(text + "\n")
    harness.log(
        f"seed {figures.seed}: {figures.records} records, {figures.workers} workers, "
        f"{figures.source_partitions} source partitions; kemu SIGKILLs {figures.kemu_kills} "
        f"(self-kills at crash points {figures.kemu_crash_points}, not reached "
        f"{figures.crash_points_not_reached}), worker SIGKILLs {figures.worker_kills} (and "
        f"self-kills at points {figures.worker_self_kills}), worker freezes "
        f"{figures.worker_freezes}, worker exits "
        f"{figures.worker_exits}; output {figures.output_records} records, "
        f"{figures.distinct_ids} ids: lost {figures.lost}, duplicated {figures.duplicated}, "
        f"input duplicated {figures.input_duplicated}, missing {figures.input_missing}, "
        f"failed {figures.input_failed}, final lag {figures.final_lag}; "
        f"drain {figures.drain_seconds} s, total {figures.seconds} s"
    )
    print("EOS-CRASH " + text, flush=True)
    print(("PASS" if figures.ok else "FAIL") + f" (seed {figures.seed})", flush=True)
    return 0 if figures.ok else 1


if __name__ == "__main__":
    sys.exit(main())
