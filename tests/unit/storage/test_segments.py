"""SegmentLog: the PartitionLog contract on disk, recovery of torn tails, retention, reopen.

MemoryLog serves as the reference model: whatever a SegmentLog answers, a MemoryLog fed the same
batches must answer too.
"""

from __future__ import annotations

import itertools
import os
import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from kemu.cluster.model import BrokerNode, Cluster
from kemu.cluster.partition import Partition
from kemu.config.definitions import BrokerConfig
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import BatchHeader, build_batch, read_header
from kemu.storage.log import MemoryLog, PartitionLog
from kemu.storage.segment_files import INDEX_ENTRY, segment_file_name
from kemu.storage.segments import SegmentLog

T0 = 1_700_000_000_000


def batch_for(
    log: PartitionLog,
    count: int = 3,
    *,
    timestamp: int = T0,
    value_size: int = 20,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> tuple[BatchHeader, bytes]:
    offset = log.log_end_offset
    records = [
        (f"k{offset + i}".encode(), bytes([(offset + i) % 251]) * value_size) for i in range(count)
    ]
    batch = build_batch(
        records,
        base_offset=offset,
        timestamp_ms=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    return read_header(batch), batch


def append_to(logs: list[PartitionLog], count: int = 3, **kwargs: int) -> bytes:
    header, batch = batch_for(logs[0], count, **kwargs)
    for log in logs:
        log.append(header, batch, now_ms=kwargs.get("timestamp", T0))
    return batch


def headers_in(data: bytes) -> list[BatchHeader]:
    headers = []
    position = 0
    while position + 61 <= len(data):
        header = read_header(data, position)
        headers.append(header)
        position += header.size
    return headers


def one_batch(batch: bytes) -> list[tuple[BatchHeader, bytes]]:
    return [(read_header(batch), batch)]


def segment_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.log"))


def assert_same(log: PartitionLog, model: MemoryLog) -> None:
    assert log.log_start_offset == model.log_start_offset
    assert log.log_end_offset == model.log_end_offset
    end = model.log_end_offset
    for offset in range(model.log_start_offset, end + 1):
        for max_bytes in (1, 200, 10_000):
            assert log.read(offset, max_bytes, upper=end) == model.read(
                offset, max_bytes, upper=end
            ), (offset, max_bytes)
        assert list(log.batches(offset, end)) == list(model.batches(offset, end))
    assert log.max_timestamp() == model.max_timestamp()


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


def test_fresh_log_is_empty_with_a_first_segment(directory: Path) -> None:
    log = SegmentLog(directory)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)
    assert segment_files(directory) == ["00000000000000000000.log"]
    assert (directory / "00000000000000000000.index").exists()
    assert log.read(0, 1000, upper=0) == b""
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp() is None


def test_append_read_batches_across_segment_rolls(directory: Path) -> None:
    log = SegmentLog(directory, segment_bytes=400)
    model = MemoryLog()
    for i in range(30):
        append_to([log, model], count=1 + i % 4, timestamp=T0 + i * 10)
    assert len(segment_files(directory)) > 5
    assert segment_files(directory)[0] == segment_file_name(0)
    for name, base in zip(segment_files(directory), log.segment_base_offsets, strict=True):
        assert name == f"{base:020d}.log"
        first = (directory / name).read_bytes()
        assert read_header(first).base_offset == base
    assert log.size_bytes == model.size_bytes
    assert log.size_bytes == sum((directory / n).stat().st_size for n in segment_files(directory))
    assert_same(log, model)
    # upper cuts a read at a batch boundary, never inside one
    upper = model.read(0, 10**6, upper=10**6)
    assert log.read(0, 10**6, upper=log.log_end_offset) == upper
    middle = log.segment_base_offsets[3]
    assert log.read(0, 10**6, upper=middle) == model.read(0, 10**6, upper=middle)


def test_read_min_one_returns_an_oversized_first_batch(directory: Path) -> None:
    log = SegmentLog(directory)
    batch = append_to([log], count=5, value_size=500)
    assert log.read(0, 10, upper=5) == batch
    assert log.read(0, 10, upper=5, min_one=False) == b""


def test_offset_for_timestamp_across_segments(directory: Path) -> None:
    log = SegmentLog(directory, segment_bytes=300)
    model = MemoryLog()
    for i in range(20):
        append_to([log, model], count=2, timestamp=T0 + i * 1000)
    for target in (0, T0, T0 + 1, T0 + 5500, T0 + 19_000, T0 + 19_001):
        assert log.offset_for_timestamp(target) == model.offset_for_timestamp(target)
    assert log.max_timestamp() == model.max_timestamp()


def test_segment_ms_rolls_on_batch_timestamps(directory: Path) -> None:
    log = SegmentLog(directory, segment_ms=1000)
    append_to([log], timestamp=T0)
    append_to([log], timestamp=T0 + 1000)  # exactly segment.ms later: same segment
    assert log.segment_base_offsets == [0]
    append_to([log], timestamp=T0 + 1001)
    assert log.segment_base_offsets == [0, 6]


def test_sparse_index_points_at_batches(directory: Path) -> None:
    log = SegmentLog(directory, index_interval_bytes=256)
    for _ in range(40):
        append_to([log], count=2, value_size=40)
    # entries are buffered until the flush: no file write per entry on the produce path
    assert (directory / segment_file_name(0, ".index")).read_bytes() == b""
    log.flush()
    data = (directory / segment_file_name(0)).read_bytes()
    index = (directory / segment_file_name(0, ".index")).read_bytes()
    assert index and len(index) % INDEX_ENTRY.size == 0
    entries = [INDEX_ENTRY.unpack_from(index, i) for i in range(0, len(index), 8)]
    assert [p for _, p in entries] == sorted(p for _, p in entries)
    for relative, position in entries:
        assert read_header(data, position).last_offset == relative
    # every entry comes after more than the interval's worth of bytes
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(entries)]
    assert all(gap > 256 for gap in gaps)
    log.close()
    os.truncate(directory / segment_file_name(0, ".index"), 3)
    SegmentLog(directory, index_interval_bytes=256).close()  # the index is rebuilt on open
    assert (directory / segment_file_name(0, ".index")).read_bytes() == index


def test_a_roll_writes_the_rolled_segments_buffered_index(directory: Path) -> None:
    log = SegmentLog(directory, segment_bytes=600, index_interval_bytes=50)
    while len(log.segment_base_offsets) < 2:
        append_to([log], count=2, value_size=40)
    first_index = (directory / segment_file_name(0, ".index")).read_bytes()
    assert first_index  # written at the roll, before any flush
    second = log.segment_base_offsets[1]
    log.close()
    assert (directory / segment_file_name(0, ".index")).read_bytes() == first_index
    rebuilt = SegmentLog(directory, segment_bytes=600, index_interval_bytes=50)
    rebuilt.close()
    assert (directory / segment_file_name(0, ".index")).read_bytes() == first_index
    assert (directory / segment_file_name(second, ".index")).exists()


def test_reopen_after_close_and_without_close(directory: Path) -> None:
    log = SegmentLog(directory, segment_bytes=500)
    model = MemoryLog()
    for i in range(25):
        append_to([log, model], count=2, timestamp=T0 + i)
    log.close()
    reopened = SegmentLog(directory, segment_bytes=500)
    assert_same(reopened, model)
    assert reopened.size_bytes == model.size_bytes
    append_to([reopened, model], count=4, timestamp=T0 + 99)
    # no close: as after a SIGKILL, what was written is in the files
    again = SegmentLog(directory, segment_bytes=500)
    assert_same(again, model)
    append_to([again, model])
    assert_same(again, model)


def test_flush_every_append_and_flush(directory: Path) -> None:
    log = SegmentLog(directory, flush_every_append=True, segment_bytes=200)
    for _ in range(5):
        append_to([log])
    log.flush()
    log.close()
    log.close()  # idempotent
    assert SegmentLog(directory).log_end_offset == 15


def _cut_last_file(directory: Path, mutate: str) -> tuple[int, int]:
    """Damage the last segment; returns (valid bytes, size before) of the damaged file."""
    path = directory / segment_files(directory)[-1]
    data = bytearray(path.read_bytes())
    headers = headers_in(bytes(data))
    last_start = len(data) - headers[-1].size
    if mutate == "torn":
        path.write_bytes(data[: last_start + 30])
        return last_start, last_start + 30
    if mutate == "crc":
        data[last_start + 70] ^= 0xFF  # inside the records, covered by the CRC
        path.write_bytes(bytes(data))
        return last_start, len(data)
    if mutate == "garbage":
        path.write_bytes(bytes(data) + os.urandom(100))
        return len(data), len(data) + 100
    if mutate == "zeros":
        path.write_bytes(bytes(data) + bytes(5000))
        return len(data), len(data) + 5000
    if mutate == "offset":
        struct.pack_into(">q", data, last_start, headers[-1].base_offset + 7)
        path.write_bytes(bytes(data))
        return last_start, len(data)
    raise AssertionError(mutate)


@pytest.mark.parametrize("mutate", ["torn", "crc", "garbage", "zeros", "offset"])
def test_damaged_tail_is_cut_at_the_last_good_batch(directory: Path, mutate: str) -> None:
    log = SegmentLog(directory, segment_bytes=600)
    model = MemoryLog()
    for i in range(12):
        append_to([log, model], count=3, timestamp=T0 + i)
    log.close()
    keeps_last = mutate in ("garbage", "zeros")
    valid, before = _cut_last_file(directory, mutate)
    with capture_logs() as logs:
        reopened = SegmentLog(directory, segment_bytes=600)
    warning = next(e for e in logs if e["event"] == "log_tail_truncated")
    assert warning["log_level"] == "warning"
    assert warning["bytes_truncated"] == before - valid
    assert (directory / segment_files(directory)[-1]).stat().st_size == valid
    if not keeps_last:
        model.truncate_to(model.log_end_offset - 3)
    assert_same(reopened, model)
    append_to([reopened, model])  # and the log goes on from there
    assert_same(SegmentLog(directory, segment_bytes=600), model)


def test_corrupt_middle_segment_ends_the_log(directory: Path) -> None:
    log = SegmentLog(directory, segment_bytes=300)
    for _ in range(12):
        append_to([log], count=2)
    log.close()
    names = segment_files(directory)
    assert len(names) >= 4
    # a summarized segment is known synced and read from its summary, not rescanned (as Kafka
    # does not rescan below its recovery point): without summaries, every segment is scanned
    for summary in directory.glob("*.scan"):
        summary.unlink()
    path = directory / names[1]
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x01
    path.write_bytes(bytes(data))
    with capture_logs() as logs:
        reopened = SegmentLog(directory, segment_bytes=300)
    events = [e["event"] for e in logs]
    assert "log_tail_truncated" in events
    assert events.count("log_segment_removed") == len(names) - 2
    assert segment_files(directory) == names[:2]
    assert reopened.log_end_offset == headers_in(bytes(data))[-1].base_offset


def test_retention_by_time_deletes_old_segments_only(directory: Path) -> None:
    log = SegmentLog(directory, segment_bytes=300)
    for i in range(12):
        append_to([log], count=2, timestamp=T0 + i * 1000)
    bases = log.segment_base_offsets
    assert len(bases) >= 4
    log.enforce_retention(now_ms=T0 + 11_000, retention_ms=10**9, retention_bytes=-1)
    assert log.segment_base_offsets == bases
    # everything is too old: all but the active segment go
    log.enforce_retention(now_ms=T0 + 10**7, retention_ms=1000, retention_bytes=-1)
    assert log.segment_base_offsets == bases[-1:]
    assert log.log_start_offset == bases[-1]
    assert segment_files(directory) == [segment_file_name(bases[-1])]
    assert log.read(bases[-1], 10**6, upper=log.log_end_offset)
    reopened = SegmentLog(directory, segment_bytes=300)
    assert reopened.log_start_offset == bases[-1]
    assert reopened.log_end_offset == 24


def test_retention_by_size_keeps_at_least_the_limit(directory: Path) -> None:
    log = SegmentLog(directory, segment_bytes=300)
    for i in range(12):
        append_to([log], count=2, timestamp=T0 + i)
    total = log.size_bytes
    bases = log.segment_base_offsets
    first_size = (directory / segment_file_name(0)).stat().st_size
    log.enforce_retention(now_ms=T0, retention_ms=-1, retention_bytes=total - first_size + 1)
    assert log.segment_base_offsets == bases  # deleting one would go below the limit
    log.enforce_retention(now_ms=T0, retention_ms=-1, retention_bytes=total - first_size)
    assert log.segment_base_offsets == bases[1:]
    assert log.size_bytes == total - first_size
    assert log.log_start_offset == bases[1]
    log.enforce_retention(now_ms=T0, retention_ms=-1, retention_bytes=0)
    assert len(log.segment_base_offsets) == 1
    assert log.size_bytes > 0
    assert log.log_end_offset == 24


def test_advance_start_persists_across_reopen(directory: Path) -> None:
    log = SegmentLog(directory, segment_bytes=300)
    model = MemoryLog()
    for i in range(12):
        append_to([log, model], count=2, timestamp=T0 + i)
    bases = log.segment_base_offsets
    inside = bases[2] + 1
    log.advance_start(inside)
    model.advance_start(inside)
    assert log.segment_base_offsets == bases[2:]
    assert_same(log, model)
    assert log.read(inside, 10**6, upper=24).startswith(model.read(inside, 10**6, upper=24))
    assert (directory / "log-start-offset").read_text() == f"0\n{inside}\n"
    reopened = SegmentLog(directory, segment_bytes=300)
    assert_same(reopened, model)
    # DeleteRecords to the end leaves an empty, still appendable log
    reopened.advance_start(10**6)
    model.advance_start(10**6)
    assert reopened.log_start_offset == 24
    append_to([reopened, model])
    assert_same(SegmentLog(directory, segment_bytes=300), model)


def test_truncate_to_inside_and_across_segments(directory: Path) -> None:
    log = SegmentLog(directory, segment_bytes=300, index_interval_bytes=50)
    model = MemoryLog()
    for i in range(12):
        append_to([log, model], count=2, timestamp=T0 + i)
    for target in (21, 13, 4):
        log.truncate_to(target)
        model.truncate_to(target)
        assert_same(log, model)
        assert_same(SegmentLog(directory, segment_bytes=300, index_interval_bytes=50), model)
        append_to([log, model], count=1)
        assert_same(log, model)
    index = (directory / segment_file_name(0, ".index")).read_bytes()
    size = (directory / segment_file_name(0)).stat().st_size
    assert all(INDEX_ENTRY.unpack_from(index, i)[1] < size for i in range(0, len(index), 8))
    log.truncate_to(0)
    model.truncate_to(0)
    assert_same(log, model)


def test_start_checkpoint_past_the_recovered_end_restarts_the_log_there(directory: Path) -> None:
    log = SegmentLog(directory)
    for _ in range(4):
        append_to([log])
    log.advance_start(11)
    log.close()
    os.truncate(directory / segment_file_name(0), 10)
    reopened = SegmentLog(directory)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (11, 11)
    assert segment_files(directory) == [segment_file_name(11)]


def test_idempotent_producer_state_survives_reopen(directory: Path) -> None:
    log = SegmentLog(directory)
    for sequence in range(0, 21, 3):
        append_to([log], count=3, producer_id=7, producer_epoch=2, base_sequence=sequence)
    append_to([log], count=1)  # a non-idempotent batch is not remembered
    log.close()
    reopened = SegmentLog(directory)
    state = reopened.recovered_producers()
    assert list(state) == [7]
    assert state[7].epoch == 2
    assert state[7].recent == [(s, s + 2, s) for s in range(6, 21, 3)]
    assert state[7].last_timestamp == T0  # its last batch's max timestamp (DescribeProducers)

    partition = Partition("topic", uuid.uuid4(), 0, 1, [1], reopened)
    assert partition.producers[7].last_timestamp == T0
    # the producer retries its last batch after the restart: it gets the original offset
    retry = build_batch(
        [(b"k", b"v")] * 3, timestamp_ms=T0, producer_id=7, producer_epoch=2, base_sequence=18
    )
    result = partition.append(one_batch(retry), now_ms=T0)
    assert (result.error, result.base_offset) == (ErrorCode.none, 18)
    assert reopened.log_end_offset == 22
    following = build_batch(
        [(b"k", b"v")], timestamp_ms=T0, producer_id=7, producer_epoch=2, base_sequence=21
    )
    assert partition.append(one_batch(following), now_ms=T0).base_offset == 22
    # a producer the log has never seen starts wherever it likes
    stranger = build_batch(
        [(b"k", b"v")], timestamp_ms=T0, producer_id=8, producer_epoch=0, base_sequence=42
    )
    assert partition._check_sequence(read_header(stranger)) is None


def test_append_refuses_a_batch_that_does_not_continue_the_log(directory: Path) -> None:
    log = SegmentLog(directory)
    append_to([log])
    header, batch = batch_for(log)
    wrong = build_batch([(b"k", b"v")], base_offset=99, timestamp_ms=T0)
    with pytest.raises(ValueError):
        log.append(read_header(wrong), wrong, now_ms=T0)
    with pytest.raises(ValueError):
        log.append(header, batch[:-1], now_ms=T0)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 5), st.integers(0, 120)), min_size=1, max_size=25),
    segment_bytes=st.integers(150, 2000),
    cut_fraction=st.floats(0, 1),
)
def test_any_cut_of_the_last_segment_keeps_exactly_the_whole_batches_before_it(
    tmp_path: Path,
    sizes: list[tuple[int, int]],
    segment_bytes: int,
    cut_fraction: float,
) -> None:
    directory = tmp_path / f"p-{uuid.uuid4().hex}"
    log = SegmentLog(directory, segment_bytes=segment_bytes)
    model = MemoryLog()
    for count, value_size in sizes:
        append_to([log, model], count=count, value_size=value_size)
    # no close: as after a kill
    last = directory / segment_files(directory)[-1]
    base = int(last.name[:20])
    size = last.stat().st_size
    cut = int(size * cut_fraction)
    os.truncate(last, cut)
    whole = [header for header, _ in model.batches(base, model.log_end_offset)]
    position = 0
    kept_end = base
    for header in whole:
        if position + header.size > cut:
            break
        position += header.size
        kept_end = header.next_offset
    model.truncate_to(kept_end)
    reopened = SegmentLog(directory, segment_bytes=segment_bytes)
    assert reopened.log_end_offset == kept_end
    assert last.stat().st_size == position
    assert_same(reopened, model)


# --- with the cluster's topic catalogue ----------------------------------------------------


def _cluster(data_dir: Path) -> Cluster:
    def make(topic: str, index: int) -> PartitionLog:
        return SegmentLog(data_dir / f"{topic}-{index}")

    nodes = {n: BrokerNode(n, "127.0.0.1", 9000 + n) for n in (1, 2, 3)}
    cluster = Cluster("cluster-a", nodes, BrokerConfig(), make, data_dir=data_dir)
    cluster.load_metadata()
    return cluster


def test_catalogue_and_logs_come_back_together(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path)
    topic = cluster.create_topic("orders", 2, 1, {"segment.bytes": "1048576"})
    log = topic.partitions[1].log
    assert isinstance(log, SegmentLog) and log.segment_bytes == 1048576
    for _ in range(3):
        header, batch = batch_for(log)
        topic.partitions[1].append([(header, batch)], now_ms=T0)
    contents = log.read(0, 10**6, upper=9)

    again = _cluster(tmp_path)  # a restart, without closing anything
    restored = again.topics["orders"]
    assert restored.topic_id == topic.topic_id
    assert restored.config.overrides == {"segment.bytes": "1048576"}
    relog = restored.partitions[1].log
    assert isinstance(relog, SegmentLog) and relog.segment_bytes == 1048576
    assert relog.log_end_offset == 9
    assert relog.read(0, 10**6, upper=9) == contents


def test_a_recreated_topic_does_not_inherit_old_files(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path)
    topic = cluster.create_topic("ghost", 1, 1)
    header, batch = batch_for(topic.partitions[0].log)
    topic.partitions[0].append([(header, batch)], now_ms=T0)
    # as if the broker died after creating the files but before saving the catalogue
    (tmp_path / "kemu-metadata.json").unlink()
    again = _cluster(tmp_path)
    assert "ghost" not in again.topics
    assert again.create_topic("ghost", 1, 1).partitions[0].log.log_end_offset == 0
