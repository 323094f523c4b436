"""``python -m kemu.testing.sim --seed N --steps S``: run simulations, print what failed.

``--seed`` takes one seed or a range ``A-B``; each run prints one line (steps, virtual time,
faults, a digest of its trace) and, on a violation, the seed, the step and the end of the trace.
The exit code is 1 when any seed failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HASH_SEED = "0"  # str hashes order sets: a replay needs the same PYTHONHASHSEED


def _seeds(text: str) -> list[int]:
    if "-" in text.strip("-"):
        first, last = text.split("-", 1)
        return list(range(int(first), int(last) + 1))
    return [int(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kemu.testing.sim", description=__doc__)
    parser.add_argument("--seed", default="1", help="a seed, or a range A-B")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--no-faults", action="store_true", help="the workload alone")
    parser.add_argument("--trace", action="store_true", help="print every run's whole trace")
    parser.add_argument("--tail", type=int, default=60, help="trace lines shown on a failure")
    args = parser.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        os.environ["PYTHONHASHSEED"] = HASH_SEED
        os.execv(sys.executable, [sys.executable, "-m", "kemu.testing.sim", *sys.argv[1:]])

    from kemu.testing.sim.chaos import FaultRates
    from kemu.testing.sim.run import Simulation

    failed = 0
    totals: dict[str, int] = {}
    virtual_ms = steps = 0
    started = time.perf_counter()
    for seed in _seeds(args.seed):
        rates = FaultRates.none() if args.no_faults else None
        result = Simulation(seed, args.steps, rates=rates).run()
        virtual_ms += result.virtual_ms
        steps += result.steps
        for kind, count in result.faults.items():
            totals[kind] = totals.get(kind, 0) + count
        faults = sum(result.faults.values())
        print(
            f"seed {seed}: {'ok' if result.ok else 'FAILED'} {result.steps} steps, "
            f"{result.virtual_ms / 1000:.0f} s simulated, {faults} faults, "
            f"trace {result.digest()[:16]}",
            flush=True,
        )
        if args.trace:
            print("\n".join(result.trace))
        if not result.ok:
            failed += 1
            print(f"  seed {seed} failed at step {result.failed_step}:")
            for line in result.trace[-args.tail :]:
                print(f"  | {line}")
            print(f"  replay: python -m kemu.testing.sim --seed {seed} --steps {args.steps}")
    elapsed = time.perf_counter() - started
    print(
        f"{len(_seeds(args.seed))} seeds, {steps} steps, {virtual_ms / 3_600_000:.2f} simulated "
        f"hours in {elapsed:.0f} s; {failed} failed; faults: "
        + ", ".join(f"{kind} {count}" for kind, count in sorted(totals.items()))
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
