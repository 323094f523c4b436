"""kemu's error log events during a simulation are violations (``surroundings.quiet_logs``): an
exception a handler or a task of kemu catches and logs reaches the clients at most as an error
code they retry, so only the log tells."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import structlog

from kemu.broker.handlers import REGISTRY, load_handlers
from kemu.testing.sim.run import Simulation
from kemu.testing.sim.surroundings import quiet_logs

SHARE_ACKNOWLEDGE = 79


def test_a_handler_raising_inside_kemu_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every 5th ShareAcknowledge raises KeyError inside kemu: kemu answers
    UNKNOWN_SERVER_ERROR, which the reader retries as any error; the run reports the logged
    handler_failed with its fields and the exception."""
    load_handlers()
    real = REGISTRY[SHARE_ACKNOWLEDGE]
    calls = 0

    def sometimes_raising(ctx: Any, request: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls % 5 == 0:
            raise KeyError("planted")
        return real.function(ctx, request)

    monkeypatch.setitem(
        REGISTRY, SHARE_ACKNOWLEDGE, dataclasses.replace(real, function=sometimes_raising)
    )
    result = Simulation(3, 200).run()
    assert calls >= 5
    assert not result.ok
    [first, *_] = result.violations
    assert first.startswith("kemu logged error handler_failed: api=share_acknowledge"), first
    assert "KeyError('planted') at dispatch (handler.py:" in first
    assert "< sometimes_raising (test_sim_logs.py:" in first


def test_errors_and_named_warnings_are_reported_others_dropped() -> None:
    found: list[str] = []
    log = structlog.get_logger("kemu.test")
    with quiet_logs(found):
        log.info("routine", n=1)
        log.warning("join_group_not_written", group="g")
        log.warning("share_state_batch_skipped", partition=2, offset=7, reason="crc")
        log.error("transaction_marker_failed", topic="t", partition=0, error="EIO")
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("share_lock_expiry_failed", key="k")
    assert found[:2] == [
        "warning share_state_batch_skipped: offset=7, partition=2, reason=crc",
        "error transaction_marker_failed: error=EIO, partition=0, topic=t",
    ]
    assert found[2].startswith(
        "error share_lock_expiry_failed: key=k, ValueError('boom') at "
        "test_errors_and_named_warnings_are_reported_others_dropped (test_sim_logs.py:"
    )
    assert len(found) == 3
