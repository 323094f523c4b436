"""Scaling micro-check for the share-partition core: cost per acquired+acknowledged record as
the in-flight window grows (100 / 1,000 / 10,000 records).

A sliding window is held at W records, all ACQUIRED; every step acquires the next log batch
(the window grows by one batch) and accepts the oldest one (the start offset moves by one
batch). Two shapes:
* batch: 10-record batches, acknowledged whole (one span per batch in the window);
* record: every record acquired on its own (RECORD_LIMIT, max_records=1) and acknowledged on
  its own, so the window is one span per record (the worst case for the span list).

Flat numbers across window sizes mean the cost per record does not grow with the window.
``--wire`` measures the same through kemu's server (``bench.share_wire``: kemu's CPU per
acquired+acknowledged record with ``group.share.partition.max.record.locks`` at the window);
``bench.run`` does that as part of its share phase. ``--write`` appends the tables to
docs/benchmarks.md. Run: ``.venv/bin/python -m bench.share_window [--wire]``. Not a test: nothing
is asserted.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from kemu.broker.share.partition import (
    AckBatch,
    AcquireMode,
    SharePartitionConfig,
    SharePartitionCore,
)
from kemu.coordinator.share.persister import PersistedState
from kemu.protocol.records import build_batch, read_header, with_offset
from kemu.storage.log import MemoryLog

ACCEPT = 1


def make_log(records: int, batch_records: int) -> MemoryLog:
    log = MemoryLog()
    template = build_batch([(None, b"x" * 16)] * batch_records, timestamp_ms=0)
    for base in range(0, records, batch_records):
        stored = with_offset(template, base, 0)
        log.append(read_header(stored), stored, now_ms=0)
    return log


def run(window: int, batch_records: int, steps: int) -> float:
    """Microseconds per record for ``steps`` acquire+ack steps at a window of ``window``."""
    per_step = batch_records if batch_records > 1 else 1
    total = window + (steps + 10) * per_step
    log = make_log(total, batch_records)
    config = SharePartitionConfig(
        record_lock_duration_ms=10**9, max_in_flight_records=window + 2 * per_step
    )
    core, _ = SharePartitionCore.from_persisted(PersistedState(0, 0), config, reset_offset=0)
    mode = AcquireMode.RECORD_LIMIT if batch_records == 1 else AcquireMode.BATCH_OPTIMIZED
    now = 0

    def step() -> None:
        nonlocal now
        now += 1  # a new deadline per step: neighbouring acquisitions never merge
        result = core.acquire(
            "m",
            log.batches(core.next_fetch_offset(), log.log_end_offset),
            max_records=per_step,
            batch_size=per_step,
            mode=mode,
            now_ms=now,
        )
        assert result.count == per_step

    while core.in_flight < window:
        step()
    started = time.perf_counter()
    for _ in range(steps):
        step()
        first = core.start
        outcome = core.acknowledge("m", [AckBatch(first, first + per_step - 1, (ACCEPT,))], now)
        assert outcome.error == 0 and core.start == first + per_step
    elapsed = time.perf_counter() - started
    return elapsed / (steps * per_step) * 1e6


WINDOWS = (100, 1_000, 10_000)
SHAPES = (("batch", 10, 2_000), ("record", 1, 10_000))


def core_table(windows: tuple[int, ...] = WINDOWS) -> str:
    """The in-process figures as a Markdown table."""
    lines = [
        "| window | shape | spans | us/record |",
        "|---|---|---|---|",
    ]
    for window in windows:
        for shape, batch_records, steps in SHAPES:
            cost = run(window, batch_records, steps)
            lines.append(f"| {window:,} | {shape} | {window // batch_records:,} | {cost:.2f} |")
            print(lines[-1], flush=True)
    return "\n".join(lines)


def wire_table(
    windows: tuple[int, ...] = WINDOWS,
    *,
    steps: int = 500,
    step: int = 100,
    profile: Path | None = None,
) -> str:
    """kemu's server CPU per acquired+acknowledged record through the wire, as Markdown."""
    from bench.share_wire import iterate_windows

    lines = [
        "| window | acks | server CPU us/record | records/s | requests |",
        "|---|---|---|---|---|",
    ]
    for result in iterate_windows(windows, steps=steps, step=step, profile=profile):
        lines.append(
            f"| {result.window:,} | {result.shape} | {result.cpu_us_per_record:.1f} | "
            f"{result.records_per_s:,.0f} | {result.requests:,} |"
        )
        print(lines[-1], flush=True)
    return "\n".join(lines)


WIRE_LEGEND = (
    "Share window scaling (kemu only), through the wire: one Python share consumer against "
    "`kemu serve` (on disk) with "
    "`group.share.partition.max.record.locks` at the window; each ShareFetch ACCEPTs the oldest "
    "{step} records (one AcknowledgementBatch, or one per record) and acquires {step} more, "
    "{steps} times; server CPU from /proc (10 ms ticks: about +-{tick:.1f} us/record)."
)


def wire_legend(steps: int, step: int) -> str:
    return WIRE_LEGEND.format(steps=steps, step=step, tick=0.01 / (steps * step) * 1e6)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.share_window", description=__doc__)
    parser.add_argument("--wire", action="store_true", help="also measure through kemu's server")
    parser.add_argument("--steps", type=int, default=500, help="wire: measured ShareFetches")
    parser.add_argument("--step", type=int, default=100, help="wire: records per ShareFetch")
    parser.add_argument("--profile", type=Path, default=None, help="wire: py-spy kemu into DIR")
    parser.add_argument("--write", action="store_true", help="append to docs/benchmarks.md")
    parser.add_argument("--note", default=None, help="a sentence to add to the docs entry")
    args = parser.parse_args(argv)
    sections = [
        "In process (`SharePartitionCore` alone, no I/O): batch = 10-record batches acquired and "
        "acknowledged whole; record = every record acquired and acknowledged on its own.",
        "",
        core_table(),
    ]
    if args.wire:
        sections += [
            "",
            wire_legend(args.steps, args.step),
            "",
            wire_table(steps=args.steps, step=args.step, profile=args.profile),
        ]
    if args.write:
        from bench import report

        given = argv if argv is not None else sys.argv[1:]
        command = ".venv/bin/python -m bench.share_window " + shlex.join(given)
        written = report.write_section(
            "share window scaling", command.strip(), sections, note=args.note
        )
        print(f"\nwritten to {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
