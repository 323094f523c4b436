"""The soak's short mode (``python -m bench.soak --minutes 30`` is the published run,
docs/reliability.md).

One minute of the mixed workload (acks=all producer, classic and KIP-848 consumer groups, a
share group, transactions, topic churn) against ``kemu serve --data-dir``, SIGKILLed and
restarted twice (the second life with ``kemu.log.flush=always``), then once more before the
read-back: every acknowledged record and committed transaction is there, no aborted one is
visible, every group got every record, and no client error happened outside a restart.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.process]

REPO = REPO_ROOT


def test_a_one_minute_soak_with_kills_loses_nothing(tmp_path: Path) -> None:
    figures_path = tmp_path / "figures.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.soak",
            "--minutes",
            "1",
            "--kill-every",
            "20",
            "--rate",
            "100",
            "--run-dir",
            str(tmp_path / "run"),
            "--json",
            str(figures_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=550,
    )
    assert run.returncode == 0, f"{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
    figures = json.loads(figures_path.read_text())
    assert figures["ok"], figures
    assert figures["kills"] >= 2, figures  # at least one mid-run, plus the one before read-back
    assert {life["flush"] for life in figures["lives"]} == {"interval", "always"}
    assert figures["produced_acked"] > 0 and figures["txn_committed"] > 0, figures
    assert figures["lost"] == 0 and figures["txn_lost"] == 0 and figures["aborted_visible"] == 0
    assert not figures["errors_steady"], figures["errors_steady"]
    assert set(figures["undelivered"].values()) == {0}, figures["undelivered"]
