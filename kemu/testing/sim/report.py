"""``python -m kemu.testing.sim --report JOURNAL``: what a journal holds, per fingerprint.

Per fingerprint: the seeds done (which failed, at which step, with the first violation), steps,
simulated hours, CPU hours, faults injected by kind; and how much of a target (seeds x steps,
under the current tree's fingerprint) is done, with the CPU time left at the rate measured so
far. A seed recorded twice under one fingerprint counts once; two different trace digests for
it are reported, since a seed's run is deterministic.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

from kemu.testing.sim.journal import Fingerprint, Journal, Record


@dataclass
class Target:
    seeds: list[int]
    steps: int


@dataclass
class Tally:
    """The sums over one fingerprint's seeds (each seed once)."""

    records: dict[int, Record] = field(default_factory=dict)
    diverged: set[int] = field(default_factory=set)  # seeds recorded with two trace digests

    def add(self, record: Record) -> None:
        first = self.records.setdefault(record.seed, record)
        if first.trace != record.trace:
            self.diverged.add(record.seed)

    @property
    def failed(self) -> list[Record]:
        return [record for _, record in sorted(self.records.items()) if not record.ok]

    @property
    def steps(self) -> int:
        return sum(record.steps for record in self.records.values())

    @property
    def virtual_ms(self) -> int:
        return sum(record.virtual_ms for record in self.records.values())

    @property
    def cpu_s(self) -> float:
        return sum(record.cpu_s for record in self.records.values())

    @property
    def wall_s(self) -> float:
        return sum(record.wall_s for record in self.records.values())

    @property
    def faults(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for record in self.records.values():
            for kind, count in record.faults.items():
                totals[kind] = totals.get(kind, 0) + count
        return dict(sorted(totals.items()))


def tallies(records: Iterable[Record]) -> dict[str, Tally]:
    """Each fingerprint's tally, in the order the fingerprints first appear."""
    found: dict[str, Tally] = {}
    for record in records:
        found.setdefault(record.fingerprint, Tally()).add(record)
    return found


def seed_ranges(seeds: Iterable[int]) -> str:
    """``1-3, 7, 9-10``."""
    spans: list[list[int]] = []
    for seed in sorted(set(seeds)):
        if spans and seed == spans[-1][1] + 1:
            spans[-1][1] = seed
        else:
            spans.append([seed, seed])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)


def duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:,.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def describe_options(record: Record) -> str:
    from kemu.testing.sim.chaos import FaultRates

    options = record.options
    rates = options.get("rates", {})
    default = dataclasses.asdict(FaultRates())
    changed = [
        f"{name} {value}"
        for name, value in rates.items()
        if any(rates.values()) and value != default.get(name)
    ]
    parts = [
        f"{options.get('steps')} steps",
        "faults" if any(rates.values()) else "no faults",
        *([f"rates {', '.join(changed)}"] if changed else []),
        *(["pipelined"] if options.get("pipelined") else []),
        *(["copier"] if options.get("copier") else []),
        *(["copier listener"] if options.get("copier_listener") else []),
        *(["churn"] if options.get("churn") else []),
        f"cleaner backoff {options.get('cleaner_backoff_ms')} ms",
        record.python,
        f"PYTHONHASHSEED {record.hash_seed}",
        f"kio {record.kio}",
        f"sources {record.sources[:16]}",
    ]
    return ", ".join(parts)


def describe_faults(faults: dict[str, int]) -> list[str]:
    """The total, then one line per family (``crash``, ``client``, ``net``, ``rule``)."""
    families: dict[str, dict[str, int]] = {}
    for kind, count in faults.items():
        families.setdefault(kind.split(".", 1)[0], {})[kind] = count
    lines = [f"faults injected: {sum(faults.values()):,}"]
    for family, kinds in sorted(families.items()):
        detail = ", ".join(
            f"{kind.split('.', 1)[-1]} {count:,}"
            for kind, count in sorted(kinds.items(), key=lambda item: (-item[1], item[0]))
        )
        lines.append(f"  {family} {sum(kinds.values()):,}: {detail}")
    return lines


def describe_tally(fingerprint: str, tally: Tally, current: bool) -> list[str]:
    records = sorted(tally.records.values(), key=lambda record: record.finished)
    first = records[0]
    steps = tally.steps
    lines = [
        f"fingerprint {fingerprint[:16]}"
        + (" (current: this tree with these options)" if current else " (not current)"),
        f"  {describe_options(first)}",
        f"  recorded {records[0].finished} .. {records[-1].finished}",
        f"  seeds {len(records):,}: {seed_ranges(tally.records)}; failed {len(tally.failed)}",
    ]
    for record in tally.failed:
        lines.append(
            f"    seed {record.seed} failed at step {record.failed_step}: {record.violation}"
        )
    if tally.diverged:
        lines.append(
            f"  NOT DETERMINISTIC: seeds {seed_ranges(tally.diverged)} recorded with two "
            "different traces under this fingerprint"
        )
    lines += [
        f"  steps {steps:,}, {tally.virtual_ms / 3_600_000:,.2f} simulated hours, "
        f"{tally.cpu_s / 3600:,.2f} CPU hours ({1000 * tally.cpu_s / max(steps, 1):.1f} ms "
        f"of CPU a step), {tally.wall_s / 3600:,.2f} hours of wall time summed over seeds",
        *(f"  {line}" for line in describe_faults(tally.faults)),
    ]
    return lines


def describe_target(target: Target, tally: Tally | None, jobs: int) -> list[str]:
    wanted = set(target.seeds)
    recorded = tally.records if tally is not None else {}
    done = {seed: record for seed, record in recorded.items() if seed in wanted}
    left = len(wanted) - len(done)
    failed = sorted(seed for seed, record in done.items() if not record.ok)
    lines = [
        f"target: seeds {seed_ranges(wanted)} x {target.steps:,} steps under the current "
        f"fingerprint: {len(done):,} of {len(wanted):,} seeds done "
        f"({100 * len(done) / max(len(wanted), 1):.1f}%), {len(failed)} failed"
        + (f" ({seed_ranges(failed)})" if failed else "")
        + f", {left:,} left"
    ]
    if not left:
        return lines
    if not done:
        lines.append("  no seed of it is done yet: no rate measured")
        return lines
    per_seed = sum(record.cpu_s for record in done.values()) / len(done)
    cpu_left = per_seed * left
    lines.append(
        f"  at the measured {duration(per_seed)} of CPU a seed: {duration(cpu_left)} of CPU "
        f"left, at least {duration(cpu_left / max(jobs, 1))} of wall time with {jobs} jobs"
    )
    return lines


def report(
    journal: Journal,
    current: Fingerprint,
    *,
    every_fingerprint: bool,
    target: Target | None,
    jobs: int,
) -> list[str]:
    digest = current.digest
    found = tallies(journal.records)
    lines = [
        f"{len(journal.records):,} records, {len(found)} "
        + ("fingerprint" if len(found) == 1 else "fingerprints")
        + (f", {journal.unreadable} unreadable lines skipped" if journal.unreadable else "")
        + f"; current fingerprint {digest[:16]}"
    ]
    shown = [(fp, tally) for fp, tally in found.items() if every_fingerprint or fp == digest]
    shown.sort(key=lambda item: item[0] != digest)  # the current one first
    for fingerprint, tally in shown:
        lines += describe_tally(fingerprint, tally, fingerprint == digest)
    if not shown:
        lines.append("no seed recorded under the current fingerprint")
    if target is not None:
        lines += describe_target(target, found.get(digest), jobs)
    return lines
