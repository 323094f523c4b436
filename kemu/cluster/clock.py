"""The process's clock: what time it is and when timers fire.

Every timer in kemu (share acquisition locks, group session and rebalance timeouts, transaction
timeouts, retention) goes through a ``Clock``, so ``kemu serve --clock virtual`` can move all of
them at once. The sans-IO cores still take ``now_ms`` as an argument; only their asyncio
wrappers ask the clock.

- ``RealClock``: wall-clock milliseconds; timers are the event loop's ``call_later``.
- ``VirtualClock``: time stands still until ``advance(ms)``, which fires, in deadline order, every
  timer due by the new time (each sees ``now_ms()`` equal to its own deadline while it runs, so a
  timer armed by a callback for a deadline still inside the advance fires in the same advance).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any, Protocol

import structlog

log = structlog.get_logger("kemu.clock")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    virtual: bool

    def now_ms(self) -> int: ...

    def call_at(self, when_ms: int, callback: Callable[..., Any], *args: Any) -> TimerHandle:
        """Run ``callback(*args)`` once the clock reads ``when_ms`` or later."""
        ...

    def call_later(
        self, delay_ms: int, callback: Callable[..., Any], *args: Any
    ) -> TimerHandle: ...


class Repeating:
    """``job()`` every ``interval_ms`` on ``clock``, the next run armed when one ends (also when
    it raised): a periodic job of Kafka's scheduler."""

    def __init__(self, clock: Clock, interval_ms: int, job: Callable[[], object]) -> None:
        self._clock, self._interval_ms, self._job = clock, interval_ms, job
        self._handle: TimerHandle | None = clock.call_later(interval_ms, self._run)

    def _run(self) -> None:
        self._handle = None
        try:
            self._job()
        finally:
            self._handle = self._clock.call_later(self._interval_ms, self._run)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


class RealClock:
    """Wall-clock time (or any ``now`` function, for tests); timers on the running loop."""

    virtual = False

    def __init__(self, now: Callable[[], int] = wall_clock_ms) -> None:
        self.now_ms = now

    def call_at(self, when_ms: int, callback: Callable[..., Any], *args: Any) -> TimerHandle:
        return self.call_later(when_ms - self.now_ms(), callback, *args)

    def call_later(self, delay_ms: int, callback: Callable[..., Any], *args: Any) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(0, delay_ms) / 1000, callback, *args)


class _VirtualTimer:
    __slots__ = ("args", "callback", "cancelled", "when_ms")

    def __init__(self, when_ms: int, callback: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.when_ms = when_ms
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class VirtualClock:
    """Time moves only when ``advance`` is called; it starts at the wall-clock time."""

    virtual = True

    def __init__(self, start_ms: int | None = None) -> None:
        self._now = wall_clock_ms() if start_ms is None else start_ms
        self._heap: list[tuple[int, int, _VirtualTimer]] = []
        self._sequence = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def call_at(self, when_ms: int, callback: Callable[..., Any], *args: Any) -> TimerHandle:
        timer = _VirtualTimer(when_ms, callback, args)
        if when_ms <= self._now:
            # Due already: run it on the loop like a real timer of delay 0, never re-entrantly.
            return asyncio.get_running_loop().call_soon(self._fire, timer)
        heapq.heappush(self._heap, (when_ms, next(self._sequence), timer))
        return timer

    def call_later(self, delay_ms: int, callback: Callable[..., Any], *args: Any) -> TimerHandle:
        return self.call_at(self._now + max(0, delay_ms), callback, *args)

    def pending(self) -> int:
        return sum(1 for _, _, timer in self._heap if not timer.cancelled)

    def advance(self, delta_ms: int) -> int:
        """Move time forward by ``delta_ms`` (>= 0), firing what falls due; returns how many
        timers fired."""
        if delta_ms < 0:
            raise ValueError("a virtual clock only moves forward")
        target = self._now + delta_ms
        fired = 0
        heap = self._heap
        while heap and heap[0][0] <= target:
            when, _, timer = heapq.heappop(heap)
            if timer.cancelled:
                continue
            self._now = max(self._now, when)
            fired += self._fire(timer)
        self._now = target
        return fired

    @staticmethod
    def _fire(timer: _VirtualTimer) -> int:
        if timer.cancelled:
            return 0
        timer.cancelled = True
        try:
            timer.callback(*timer.args)
        except Exception:
            log.exception("virtual_timer_failed", callback=repr(timer.callback))
        return 1
