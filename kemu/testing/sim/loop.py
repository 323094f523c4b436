"""The simulation's event loop: virtual time, no I/O, and processes that can die at any instant.

``SimLoop`` is an asyncio loop whose clock is virtual: when nothing is ready it jumps straight to
the next timer instead of waiting for it, so a simulated hour takes as long as the work done in
it. It polls no file descriptors; the only "I/O" is the in-memory network of
``kemu.testing.sim.network``, which delivers bytes with ``call_at``.

Every callback runs on behalf of a ``Process`` (a broker incarnation or a client), found in the
``contextvars`` context asyncio gives each handle and task: a callback whose process has died is
skipped, so a crash stops all its tasks and timers at once, as SIGKILL stops a real process,
without a cooperating shutdown. Callbacks with no process (the harness itself) always run.
A process can also be frozen for a while (``SimLoop.freeze``, SIGSTOP then SIGCONT): its
callbacks, timers and arriving bytes wait, in order, until it thaws; its connections stay open.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import heapq
import inspect
from collections.abc import Callable, Iterator
from threading import get_ident
from typing import Any

START_S = 1_767_225_600.0  # 2026-01-01T00:00:00Z: every run starts at the same instant


class Process:
    """One simulated process: what its callbacks check before running."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dead = False
        self.frozen = False
        # what came due while frozen, in order, with the context each would have run in
        self.deferred: list[tuple[Callable[..., Any], tuple[Any, ...], contextvars.Context]] = []
        self.context = contextvars.copy_context()
        self.context.run(CURRENT.set, self)

    def __repr__(self) -> str:
        return f"Process({self.name}{', dead' if self.dead else ''})"


CURRENT: contextvars.ContextVar[Process | None] = contextvars.ContextVar(
    "kemu_sim_process", default=None
)


def current_process() -> Process | None:
    return CURRENT.get()


@contextlib.contextmanager
def lookups_without_getpid(loop: SimLoop) -> Iterator[None]:
    """For the block, asyncio's lookups of the running loop answer ``loop`` while it runs, and
    as before while it does not: the same answers, without the ``getpid`` system call C
    asyncio makes at each lookup (to notice a fork). asyncio looks the loop up for every
    ``sleep``, ``wait_for``, ``ensure_future`` and lock: ~270 times a step, 0.7 us each in a VM
    (~2% of a run)."""
    get_running_loop = asyncio.events.get_running_loop
    get_running_loop_or_none = asyncio.events._get_running_loop
    get_event_loop = getattr(asyncio.events, "_get_event_loop", None)  # gone in 3.12

    # Only in the thread that runs ``loop``: another thread of the process running a loop of its
    # own (an in-process kemu a test left running) must still find its own, or it schedules its
    # callbacks on the simulation's, from the wrong thread, and the run's trace moves with it.
    def ours() -> bool:
        owner: int | None = loop._thread_id  # type: ignore[attr-defined]
        return owner == get_ident()

    def running() -> asyncio.AbstractEventLoop:
        return loop if ours() else get_running_loop()

    def running_or_none() -> asyncio.AbstractEventLoop | None:
        return loop if ours() else get_running_loop_or_none()

    def running_or_policys(stacklevel: int = 3) -> Any:
        # one frame more than asyncio's: a deprecation warning names the same caller
        return loop if ours() else get_event_loop(stacklevel + 1)  # type: ignore[misc]

    patches: list[tuple[Any, str, Any]] = [
        (asyncio.events, "get_running_loop", running),
        (asyncio, "get_running_loop", running),
        (asyncio.events, "_get_running_loop", running_or_none),
        (asyncio, "_get_running_loop", running_or_none),
    ]
    if get_event_loop is not None:  # ensure_future's and gather's lookup, in 3.11
        patches.append((asyncio.events, "_get_event_loop", running_or_policys))
    saved = [(module, name, getattr(module, name)) for module, name, _ in patches]
    for module, name, value in patches:
        setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


class Stalled(RuntimeError):
    """Nothing is ready and no timer is armed: the simulated world can never move again."""


def _guarded(process: Process, callback: Callable[..., Any], *args: Any) -> None:
    if process.dead:
        return
    if process.frozen:
        # run in a copy of its context at the thaw: kemu's code sets no context variable
        process.deferred.append((callback, args, contextvars.copy_context()))
        return
    callback(*args)


class _Due(float):
    """A timer in the loop's heap: the float is its time. The heap compares entries with
    float's own ``<``, which orders them as ``TimerHandle.__lt__`` does (by time alone), so
    every heap operation moves the same entries as it would with the handles themselves (the
    order of timers due at the same instant is the heap's), without a Python call for each
    comparison."""

    __slots__ = ("timer",)
    timer: asyncio.TimerHandle


# BaseEventLoop._run_once's: the heap is rebuilt without its cancelled timers once they are
# more than this fraction of a heap of more than this many
_MIN_SCHEDULED_TIMER_HANDLES = 100
_MIN_CANCELLED_TIMER_HANDLES_FRACTION = 0.5


class SimLoop(asyncio.BaseEventLoop):
    """A deterministic loop on virtual time (see the module docstring)."""

    _timer_cancelled_count: int  # BaseEventLoop's

    def __init__(self) -> None:
        super().__init__()
        self._now = START_S
        self._due: list[_Due] = []  # the timers, a heap (BaseEventLoop's _scheduled stays empty)
        self._clock_resolution = 1e-6  # above a float ulp at this epoch
        self.network: Any = None  # the SimNetwork, set by it
        self.exceptions: list[str] = []
        self.set_exception_handler(self._record_exception)
        # Every task, held until the run ends: a killed process's tasks must not be collected
        # (collecting a coroutine runs its ``finally`` blocks, at a moment the garbage collector
        # picks: the dead would act, and a replay would differ).
        self.tasks: list[asyncio.Task[Any]] = []

    # --- time ----------------------------------------------------------------------------------

    def time(self) -> float:
        return self._now

    def now_ms(self) -> int:
        return round(self._now * 1000)

    # --- one iteration ----------------------------------------------------------------------------

    def _run_once(self) -> None:
        """``BaseEventLoop._run_once`` step for step (the same heap operations, the same
        callbacks in the same order), where polling for I/O is moving virtual time to the
        next timer when nothing is ready."""
        due = self._due
        if (
            len(due) > _MIN_SCHEDULED_TIMER_HANDLES
            and self._timer_cancelled_count / len(due) > _MIN_CANCELLED_TIMER_HANDLES_FRACTION
        ):
            kept = []
            for entry in due:
                if entry.timer._cancelled:
                    entry.timer._scheduled = False  # type: ignore[attr-defined]
                else:
                    kept.append(entry)
            heapq.heapify(kept)
            self._due = due = kept
            self._timer_cancelled_count = 0
        else:
            while due and due[0].timer._cancelled:
                self._timer_cancelled_count -= 1
                heapq.heappop(due).timer._scheduled = False  # type: ignore[attr-defined]
        ready: collections.deque[asyncio.Handle] = self._ready  # type: ignore[attr-defined]
        if not ready and not self._stopping:  # type: ignore[attr-defined]
            if not due:
                raise Stalled("no callback is ready and no timer is armed")
            if due[0] > self._now:
                self._now = due[0].timer.when()
        end_time = self._now + self._clock_resolution
        while due and due[0] < end_time:
            timer = heapq.heappop(due).timer
            timer._scheduled = False  # type: ignore[attr-defined]
            ready.append(timer)
        for _ in range(len(ready)):
            handle = ready.popleft()
            if not handle._cancelled:
                handle._run()

    def close(self) -> None:
        super().close()
        self._due.clear()

    def create_task(self, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = super().create_task(coro, **kwargs)
        self.tasks.append(task)
        if len(self.tasks) % 4096 == 0:
            self.tasks = [task for task in self.tasks if not task.done()]
        return task

    def freeze(self, process: Process, seconds: float) -> None:
        """``process`` stops for ``seconds`` of virtual time (as SIGSTOP, then SIGCONT): what
        would run on its behalf meanwhile runs, in the same order, once it thaws."""
        process.frozen = True
        self.call_at(self._now + seconds, self.thaw, process, context=contextvars.Context())

    def thaw(self, process: Process) -> None:
        process.frozen = False
        deferred, process.deferred = process.deferred, []
        for callback, args, context in deferred:
            self.call_soon(callback, *args, context=context)

    def bury(self) -> None:
        """At the end of a run: close every unfinished coroutine now, while nothing runs."""
        tasks, self.tasks = self.tasks, []
        for task in tasks:
            if not task.done():
                _close(task.get_coro())

    # --- callbacks run on behalf of their process -----------------------------------------------

    def _call_soon(
        self, callback: Callable[..., Any], args: Any, context: contextvars.Context | None
    ) -> asyncio.Handle:
        # the context is copied once, here, for both the owner lookup and the handle
        if context is None:
            context = contextvars.copy_context()
        owner = context.get(CURRENT)
        if owner is not None:
            args = (owner, callback, *args)
            callback = _guarded
        handle = asyncio.Handle(callback, args, self, context)
        self._ready.append(handle)  # type: ignore[attr-defined]
        return handle

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        self._check_closed()  # type: ignore[attr-defined]
        if context is None:
            context = contextvars.copy_context()
        owner = context.get(CURRENT)
        if owner is not None:
            args = (owner, callback, *args)
            callback = _guarded
        timer = asyncio.TimerHandle(when, callback, args, self, context)
        entry = _Due(when)
        entry.timer = timer
        heapq.heappush(self._due, entry)
        timer._scheduled = True  # type: ignore[attr-defined]
        return timer

    # --- no selector, no threads ------------------------------------------------------------------

    def _process_events(self, event_list: list[Any]) -> None:
        pass

    def _write_to_self(self) -> None:
        pass

    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Callable[..., Any], *args: Any
    ) -> Any:
        future = self.create_future()  # no threads in a simulation: run it here, now
        try:
            future.set_result(func(*args))
        except Exception as error:
            future.set_exception(error)
        return future

    async def create_connection(  # type: ignore[override]
        self, protocol_factory: Callable[[], asyncio.BaseProtocol], host: str, port: int, **_: Any
    ) -> tuple[asyncio.Transport, asyncio.BaseProtocol]:
        pair: tuple[asyncio.Transport, asyncio.BaseProtocol]
        pair = await self.network.connect(protocol_factory, host, port)
        return pair

    async def create_server(  # type: ignore[override]
        self, protocol_factory: Callable[[], asyncio.BaseProtocol], host: str, port: int, **_: Any
    ) -> Any:
        return self.network.listen(protocol_factory, host, port)

    def _record_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        # A task of a dead process is never finished; its destruction is no error.
        message = str(context.get("message", ""))
        if "destroyed but it is pending" in message:
            return
        error = context.get("exception")
        self.exceptions.append(f"{message}: {error!r}" if error is not None else message)


def _close(coroutine: Any) -> None:
    """Close ``coroutine``; one that never started also closes the coroutines it was handed (the
    broker's handler stage hands a handler's coroutine to the task that awaits it), which would
    otherwise be left "never awaited"."""
    frame = getattr(coroutine, "cr_frame", None)
    if frame is not None and inspect.getcoroutinestate(coroutine) == inspect.CORO_CREATED:
        for argument in frame.f_locals.values():
            if inspect.iscoroutine(argument):
                _close(argument)
    # a ``finally`` that awaits raises here: it cannot await any more
    with contextlib.suppress(BaseException):
        coroutine.close()
