"""``python -m kemu.testing.sim --seed N --steps S``: run simulations, print what failed.

``--seed`` takes one seed or a range ``A-B``; each run prints one line (steps, virtual time,
faults, a digest of its trace) and, on a violation, the seed, the step and the end of the trace.
``--jobs J`` runs the seeds in J worker processes; what each seed prints is still printed in
seed order, as soon as every seed before it has printed. The exit code is 1 when any seed
failed.

A long run goes in slices: ``--journal PATH`` appends a line per finished seed (with a
fingerprint of the sources and options that ran it) and skips the seeds already recorded under
the same fingerprint; ``--budget-minutes M`` starts no seed after M minutes (the ones in flight
finish, or with ``--abandon-at-budget`` are abandoned; SIGINT abandons them at once, unrecorded).
``--report PATH`` sums a journal per fingerprint, and against ``--target-seeds`` x
``--target-steps`` says what is left.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from kemu.testing.sim import journal
from kemu.testing.sim.journal import Fingerprint, Journal, Record
from kemu.testing.sim.report import Target, report, seed_ranges
from kemu.testing.sim.seeds import Batch, Options, Outcome, Stop, in_seed_order, run_seeds

__all__ = ["Options", "Outcome", "main", "run_seeds"]

HASH_SEED = "0"  # str hashes order sets: a replay needs the same PYTHONHASHSEED
OPTIMIZED_REFUSED = (
    "refusing to run under python -O (or PYTHONOPTIMIZE): it strips the asserts of the "
    "share-window invariants, an oracle of every step"
)


def _seeds(text: str) -> list[int]:
    if "-" in text.strip("-"):
        first, last = text.split("-", 1)
        return list(range(int(first), int(last) + 1))
    return [int(text)]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kemu.testing.sim", description=__doc__)
    parser.add_argument("--seed", default="1", help="a seed, or a range A-B")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--no-faults", action="store_true", help="the workload alone")
    parser.add_argument("--trace", action="store_true", help="print every run's whole trace")
    parser.add_argument("--tail", type=int, default=60, help="trace lines shown on a failure")
    parser.add_argument(
        "--pipelined",
        action="store_true",
        help="input producers pipeline (max_in_flight 2-5, drawn from the seed)",
    )
    parser.add_argument(
        "--copier",
        action="store_true",
        help="add a consume-transform-produce role committing its group's offsets in its "
        "transactions, and its end check",
    )
    parser.add_argument(
        "--copier-listener",
        action="store_true",
        help="--copier, with transactions spanning polls that a rebalance listener commits "
        "before a partition is revoked (and aborts when partitions are lost)",
    )
    parser.add_argument(
        "--churn",
        action="store_true",
        help="add a role creating and deleting topics, kemu's topic crash points, and checks "
        "that acknowledged creations and deletions hold",
    )
    parser.add_argument(
        "--undo-deletions",
        action="store_true",
        help="a power loss also undoes what no directory sync made durable: deleted files and "
        "removed directories come back, directories made since go",
    )
    parser.add_argument(
        "--clean-stops",
        action="store_true",
        help="kemu is also stopped cleanly at random steps (as by SIGTERM), so that boots after "
        "a clean shutdown, and crashes after such boots, are run",
    )
    parser.add_argument(
        "--cleaner-backoff-ms",
        type=int,
        default=None,
        help="kemu's log.cleaner.backoff.ms (default 1000 in runs; Kafka's is 15000)",
    )
    parser.add_argument(
        "--crash-point-rate",
        type=float,
        default=None,
        help="the chance of dying at each crash point reached (default 0.003, FaultRates')",
    )
    slices = parser.add_argument_group("a long run in slices")
    slices.add_argument(
        "--journal",
        type=Path,
        help="append a JSON line per finished seed; skip the seeds it holds for this fingerprint",
    )
    slices.add_argument(
        "--budget-minutes", type=float, help="start no seed after this many minutes"
    )
    slices.add_argument(
        "--abandon-at-budget",
        action="store_true",
        help="at the budget's end abandon the seeds in flight (unrecorded) instead of waiting",
    )
    reporting = parser.add_argument_group("reading a journal")
    reporting.add_argument("--report", type=Path, metavar="JOURNAL", help="sum a journal")
    reporting.add_argument(
        "--fingerprint",
        choices=["current", "all"],
        default="current",
        help="the current tree's fingerprint (with these options) or every one",
    )
    reporting.add_argument("--target-seeds", help="the seeds of the whole run, A-B")
    reporting.add_argument("--target-steps", type=int, help="its steps (default --steps)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.abandon_at_budget and args.budget_minutes is None:
        parser.error("--abandon-at-budget needs --budget-minutes")
    if args.report is None and (args.target_seeds or args.target_steps):
        parser.error("--target-seeds and --target-steps go with --report")
    if args.report is None and sys.flags.optimize:
        parser.error(OPTIMIZED_REFUSED)
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        os.environ["PYTHONHASHSEED"] = HASH_SEED
        os.execv(sys.executable, [sys.executable, "-m", "kemu.testing.sim", *sys.argv[1:]])
    if args.report is not None:
        return _report(args)
    return _run(args)


def _options(args: argparse.Namespace, steps: int) -> Options:
    return Options(
        steps,
        args.no_faults,
        args.trace,
        args.tail,
        args.pipelined,
        args.cleaner_backoff_ms,
        args.crash_point_rate,
        args.copier,
        args.copier_listener,
        args.churn,
        args.undo_deletions,
        args.clean_stops,
    )


def _report(args: argparse.Namespace) -> int:
    steps = args.target_steps if args.target_steps is not None else args.steps
    target = Target(_seeds(args.target_seeds), steps) if args.target_seeds else None
    if not args.report.exists():
        print(f"no journal at {args.report} yet")
    lines = report(
        Journal.read(args.report),
        Fingerprint.of(_options(args, steps)),
        every_fingerprint=args.fingerprint == "all",
        target=target,
        jobs=args.jobs,
    )
    print("\n".join(lines))
    return 0


def _journaled(
    outcomes: Iterator[Outcome], path: Path, fingerprint: Fingerprint, stop: Stop
) -> Iterator[Outcome]:
    """Each outcome, appended to the journal as it comes, unless the sources changed under the
    run: then the seeds finishing from then on may have run other code, and none starts."""
    for outcome in outcomes:
        if (
            outcome.journal
            and stop.halted is None
            and journal.sources_digest() != fingerprint.sources
        ):
            stop.halted = "kemu's sources changed during the run"
        if not outcome.journal or stop.halted is not None:
            outcome.text.append(f"  seed {outcome.seed}: not journaled")
        else:
            finished = datetime.now(UTC).isoformat(timespec="seconds")
            journal.append(path, Record.of(outcome, fingerprint, finished))
        yield outcome


def _run(args: argparse.Namespace) -> int:
    stop = Stop(abandon_at_budget=args.abandon_at_budget)
    if args.budget_minutes is not None:
        stop.deadline = stop.clock() + 60 * args.budget_minutes
    handlers = {sig: signal.signal(sig, stop.on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _run_seeds(args, stop)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def _run_seeds(args: argparse.Namespace, stop: Stop) -> int:
    seeds = _seeds(args.seed)
    options = _options(args, args.steps)
    fingerprint = Fingerprint.of(options) if args.journal is not None else None
    done = _resume(args.journal, seeds, fingerprint) if fingerprint is not None else {}
    to_run = [seed for seed in seeds if seed not in done]
    batch = Batch(to_run, options, args.jobs, stop)
    outcomes = batch.completions()
    if fingerprint is not None:
        outcomes = _journaled(outcomes, args.journal, fingerprint, stop)
    failed = ran = steps = virtual_ms = 0
    totals: dict[str, int] = {}
    cpu_s = 0.0
    started = time.perf_counter()
    for outcome in in_seed_order(outcomes, to_run):
        ran += 1
        virtual_ms += outcome.virtual_ms
        steps += outcome.steps
        cpu_s += outcome.cpu_s
        for kind, count in outcome.faults.items():
            totals[kind] = totals.get(kind, 0) + count
        print("\n".join(outcome.text), flush=True)
        failed += not outcome.ok
    elapsed = time.perf_counter() - started
    print(
        f"{ran} seeds, {steps} steps, {virtual_ms / 3_600_000:.2f} simulated hours in "
        f"{elapsed:.0f} s ({args.jobs} jobs; {cpu_s:.0f} s of CPU, "
        f"{1000 * cpu_s / max(steps, 1):.1f} ms a step); {failed} failed; faults: "
        + ", ".join(f"{kind} {count}" for kind, count in sorted(totals.items()))
    )
    _say_why_stopped(batch, stop)
    # a seed that failed in an earlier slice fails the run as much as one failing now
    failed_recorded = _say_journaled(args.journal, seeds, fingerprint) if fingerprint else 0
    if failed or failed_recorded:
        return 1
    return 130 if stop.interrupted else 0


def _say_journaled(path: Path, seeds: list[int], fingerprint: Fingerprint) -> int:
    """Prints how much of ``seeds`` the journal holds under ``fingerprint``; returns how many
    of them failed."""
    recorded = Journal.read(path).done(fingerprint.digest)
    failed = [seed for seed in seeds if seed in recorded and not recorded[seed].ok]
    print(
        f"journal: {sum(seed in recorded for seed in seeds)} of {len(seeds)} seeds done under "
        f"this fingerprint, {len(failed)} failed" + (f" ({seed_ranges(failed)})" if failed else "")
    )
    return len(failed)


def _resume(path: Path, seeds: list[int], fingerprint: Fingerprint) -> dict[int, Record]:
    recorded = Journal.read(path)
    wanted = set(seeds)
    done = {
        seed: record for seed, record in recorded.done(fingerprint.digest).items() if seed in wanted
    }
    others = sum(record.fingerprint != fingerprint.digest for record in recorded.records)
    failed = sorted(seed for seed, record in done.items() if not record.ok)
    print(
        f"journal {path}: fingerprint {fingerprint.digest[:16]}; {len(done)} of {len(seeds)} "
        f"seeds already done under it, skipped"
        + (f" ({len(failed)} of them failed: {seed_ranges(failed)})" if failed else "")
        + f"; {others} records of other fingerprints not counted"
        + (f"; {recorded.unreadable} unreadable lines skipped" if recorded.unreadable else ""),
        flush=True,
    )
    return done


def _say_why_stopped(batch: Batch, stop: Stop) -> None:
    if stop.halted is not None:
        print(f"stopped: {stop.halted}")
    elif stop.interrupted:
        print("interrupted")
    elif batch.not_started or batch.abandoned:
        print("budget spent")
    if batch.abandoned:
        print(f"abandoned in flight, not journaled: seeds {seed_ranges(batch.abandoned)}")
    if batch.not_started:
        print(f"not started: {len(batch.not_started)} seeds ({seed_ranges(batch.not_started)})")


if __name__ == "__main__":
    sys.exit(main())
