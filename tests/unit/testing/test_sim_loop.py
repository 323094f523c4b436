"""The simulation's loop runs asyncio's iteration itself (``SimLoop._run_once``): timers due at
the same instant must run in the order asyncio's own iteration runs them (its heap's), with
cancelled timers left in the heap and the heap rebuilt without them, as asyncio does. The
reference here is asyncio's ``BaseEventLoop._run_once`` over a heap of ``TimerHandle``s, time
moved to the next timer by a selector. And asyncio's lookups of the running loop answer the
loop while it runs, as before, without a system call."""

from __future__ import annotations

import asyncio
import gc
import heapq
import random
import threading
import warnings
from typing import Any

import pytest

from kemu.testing.sim.loop import SimLoop, lookups_without_getpid


class _JumpingSelector:
    def __init__(self, loop: ReferenceLoop) -> None:
        self.loop = loop

    def select(self, timeout: float | None) -> list[Any]:
        assert timeout is not None
        scheduled = self.loop._scheduled  # type: ignore[attr-defined]
        if timeout > 0:
            self.loop._now = max(self.loop._now, scheduled[0].when())
        return []


class ReferenceLoop(SimLoop):
    """asyncio's own iteration, over a heap of TimerHandles."""

    def __init__(self) -> None:
        super().__init__()
        self._selector = _JumpingSelector(self)

    _run_once = asyncio.BaseEventLoop._run_once  # type: ignore[attr-defined]

    def call_at(self, when: float, callback: Any, *args: Any, context: Any = None) -> Any:  # type: ignore[override]
        timer = asyncio.TimerHandle(when, callback, args, self, context)
        heapq.heappush(self._scheduled, timer)  # type: ignore[attr-defined]
        timer._scheduled = True  # type: ignore[attr-defined]
        return timer


def order_of_callbacks(loop: SimLoop, seed: int) -> list[int]:
    """Timers at a few instants (many due together), some cancelled (enough for a heap
    rebuild), each scheduling more timers and callbacks when it runs."""
    rng = random.Random(seed)
    ran: list[int] = []
    timers: list[asyncio.TimerHandle] = []

    def fire(n: int, depth: int) -> None:
        ran.append(n)
        if depth < 5:
            for k in range(rng.randint(1, 3)):
                delay = rng.choice((0, 0.001, 0.002))
                timers.append(loop.call_later(delay, fire, 4 * n + k + 1, depth + 1))
            loop.call_soon(ran.append, -n)
        for timer in rng.sample(timers, min(len(timers), rng.randint(0, 2))):
            timer.cancel()

    for n in range(300):
        timers.append(loop.call_later(rng.choice((0.001, 0.002, 0.003)), fire, n, 0))
    for timer in rng.sample(timers, 200):
        timer.cancel()
    loop.run_until_complete(asyncio.sleep(1))
    return ran


@pytest.mark.parametrize("seed", range(5))
def test_timers_run_in_asyncios_own_order(seed: int) -> None:
    expected = order_of_callbacks(ReferenceLoop(), seed)
    assert len(expected) > 1_000
    assert order_of_callbacks(SimLoop(), seed) == expected


def test_the_running_loop_is_found_as_before() -> None:
    loop = SimLoop()
    looked_up: list[Any] = []

    async def look() -> None:
        looked_up.append(asyncio.get_running_loop())
        looked_up.append(asyncio.events._get_running_loop())
        looked_up.append(asyncio.ensure_future(asyncio.sleep(0)).get_loop())

    original = asyncio.get_running_loop
    with lookups_without_getpid(loop):
        loop.run_until_complete(look())
        with pytest.raises(RuntimeError, match="no running event loop"):
            asyncio.get_running_loop()  # the loop does not run
        assert asyncio.events._get_running_loop() is None
    assert looked_up == [loop, loop, loop]
    assert asyncio.get_running_loop is original


def test_a_run_ends_with_no_coroutine_left_never_awaited() -> None:
    """A task created but never stepped still holds the handler coroutine it was handed, as the
    broker's handler stage hands one to the task that awaits it: burying it closes both."""
    loop = SimLoop()

    async def handle() -> int:
        return 1

    async def finish(outcome: Any) -> int:
        return int(await outcome)

    loop.create_task(finish(handle()))  # never stepped: the run ends first
    gc.collect()  # what earlier tests left
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        loop.bury()
        gc.collect()
    loop.close()
    assert [str(w.message) for w in warned if "never awaited" in str(w.message)] == []


def test_another_threads_loop_is_found_as_its_own_while_the_simulation_runs() -> None:
    """An in-process kemu left running by another test runs its loop in a thread of its own;
    while a simulation runs, that thread must still find its own loop, not the simulation's
    (it would schedule its callbacks there, from the wrong thread)."""
    loop = SimLoop()
    other = asyncio.new_event_loop()
    found: list[Any] = []

    def other_thread() -> None:
        async def look() -> None:
            found.append(asyncio.get_running_loop())
            found.append(asyncio.events._get_running_loop())
            found.append(asyncio.ensure_future(asyncio.sleep(0)).get_loop())

        other.run_until_complete(look())

    async def simulated() -> None:
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()  # the simulation's loop is running all along

    with lookups_without_getpid(loop):
        loop.run_until_complete(simulated())
    other.close()
    loop.close()
    assert found == [other, other, other]
