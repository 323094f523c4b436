"""The clocks of kemu/cluster/clock.py: a virtual clock fires its timers in deadline order on
advance, each seeing its own deadline as now, and a timer armed inside an advance for a deadline
it covers fires in the same advance."""

from __future__ import annotations

import asyncio

import pytest

from kemu.cluster.clock import RealClock, Repeating, VirtualClock
from kemu.cluster.context import RequestContext


async def test_virtual_timers_fire_in_order_on_advance() -> None:
    clock = VirtualClock(start_ms=1_000)
    seen: list[tuple[str, int]] = []
    clock.call_later(60_000, lambda: seen.append(("lock", clock.now_ms())))
    clock.call_at(1_000 + 900_000, lambda: seen.append(("txn", clock.now_ms())))
    cancelled = clock.call_later(10, lambda: seen.append(("cancelled", 0)))
    cancelled.cancel()
    assert clock.advance(59_999) == 0 and seen == []
    assert clock.pending() == 2

    def rearm() -> None:
        seen.append(("lock", clock.now_ms()))
        clock.call_later(30_000, lambda: seen.append(("again", clock.now_ms())))

    clock.call_at(1_000 + 60_000, rearm)
    assert clock.advance(15 * 60_000) == 4
    assert seen == [
        ("lock", 61_000),
        ("lock", 61_000),
        ("again", 91_000),
        ("txn", 901_000),
    ]
    assert clock.now_ms() == 1_000 + 59_999 + 15 * 60_000


async def test_a_due_timer_runs_on_the_loop_not_inside_call_at() -> None:
    clock = VirtualClock(start_ms=0)
    seen: list[int] = []
    clock.call_at(0, seen.append, 1)
    assert seen == []
    await asyncio.sleep(0)
    assert seen == [1]


def test_negative_advance_is_refused() -> None:
    clock = VirtualClock(start_ms=5)
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert clock.now_ms() == 5


async def test_a_failing_timer_does_not_stop_the_others() -> None:
    clock = VirtualClock(start_ms=0)
    seen: list[int] = []
    clock.call_later(1, lambda: 1 / 0)
    clock.call_later(2, seen.append, 2)
    assert clock.advance(5) == 2 and seen == [2]


async def test_real_clock_uses_the_loop() -> None:
    now = [10_000]
    clock = RealClock(lambda: now[0])
    fired = asyncio.Event()
    clock.call_at(10_001, fired.set)
    await asyncio.wait_for(fired.wait(), 5)


def test_request_waits_use_real_time() -> None:
    first = RequestContext.wait_ms()
    assert RequestContext.wait_ms() >= first


def test_a_repeating_job_runs_every_interval_until_cancelled_and_after_it_raised() -> None:
    clock = VirtualClock(start_ms=0)
    runs: list[int] = []

    def job() -> None:
        runs.append(clock.now_ms())
        if len(runs) == 2:
            raise RuntimeError("the job failed")

    repeating = Repeating(clock, 100, job)
    clock.advance(99)
    assert runs == []
    clock.advance(1)
    assert runs == [100]
    clock.advance(100)  # the clock logs what a timer raised, as the event loop does
    assert runs == [100, 200]
    clock.advance(100)  # armed again though it raised
    assert runs == [100, 200, 300]
    repeating.cancel()
    assert clock.pending() == 0
    clock.advance(1000)
    assert runs == [100, 200, 300]
