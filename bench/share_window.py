"""Scaling micro-check for the share-partition core: cost per acquired+acknowledged record as
the in-flight window grows (100 / 1,000 / 10,000 records).

A sliding window is held at W records, all ACQUIRED; every step acquires the next log batch
(the window grows by one batch) and accepts the oldest one (the start offset moves by one
batch). Two shapes:
* batch: 10-record batches, acknowledged whole (one span per batch in the window);
* record: every record acquired on its own (RECORD_LIMIT, max_records=1) and acknowledged on
  its own, so the window is one span per record (the worst case for the span list).

Flat numbers across window sizes mean the cost per record does not grow with the window.
Run: ``.venv/bin/python bench/share_window.py``. Not a test: nothing is asserted.
"""

from __future__ import annotations

import time

from kemu.broker.share.partition import (
    AckBatch,
    AcquireMode,
    SharePartitionConfig,
    SharePartitionCore,
)
from kemu.coordinator.share.persister import PersistedState
from kemu.protocol.records import build_batch, read_header, with_offset
from kemu.storage.log import MemoryLog

ACCEPT = 1


def make_log(records: int, batch_records: int) -> MemoryLog:
    log = MemoryLog()
    template = build_batch([(None, b"x" * 16)] * batch_records, timestamp_ms=0)
    for base in range(0, records, batch_records):
        stored = with_offset(template, base, 0)
        log.append(read_header(stored), stored, now_ms=0)
    return log


def run(window: int, batch_records: int, steps: int) -> float:
    """Microseconds per record for ``steps`` acquire+ack steps at a window of ``window``."""
    per_step = batch_records if batch_records > 1 else 1
    total = window + (steps + 10) * per_step
    log = make_log(total, batch_records)
    config = SharePartitionConfig(
        record_lock_duration_ms=10**9, max_in_flight_records=window + 2 * per_step
    )
    core, _ = SharePartitionCore.from_persisted(PersistedState(0, 0), config, reset_offset=0)
    mode = AcquireMode.RECORD_LIMIT if batch_records == 1 else AcquireMode.BATCH_OPTIMIZED
    now = 0

    def step() -> None:
        nonlocal now
        now += 1  # a new deadline per step: neighbouring acquisitions never merge
        result = core.acquire(
            "m",
            log.batches(core.next_fetch_offset(), log.log_end_offset),
            max_records=per_step,
            batch_size=per_step,
            mode=mode,
            now_ms=now,
        )
        assert result.count == per_step

    while core.in_flight < window:
        step()
    started = time.perf_counter()
    for _ in range(steps):
        step()
        first = core.start
        outcome = core.acknowledge("m", [AckBatch(first, first + per_step - 1, (ACCEPT,))], now)
        assert outcome.error == 0 and core.start == first + per_step
    elapsed = time.perf_counter() - started
    return elapsed / (steps * per_step) * 1e6


def main() -> None:
    print(f"{'window':>8}  {'shape':>6}  {'spans':>6}  {'us/record':>10}")
    for window in (100, 1_000, 10_000):
        for shape, batch_records, steps in (("batch", 10, 2_000), ("record", 1, 10_000)):
            cost = run(window, batch_records, steps)
            spans = window // batch_records
            print(f"{window:>8}  {shape:>6}  {spans:>6}  {cost:>10.2f}")


if __name__ == "__main__":
    main()
