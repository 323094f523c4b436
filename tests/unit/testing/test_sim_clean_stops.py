"""``--clean-stops`` and ``--undo-deletions``: kemu stopped as a user stops it, and power losses
that undo what no directory sync made durable (``kemu/testing/sim/run.py``, ``disk.py``).

Before them no run stopped kemu cleanly: the clean-shutdown marker, the recovery points
checkpointed at a close and the boot that reads active segments from their summaries were
never run by a seed, nor a power loss that brings back a deleted file or directory.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from kemu.cluster import model
from kemu.storage import recovery_points
from kemu.testing.sim.chaos import FaultRates
from kemu.testing.sim.run import Simulation


def test_boots_after_clean_stops_keep_every_check(monkeypatch: pytest.MonkeyPatch) -> None:
    boots: list[bool] = []
    opened = recovery_points.RecoveryPoints.__init__

    def recording(self: recovery_points.RecoveryPoints, *args: object) -> None:
        opened(self, *args)  # type: ignore[arg-type]
        boots.append(self.clean_shutdown)

    monkeypatch.setattr(recovery_points.RecoveryPoints, "__init__", recording)
    result = Simulation(2, 400, rates=FaultRates(crash=0.02), clean_stops=True).run()
    assert result.ok, (result.violations, result.trace[-30:])
    assert result.faults.get("stop.clean", 0) >= 3, result.faults
    assert boots.count(True) >= 3, boots  # each boot after a stop found the marker


def test_power_losses_bring_deleted_files_back_and_every_check_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seed 10 (300 steps, crash points at 0.03, ``--churn``): power losses bring deleted
    topics' partition directories back with their segments; kemu removes them at the boot
    (they are stray logs) and every check holds."""
    strays: list[str] = []
    remove_tree = model._remove_tree

    def removing(path: Path) -> None:
        if path.exists() and any(
            frame.function == "_remove_stray_logs" for frame in inspect.stack()[1:3]
        ):
            strays.append(path.name)
        remove_tree(path)

    monkeypatch.setattr(model, "_remove_tree", removing)
    result = Simulation(
        10, 300, rates=FaultRates(crash_point=0.03), churn=True, undo_deletions=True
    ).run()
    assert result.ok, (result.violations, result.trace[-30:])
    assert result.faults.get("crash.deletions_undone", 0) >= 2, result.faults
    assert any("deleted names back" in line for line in result.trace)
    assert any(name.startswith("churn-") for name in strays), strays
