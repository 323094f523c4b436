"""Restart-to-ready and restart-to-serving for a data dir holding committed offsets,
transactions and share-state updates, before and after compaction and share-state snapshots.

    .venv/bin/python -m bench.restart_figure --commits 1000000 --transactions 10000 \\
        --share-updates 1000000

1. A kemu (one broker, ``--data-dir``, log cleaner off) gets ``--commits`` committed offsets (one
   group, ``--partitions`` partitions, one OffsetCommit per round), ``--transactions``
   transactions (transactional producers in threads, one record each, committed), and a share
   group that consumes a queue topic (its share partitions initialised), then a few unconsumed
   records. kemu is SIGKILLed.
2. The data dir is copied twice. In each copy the ``--share-updates`` ShareUpdates are written
   in-process, through kemu's own share coordinator (``KemuServer`` without listeners, so
   exactly what a running broker would append): in the "before" copy with
   ``share.coordinator.snapshot.update.records.per.snapshot`` at its maximum (no snapshot after
   the first, nothing pruned: the whole history is replayed); in the "after" copy with the
   default 500 (a ShareSnapshot per 500 updates of a key, the log pruned below the oldest
   latest snapshot). The "after" copy then runs once with the log cleaner on until
   ``__consumer_offsets`` and ``__transaction_state`` are cleaned (not at all when neither has
   rolled a segment: the cleaner leaves the active one alone).
3. Each copy is restarted ``--runs`` times (SIGKILL in between): seconds from spawning
   ``kemu serve`` to its ready line, to the group's committed offsets read back (OffsetFetch:
   the group coordinator loads ``__consumer_offsets`` on first use), and to a share consumer's
   first records (ShareFetch answered with the unconsumed records); and the CPU seconds the
   kemu process had used when its ready line came (from ``/proc``: on a machine shared with
   other work this moves far less than the wall-clock figures).

Populating takes minutes: with ``--workdir DIR`` the data dirs are kept, and
``--restart-only --workdir DIR`` restarts copies of them (a fresh copy of ``DIR/<name>/data``
per run, so every run starts from the same bytes) without populating again. Another source tree
(an older commit) is measured from a directory without a ``kemu`` package in it, with that tree
on ``PYTHONPATH`` (the ``kemu serve`` child runs ``python -m kemu.cli``, which looks in the
current directory first):

    cd /tmp && PYTHONPATH=/path/to/old/checkout /path/to/.venv/bin/python \\
        /path/to/kemu/bench/restart_figure.py --restart-only --workdir DIR --runs 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kemu.testing.plugin import KemuProcess

TOPIC, GROUP = "events", "committer"
TXN_TOPIC = "txn-out"
QUEUE, SHARE_GROUP = "queue", "queue-workers"
QUEUE_PARTITIONS, QUEUE_RECORDS, FRESH_RECORDS = 10, 1000, 10
COMMON = [
    "offsets.topic.num.partitions=1",
    "transaction.state.log.num.partitions=1",
    "share.coordinator.state.topic.num.partitions=1",
    "offsets.topic.segment.bytes=1048576",
    "transaction.state.log.segment.bytes=1048576",
    "share.coordinator.state.topic.segment.bytes=1048576",
]
NO_SNAPSHOTS = "share.coordinator.snapshot.update.records.per.snapshot=2147483647"
# a share consumer's close waits for the fetch it has in flight, which the broker holds this long
# when nothing is left to acquire (the client's default, 500 ms, is all waiting here)
CLOSE_WAIT_MS = 100


# --- populating -------------------------------------------------------------------------------


def commit_offsets(bootstrap: str, partitions: int, rounds: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    for round_number in range(1, rounds + 1):
        consumer.commit(
            offsets=[TopicPartition(TOPIC, p, round_number) for p in range(partitions)],
            asynchronous=False,
        )
    consumer.close()


def run_transactions(bootstrap: str, count: int, threads: int = 4) -> None:
    def worker(index: int, share: int) -> None:
        producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": f"bench-txn-{index}"}
        )
        producer.init_transactions(60)
        for number in range(share):
            producer.begin_transaction()
            producer.produce(TXN_TOPIC, value=b"%d" % number, partition=number % 3)
            producer.commit_transaction(60)

    workers = [
        threading.Thread(target=worker, args=(i, count // threads + (i < count % threads)))
        for i in range(threads)
    ]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()


def produce_queue(bootstrap: str, count: int, tag: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for index in range(count):
        producer.produce(QUEUE, value=tag + b"%d" % index, partition=index % QUEUE_PARTITIONS)
    assert producer.flush(60) == 0


async def share_consume(bootstrap: str, wanted: int, timeout_s: float = 300.0) -> int:
    from kemu.client import ShareConsumer

    consumer = ShareConsumer(bootstrap, SHARE_GROUP, max_wait_ms=CLOSE_WAIT_MS)
    got = 0
    try:
        await consumer.subscribe([QUEUE])
        deadline = time.monotonic() + timeout_s
        while got < wanted and time.monotonic() < deadline:
            got += len(await consumer.poll(0.5))
        await consumer.commit()
    finally:
        await consumer.close()
    return got


def populate(data_dir: Path, commits: int, partitions: int, transactions: int) -> None:
    kemu = KemuProcess(
        brokers=1,
        data_dir=data_dir,
        overrides=[*COMMON, "log.cleaner.enable=false"],
        log_path=data_dir.parent / "populate.log",
    ).start(timeout=300)
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    for future in admin.create_topics(
        [
            NewTopic(TOPIC, partitions, 1),
            NewTopic(TXN_TOPIC, 3, 1),
            NewTopic(QUEUE, QUEUE_PARTITIONS, 1),
        ]
    ).values():
        future.result(60)
    resource = ConfigResource(
        ResourceType.GROUP,
        SHARE_GROUP,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(60)
    began = time.monotonic()
    commit_offsets(kemu.bootstrap, partitions, commits // partitions)
    print(f"committed {commits} offsets ({time.monotonic() - began:.1f} s)", flush=True)
    began = time.monotonic()
    run_transactions(kemu.bootstrap, transactions)
    print(f"{transactions} transactions ({time.monotonic() - began:.1f} s)", flush=True)
    produce_queue(kemu.bootstrap, QUEUE_RECORDS, b"q")
    got = asyncio.run(share_consume(kemu.bootstrap, QUEUE_RECORDS))
    assert got == QUEUE_RECORDS, got
    produce_queue(kemu.bootstrap, FRESH_RECORDS, b"fresh")  # for the first ShareFetch later
    kemu.kill()


def write_share_updates(data_dir: Path, updates: int, overrides: list[str]) -> None:
    """Append ``updates`` ShareUpdates over the share group's keys in-process, computed by
    kemu's share coordinator shard as a leader's write would be (one record released, its
    delivery counted; a ShareSnapshot whenever the configured cadence says so), appended 500
    records to a batch (so that generating a million takes minutes, not an hour) and pruned
    as the service prunes."""
    from kemu.broker.server import KemuServer, ServerOptions
    from kemu.config.definitions import BrokerConfig
    from kemu.coordinator.share.persister import PersistedBatch
    from kemu.coordinator.share.records import encode_key, encode_value
    from kemu.coordinator.share.service import share_coordinator
    from kemu.protocol.records import build_batch, read_header

    config = BrokerConfig(dict(item.split("=", 1) for item in overrides))
    server = KemuServer(ServerOptions(brokers=1, data_dir=data_dir, config=config))
    try:
        service = share_coordinator(server.runtime)
        keys = [
            (index, key)
            for index, shard in service.shards.items()
            for key in shard.states
            if key.group_id == SHARE_GROUP
        ]
        assert keys, "the share group has no state"
        began = time.monotonic()
        pending: dict[int, list[Any]] = {}

        def flush(index: int) -> None:
            records = pending.pop(index, [])
            if not records:
                return
            partition = service.topic().partitions[index]
            batch = build_batch(
                [(encode_key(r.key), encode_value(r.value)) for r in records], timestamp_ms=0
            )
            appended = partition.append([(read_header(batch), batch)], now_ms=0)
            for offset, record in enumerate(records, appended.base_offset):
                service._note_snapshot(index, offset, record.key, record.value)
            service.replayed[index] = partition.high_watermark
            # the prune job, as if it ran after every batch: the population takes minutes, and
            # the data dir it leaves is the pruned one a long-lived broker has
            service.prune(index)

        for number in range(updates):
            index, key = keys[number % len(keys)]
            shard = service.shard(index)
            state = shard.states[key]
            offset = state.start_offset + (number // len(keys)) % FRESH_RECORDS
            result = shard.write(
                key,
                state_epoch=state.state_epoch,
                leader_epoch=state.leader_epoch,
                start_offset=state.start_offset,
                delivery_complete_count=state.delivery_complete_count,
                batches=(PersistedBatch(offset, offset, 0, 1),),
                now_ms=0,
            )
            for record in result.records:
                shard.replay(record.key, record.value)
                pending.setdefault(index, []).append(record)
            if len(pending.get(index, ())) >= 500:
                flush(index)
        for index in list(pending):
            flush(index)
        elapsed = time.monotonic() - began
        partition = service.topic().partitions[0]
        print(
            f"  {updates} share updates over {len(keys)} keys in {elapsed:.1f} s; state log "
            f"offsets {partition.log_start_offset}..{partition.high_watermark}",
            flush=True,
        )
    finally:
        asyncio.run(server.close())


def clean(data_dir: Path) -> None:
    """Run kemu with the log cleaner on until both coordinator logs were cleaned once."""
    # a log whose records all sit in its active segment has nothing the cleaner may touch
    checkpoints = [
        directory / "cleaner-offset"
        for directory in (data_dir / "__consumer_offsets-0", data_dir / "__transaction_state-0")
        if len(list(directory.glob("*.log"))) > 1
    ]
    if not checkpoints:  # a small population (the docs' shortened runs): no kemu to start
        print("  nothing to clean: every coordinator log is one active segment", flush=True)
        return
    kemu = KemuProcess(
        brokers=1,
        data_dir=data_dir,
        overrides=[*COMMON, "log.cleaner.enable=true", "log.cleaner.backoff.ms=500"],
        log_path=data_dir.parent / "clean.log",
    ).start(timeout=600)
    began = time.monotonic()
    while not all(path.exists() for path in checkpoints) and time.monotonic() - began < 900:
        time.sleep(0.5)
    print(f"  first cleanings done {time.monotonic() - began:.1f} s after the start", flush=True)
    kemu.kill()


# --- measuring --------------------------------------------------------------------------------


@dataclass
class Run:
    ready: float
    offsets: float
    share: float
    cpu_at_ready: float = 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def restart(data_dir: Path, partitions: int, rounds: int, overrides: list[str]) -> Run:
    kemu = KemuProcess(
        brokers=1, data_dir=data_dir, overrides=overrides, log_path=data_dir.parent / "run.log"
    )
    started = time.monotonic()
    kemu.start(timeout=900)
    ready = time.monotonic() - started
    assert kemu.process is not None
    cpu_at_ready = cpu_seconds(kemu.process.pid)
    consumer = Consumer({"bootstrap.servers": kemu.bootstrap, "group.id": GROUP})
    committed = consumer.committed(
        [TopicPartition(TOPIC, p) for p in range(partitions)], timeout=900
    )
    offsets = time.monotonic() - started
    consumer.close()
    assert all(tp.offset == rounds for tp in committed), "committed offsets lost"

    async def first_records() -> float:
        """Seconds from the spawn to the first records, the consumer's close not counted."""
        from kemu.client import ShareConsumer

        share = ShareConsumer(
            kemu.bootstrap,
            SHARE_GROUP,
            acknowledgement_mode="explicit",
            max_wait_ms=CLOSE_WAIT_MS,
        )
        try:
            await share.subscribe([QUEUE])
            while not await share.poll(0.2):
                pass
            return time.monotonic() - started
        finally:
            await share.close()

    share = asyncio.run(first_records())
    kemu.kill()
    return Run(ready, offsets, share, cpu_at_ready)


def summary(runs: list[Run]) -> str:
    median = {
        name: statistics.median(getattr(r, name) for r in runs)
        for name in ("ready", "offsets", "share", "cpu_at_ready")
    }
    each = ", ".join(
        f"{r.ready:.2f}/{r.offsets:.2f}/{r.share:.2f}/{r.cpu_at_ready:.2f}" for r in runs
    )
    return (
        f"ready {median['ready']:.2f} s, committed offsets {median['offsets']:.2f} s, "
        f"first share records {median['share']:.2f} s, CPU at ready "
        f"{median['cpu_at_ready']:.2f} s (runs ready/offsets/share/cpu: {each}; "
        f"load average {os.getloadavg()[0]:.1f})"
    )


def sizes(data_dir: Path) -> str:
    parts = []
    for name in ("__consumer_offsets", "__transaction_state", "__share_group_state"):
        files = list(data_dir.glob(f"{name}-*/*.log"))
        parts.append(f"{name} {sum(p.stat().st_size for p in files) / 1e6:.1f} MB")
    return ", ".join(parts)


def restart_copies(workdir: Path, partitions: int, commits: int, runs: int) -> None:
    """``--restart-only``: each run restarts a fresh copy of a kept data dir."""
    overrides_of = {
        "before": [*COMMON, "log.cleaner.enable=false", NO_SNAPSHOTS],
        "after": [*COMMON],
    }
    for name, overrides in overrides_of.items():
        kept = workdir / name / "data"
        if not kept.exists():
            continue
        print(f"{name}: {sizes(kept)}", flush=True)
        results = []
        for _ in range(runs):
            data_dir = workdir / f"{name}-run" / "data"
            shutil.rmtree(data_dir.parent, ignore_errors=True)
            shutil.copytree(kept, data_dir)
            (data_dir / ".lock").unlink(missing_ok=True)
            results.append(restart(data_dir, partitions, commits // partitions, overrides))
            shutil.rmtree(data_dir.parent, ignore_errors=True)
        print(f"  restart: {summary(results)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--transactions", type=int, default=10_000)
    parser.add_argument("--share-updates", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--restart-only",
        action="store_true",
        help="restart copies of the data dirs a previous run kept in --workdir",
    )
    options = parser.parse_args()
    if not 0 < options.partitions <= options.commits:
        # each round commits one offset per partition: fewer commits would make no round
        parser.error(
            f"--commits ({options.commits}) must be at least --partitions "
            f"({options.partitions}), which must be at least 1"
        )
    if options.restart_only:
        if options.workdir is None:
            parser.error("--restart-only needs --workdir")
        restart_copies(options.workdir, options.partitions, options.commits, options.runs)
        return
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="kemu-restart-"))
    rounds = options.commits // options.partitions
    base = workdir / "base" / "data"
    base.parent.mkdir(parents=True, exist_ok=True)
    try:
        populate(base, options.commits, options.partitions, options.transactions)
        results = {}
        for name in ("before", "after"):
            data_dir = workdir / name / "data"
            shutil.copytree(base, data_dir)
            (data_dir / ".lock").unlink(missing_ok=True)
            print(f"{name}:", flush=True)
            if name == "before":
                overrides = [*COMMON, "log.cleaner.enable=false", NO_SNAPSHOTS]
                write_share_updates(data_dir, options.share_updates, overrides)
            else:
                overrides = [*COMMON]
                write_share_updates(data_dir, options.share_updates, overrides)
                clean(data_dir)
            print(f"  {sizes(data_dir)}", flush=True)
            runs = [
                restart(data_dir, options.partitions, rounds, overrides)
                for _ in range(options.runs)
            ]
            results[name] = runs
            print(f"  restart: {summary(runs)}", flush=True)
    finally:
        if options.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
