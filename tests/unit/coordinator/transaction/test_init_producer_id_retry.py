"""InitProducerId naming the producer id and epoch a producer holds (KIP-360), answered as Kafka
4.4.0's ``TransactionCoordinator.prepareInitProducerIdTransit`` answers it (the same answers on a
real Kafka 4.4.0 in ``tests/integration/txn/test_end_txn_retry_parity.py``):

- the current id at its epoch: the epoch bumped (a new id at epoch 0 once it is exhausted);
- the current id at the epoch before the last bump a request named (an InitProducerId, or the
  EndTxn v5 that bumped it): a retry, NONE with the current id and epoch, the transaction Empty;
- the old id at 32766 right after the bump that replaced it: the same retry (the new id, epoch 0);
- the current id at any epoch over an Ongoing transaction: it is aborted, CONCURRENT_TRANSACTIONS
  (the epoch before that fence is then the last one);
- anything else, and the epoch before a bump that named none (a new instance): fenced.
"""

from __future__ import annotations

import itertools

from kemu.coordinator.transaction.coordinator import (
    MAX_EPOCH,
    Outcome,
    TransactionCoordinator,
    TxnState,
)
from kemu.protocol.errors import ErrorCode
from tests.unit.coordinator.transaction.test_end_txn_retry import restarted

TXN = "payments"
TP = ("orders", 0)
OLD, NEW = 1000, 1001
LAST_USABLE = MAX_EPOCH - 1  # 32766
TIMEOUT_MS = 10_000
FENCED = (ErrorCode.producer_fenced, -1, -1)


def at(epoch: int) -> TransactionCoordinator:
    """A coordinator whose producer ``OLD`` holds ``epoch``, Empty."""
    ids = itertools.count(OLD)
    coordinator = TransactionCoordinator(lambda: next(ids), max_timeout_ms=60_000)
    assert coordinator.init_producer_id(TXN, TIMEOUT_MS, now_ms=0).producer_id == OLD
    coordinator.transactions[TXN].producer_epoch = epoch
    return coordinator


def init(
    coordinator: TransactionCoordinator, producer_id: int, epoch: int, now_ms: int = 10
) -> tuple[ErrorCode, int, int]:
    outcome = coordinator.init_producer_id(TXN, TIMEOUT_MS, now_ms, producer_id, epoch)
    return outcome.error, outcome.producer_id, outcome.producer_epoch


def committed_v5(coordinator: TransactionCoordinator, producer_id: int, epoch: int) -> Outcome:
    """A transaction opened and committed with EndTxn v5, its markers written."""
    assert coordinator.add_partitions(TXN, producer_id, epoch, [TP], 1).error is ErrorCode.none
    ended = coordinator.end_transaction(TXN, producer_id, epoch, True, 2, bump_epoch=True)
    assert ended.error is ErrorCode.none
    coordinator.complete(TXN, now_ms=3)
    return ended


def test_the_epoch_a_v5_commit_bumped_from_is_a_retry_answered_the_current_one() -> None:
    coordinator = at(4001)
    ended = committed_v5(coordinator, OLD, 4001)
    assert (ended.producer_id, ended.producer_epoch) == (OLD, 4002)
    retried = coordinator.init_producer_id(TXN, TIMEOUT_MS, 10, OLD, 4001)
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (
        ErrorCode.none,
        OLD,
        4002,
    )
    # as Kafka, the retry is a transition to Empty (written), the epoch unchanged
    [(_, empty)] = retried.records
    assert empty is not None and (empty.status, empty.producer_epoch) == (TxnState.EMPTY, 4002)
    assert coordinator.transactions[TXN].state is TxnState.EMPTY
    assert init(coordinator, OLD, 4001) == (ErrorCode.none, OLD, 4002)  # as often as it comes
    assert init(coordinator, OLD, 4000) == FENCED
    assert init(coordinator, OLD, 4002) == (ErrorCode.none, OLD, 4003)  # its own epoch: a bump


def test_a_bump_that_named_its_epoch_is_retried_and_one_that_named_none_forgets_it() -> None:
    coordinator = at(7)
    assert init(coordinator, OLD, 7) == (ErrorCode.none, OLD, 8)
    assert init(coordinator, OLD, 7) == (ErrorCode.none, OLD, 8)
    # a new instance (no producer id) bumps to 9; the zombie's 8 and the retried 7 are fenced
    assert init(coordinator, -1, -1) == (ErrorCode.none, OLD, 9)
    assert init(coordinator, OLD, 8) == FENCED
    assert init(coordinator, OLD, 7) == FENCED
    assert init(coordinator, OLD + 5, 9) == FENCED  # another id


def test_the_old_id_at_32766_after_the_exhausting_v5_commit_gets_the_new_id_once() -> None:
    coordinator = at(LAST_USABLE)
    ended = committed_v5(coordinator, OLD, LAST_USABLE)
    assert (ended.producer_id, ended.producer_epoch) == (NEW, 0)
    assert init(coordinator, OLD, LAST_USABLE) == (ErrorCode.none, NEW, 0)
    meta = coordinator.transactions[TXN]
    assert (meta.state, meta.producer_id, meta.producer_epoch) == (TxnState.EMPTY, NEW, 0)
    # that transition kept the id, so, as in Kafka, the old id is no longer recognised
    assert init(coordinator, OLD, LAST_USABLE) == FENCED
    assert init(coordinator, NEW, 0) == (ErrorCode.none, NEW, 1)


def test_the_old_id_is_recognised_only_at_its_exhausted_epoch() -> None:
    coordinator = at(LAST_USABLE)
    committed_v5(coordinator, OLD, LAST_USABLE)
    assert init(coordinator, OLD, LAST_USABLE - 1) == FENCED
    assert init(coordinator, OLD, 0) == FENCED
    assert init(coordinator, OLD, LAST_USABLE) == (ErrorCode.none, NEW, 0)


def test_the_old_id_is_fenced_once_the_new_one_opened_a_transaction() -> None:
    coordinator = at(LAST_USABLE)
    committed_v5(coordinator, OLD, LAST_USABLE)
    assert coordinator.add_partitions(TXN, NEW, 0, [TP], 5).error is ErrorCode.none
    assert init(coordinator, OLD, LAST_USABLE) == FENCED
    assert coordinator.transactions[TXN].state is TxnState.ONGOING  # nothing aborted


def test_the_old_id_is_fenced_after_a_restart() -> None:
    coordinator = at(LAST_USABLE)
    committed_v5(coordinator, OLD, LAST_USABLE)
    # a loaded Kafka coordinator has no last epoch: there is nothing to retry
    assert init(restarted(coordinator), OLD, LAST_USABLE) == FENCED


def test_an_init_that_exhausted_the_epoch_is_retried_with_the_old_id() -> None:
    coordinator = at(LAST_USABLE)
    assert init(coordinator, OLD, LAST_USABLE) == (ErrorCode.none, NEW, 0)
    assert init(coordinator, OLD, LAST_USABLE) == (ErrorCode.none, NEW, 0)
    assert init(coordinator, OLD, LAST_USABLE) == FENCED


def test_an_exhausting_init_that_named_no_id_is_no_retry_of_the_old_one() -> None:
    coordinator = at(LAST_USABLE)
    assert init(coordinator, -1, -1) == (ErrorCode.none, NEW, 0)
    assert init(coordinator, OLD, LAST_USABLE) == FENCED


def test_any_epoch_of_the_current_id_aborts_an_ongoing_transaction() -> None:
    coordinator = at(3)
    assert coordinator.add_partitions(TXN, OLD, 3, [TP], 1).error is ErrorCode.none
    assert init(coordinator, OLD + 7, 3) == FENCED  # another id aborts nothing
    assert coordinator.transactions[TXN].state is TxnState.ONGOING
    aborted = coordinator.init_producer_id(TXN, TIMEOUT_MS, 2, OLD, 1)
    assert aborted.error is ErrorCode.concurrent_transactions
    assert aborted.markers is not None and not aborted.markers.commit
    assert aborted.markers.producer_epoch == 4
    coordinator.complete(TXN, now_ms=3)
    # as Kafka 4.4.0's fence (transaction version 2), the last epoch is the fenced producer's:
    # the zombie's retry is fenced, the fenced producer's InitProducerId is a retry
    assert init(coordinator, OLD, 1) == FENCED
    assert init(coordinator, OLD, 3) == (ErrorCode.none, OLD, 4)
    assert coordinator.transactions[TXN].state is TxnState.EMPTY
    assert init(coordinator, OLD, 4) == (ErrorCode.none, OLD, 5)


def test_the_producer_whose_transaction_timed_out_recovers_with_its_epoch() -> None:
    coordinator = at(3)
    assert coordinator.add_partitions(TXN, OLD, 3, [TP], 1).error is ErrorCode.none
    [expired] = coordinator.expire(now_ms=1 + TIMEOUT_MS)
    assert expired.markers is not None and expired.markers.producer_epoch == 4
    coordinator.complete(TXN, now_ms=2 + TIMEOUT_MS)
    assert init(coordinator, OLD, 2) == FENCED
    assert init(coordinator, OLD, 3) == (ErrorCode.none, OLD, 4)


def test_another_epoch_of_an_exhausted_one_keeps_kemus_answers() -> None:
    """Kafka 4.4.0 answers UNKNOWN_SERVER_ERROR here (its ``prepareIncrementProducerEpoch``
    throws on an exhausted epoch); kemu answers as below the exhaustion (docs/conformance.md)."""
    coordinator = at(LAST_USABLE - 1)
    bumped = coordinator.init_producer_id(TXN, TIMEOUT_MS, 1, OLD, LAST_USABLE - 1)
    assert (bumped.error, bumped.producer_id, bumped.producer_epoch) == (
        ErrorCode.none,
        OLD,
        LAST_USABLE,
    )
    stale = coordinator.init_producer_id(TXN, TIMEOUT_MS, 2, OLD, 100)
    assert (stale.error, stale.producer_id, stale.producer_epoch) == FENCED
    retried = coordinator.init_producer_id(TXN, TIMEOUT_MS, 3, OLD, LAST_USABLE - 1)
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (
        ErrorCode.none,
        OLD,
        LAST_USABLE,
    )
    assert coordinator.transactions[TXN].state is TxnState.EMPTY
