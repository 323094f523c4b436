"""The exactly-once crash harness's short mode (``make eos-crash`` runs the long one).

``python -m bench.eos_crash --short`` runs as a user runs it: a 3-broker kemu with a data dir,
three pipeline workers (ShareConsumer + TransactionalProducer, both KIP-1289 wire forms), each a
process of its own, SIGKILLs of kemu (one plain, two at KEMU_CRASH_AT transaction/share points)
and of workers, then a drain and a read_committed check after one more SIGKILL of kemu. The
output must hold each of the 400 inputs exactly once and the share group's lag must be 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900), pytest.mark.process]

REPO = REPO_ROOT
SEED = 7


def test_the_short_crash_run_is_exactly_once(tmp_path: Path) -> None:
    figures_path = tmp_path / "figures.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.eos_crash",
            "--short",
            "--seed",
            str(SEED),
            "--run-dir",
            str(tmp_path / "run"),
            "--json",
            str(figures_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=850,
    )
    assert run.returncode == 0, f"seed {SEED}:\n{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
    figures = json.loads(figures_path.read_text())
    assert figures["lost"] == 0 and figures["duplicated"] == 0, figures
    assert figures["distinct_ids"] == figures["records"] == 400
    assert set(figures["final_lag"].values()) == {0}
    assert figures["kemu_kills"] >= 3 and figures["worker_kills"] >= 1, figures
