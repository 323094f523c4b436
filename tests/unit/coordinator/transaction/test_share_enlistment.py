"""KIP-1289 enlistment in the sans-IO transaction coordinator (spec §2.7): the
``__share_group_state`` partitions of share partitions join a transaction, which remembers the
share partitions for ``kemu.kip1289.enlist=explicit``."""

from __future__ import annotations

import itertools
import uuid

from kemu.coordinator.transaction.coordinator import TransactionCoordinator, TxnState
from kemu.protocol.errors import ErrorCode

TXN = "tx"
TOPIC_ID = uuid.UUID(int=7)
SHARE = ("g", TOPIC_ID, 0)
OTHER_SHARE = ("g", TOPIC_ID, 1)
STATE = ("__share_group_state", 4)
TIMEOUT_MS = 10_000


def initialised() -> tuple[TransactionCoordinator, int, int]:
    ids = itertools.count(1000)
    coordinator = TransactionCoordinator(lambda: next(ids), max_timeout_ms=60_000)
    outcome = coordinator.init_producer_id(TXN, TIMEOUT_MS, now_ms=0)
    return coordinator, outcome.producer_id, outcome.producer_epoch


def test_first_enlistment_starts_the_transaction_and_its_timeout() -> None:
    coordinator, pid, epoch = initialised()
    outcome = coordinator.add_share_partitions(TXN, pid, epoch, [SHARE], [STATE], now_ms=500)
    assert outcome.error is ErrorCode.none
    assert len(outcome.records) == 1  # the Ongoing record is written
    meta = coordinator.transactions[TXN]
    assert meta.state is TxnState.ONGOING and meta.partitions == {STATE}
    assert meta.start_ms == 500
    assert coordinator.next_deadline_ms() == 500 + TIMEOUT_MS
    assert coordinator.enlisted_share_partitions(TXN, pid, epoch) == (
        ErrorCode.none,
        frozenset({SHARE}),
    )


def test_repeating_it_is_none_and_writes_nothing() -> None:
    coordinator, pid, epoch = initialised()
    coordinator.add_share_partitions(TXN, pid, epoch, [SHARE], [STATE], now_ms=500)
    again = coordinator.add_share_partitions(TXN, pid, epoch, [SHARE], [STATE], now_ms=900)
    assert again.error is ErrorCode.none and again.records == []
    assert coordinator.transactions[TXN].start_ms == 500  # the timeout is not restarted


def test_another_share_partition_on_the_same_state_partition_is_remembered() -> None:
    coordinator, pid, epoch = initialised()
    coordinator.add_share_partitions(TXN, pid, epoch, [SHARE], [STATE], now_ms=500)
    outcome = coordinator.add_share_partitions(TXN, pid, epoch, [OTHER_SHARE], [STATE], 600)
    # the state partition was in already; the record is written for the new share partition,
    # so that the enlistment survives a restart
    [(_, value)] = outcome.records
    assert value is not None and set(value.share_partitions) == {SHARE, OTHER_SHARE}
    _, enlisted = coordinator.enlisted_share_partitions(TXN, pid, epoch)
    assert enlisted == {SHARE, OTHER_SHARE}


def test_a_transaction_with_only_share_acknowledgements_commits_with_markers() -> None:
    coordinator, pid, epoch = initialised()
    coordinator.add_share_partitions(TXN, pid, epoch, [SHARE], [STATE], now_ms=500)
    ended = coordinator.end_transaction(TXN, pid, epoch, True, now_ms=600, bump_epoch=True)
    assert ended.error is ErrorCode.none
    assert ended.markers is not None and ended.markers.commit
    assert ended.markers.partitions == {STATE}
    coordinator.complete(TXN, now_ms=600)
    # the next transaction (bumped epoch) starts with nothing enlisted
    assert coordinator.enlisted_share_partitions(TXN, pid, epoch + 1) == (
        ErrorCode.none,
        frozenset(),
    )


def test_producer_errors_change_nothing() -> None:
    coordinator, pid, epoch = initialised()
    assert (
        coordinator.add_share_partitions(TXN, pid + 1, epoch, [SHARE], [STATE], 500).error
        is ErrorCode.invalid_producer_id_mapping
    )
    assert (
        coordinator.add_share_partitions(TXN, pid, epoch - 1, [SHARE], [STATE], 500).error
        is ErrorCode.producer_fenced
    )
    assert (
        coordinator.add_share_partitions("unknown", pid, epoch, [SHARE], [STATE], 500).error
        is ErrorCode.invalid_producer_id_mapping
    )
    meta = coordinator.transactions[TXN]
    assert meta.state is TxnState.EMPTY and not meta.partitions and not meta.share_partitions
    assert (
        coordinator.enlisted_share_partitions(TXN, pid, epoch - 1)[0] is ErrorCode.producer_fenced
    )


def test_a_new_producer_epoch_forgets_the_enlistment() -> None:
    coordinator, pid, epoch = initialised()
    coordinator.add_share_partitions(TXN, pid, epoch, [SHARE], [STATE], now_ms=500)
    bumped = coordinator.init_producer_id(TXN, TIMEOUT_MS, now_ms=600)  # fences, aborts
    assert bumped.markers is not None and not bumped.markers.commit
    coordinator.complete(TXN, now_ms=600)
    new_epoch = coordinator.transactions[TXN].producer_epoch
    assert coordinator.enlisted_share_partitions(TXN, pid, new_epoch) == (
        ErrorCode.none,
        frozenset(),
    )
    assert coordinator.enlisted_share_partitions(TXN, pid, epoch)[0] is ErrorCode.producer_fenced


def test_a_completing_transaction_is_concurrent() -> None:
    coordinator, pid, epoch = initialised()
    coordinator.add_share_partitions(TXN, pid, epoch, [SHARE], [STATE], now_ms=500)
    coordinator.end_transaction(TXN, pid, epoch, True, now_ms=600)  # TV1: prepared, same epoch
    assert coordinator.transactions[TXN].state is TxnState.PREPARE_COMMIT
    outcome = coordinator.add_share_partitions(TXN, pid, epoch, [OTHER_SHARE], [STATE], 700)
    assert outcome.error is ErrorCode.concurrent_transactions
    assert coordinator.enlisted_share_partitions(TXN, pid, epoch)[0] is (
        ErrorCode.concurrent_transactions
    )


def test_timeout_forgets_the_enlistment() -> None:
    coordinator, pid, epoch = initialised()
    coordinator.add_share_partitions(TXN, pid, epoch, [SHARE], [STATE], now_ms=500)
    [expired] = coordinator.expire(now_ms=500 + TIMEOUT_MS)
    assert expired.markers is not None and expired.markers.partitions == {STATE}
    coordinator.complete(TXN, now_ms=500 + TIMEOUT_MS)
    assert not coordinator.transactions[TXN].share_partitions


def test_explicit_enlistments_are_written_to_the_transaction_log_and_read_back() -> None:
    from kemu.coordinator.transaction.coordinator import TransactionCoordinator
    from kemu.coordinator.transaction.records import decode_value
    from kemu.coordinator.transaction.records import encode_value as encode_txn_value

    coordinator = TransactionCoordinator(lambda: 1000, 900_000)
    init = coordinator.init_producer_id("tx", 60_000, 0, -1, -1)
    enlisted = ("g", uuid.UUID(int=9), 0)
    pid, epoch = init.producer_id, init.producer_epoch
    outcome = coordinator.add_share_partitions("tx", pid, epoch, [enlisted], [STATE], 1)
    [(_, value)] = outcome.records
    assert value is not None and value.share_partitions == (enlisted,)
    again = coordinator.add_share_partitions("tx", pid, epoch, [enlisted], [STATE], 2)
    assert again.records == []  # idempotent: nothing new to write
    data = encode_txn_value(value)
    assert data is not None and decode_value(data) == value
    restarted = TransactionCoordinator(lambda: 2000, 900_000)
    restarted.replay("tx", decode_value(data))
    error, found = restarted.enlisted_share_partitions("tx", pid, epoch)
    assert (error, found) == (ErrorCode.none, frozenset({enlisted}))
