"""The groups' settings are set at the first boot only (``Simulation._prepare``): a restarted
kemu that lost them is reported, where rewriting them at every boot hid it."""

from __future__ import annotations

from typing import Any

import pytest

from kemu.coordinator.group.config import GroupConfigStore
from kemu.testing.sim.chaos import FaultRates
from kemu.testing.sim.run import Simulation
from kemu.testing.sim.workload import PIPE_GROUP


def test_settings_lost_across_a_restart_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store that, read back from its file, forgets the pipelines' group: the first restart
    reports each setting of it lost."""
    load = GroupConfigStore.__init__

    def forgetful(self: GroupConfigStore, *args: Any, **kwargs: Any) -> None:
        load(self, *args, **kwargs)
        self.overrides.pop(PIPE_GROUP, None)

    monkeypatch.setattr(GroupConfigStore, "__init__", forgetful)
    result = Simulation(1, 200, rates=FaultRates(crash=0.05)).run()
    assert any("kemu restarts" in line for line in result.trace)
    assert not result.ok
    assert (
        f"kemu lost group {PIPE_GROUP}'s errors.deadletterqueue.topic.name=dlq.pipe across a "
        "restart (holds None)"
    ) in result.violations, result.violations


def test_settings_survive_restarts_and_power_losses() -> None:
    rates = FaultRates(crash=0.05)
    result = Simulation(2, 150, rates=rates).run()
    assert sum("kemu restarts" in line for line in result.trace) >= 2
    assert any("power_loss" in line for line in result.trace)
    assert result.ok, (result.violations, result.trace[-20:])
