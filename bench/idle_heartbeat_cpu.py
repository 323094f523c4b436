"""``python -m bench.idle_heartbeat_cpu``: what a short broker-driven heartbeat costs kemu when
nothing happens (docs/benchmarks.md, the first-record entries).

Four idle members (two KIP-848 consumers and two share consumers, confluent-kafka, subscribed to
an empty topic, each polled every 0.5 s) heartbeat on a ``kemu serve --brokers 1``; kemu's own
CPU time (user + system, from /proc) over ``--seconds`` is printed as a percentage of one core,
for ``--timing fast`` (KIP-848 consumers 50 ms, share consumers 100 ms), ``fast`` with 200 ms and
``--timing kafka`` (5000 ms).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from kemu.testing.plugin import KemuProcess

POLL_S = 0.5
SETTLE_S = 5.0
INTERVALS = (
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.min.heartbeat.interval.ms",
    "group.share.heartbeat.interval.ms",
    "group.share.min.heartbeat.interval.ms",
)
CASES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("50/100 ms (--timing fast: consumer/share)", "fast", ()),
    ("200 ms (fast, overridden)", "fast", tuple(f"{name}=200" for name in INTERVALS)),
    ("5000 ms (--timing kafka)", "kafka", ()),
)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu_percent(timing: str, overrides: tuple[str, ...], seconds: float) -> float:
    from confluent_kafka import Consumer, ShareConsumer
    from confluent_kafka.admin import AdminClient, NewTopic

    kemu = KemuProcess(brokers=1, timing=timing, overrides=list(overrides)).start()
    assert kemu.process is not None
    stop = threading.Event()
    members: list[Any] = []
    threads: list[threading.Thread] = []
    try:
        base: dict[str, str | int | float | bool] = {"bootstrap.servers": kemu.bootstrap}
        topic = f"idle-{uuid.uuid4().hex[:8]}"
        admin = AdminClient(base)
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        consumer = {**base, "group.id": f"c-{topic}", "group.protocol": "consumer"}
        for _ in range(2):
            members.append(Consumer(consumer))
            members.append(ShareConsumer({**base, "group.id": f"s-{topic}"}))
        for member in members:
            member.subscribe([topic])

        def poll(member: Any) -> None:
            while not stop.is_set():
                member.poll(POLL_S)

        threads = [threading.Thread(target=poll, args=(m,), daemon=True) for m in members]
        for thread in threads:
            thread.start()
        time.sleep(SETTLE_S)  # joined, assigned, heartbeating
        cpu_before, wall_before = cpu_seconds(kemu.process.pid), time.monotonic()
        time.sleep(seconds)
        cpu_after, wall_after = cpu_seconds(kemu.process.pid), time.monotonic()
        return (cpu_after - cpu_before) / (wall_after - wall_before) * 100
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        for member in members:
            member.close()
        kemu.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.idle_heartbeat_cpu", description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0, help="measured, per case")
    parser.add_argument("--rounds", type=int, default=2, help="of every case")
    args = parser.parse_args(argv)
    for _ in range(args.rounds):
        for title, timing, overrides in CASES:
            percent = idle_cpu_percent(timing, overrides, args.seconds)
            print(f"{title}: {percent:.2f} % of one core", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
