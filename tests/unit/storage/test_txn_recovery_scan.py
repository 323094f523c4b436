"""Open and aborted transactions after a restart come from the batches the log's recovery scan
noted (``ProducerTracker.transactions``), not from a second read of the log: for any
interleaving of transactional producers, commits, aborts, plain batches, a moved log start and
a torn tail, a reopened partition knows exactly what rebuilding from its batches gives."""

from __future__ import annotations

import os
import random
import uuid
from pathlib import Path

import pytest

from kemu.cluster.partition import Partition
from kemu.cluster.partition_transactions import PartitionTransactions
from kemu.protocol.record_reader import control_type
from kemu.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    build_batch,
    control_batch,
    read_header,
)
from kemu.storage.segments import SegmentLog

TOPIC_ID = uuid.UUID(int=7)


def _produce(
    partition: Partition, producer_id: int, transactional: bool, sequences: dict[int, int]
) -> None:
    sequence = sequences.get(producer_id, 0)
    batch = build_batch(
        [(b"k", b"v")] * 2,
        timestamp_ms=0,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
        transactional=transactional,
    )
    sequences[producer_id] = sequence + 2
    partition.append([(read_header(batch), batch)], now_ms=0)


def _from_batches(log: SegmentLog) -> PartitionTransactions:
    rebuilt = PartitionTransactions()
    rebuilt.rebuild(log.batches(log.log_start_offset, log.log_end_offset))
    return rebuilt


@pytest.mark.parametrize("seed", range(12))
def test_reopened_partition_matches_a_rebuild_from_its_batches(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    directory = tmp_path / "p"
    log = SegmentLog(directory, segment_bytes=rng.choice((300, 2000, 1 << 20)))
    partition = Partition("t", TOPIC_ID, 0, 1, [1], log)
    sequences: dict[int, int] = {}
    for _ in range(rng.randint(5, 80)):
        producer_id = rng.randint(1, 5)
        roll = rng.random()
        if roll < 0.55:
            _produce(partition, producer_id, producer_id != 5, sequences)  # 5 is not transactional
        elif producer_id != 5:
            partition.write_marker(producer_id, 0, roll < 0.8, now_ms=0)
    if rng.random() < 0.4:
        log.advance_start(rng.randint(0, log.log_end_offset))
    log.close()
    if rng.random() < 0.4:  # a torn tail: the last segment loses some bytes
        last = sorted(directory.glob("*.log"))[-1]
        size = last.stat().st_size
        if size:
            os.truncate(last, rng.randint(0, size - 1))
    reopened_log = SegmentLog(directory, segment_bytes=1 << 20)
    expected = _from_batches(reopened_log)
    reopened = Partition("t", TOPIC_ID, 0, 1, [1], reopened_log)
    assert reopened.transactions.ongoing == expected.ongoing
    assert reopened.transactions.aborted == expected.aborted
    assert reopened_log.take_recovered_transactions() == []  # handed over once
    reopened_log.close()


def test_control_type_reads_markers_as_iter_records_does() -> None:
    for marker in (CONTROL_ABORT, CONTROL_COMMIT):
        batch = control_batch(
            marker, producer_id=3, producer_epoch=1, coordinator_epoch=0, timestamp_ms=5
        )
        assert control_type(batch) == marker
    # a record without a 4-byte key: no marker
    assert control_type(build_batch([(b"k", b"v")], timestamp_ms=0)) is None
    # other layouts take the slow paths, with the answer iter_records gives
    rng = random.Random(3)
    for _ in range(200):
        records: list[tuple[bytes | None, bytes | None]] = [
            (
                rng.choice((None, rng.randbytes(rng.randint(0, 9)))),
                rng.randbytes(rng.randint(0, 200)),
            )
            for _ in range(rng.randint(1, 3))
        ]
        batch = build_batch(records, timestamp_ms=rng.randint(0, 2**40))
        keys = [key for key, _ in records if key is not None and len(key) >= 4]
        expected = int.from_bytes(keys[0][2:4], "big", signed=True) if keys else None
        assert control_type(batch) == expected


def test_a_log_start_inside_an_open_transactions_batch_keeps_it_open(tmp_path: Path) -> None:
    # DeleteRecords may move the log start into a batch; a read from the log start still
    # returns that batch, so its open transaction holds the last stable offset back
    directory = tmp_path / "p"
    log = SegmentLog(directory)
    partition = Partition("t", TOPIC_ID, 0, 1, [1], log)
    _produce(partition, 1, True, {})  # offsets 0-1, producer 1's transaction left open
    _produce(partition, 2, False, {})  # 2-3
    log.advance_start(1)
    log.close()
    reopened = Partition("t", TOPIC_ID, 0, 1, [1], SegmentLog(directory))
    assert reopened.transactions.ongoing == {1: 0}
    assert reopened.last_stable_offset == 0
