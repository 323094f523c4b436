"""__consumer_offsets size and restart-to-ready time before and after log compaction.

    .venv/bin/python -m bench.compaction_restart --commits 1000000 --partitions 1000

One group commits offsets for every partition of a topic (one OffsetCommit per round, so
``--commits`` records in ``--commits / --partitions`` requests) into a kemu with ``--data-dir``
and the cleaner off. kemu is SIGKILLed and restarted (cleaner still off) a few times: the time
from spawning the process to its ready line, and to a consumer reading back its committed
offsets, is the "before" figure. Then kemu runs with the cleaner on until the partition's
cleaner checkpoint is written (its first cleaning completed), is SIGKILLed, and restarted again
for the "after" figure.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.testing.plugin import KemuProcess

TOPIC = "events"
GROUP = "committer"


def offsets_bytes(data_dir: Path) -> tuple[int, int]:
    """(bytes, segment files) of every __consumer_offsets partition."""
    files = list(data_dir.glob("__consumer_offsets-*/*.log"))
    return sum(path.stat().st_size for path in files), len(files)


def commit_all(bootstrap: str, partitions: int, rounds: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    for round_number in range(1, rounds + 1):
        consumer.commit(
            offsets=[TopicPartition(TOPIC, p, round_number) for p in range(partitions)],
            asynchronous=False,
        )
    consumer.close()


def restart_times(
    kemu: KemuProcess, partitions: int, rounds: int, runs: int
) -> list[tuple[float, float]]:
    """Seconds from spawn to the ready line, and to a consumer reading back every committed
    offset, ``runs`` times."""
    found = []
    for _ in range(runs):
        kemu.kill()
        started = time.monotonic()
        kemu.start(timeout=300)
        ready = time.monotonic() - started
        consumer = Consumer({"bootstrap.servers": kemu.bootstrap, "group.id": GROUP})
        committed = consumer.committed(
            [TopicPartition(TOPIC, p) for p in range(partitions)], timeout=300
        )
        found.append((ready, time.monotonic() - started))
        consumer.close()
        assert all(tp.offset == rounds for tp in committed), "committed offsets lost"
    return found


def summary(times: list[tuple[float, float]]) -> str:
    ready = statistics.median(t for t, _ in times)
    read = statistics.median(t for _, t in times)
    runs = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in times)
    return f"ready {ready:.2f} s, committed offsets read back {read:.2f} s (runs: {runs})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--segment-bytes", type=int, default=1 << 20)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    rounds = options.commits // options.partitions
    workdir = Path(tempfile.mkdtemp(prefix="kemu-compaction-"))
    data_dir = workdir / "data"
    common = [
        "offsets.topic.num.partitions=1",
        f"offsets.topic.segment.bytes={options.segment_bytes}",
    ]
    try:
        kemu = KemuProcess(
            brokers=1,
            data_dir=data_dir,
            overrides=[*common, "log.cleaner.enable=false"],
            log_path=workdir / "kemu.log",
        ).start()
        admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
        admin.create_topics([NewTopic(TOPIC, options.partitions, 1)])[TOPIC].result(60)
        began = time.monotonic()
        commit_all(kemu.bootstrap, options.partitions, rounds)
        print(
            f"committed {rounds * options.partitions} offsets in {rounds} requests "
            f"({time.monotonic() - began:.1f} s)"
        )
        size, files = offsets_bytes(data_dir)
        before = restart_times(kemu, options.partitions, rounds, options.runs)
        print(
            f"before: __consumer_offsets {size / 1e6:.2f} MB in {files} segments; restart: "
            + summary(before)
        )
        kemu.kill()
        kemu.overrides = [*common, "log.cleaner.enable=true", "log.cleaner.backoff.ms=500"]
        began = time.monotonic()
        kemu.start(timeout=300)
        checkpoint = data_dir / "__consumer_offsets-0" / "cleaner-offset"
        while not checkpoint.exists():  # written when a cleaning of the partition completes
            time.sleep(0.5)
        size, files = offsets_bytes(data_dir)
        print(f"first cleaning done {time.monotonic() - began:.1f} s after the start")
        after = restart_times(kemu, options.partitions, rounds, options.runs)
        print(
            f"after: __consumer_offsets {size / 1e6:.2f} MB in {files} segments; restart: "
            + summary(after)
        )
        kemu.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
