"""The producer-id/epoch/sequence checks of ``kemu.cluster.producer_state``, case by case as Kafka
4.4.0's ProducerAppendInfo makes them (the same cases against a real Kafka:
tests/integration/txn/test_sequence_parity_kafka.py), and through ``Partition``."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kemu.cluster.partition import MarkerRefused, Partition
from kemu.cluster.producer_state import ProducerStates
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import BatchHeader, build_batch, read_header
from kemu.storage.log import MemoryLog
from kemu.storage.segments import SegmentLog

T0 = 1_700_000_000_000
PID = 42
WHERE = "t-0"


def header(
    sequence: int, epoch: int = 0, *, count: int = 1, transactional: bool = False
) -> BatchHeader:
    return read_header(
        build_batch(
            [(None, b"v")] * count,
            timestamp_ms=T0,
            producer_id=PID,
            producer_epoch=epoch,
            base_sequence=sequence,
            transactional=transactional,
        )
    )


def written(states: ProducerStates, *batches: BatchHeader) -> ProducerStates:
    offset = 0
    for batch in batches:
        assert states.check_batch(batch, offset=offset, in_transaction=False, where=WHERE) is None
        states.remember_batch(batch, offset)
        offset += batch.record_count
    return states


def verdict(
    states: ProducerStates, batch: BatchHeader, *, in_transaction: bool = False
) -> ErrorCode:
    refusal = states.check_batch(batch, offset=99, in_transaction=in_transaction, where=WHERE)
    return ErrorCode.none if refusal is None else refusal.error


OUT_OF_ORDER = ErrorCode.out_of_order_sequence_number


# --- data batches ------------------------------------------------------------------------------


@pytest.mark.parametrize("sequence", [0, 7, 2**31 - 1])
def test_an_unknown_producer_may_start_at_any_sequence(sequence: int) -> None:
    assert verdict(ProducerStates(), header(sequence)) == ErrorCode.none


def test_same_epoch_must_continue_its_sequence() -> None:
    states = written(ProducerStates(), header(0, count=3))
    assert verdict(states, header(3)) == ErrorCode.none
    assert verdict(states, header(4)) == OUT_OF_ORDER
    assert verdict(states, header(2)) == OUT_OF_ORDER


def test_sequence_wraps_to_zero_after_the_largest() -> None:
    states = written(ProducerStates(), header(2**31 - 1))
    assert verdict(states, header(0)) == ErrorCode.none
    assert verdict(states, header(1)) == OUT_OF_ORDER


def test_a_stale_epoch_is_invalid_producer_epoch() -> None:
    states = written(ProducerStates(), header(0, epoch=3))
    assert verdict(states, header(1, epoch=2)) == ErrorCode.invalid_producer_epoch
    assert verdict(states, header(0, epoch=2)) == ErrorCode.invalid_producer_epoch


def test_a_new_epoch_of_a_known_producer_starts_at_zero() -> None:
    states = written(ProducerStates(), header(0, count=5))
    assert verdict(states, header(5, epoch=1)) == OUT_OF_ORDER
    assert verdict(states, header(0, epoch=1)) == ErrorCode.none


def test_a_new_epoch_forgets_the_old_epochs_batches() -> None:
    states = written(ProducerStates(), header(0, count=2), header(0, epoch=1))
    assert states[PID].recent == [(0, 0, 2)]
    assert states.duplicate_of(header(0, count=2)) is None  # the old epoch's batch


def test_duplicates_are_found_among_the_last_five_batches_only() -> None:
    states = written(ProducerStates(), *(header(s) for s in range(6)))
    assert [states.duplicate_of(header(s)) for s in range(6)] == [None, 1, 2, 3, 4, 5]
    assert states.duplicate_of(header(1, count=2)) is None  # a different range
    assert states.duplicate_of(header(1, epoch=1)) is None  # another epoch
    assert verdict(states, header(0)) == OUT_OF_ORDER  # out of the window: out of order


def test_a_producer_known_with_epoch_minus_one_is_not_checked() -> None:
    states = written(ProducerStates(), header(5, epoch=-1))
    assert verdict(states, header(17, epoch=-1)) == ErrorCode.none


def test_non_transactional_batch_during_a_transaction_is_invalid_txn_state() -> None:
    states = written(ProducerStates(), header(0, transactional=True))
    assert verdict(states, header(1), in_transaction=True) == ErrorCode.invalid_txn_state
    # the sequence is checked first
    assert verdict(states, header(5), in_transaction=True) == OUT_OF_ORDER
    assert verdict(states, header(1, transactional=True), in_transaction=True) == ErrorCode.none


# --- transactional verification -----------------------------------------------------------------


def test_transaction_version_2_unknown_producer_starts_at_zero() -> None:
    states = ProducerStates()
    states.start_verification(PID, 3, 0, supports_epoch_bump=True, now_ms=T0)
    assert verdict(states, header(3, transactional=True)) == OUT_OF_ORDER
    states.start_verification(PID, 0, 0, supports_epoch_bump=True, now_ms=T0)
    assert verdict(states, header(0, transactional=True)) == ErrorCode.none


def test_transaction_version_1_unknown_producer_may_start_anywhere() -> None:
    states = ProducerStates()
    states.start_verification(PID, 3, 0, supports_epoch_bump=False, now_ms=T0)
    assert verdict(states, header(3, transactional=True)) == ErrorCode.none


def test_a_sequence_above_an_unfinished_attempts_is_out_of_order() -> None:
    states = written(ProducerStates(), header(0, count=10))
    # an attempt with sequence 5 was refused (out of order), its verification stays
    states.start_verification(PID, 5, 0, supports_epoch_bump=False, now_ms=T0)
    assert verdict(states, header(5, transactional=True)) == OUT_OF_ORDER
    states.start_verification(PID, 10, 0, supports_epoch_bump=False, now_ms=T0)
    assert states.verifying[PID].lowest_sequence == 5
    assert verdict(states, header(10, transactional=True)) == OUT_OF_ORDER  # in sequence, too
    # a later epoch's attempt replaces the lowest sequence
    states.start_verification(PID, 0, 1, supports_epoch_bump=False, now_ms=T0)
    assert verdict(states, header(0, 1, transactional=True)) == ErrorCode.none


def test_a_transactional_append_ends_the_verification() -> None:
    states = ProducerStates()
    states.start_verification(PID, 0, 0, supports_epoch_bump=True, now_ms=T0)
    written(states, header(0, transactional=True))
    assert PID not in states.verifying


def test_a_version_2_marker_keeps_the_next_transactions_verification() -> None:
    states = written(ProducerStates(), header(0, transactional=True))
    states.start_verification(PID, 0, 1, supports_epoch_bump=True, now_ms=T0)
    states.remember_marker(PID, 1, None, T0)
    assert PID in states.verifying
    states.remember_marker(PID, 2, None, T0)
    assert PID not in states.verifying


# --- markers -----------------------------------------------------------------------------------


def marker_verdict(
    states: ProducerStates,
    epoch: int,
    *,
    version: int,
    in_transaction: bool = False,
    coordinator_epoch: int | None = None,
) -> ErrorCode:
    refusal = states.check_marker(
        PID,
        epoch,
        coordinator_epoch,
        transaction_version=version,
        in_transaction=in_transaction,
        where=WHERE,
    )
    return ErrorCode.none if refusal is None else refusal.error


def test_marker_epochs_below_version_2_may_equal_the_producers() -> None:
    states = written(ProducerStates(), header(0, epoch=3))
    assert marker_verdict(states, 2, version=1) == ErrorCode.invalid_producer_epoch
    assert marker_verdict(states, 3, version=1, in_transaction=True) == ErrorCode.none
    assert marker_verdict(states, 4, version=0) == ErrorCode.none


def test_marker_epochs_of_version_2_must_be_above_unless_a_retry() -> None:
    states = written(ProducerStates(), header(0, epoch=3, transactional=True))
    assert marker_verdict(states, 2, version=2) == ErrorCode.invalid_producer_epoch
    equal = marker_verdict(states, 3, version=2, in_transaction=True)
    assert equal == ErrorCode.invalid_producer_epoch
    assert marker_verdict(states, 3, version=2) == ErrorCode.none  # retry: transaction ended
    assert marker_verdict(states, 4, version=2, in_transaction=True) == ErrorCode.none


def test_a_marker_for_an_unknown_producer_is_written() -> None:
    assert marker_verdict(ProducerStates(), 0, version=2) == ErrorCode.none


def test_a_lower_coordinator_epoch_is_fenced() -> None:
    states = ProducerStates()
    states.remember_marker(PID, 0, 5, T0)
    fenced = marker_verdict(states, 1, version=0, coordinator_epoch=4)
    assert fenced == ErrorCode.transaction_coordinator_fenced
    assert marker_verdict(states, 1, version=0, coordinator_epoch=5) == ErrorCode.none
    assert marker_verdict(states, 1, version=0) == ErrorCode.none  # kemu's own coordinator


def test_a_marker_with_a_new_epoch_restarts_the_sequences() -> None:
    states = written(ProducerStates(), header(0, count=4))
    states.remember_marker(PID, 1, None, T0)
    assert verdict(states, header(4, epoch=1)) == OUT_OF_ORDER
    assert verdict(states, header(0, epoch=1)) == ErrorCode.none


def test_a_marker_with_the_same_epoch_keeps_the_sequences() -> None:
    states = written(ProducerStates(), header(0, count=4))
    states.remember_marker(PID, 0, None, T0)
    assert verdict(states, header(4)) == ErrorCode.none
    assert verdict(states, header(0)) == OUT_OF_ORDER


# --- expiry ------------------------------------------------------------------------------------


def test_idle_producers_expire_unless_a_transaction_is_open() -> None:
    states = written(ProducerStates(), header(0, count=4))
    states[7] = states.pop(PID)
    written(states, header(0))
    assert states.expire(T0 + 999, 1000, open_ids=()) == []
    assert states.expire(T0 + 1000, 1000, open_ids={PID}) == [7]
    assert list(states) == [PID]
    # expired: any sequence again
    assert states.expire(T0 + 1000, 1000, open_ids=()) == [PID]
    assert verdict(states, header(9)) == ErrorCode.none


# --- through Partition -------------------------------------------------------------------------


def partition() -> Partition:
    return Partition("t", uuid.uuid4(), 0, 1, [1], MemoryLog())


def produce(part: Partition, sequence: int, epoch: int = 0, count: int = 1) -> tuple[int, int]:
    batch = build_batch(
        [(None, b"v")] * count,
        timestamp_ms=T0,
        producer_id=PID,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    result = part.append([(read_header(batch), batch)], now_ms=T0)
    return result.error, result.base_offset


def test_partition_answers_a_duplicate_with_its_offset_and_refuses_a_new_epochs_gap() -> None:
    part = partition()
    assert produce(part, 0, count=2) == (ErrorCode.none, 0)
    assert produce(part, 2) == (ErrorCode.none, 2)
    assert produce(part, 0, count=2) == (ErrorCode.none, 0)  # duplicate
    assert produce(part, 3, epoch=1) == (OUT_OF_ORDER, -1)
    assert part.log.log_end_offset == 3


def test_partition_refuses_a_stale_marker_and_leaves_the_log_alone() -> None:
    part = partition()
    produce(part, 0, epoch=2)
    with pytest.raises(MarkerRefused) as refused:
        part.write_marker(PID, 1, False, coordinator_epoch=0, now_ms=T0)
    assert refused.value.refusal.error == ErrorCode.invalid_producer_epoch
    assert part.log.log_end_offset == 1
    part.write_marker(PID, 3, False, coordinator_epoch=0, transaction_version=2, now_ms=T0)
    assert part.log.log_end_offset == 2
    assert produce(part, 1, epoch=3) == (OUT_OF_ORDER, -1)


def test_a_restart_rebuilds_the_epoch_a_marker_bumped(tmp_path: Path) -> None:
    log = SegmentLog(tmp_path)
    part = Partition("t", uuid.uuid4(), 0, 1, [1], log)
    produce(part, 0, count=3)
    part.write_marker(PID, 1, False, transaction_version=2, now_ms=T0 + 5)
    log.close()
    reopened = Partition("t", uuid.uuid4(), 0, 1, [1], SegmentLog(tmp_path))
    assert reopened.producers[PID].epoch == 1
    assert reopened.producers[PID].last_timestamp == T0 + 5
    assert produce(reopened, 3) == (ErrorCode.invalid_producer_epoch, -1)  # the zombie
    assert produce(reopened, 3, epoch=1) == (OUT_OF_ORDER, -1)
    assert produce(reopened, 0, epoch=1) == (ErrorCode.none, 4)
