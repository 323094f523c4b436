"""Golden answers of Kafka 4.4's own quota managers for kemu's quota arithmetic test.

``QuotaGolden.java`` replays scenarios (quotas set and removed at every level, values recorded
and taken back at chosen times) on Kafka's ClientQuotaManager / ClientRequestQuotaManager /
ControllerMutationQuotaManager from the jars ``make bench`` fetches, and prints each throttle
time and quota-window maximum, and for controller mutations which topics a request's strict or
permissive quota accepts and the answer's throttle time.
``python -m conformance.quota_golden`` writes scenarios and answers to
``tests/unit/cluster/quota_golden.json``; ``tests/unit/cluster/test_quota_enforcement.py`` replays
them on ``kemu/cluster/quota_enforcement.py`` and expects the same numbers.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("QuotaGolden.java")
TARGET = Path(__file__).resolve().parent.parent / "tests" / "unit" / "quota_golden.json"

KINDS = ("produce", "fetch", "request")
USERS = ("alice", "bob", "ANONYMOUS")
CLIENTS = ("app-1", "app-2", "~")


def _single_client_quota() -> list[str]:
    """A producer at a steady 3x its quota, then idle past the samples, then a burst."""
    lines = ["config 11 1", "set produce - app-1 1000"]
    now = 1_000_000
    for _ in range(60):
        lines.append(f"record produce ANONYMOUS app-1 300 {now}")
        now += 100
    now += 30_000
    for size in (50_000, 10, 10, 5_000):
        lines.append(f"record produce ANONYMOUS app-1 {size} {now}")
        now += 7
    return lines


def _window_settings() -> list[str]:
    lines = ["config 3 2", "set fetch * - 2048", "set request - * 50"]
    now = 5_000
    for step in range(40):
        lines.append(f"record fetch bob app-2 {700 + 13 * step} {now}")
        lines.append(f"record request bob app-2 {3.5 + step % 7} {now}")
        if step % 5 == 4:
            lines.append(f"unrecord fetch bob app-2 {700 + 13 * step} {now}")
            lines.append("max fetch bob app-2")
        now += 377
    return lines


def _random_scenario(seed: int) -> list[str]:
    """Quotas at all eight levels coming and going while clients record."""
    rng = random.Random(seed)
    lines = [f"config {rng.choice((2, 5, 11))} {rng.choice((1, 2))}"]
    now = rng.randrange(0, 10_000_000)
    for _ in range(250):
        kind = rng.choice(KINDS)
        roll = rng.random()
        if roll < 0.15:
            user = rng.choice(("-", "*", "alice", "bob"))
            client = rng.choice(("-", "*", "app-1", "app-2") if user != "-" else ("*", "app-1"))
            if rng.random() < 0.25:
                lines.append(f"remove {kind} {user} {client}")
            else:
                value = rng.choice((10, 100, 1000, 5000, 12.5, 250))
                lines.append(f"set {kind} {user} {client} {value}")
        elif roll < 0.2:
            lines.append(f"max {kind} {rng.choice(USERS)} {rng.choice(CLIENTS)}")
        else:
            now += rng.choice((0, 1, 3, 50, 200, 999, 1000, 1001, 2500, 15_000))
            value = rng.choice((1, 17, 120, 900, 4000, 25_000))
            verb = "unrecord" if rng.random() < 0.05 else "record"
            lines.append(f"{verb} {kind} {rng.choice(USERS)} {rng.choice(CLIENTS)} {value} {now}")
    return lines


def _mutation_bursts() -> list[str]:
    """Requests creating many partitions at once against 2 partitions/s: the first topics fit,
    the rest are refused (strict) or throttled (permissive), and the bucket refills."""
    lines = ["config 11 1", "set mutation - admin 2"]
    now = 1_700_000_000_000  # a wall-clock time: the bucket starts full
    for _ in range(3):
        lines.append(f"mutate strict ANONYMOUS admin {now} {now} " + " ".join(["3"] * 10))
        now += 1500
        lines.append(f"mutate strict ANONYMOUS admin {now} {now + 700} 1 1")
        now += 9000
        lines.append(f"mutate permissive ANONYMOUS admin {now} {now} 30 4")
        now += 30_000
    lines.append(f"mutate strict ANONYMOUS other {now} {now} 1000")
    return lines


def _random_mutation_scenario(seed: int) -> list[str]:
    """controller_mutation_rate quotas at all eight levels coming and going while requests of
    both kinds mutate."""
    rng = random.Random(1000 + seed)
    lines = [f"config {rng.choice((2, 5, 11))} {rng.choice((1, 2))}"]
    now = rng.choice((0, 500, rng.randrange(1, 10_000_000)))
    for _ in range(200):
        if rng.random() < 0.12:
            user = rng.choice(("-", "*", "alice", "bob"))
            client = rng.choice(("-", "*", "app-1", "app-2") if user != "-" else ("*", "app-1"))
            if rng.random() < 0.25:
                lines.append(f"remove mutation {user} {client}")
            else:
                value = rng.choice((0.5, 1, 2, 5, 10, 25.5, 100))
                lines.append(f"set mutation {user} {client} {value}")
            continue
        now += rng.choice((0, 1, 10, 200, 999, 1000, 2500, 15_000))
        mode = rng.choice(("strict", "strict", "permissive"))
        permits = " ".join(str(rng.choice((1, 2, 3, 10, 50))) for _ in range(rng.randint(1, 6)))
        answer = now + rng.choice((0, 0, 5, 300, 5000))
        user, client = rng.choice(USERS), rng.choice(CLIENTS)
        lines.append(f"mutate {mode} {user} {client} {now} {answer} {permits}")
    return lines


def scenarios() -> dict[str, list[str]]:
    found = {"single_client_quota": _single_client_quota(), "window_settings": _window_settings()}
    for seed in range(12):
        found[f"random_{seed}"] = _random_scenario(seed)
    found["mutation_bursts"] = _mutation_bursts()
    for seed in range(6):
        found[f"mutation_random_{seed}"] = _random_mutation_scenario(seed)
    return found


def run_kafka(lines: list[str], classes: str) -> list[str]:
    from bench import java

    completed = subprocess.run(
        ["java", "-cp", f"{classes}:{java.LIB_DIR}/*", "QuotaGolden"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    return completed.stdout.split()


def main() -> None:
    from bench import java

    java.ensure_jars()
    javac = shutil.which("javac")
    if javac is None or shutil.which("java") is None:
        raise RuntimeError("java and javac are needed")
    with tempfile.TemporaryDirectory() as classes:
        subprocess.run([javac, "-cp", f"{java.LIB_DIR}/*", "-d", classes, str(SOURCE)], check=True)
        document = {
            "kafka_version": java.KAFKA_VERSION,
            "scenarios": {
                name: {"lines": lines, "answers": run_kafka(lines, classes)}
                for name, lines in scenarios().items()
            },
        }
    TARGET.write_text(json.dumps(document, indent=1) + "\n")
    print(f"{len(document['scenarios'])} scenarios of Kafka {java.KAFKA_VERSION} -> {TARGET}")


if __name__ == "__main__":
    main()
