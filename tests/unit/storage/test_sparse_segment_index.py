"""The sparse in-memory segment index: whatever SegmentLog answers from a bisection and a walk of
batch headers, a MemoryLog (one entry per batch) fed the same batches answers too; and its
memory grows with the bytes on disk, not with the number of batches."""

from __future__ import annotations

import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kemu.storage.log import MemoryLog
from kemu.storage.segments import SegmentLog
from tests.unit.storage.test_segments import T0, append_to, assert_same

# (records, value size, timestamp step) per batch; steps may go back in time
BATCHES = st.lists(
    st.tuples(st.integers(1, 4), st.integers(0, 300), st.integers(-50, 100)),
    min_size=1,
    max_size=40,
)


def timestamps_to_try(model: MemoryLog) -> list[int]:
    seen = sorted({header.max_timestamp for header, _ in model.batches(0, model.log_end_offset)})
    return sorted({T0 - 1_000, *seen, *(t + 1 for t in seen), *(t - 1 for t in seen)})


def assert_same_lookups(log: SegmentLog, model: MemoryLog) -> None:
    assert_same(log, model)
    for timestamp in timestamps_to_try(model):
        assert log.offset_for_timestamp(timestamp) == model.offset_for_timestamp(timestamp)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    batches=BATCHES,
    segment_bytes=st.integers(200, 3000),
    interval=st.integers(1, 1500),
    start_fraction=st.floats(0, 1),
    truncate_fraction=st.floats(0, 1),
    reopen=st.booleans(),
)
def test_sparse_reads_match_the_dense_model(
    tmp_path: Path,
    batches: list[tuple[int, int, int]],
    segment_bytes: int,
    interval: int,
    start_fraction: float,
    truncate_fraction: float,
    reopen: bool,
) -> None:
    directory = tmp_path / f"p-{uuid.uuid4().hex}"
    options = {"segment_bytes": segment_bytes, "index_interval_bytes": interval}
    log = SegmentLog(directory, **options)
    model = MemoryLog()
    timestamp = T0
    for count, value_size, step in batches:
        timestamp += step
        append_to([log, model], count=count, value_size=value_size, timestamp=timestamp)
    assert_same_lookups(log, model)

    end = model.log_end_offset
    truncate_at = int(end * truncate_fraction)
    log.truncate_to(truncate_at)
    model.truncate_to(truncate_at)
    if log.log_end_offset == model.log_end_offset:  # both cut at the same batch boundary
        assert_same_lookups(log, model)
    else:  # a cut before the first segment restarts the log there: not modelled
        return

    start = model.log_start_offset + int(
        (model.log_end_offset - model.log_start_offset) * start_fraction
    )
    log.advance_start(start)
    model.advance_start(start)
    if reopen:
        log.close()
        log = SegmentLog(directory, **options)
    assert_same_lookups(log, model)

    timestamp += 10
    append_to([log, model], count=2, value_size=40, timestamp=timestamp)
    assert_same_lookups(log, model)
    log.close()


def test_index_memory_grows_with_bytes_not_batches(tmp_path: Path) -> None:
    log = SegmentLog(tmp_path / "p-0", index_interval_bytes=4096)
    for _ in range(2_000):
        append_to([log], count=1, value_size=10)  # about 80-byte batches
    segment = log._segments[-1]
    written = segment.size
    # one entry per 4 KiB (plus the first batch), where a dense index had one per batch
    assert len(segment.sparse) <= written // 4096 + 2
    assert len(segment.sparse) < 2_000 // 20
    log.close()
