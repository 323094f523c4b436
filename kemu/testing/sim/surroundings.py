"""What a simulation run changes around itself, and restores after: wall time and unseeded
randomness replaced by the loop and the seed (``deterministic``), log output silenced with kemu's
own errors kept as violations (``quiet_logs``), and the garbage collector's thresholds
(``fewer_collections``)."""

from __future__ import annotations

import contextlib
import gc
import logging
import random
import sys
import time
import traceback
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import structlog

from kemu.cluster import seeded
from kemu.testing.sim.loop import SimLoop, current_process

# The cyclic garbage collector's thresholds for a run: a run allocates millions of short-lived
# objects and holds a large heap (every task of every dead process, the ledger), so Python's
# defaults (700, 10, 10) spent about 8% of a run's CPU in collections, most of it in full ones
# over that heap. Nothing a collection does moves a trace: the tasks that could be finalised
# are held until the run ends (SimLoop.tasks).
GC_THRESHOLDS = (50_000, 10, 10)


@contextlib.contextmanager
def deterministic(rng: random.Random, loop: SimLoop) -> Iterator[None]:
    """Wall time and unseeded randomness, replaced for the run by the loop and the seed."""

    def uuid4() -> uuid.UUID:
        return uuid.UUID(int=rng.getrandbits(128), version=4)

    def time_ns() -> int:
        return round(loop.time() * 1_000_000) * 1000

    patches: list[tuple[Any, str, Any]] = [
        (time, "time", loop.time),
        (time, "time_ns", time_ns),
        (time, "monotonic", loop.time),
        (time, "monotonic_ns", time_ns),  # a long poll's own wait (RequestContext.wait_ms)
        (uuid, "uuid4", uuid4),  # kemu.client's member ids
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in patches]
    for module, name, value in patches:
        setattr(module, name, value)
    saved_seed = seeded.current_seed()
    seeded.reseed(rng.getrandbits(64))  # the brokers' ids, session ids and fault fractions
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
        seeded.reseed(saved_seed)


# kemu's warnings the run reports as it reports errors: a share-state batch or record skipped as
# corrupt (the live coordinator and the replay oracle skip it alike, so only the log tells)
REPORTED_WARNINGS = frozenset({"share_state_batch_skipped", "share_state_record_skipped"})
_NOT_FIELDS = ("event", "exc_info")


def reported_events(found: list[str]) -> Any:
    """A structlog processor: each error or exception event of kemu (and ``REPORTED_WARNINGS``)
    goes into ``found`` with its fields and exception, then every event is dropped. A normal
    run, faults included, logs none: an exception a handler or a task of kemu caught and
    logged is a bug that the clients see at most as an error code they retry."""

    def processor(_logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
        name = event.get("event")
        process = current_process()
        if process is not None and process.dead:
            # a killed kemu's stack unwinding from its crash point (a ``finally`` writing to a
            # closed file): a real kill stops the process before any of it
            raise structlog.DropEvent
        if method in ("error", "critical") or name in REPORTED_WARNINGS:
            fields = [f"{k}={v}" for k, v in sorted(event.items()) if k not in _NOT_FIELDS]
            error = sys.exc_info()[1] if event.get("exc_info") is True else event.get("exc_info")
            if isinstance(error, BaseException):
                where = traceback.extract_tb(error.__traceback__)[-2:]
                at = " < ".join(f"{f.name} ({Path(f.filename).name}:{f.lineno})" for f in where)
                fields.append(f"{error!r} at {at}")
            found.append(f"{method} {name}: {', '.join(fields)}")
        raise structlog.DropEvent

    return processor


@contextlib.contextmanager
def quiet_logs(found: list[str] | None = None) -> Iterator[None]:
    """No log output during a run (the clients log thousands of expected errors); kemu's own
    errors go into ``found`` (``reported_events``). Restored after."""
    saved_structlog = structlog.get_config()
    client_logger = logging.getLogger("kemu")
    saved_level = client_logger.level
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        processors=[reported_events([] if found is None else found)],
    )
    client_logger.setLevel(logging.CRITICAL)  # kemu.client's warnings
    # the coroutines of a killed process are never awaited: that is what a kill is
    warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
    try:
        yield
    finally:
        structlog.configure(**saved_structlog)
        client_logger.setLevel(saved_level)


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """``GC_THRESHOLDS`` for the block, Python's previous thresholds after it."""
    saved = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*saved)
