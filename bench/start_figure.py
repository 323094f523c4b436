"""Start-up cost of ``kemu serve``: CPU seconds and wall time to the ready line, to the first
ApiVersions answer and to the first Metadata answer after it, median of several starts.

    .venv/bin/python -m bench.start_figure --runs 9

Each run spawns ``kemu serve --brokers 1`` as ``make bench`` does (a fresh ``--data-dir``, the
bench's overrides), reads its stdout until the ``kemu ready`` line and at once reads the process's
user + system CPU time from ``/proc/<pid>/stat`` (10 ms ticks); then sends one ApiVersions v0 and
reads the CPU again, then one Metadata v12 for every topic (what a client asks next; the first
request a handler module serves) and reads it once more. Wall times are from spawning the
process. On a machine shared with other work the CPU figures move far less than the wall-clock
ones. kemu's bytecode is compiled first (as ``make bench`` does), so the figures do not count
compiling edited modules.

``--baseline DIR`` also starts another source tree (e.g. ``git archive <commit> kemu | tar -x -C
DIR``) with ``DIR`` on ``PYTHONPATH``, alternating with this one run by run, so that both see the
same load; its bytecode is compiled too. ``--candidate DIR`` measures such a tree instead of this
checkout (e.g. a commit without the uncommitted edits of a shared working tree).
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.probe import api_versions_ok, cpu_seconds, free_port
from bench.servers import HOST, _compile_kemu
from kemu.testing.wire_client import build, send_once

READY_PREFIX = b"kemu ready "
READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Start:
    ready_cpu_s: float  # process CPU when its ready line was read
    ready_wall_s: float  # spawn to the ready line
    answered_cpu_s: float  # process CPU after the first ApiVersions answer
    answered_wall_s: float  # spawn to the first ApiVersions answer
    metadata_cpu_s: float  # process CPU after the first Metadata answer
    metadata_wall_s: float  # spawn to the first Metadata answer


def start_once(executable: list[str], workdir: Path, pythonpath: Path | None = None) -> Start:
    port = free_port()
    metadata = build(
        3,
        12,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    command = [
        *executable,
        "serve",
        "--brokers",
        "1",
        "--port",
        str(port),
        "--override",
        "num.partitions=1",
        "--override",
        "group.initial.rebalance.delay.ms=0",
        "--data-dir",
        str(workdir / "kemu-data"),
    ]
    started = time.monotonic()
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        ready_wall = time.monotonic() - started
        ready_cpu = cpu_seconds(process.pid)
        if not line.startswith(READY_PREFIX):
            raise RuntimeError(f"kemu did not start: {line!r}")
        if not api_versions_ok(HOST, port, timeout=READY_TIMEOUT_S):
            raise RuntimeError("no ApiVersions answer after the ready line")
        answered_wall = time.monotonic() - started
        answered_cpu = cpu_seconds(process.pid)
        send_once(f"{HOST}:{port}", metadata, timeout=READY_TIMEOUT_S)
        metadata_wall = time.monotonic() - started
        metadata_cpu = cpu_seconds(process.pid)
        return Start(
            ready_cpu, ready_wall, answered_cpu, answered_wall, metadata_cpu, metadata_wall
        )
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _median_line(label: str, values: list[float]) -> str:
    return (
        f"{label:<28} median {statistics.median(values):.3f}  "
        f"(min {min(values):.3f}, max {max(values):.3f})"
    )


def _report(name: str, starts: list[Start]) -> None:
    print(f"{name}:")
    print(_median_line("  CPU s to ready line", [s.ready_cpu_s for s in starts]))
    print(_median_line("  wall s to ready line", [s.ready_wall_s for s in starts]))
    print(_median_line("  CPU s to first ApiVersions", [s.answered_cpu_s for s in starts]))
    print(_median_line("  wall s to first ApiVersions", [s.answered_wall_s for s in starts]))
    print(_median_line("  CPU s to first Metadata", [s.metadata_cpu_s for s in starts]))
    print(_median_line("  wall s to first Metadata", [s.metadata_wall_s for s in starts]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.start_figure", description=__doc__)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="DIR",
        help="a directory holding another kemu package, started alternately with this one",
    )
    parser.add_argument(
        "--candidate",
        type=Path,
        default=None,
        metavar="DIR",
        help="a directory holding the kemu package to measure instead of this checkout's",
    )
    args = parser.parse_args(argv)
    executable = [str(Path(sys.executable).with_name("kemu"))]
    _compile_kemu()
    trees: dict[str, Path | None] = {}
    for role, directory in (("baseline", args.baseline), ("candidate", args.candidate)):
        if directory is not None:
            compileall.compile_dir(directory.resolve() / "kemu", quiet=1)
            trees[f"{role} {directory.resolve()}"] = directory.resolve()
    if args.candidate is None:
        trees["this tree"] = None
    starts: dict[str, list[Start]] = {name: [] for name in trees}
    for number in range(args.runs):
        for name, pythonpath in trees.items():
            workdir = Path(tempfile.mkdtemp(prefix="kemu-start-"))
            try:
                start = start_once(executable, workdir, pythonpath)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            starts[name].append(start)
            print(
                f"run {number + 1} ({name}): ready cpu {start.ready_cpu_s:.2f}s wall "
                f"{start.ready_wall_s:.3f}s; first ApiVersions cpu {start.answered_cpu_s:.2f}s "
                f"wall {start.answered_wall_s:.3f}s; first Metadata cpu "
                f"{start.metadata_cpu_s:.2f}s wall {start.metadata_wall_s:.3f}s",
                flush=True,
            )
    print(f"load average {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    for name, measured in starts.items():
        _report(name, measured)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
