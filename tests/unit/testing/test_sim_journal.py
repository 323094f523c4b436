"""The long simulation run in slices (kemu/testing/sim: journal.py, seeds.py, report.py;
docs/reliability.md, "Throughput"): a journal line per finished seed under a fingerprint of the
sources and options, a rerun skipping what is recorded, a budget that stops starting seeds, seeds
in flight abandoned unrecorded, and the report's sums."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kemu.testing.sim import journal
from kemu.testing.sim.__main__ import main
from kemu.testing.sim.journal import Fingerprint, Journal, Record
from kemu.testing.sim.report import Target, report
from kemu.testing.sim.run import SIM_CLEANER_BACKOFF_MS, Result, Simulation
from kemu.testing.sim.seeds import Batch, Options, Outcome, Stop, run_seed
from tests import REPO_ROOT

FEW = ["--steps", "2", "--no-faults"]  # the shortest runs: the journal is what is tested


@pytest.fixture(autouse=True)
def hash_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    # main re-executes itself unless PYTHONHASHSEED is the runs' own
    monkeypatch.setenv("PYTHONHASHSEED", "0")


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().out


def test_a_journal_is_written_and_a_rerun_skips_its_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "journal.jsonl"
    argv = ["--seed", "6-7", *FEW, "--jobs", "2", "--journal", str(path)]
    code, out = run_main(argv, capsys)
    assert code == 0, out
    records = Journal.read(path).records
    assert sorted(record.seed for record in records) == [6, 7]
    alone = {seed: run_seed(seed, Options(2, True, False, 10)) for seed in (6, 7)}
    for record in records:
        assert record.ok and record.violation is None
        assert record.steps_asked == 2 and record.steps == alone[record.seed].steps
        assert record.trace == alone[record.seed].digest  # the same run as without a journal
        assert record.fingerprint == Fingerprint.of(Options(2, True, False, 10)).digest
        assert record.options["rates"]["crash"] == 0 and record.hash_seed == "0"
    assert "journal: 2 of 2 seeds done under this fingerprint, 0 failed" in out

    code, out = run_main(argv, capsys)
    assert code == 0, out
    assert "2 of 2 seeds already done under it, skipped" in out
    assert "seed 6:" not in out and "seed 7:" not in out
    assert len(Journal.read(path).records) == 2


def test_a_record_under_another_fingerprint_does_not_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "journal.jsonl"
    argv = ["--seed", "6-7", *FEW, "--journal", str(path)]
    assert run_main(argv, capsys)[0] == 0
    before = Fingerprint.of(Options(2, True, False, 10)).digest

    monkeypatch.setattr(journal, "sources_digest", lambda package=None: "edited")
    code, out = run_main(argv, capsys)
    assert code == 0, out
    assert "0 of 2 seeds already done under it" in out
    assert "2 records of other fingerprints not counted" in out
    assert "seed 6: ok" in out and "seed 7: ok" in out
    records = Journal.read(path).records
    assert [record.fingerprint == before for record in records] == [True, True, False, False]

    # other options are another fingerprint too
    code, out = run_main(
        ["--seed", "6", "--steps", "3", "--no-faults", "--journal", str(path)], capsys
    )
    assert "0 of 1 seeds already done under it" in out

    code, out = run_main(["--report", str(path), "--fingerprint", "all", *FEW], capsys)
    assert code == 0
    assert "5 records, 3 fingerprints" in out
    assert out.count("seeds 2: 6-7; failed 0") == 2


def test_sources_changing_under_a_run_stop_it_unrecorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "journal.jsonl"
    digests = iter(["tree", "tree", "edited"])  # the fingerprint's, seed 6's, seed 7's
    monkeypatch.setattr(journal, "sources_digest", lambda package=None: next(digests, "edited"))
    code, out = run_main(["--seed", "6-8", *FEW, "--journal", str(path)], capsys)
    assert [record.seed for record in Journal.read(path).records] == [6]
    assert "seed 7: not journaled" in out
    assert "stopped: kemu's sources changed during the run" in out
    assert "not started: 1 seeds (8)" in out
    assert code == 0


def test_the_budget_stops_starting_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readings = iter([0.0])  # the clock passes the deadline once the first seed has started
    stop = Stop(deadline=1.0, clock=lambda: next(readings, 5.0))
    batch = Batch([6, 7, 8], Options(2, True, False, 10), jobs=1, stop=stop)
    assert [outcome.seed for outcome in batch.completions()] == [6]
    assert batch.not_started == [7, 8] and batch.abandoned == []

    path = tmp_path / "journal.jsonl"
    code, out = run_main(
        ["--seed", "6-7", *FEW, "--journal", str(path), "--budget-minutes", "0"], capsys
    )
    assert code == 0
    assert "budget spent" in out and "not started: 2 seeds (6-7)" in out
    assert Journal.read(path).records == []


def block_seed_6(monkeypatch: pytest.MonkeyPatch) -> None:
    original = Simulation.run

    def run(self: Simulation) -> Result:
        if self.seed == 6:
            time.sleep(3600)  # in flight until abandoned
        return original(self)

    monkeypatch.setattr(Simulation, "run", run)  # the forked workers inherit it


@pytest.mark.parametrize("how", ["budget", "sigint"])
def test_seeds_in_flight_are_abandoned_without_an_outcome(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    block_seed_6(monkeypatch)
    now = [0.0]
    stop = Stop(deadline=1.0, abandon_at_budget=how == "budget", clock=lambda: now[0])
    batch = Batch([6, 7, 8], Options(2, True, False, 10), jobs=2, stop=stop)
    seen: list[int] = []
    for outcome in batch.completions():
        seen.append(outcome.seed)
        if how == "budget":
            now[0] = 2.0
        else:
            stop.interrupted = True
    assert seen == [7]
    assert batch.abandoned == [6] and batch.not_started == [8]


def test_a_worker_that_dies_gives_a_failure_not_to_journal(monkeypatch: pytest.MonkeyPatch) -> None:
    def run(self: Simulation) -> Result:
        os._exit(3)

    monkeypatch.setattr(Simulation, "run", run)
    [outcome] = Batch([6], Options(2, True, False, 10), jobs=2).completions()
    assert not outcome.ok and not outcome.journal
    assert outcome.text == ["seed 6: FAILED, its worker process died (exit code 3)"]


def record(seed: int, fingerprint: Fingerprint, **fields: Any) -> Record:
    outcome = Outcome(
        seed,
        steps=10_050,
        virtual_ms=1_800_000,
        faults={"crash.txn.prepared": 2, "net.cut": 3},
        cpu_s=360.0,
        steps_asked=10_000,
        wall_s=400.0,
        digest=f"trace-{seed}",
    )
    base = Record.of(outcome, fingerprint, f"2026-12-06T10:00:{seed:02d}+00:00")
    return dataclasses.replace(base, **fields)


def test_the_report_sums_each_fingerprint_and_what_is_left(tmp_path: Path) -> None:
    options = Options(10_000, False, False, 10)
    current = Fingerprint("tree", journal.run_options(options), "0", "CPython 3.11.7", "0.6.5")
    older = Fingerprint("old tree", journal.run_options(options), "0", "CPython 3.11.7", "0.6.5")
    path = tmp_path / "journal.jsonl"
    for line in [
        record(1, current),
        record(2, current, ok=False, violation="record lost", failed_step=77),
        record(3, current),
        record(3, current),  # recorded twice: counts once
        record(4, older),
        record(50, current),  # outside the target
    ]:
        journal.append(path, line)
    with path.open("a") as damaged:
        damaged.write(record(7, current).to_line().replace('"seed":7', '"seed":"7"'))
        damaged.write('{"seed": 5, "ok": tr')  # a kill in the middle of a line
    journal.append(path, record(6, current))

    read = Journal.read(path)
    assert read.unreadable == 2 and [r.seed for r in read.records] == [1, 2, 3, 3, 4, 50, 6]
    lines = report(
        read, current, every_fingerprint=True, target=Target(list(range(1, 11)), 10_000), jobs=2
    )
    text = "\n".join(lines)
    assert lines[0].startswith("7 records, 2 fingerprints, 2 unreadable lines skipped")
    assert f"fingerprint {current.digest[:16]} (current" in text
    assert "seeds 5: 1-3, 6, 50; failed 1" in text
    assert "seed 2 failed at step 77: record lost" in text
    # 5 seeds: 50,250 steps, 5 x 0.5 simulated hours, 5 x 0.1 CPU hours
    assert "steps 50,250, 2.50 simulated hours, 0.50 CPU hours (35.8 ms of CPU a step)" in text
    assert "faults injected: 25" in text and "crash 10: txn.prepared 10" in text
    assert "net 15: cut 15" in text
    assert f"fingerprint {older.digest[:16]} (not current)" in text
    assert "seeds 1: 4; failed 0" in text
    # the target: seeds 1-3 and 6 of 1-10 done, 6 left at 360 s of CPU each
    assert "4 of 10 seeds done (40.0%), 1 failed (2), 6 left" in text
    assert (
        "6 min of CPU a seed: 36 min of CPU left, at least 18 min of wall time with 2 jobs" in text
    )

    only_current = report(read, current, every_fingerprint=False, target=None, jobs=2)
    assert older.digest[:16] not in "\n".join(only_current)


def test_a_seed_with_two_traces_under_one_fingerprint_is_reported(tmp_path: Path) -> None:
    current = Fingerprint("tree", {}, "0", "CPython 3.11.7", "0.6.5")
    read = Journal([record(1, current), record(1, current, trace="another")])
    text = "\n".join(report(read, current, every_fingerprint=False, target=None, jobs=1))
    assert "NOT DETERMINISTIC: seeds 1 recorded with two different traces" in text


def test_sigint_abandons_the_seeds_in_flight_and_records_nothing(tmp_path: Path) -> None:
    """The command as a user runs it: Ctrl-C during a slice leaves no line for its seeds."""
    path = tmp_path / "journal.jsonl"
    command = [sys.executable, "-m", "kemu.testing.sim", "--seed", "6-7", "--steps", "100000"]
    runner = subprocess.Popen(
        [*command, "--jobs", "2", "--journal", str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    assert runner.stdout is not None
    assert runner.stdout.readline().startswith(f"journal {path}: fingerprint ")
    runner.send_signal(signal.SIGINT)
    out = runner.stdout.read()
    assert runner.wait(timeout=60) == 130, out
    # each seed abandoned in flight or, if the signal came before its start, never started
    assert out.startswith("0 seeds, 0 steps") and "\ninterrupted\n" in out, out
    assert "seed 6:" not in out and "seed 7:" not in out
    assert Journal.read(path).records == []


def test_every_option_but_the_printing_ones_is_in_the_fingerprint() -> None:
    base = Options(300, no_faults=False, trace=False, tail=10)
    digest = Fingerprint.of(base, sources="tree").digest
    for change in ({"trace": True}, {"tail": 99}):
        assert Fingerprint.of(dataclasses.replace(base, **change), "tree").digest == digest
    for change in (
        {"steps": 301},
        {"no_faults": True},
        {"pipelined": True},
        {"cleaner_backoff_ms": 15_000},
    ):
        assert Fingerprint.of(dataclasses.replace(base, **change), "tree").digest != digest
    # None is the simulation's default backoff, the same run
    resolved = dataclasses.replace(base, cleaner_backoff_ms=SIM_CLEANER_BACKOFF_MS)
    assert Fingerprint.of(resolved, "tree").digest == digest


def test_a_run_under_python_o_is_refused() -> None:
    """-O strips asserts, and the share windows' invariants are asserts: a run would check less
    under the same fingerprint, so it does not start (a report of a journal still works)."""
    command = [sys.executable, "-O", "-m", "kemu.testing.sim", "--seed", "1", "--steps", "1"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 2, done
    assert "refusing to run under python -O" in done.stderr
    assert done.stdout == ""
