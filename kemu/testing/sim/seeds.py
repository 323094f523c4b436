"""Running many seeds: in this process or in forked workers, under a budget, abandonable.

``Batch.completions`` yields each seed's ``Outcome`` as it finishes; ``in_seed_order`` reorders
them for printing. With ``jobs`` > 1 (or when a seed in flight may have to be abandoned at the
budget's end) every seed runs in its own process, forked from this one after the imports, so it
starts warm and with the same hash seed, and abandoning it is killing it. A seed abandoned (the
budget's end with ``abandon_at_budget``, or SIGINT) yields no outcome: nothing about it is
journaled, and a later run runs it again.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import signal
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kemu.testing.sim.chaos import FaultRates

# how often a parent waiting on its workers looks at SIGINT's flag and the budget's end
POLL_S = 0.2


@dataclass
class Outcome:
    """What one seed's run sends back to be printed and journaled (its trace only when shown)."""

    seed: int
    steps: int
    virtual_ms: int
    faults: dict[str, int]
    cpu_s: float
    text: list[str] = field(default_factory=list)
    ok: bool = True
    steps_asked: int = 0
    wall_s: float = 0.0
    digest: str = ""  # sha256 of the trace
    violation: str | None = None  # the first one, or why the harness failed
    failed_step: int | None = None
    # False when the result says nothing about the seed (its worker process died): not journaled
    journal: bool = True


@dataclass
class Options:
    steps: int
    no_faults: bool
    trace: bool
    tail: int
    pipelined: bool = False
    cleaner_backoff_ms: int | None = None  # None: the simulation's (SIM_CLEANER_BACKOFF_MS)
    crash_point_rate: float | None = None  # None: FaultRates' default
    copier: bool = False  # the consume-transform-produce role (copier.py)
    copier_listener: bool = False  # ... whose transactions a rebalance listener ends
    churn: bool = False  # topics created and deleted (churn.py)
    undo_deletions: bool = False  # a power loss undoes unsynced deletions (disk.py)
    clean_stops: bool = False  # kemu is also stopped cleanly, as a user stops it

    def rates(self) -> FaultRates:
        """The fault rates of a run with these options."""
        from kemu.testing.sim.chaos import FaultRates

        rates = FaultRates.none() if self.no_faults else FaultRates()
        if self.crash_point_rate is not None:
            rates = dataclasses.replace(rates, crash_point=self.crash_point_rate)
        return rates


def run_seed(seed: int, options: Options) -> Outcome:
    from kemu.testing.sim.run import SIM_CLEANER_BACKOFF_MS, Simulation

    rates = options.rates()
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        result = Simulation(
            seed,
            options.steps,
            rates=rates,
            pipelined=options.pipelined,
            copier=options.copier,
            copier_listener=options.copier_listener,
            churn=options.churn,
            undo_deletions=options.undo_deletions,
            clean_stops=options.clean_stops,
            cleaner_backoff_ms=(
                SIM_CLEANER_BACKOFF_MS
                if options.cleaner_backoff_ms is None
                else options.cleaner_backoff_ms
            ),
        ).run()
    except Exception:  # the harness itself failed: this seed fails, the others still run
        lines = traceback.format_exc().splitlines()
        text = [f"seed {seed}: FAILED, the harness raised", *(f"  | {line}" for line in lines)]
        return Outcome(
            seed,
            0,
            0,
            {},
            time.process_time() - cpu,
            text,
            ok=False,
            steps_asked=options.steps,
            wall_s=time.perf_counter() - wall,
            violation=f"the harness raised {lines[-1]}",
        )
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    faults = sum(result.faults.values())
    digest = result.digest()
    text = [
        f"seed {seed}: {'ok' if result.ok else 'FAILED'} {result.steps} steps, "
        f"{result.virtual_ms / 1000:.0f} s simulated, {faults} faults, "
        f"trace {digest[:16]}"
    ]
    if options.trace:
        text += result.trace
    if not result.ok:
        text.append(f"  seed {seed} failed at step {result.failed_step}:")
        text += [f"  | {line}" for line in result.trace[-options.tail :]]
        text.append(f"  replay: python -m kemu.testing.sim --seed {seed} --steps {options.steps}")
    return Outcome(
        seed,
        result.steps,
        result.virtual_ms,
        result.faults,
        cpu,
        text,
        result.ok,
        steps_asked=options.steps,
        wall_s=wall,
        digest=digest,
        violation=result.violations[0] if result.violations else None,
        failed_step=result.failed_step,
    )


@dataclass
class Stop:
    """When a batch stops starting seeds, and when it abandons the ones in flight.

    ``clock`` is read against ``deadline`` (both in seconds; None: no budget). ``interrupted``
    (SIGINT, SIGTERM) abandons the seeds in flight; so does the deadline with ``abandon_at_budget``.
    ``halted`` stops starting seeds for another reason (the sources changed under the run).
    """

    deadline: float | None = None
    abandon_at_budget: bool = False
    clock: Callable[[], float] = time.monotonic
    interrupted: bool = False
    halted: str | None = None
    # set while a seed runs in this process: SIGINT must then raise to abandon it
    seed_in_process: bool = False

    def budget_spent(self) -> bool:
        return self.deadline is not None and self.clock() >= self.deadline

    def starts_no_more(self) -> bool:
        return self.interrupted or self.halted is not None or self.budget_spent()

    def abandons(self) -> bool:
        return self.interrupted or (self.abandon_at_budget and self.budget_spent())

    def on_signal(self, signum: int, frame: object) -> None:
        """SIGINT's and SIGTERM's handler in the runner."""
        self.interrupted = True
        if self.seed_in_process:
            raise KeyboardInterrupt


@dataclass
class _Worker:
    seed: int
    process: BaseProcess
    outcomes: Connection


def _worker(seed: int, options: Options, outcomes: Connection) -> None:
    # the terminal's Ctrl-C reaches the whole process group: the parent decides what stops
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler
    outcomes.send(run_seed(seed, options))
    outcomes.close()


class Batch:
    """The seeds of one run: which finished (``completions``), which were abandoned in flight,
    which were never started."""

    def __init__(self, seeds: list[int], options: Options, jobs: int, stop: Stop | None = None):
        self.seeds = seeds
        self.options = options
        self.jobs = max(jobs, 1)
        self.stop = stop if stop is not None else Stop()
        self.abandoned: list[int] = []
        self.not_started: list[int] = []

    def completions(self) -> Iterator[Outcome]:
        """Each seed's outcome as it finishes."""
        pending = deque(self.seeds)
        try:
            if self.jobs == 1 and not self.stop.abandon_at_budget:
                yield from self._in_process(pending)
            else:
                yield from self._forked(pending)
        finally:
            self.not_started = list(pending)

    def _in_process(self, pending: deque[int]) -> Iterator[Outcome]:
        while pending and not self.stop.starts_no_more():
            seed = pending.popleft()
            self.stop.seed_in_process = True
            try:
                outcome = run_seed(seed, self.options)
            except KeyboardInterrupt:
                self.stop.interrupted = True
                self.abandoned.append(seed)
                return
            finally:
                self.stop.seed_in_process = False
            yield outcome

    def _forked(self, pending: deque[int]) -> Iterator[Outcome]:
        # imported before forking: each worker starts warm
        from kemu.testing.sim import run  # noqa: F401

        context = multiprocessing.get_context("fork")
        running: dict[Connection, _Worker] = {}
        try:
            while True:
                while pending and len(running) < self.jobs and not self.stop.starts_no_more():
                    seed = pending.popleft()
                    reader, writer = context.Pipe(duplex=False)
                    process = context.Process(
                        target=_worker, args=(seed, self.options, writer), daemon=True
                    )
                    process.start()
                    writer.close()  # the child holds the only writer: its death reads as EOF
                    running[reader] = _Worker(seed, process, reader)
                if not running:
                    return
                for ready in wait(list(running), timeout=POLL_S):
                    assert isinstance(ready, Connection)
                    yield self._collect(running.pop(ready))
                if self.stop.abandons():
                    return
        finally:
            for worker in running.values():  # abandoned: killed, nothing recorded
                self.abandoned.append(worker.seed)
                worker.process.kill()
                worker.process.join()
                worker.outcomes.close()
            self.abandoned.sort()

    def _collect(self, worker: _Worker) -> Outcome:
        try:
            outcome: Outcome = worker.outcomes.recv()
        except EOFError:
            worker.process.join()
            code = worker.process.exitcode
            text = f"seed {worker.seed}: FAILED, its worker process died (exit code {code})"
            outcome = Outcome(worker.seed, 0, 0, {}, 0.0, [text], ok=False, journal=False)
        worker.outcomes.close()
        worker.process.join()
        return outcome


def in_seed_order(outcomes: Iterable[Outcome], seeds: list[int]) -> Iterator[Outcome]:
    """``outcomes`` in the order of ``seeds``, each as soon as every seed before it has come;
    after the last, those held behind a seed that never came (abandoned), in seed order."""
    order = iter(seeds)
    waiting = next(order, None)
    held: dict[int, Outcome] = {}
    for outcome in outcomes:
        held[outcome.seed] = outcome
        while waiting is not None and waiting in held:
            yield held.pop(waiting)
            waiting = next(order, None)
    for seed in seeds:
        if seed in held:
            yield held.pop(seed)


def run_seeds(seeds: list[int], options: Options, jobs: int) -> Iterator[Outcome]:
    """Every seed's outcome, in seed order; ``jobs`` worker processes run them."""
    return in_seed_order(Batch(seeds, options, jobs).completions(), seeds)
