"""``python -m kemu.testing.sim --seed N --steps S``: run simulations, print what failed.

``--seed`` takes one seed or a range ``A-B``; each run prints one line (steps, virtual time,
faults, a digest of its trace) and, on a violation, the seed, the step and the end of the trace.
``--jobs J`` runs the seeds in J worker processes; what each seed prints is still printed in
seed order, as soon as every seed before it has printed. The exit code is 1 when any seed
failed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

HASH_SEED = "0"  # str hashes order sets: a replay needs the same PYTHONHASHSEED


def _seeds(text: str) -> list[int]:
    if "-" in text.strip("-"):
        first, last = text.split("-", 1)
        return list(range(int(first), int(last) + 1))
    return [int(text)]


@dataclass
class Outcome:
    """What one seed's run sends back to be printed (its trace only when it is shown)."""

    seed: int
    steps: int
    virtual_ms: int
    faults: dict[str, int]
    cpu_s: float
    text: list[str] = field(default_factory=list)
    ok: bool = True


@dataclass
class Options:
    steps: int
    no_faults: bool
    trace: bool
    tail: int
    pipelined: bool = False
    cleaner_backoff_ms: int | None = None  # None: the simulation's (SIM_CLEANER_BACKOFF_MS)


def run_seed(seed: int, options: Options) -> Outcome:
    from kemu.testing.sim.chaos import FaultRates
    from kemu.testing.sim.run import SIM_CLEANER_BACKOFF_MS, Simulation

    rates = FaultRates.none() if options.no_faults else None
    cpu = time.process_time()
    try:
        result = Simulation(
            seed,
            options.steps,
            rates=rates,
            pipelined=options.pipelined,
            cleaner_backoff_ms=(
                SIM_CLEANER_BACKOFF_MS
                if options.cleaner_backoff_ms is None
                else options.cleaner_backoff_ms
            ),
        ).run()
    except Exception:  # the harness itself failed: this seed fails, the others still run
        lines = traceback.format_exc().splitlines()
        text = [f"seed {seed}: FAILED, the harness raised", *(f"  | {line}" for line in lines)]
        return Outcome(seed, 0, 0, {}, time.process_time() - cpu, text, ok=False)
    cpu = time.process_time() - cpu
    faults = sum(result.faults.values())
    text = [
        f"seed {seed}: {'ok' if result.ok else 'FAILED'} {result.steps} steps, "
        f"{result.virtual_ms / 1000:.0f} s simulated, {faults} faults, "
        f"trace {result.digest()[:16]}"
    ]
    if options.trace:
        text += result.trace
    if not result.ok:
        text.append(f"  seed {seed} failed at step {result.failed_step}:")
        text += [f"  | {line}" for line in result.trace[-options.tail :]]
        text.append(f"  replay: python -m kemu.testing.sim --seed {seed} --steps {options.steps}")
    return Outcome(seed, result.steps, result.virtual_ms, result.faults, cpu, text, result.ok)


def run_seeds(seeds: list[int], options: Options, jobs: int) -> Iterator[Outcome]:
    """Every seed's outcome, in seed order; ``jobs`` worker processes run them."""
    if jobs <= 1 or len(seeds) <= 1:
        for seed in seeds:
            yield run_seed(seed, options)
        return
    # forked after the imports above: each worker starts warm and with the same hash seed
    from kemu.testing.sim import run  # noqa: F401

    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        # map hands the seeds out one at a time and yields their outcomes in seed order
        yield from pool.map(run_seed, seeds, [options] * len(seeds))


def main(argv: list[str] | None = None) -> int:
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
        "--cleaner-backoff-ms",
        type=int,
        default=None,
        help="kemu's log.cleaner.backoff.ms (default 1000 in runs; Kafka's is 15000)",
    )
    args = parser.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        os.environ["PYTHONHASHSEED"] = HASH_SEED
        os.execv(sys.executable, [sys.executable, "-m", "kemu.testing.sim", *sys.argv[1:]])

    seeds = _seeds(args.seed)
    options = Options(
        args.steps, args.no_faults, args.trace, args.tail, args.pipelined, args.cleaner_backoff_ms
    )
    failed = 0
    totals: dict[str, int] = {}
    virtual_ms = steps = 0
    cpu_s = 0.0
    started = time.perf_counter()
    for outcome in run_seeds(seeds, options, args.jobs):
        virtual_ms += outcome.virtual_ms
        steps += outcome.steps
        cpu_s += outcome.cpu_s
        for kind, count in outcome.faults.items():
            totals[kind] = totals.get(kind, 0) + count
        print("\n".join(outcome.text), flush=True)
        failed += not outcome.ok
    elapsed = time.perf_counter() - started
    print(
        f"{len(seeds)} seeds, {steps} steps, {virtual_ms / 3_600_000:.2f} simulated hours in "
        f"{elapsed:.0f} s ({args.jobs} jobs; {cpu_s:.0f} s of CPU, "
        f"{1000 * cpu_s / max(steps, 1):.1f} ms a step); {failed} failed; faults: "
        + ", ".join(f"{kind} {count}" for kind, count in sorted(totals.items()))
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
