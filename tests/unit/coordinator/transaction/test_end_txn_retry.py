"""A retried EndTxn v5 (transaction version 2) whose first answer was lost, after the transaction
completed, answered as Kafka 4.4.0 answers it (its ``TransactionCoordinator.endTransaction``:
``retryOnEpochBump`` and ``retryOnOverflow``; the same answers on a real Kafka 4.4.0 in
``tests/integration/txn/test_end_txn_retry_parity.py``):

- the retry of an ordinary EndTxn (epoch e, which the EndTxn bumped to e + 1): NONE with e + 1;
- the retry of the EndTxn that exhausted the epoch (old id, epoch 32766): NONE with the new id at
  epoch 0, the answer the producer lost;
- either with the other outcome: INVALID_TXN_STATE; an older epoch is fenced, or, of the old id,
  INVALID_PRODUCER_ID_MAPPING.

A retry writes nothing and changes nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from kemu.coordinator.transaction.coordinator import (
    MAX_EPOCH,
    Outcome,
    TransactionCoordinator,
    TxnState,
)
from kemu.coordinator.transaction.records import decode_key, decode_value, encode_key, encode_value
from kemu.protocol.errors import ErrorCode

TXN = "flink-sink"
TP = ("orders", 0)
OLD, NEW = 1000, 1001
LAST_USABLE = MAX_EPOCH - 1  # 32766: the last epoch a client holds
COMPLETED = {True: TxnState.COMPLETE_COMMIT, False: TxnState.COMPLETE_ABORT}


def open_at(epoch: int) -> TransactionCoordinator:
    """A coordinator whose producer ``OLD`` holds ``epoch`` with an Ongoing transaction."""
    ids = itertools.count(OLD)
    coordinator = TransactionCoordinator(lambda: next(ids), max_timeout_ms=60_000)
    assert coordinator.init_producer_id(TXN, 10_000, now_ms=0).producer_id == OLD
    coordinator.transactions[TXN].producer_epoch = epoch
    assert coordinator.add_partitions(TXN, OLD, epoch, [TP], now_ms=1).error is ErrorCode.none
    return coordinator


def ended(coordinator: TransactionCoordinator, epoch: int, commit: bool) -> Outcome:
    """EndTxn v5 of the open transaction, its markers written (kemu writes them before it
    answers)."""
    outcome = coordinator.end_transaction(TXN, OLD, epoch, commit, 2, bump_epoch=True)
    assert outcome.error is ErrorCode.none and outcome.markers is not None
    coordinator.complete(TXN, now_ms=3)
    assert coordinator.transactions[TXN].state is COMPLETED[commit]
    return outcome


def restarted(coordinator: TransactionCoordinator) -> TransactionCoordinator:
    """A fresh coordinator that loaded only each id's latest record (a compacted
    ``__transaction_state``), through the codec; it allocates no producer id."""

    def no_allocation() -> int:
        raise AssertionError("a retry allocates no producer id")

    fresh = TransactionCoordinator(no_allocation, max_timeout_ms=60_000)
    for transactional_id, meta in coordinator.transactions.items():
        raw = encode_value(meta.record(), empty=meta.state == TxnState.EMPTY)
        fresh.replay(decode_key(encode_key(transactional_id)), decode_value(raw))
    return fresh


def answer(outcome: Outcome) -> tuple[ErrorCode, int, int]:
    assert outcome.records == [] and outcome.markers is None  # nothing written, ever
    return outcome.error, outcome.producer_id, outcome.producer_epoch


FENCED = (ErrorCode.producer_fenced, -1, -1)
INVALID_TXN_STATE = (ErrorCode.invalid_txn_state, -1, -1)
UNKNOWN_ID = (ErrorCode.invalid_producer_id_mapping, -1, -1)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_retry_of_an_ordinary_end_gets_the_bumped_epoch(commit: bool) -> None:
    coordinator = open_at(7)
    first = ended(coordinator, 7, commit)
    assert (first.producer_id, first.producer_epoch) == (OLD, 8)
    before = coordinator.transactions[TXN].record()

    def retry(epoch: int, outcome: bool) -> tuple[ErrorCode, int, int]:
        return answer(coordinator.end_transaction(TXN, OLD, epoch, outcome, 4, bump_epoch=True))

    assert retry(7, commit) == (ErrorCode.none, OLD, 8)
    assert retry(7, commit) == (ErrorCode.none, OLD, 8)  # as often as it is retried
    assert retry(7, not commit) == INVALID_TXN_STATE
    assert retry(6, commit) == FENCED
    assert coordinator.transactions[TXN].record() == before


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_retry_of_the_exhausting_end_gets_the_new_id_at_epoch_0(commit: bool) -> None:
    coordinator = open_at(LAST_USABLE)
    first = ended(coordinator, LAST_USABLE, commit)
    assert (first.producer_id, first.producer_epoch) == (NEW, 0)
    before = coordinator.transactions[TXN].record()

    def retry(epoch: int, outcome: bool) -> tuple[ErrorCode, int, int]:
        return answer(coordinator.end_transaction(TXN, OLD, epoch, outcome, 4, bump_epoch=True))

    assert retry(LAST_USABLE, commit) == (ErrorCode.none, NEW, 0)
    assert retry(LAST_USABLE, commit) == (ErrorCode.none, NEW, 0)
    assert retry(LAST_USABLE, not commit) == INVALID_TXN_STATE
    assert retry(LAST_USABLE - 1, commit) == UNKNOWN_ID
    assert coordinator.transactions[TXN].record() == before
    # transaction version 1 knows no retry by epoch: the old id is unknown
    old_version = coordinator.end_transaction(TXN, OLD, LAST_USABLE, commit, 4)
    assert answer(old_version) == UNKNOWN_ID
    # and the new producer goes on
    assert coordinator.add_partitions(TXN, NEW, 0, [TP], 5).error is ErrorCode.none


def test_the_retry_of_a_timeout_abort_that_exhausted_the_epoch() -> None:
    """The coordinator aborted the transaction at epoch 32766 on its timeout (a new id); the
    producer's abort, sent before it heard, is a retry of it (Kafka's
    ``shouldHandleTimeoutAtEpochOverflowBoundaryCorrectly...`` test); its commit is not."""
    coordinator = open_at(LAST_USABLE)
    [aborted] = coordinator.expire(10_001)
    assert (aborted.producer_id, aborted.producer_epoch) == (NEW, 0)
    coordinator.complete(TXN, 10_002)
    abort = coordinator.end_transaction(TXN, OLD, LAST_USABLE, False, 10_003, bump_epoch=True)
    assert answer(abort) == (ErrorCode.none, NEW, 0)
    commit = coordinator.end_transaction(TXN, OLD, LAST_USABLE, True, 10_003, bump_epoch=True)
    assert answer(commit) == INVALID_TXN_STATE


@pytest.mark.parametrize(
    ("epoch", "new_id", "new_epoch"), [(7, OLD, 8), (LAST_USABLE, NEW, 0)], ids=["e+1", "new-id"]
)
def test_a_retry_after_a_restart_over_the_compacted_log(
    epoch: int, new_id: int, new_epoch: int
) -> None:
    """The retry of a producer whose EndTxn answer was lost to a coordinator restart: the
    COMPLETE record alone (compaction keeps no other) is enough to recognise it."""
    coordinator = restarted(_ended_at(epoch))
    retry = coordinator.end_transaction(TXN, OLD, epoch, True, 4, bump_epoch=True)
    assert answer(retry) == (ErrorCode.none, new_id, new_epoch)
    other = coordinator.end_transaction(TXN, OLD, epoch, False, 4, bump_epoch=True)
    assert answer(other) == INVALID_TXN_STATE


def _ended_at(epoch: int) -> TransactionCoordinator:
    coordinator = open_at(epoch)
    ended(coordinator, epoch, True)
    return coordinator


NEW_ID_REQUESTS: dict[str, Callable[[TransactionCoordinator], object]] = {
    "Ongoing": lambda c: c.add_partitions(TXN, NEW, 0, [TP], 5),
    "its own commit": lambda c: (
        c.add_partitions(TXN, NEW, 0, [TP], 5),
        c.end_transaction(TXN, NEW, 0, True, 6, bump_epoch=True),
        c.complete(TXN, 7),
    ),
}


@pytest.mark.parametrize("after", sorted(NEW_ID_REQUESTS))
def test_once_the_new_id_is_in_use_the_old_one_is_unknown(after: str) -> None:
    coordinator = open_at(LAST_USABLE)
    ended(coordinator, LAST_USABLE, True)
    NEW_ID_REQUESTS[after](coordinator)
    for commit in (True, False):
        late = coordinator.end_transaction(TXN, OLD, LAST_USABLE, commit, 8, bump_epoch=True)
        assert answer(late) == UNKNOWN_ID


def test_an_end_of_the_old_id_after_an_exhausting_init_is_fenced() -> None:
    """InitProducerId at epoch 32766 gave the new id without a transaction to end (Empty): the
    old id's EndTxn at its last epoch is fenced, as on Kafka 4.4.0 (which sees the old id as the
    previous one and then finds the epoch wrong for Empty)."""
    ids = itertools.count(OLD)
    coordinator = TransactionCoordinator(lambda: next(ids), max_timeout_ms=60_000)
    coordinator.init_producer_id(TXN, 10_000, now_ms=0)
    coordinator.transactions[TXN].producer_epoch = LAST_USABLE
    rotated = coordinator.init_producer_id(TXN, 10_000, 1)
    assert (rotated.producer_id, rotated.producer_epoch) == (NEW, 0)
    for commit in (True, False):
        late = coordinator.end_transaction(TXN, OLD, LAST_USABLE, commit, 2, bump_epoch=True)
        assert answer(late) == FENCED
    assert coordinator.transactions[TXN].state is TxnState.EMPTY
