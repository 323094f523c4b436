"""The sans-IO transaction coordinator on a virtual clock, its ``__transaction_state`` records,
and a partition's transaction index (last stable offset, aborted transactions)."""

from __future__ import annotations

import itertools
from pathlib import Path

from kemu.cluster.partition import Partition
from kemu.coordinator.transaction.coordinator import TransactionCoordinator, TxnState
from kemu.coordinator.transaction.records import (
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch, read_header
from kemu.storage.log import MemoryLog

TXN = "my-txn"
TP = ("orders", 0)


def make() -> TransactionCoordinator:
    ids = itertools.count(1000)
    return TransactionCoordinator(lambda: next(ids), max_timeout_ms=60_000)


def replayed(coordinator: TransactionCoordinator, *outcomes: object) -> TransactionCoordinator:
    """A fresh coordinator fed the records of ``coordinator``'s operations through the codec."""
    del outcomes
    fresh = make()
    for txn_id, meta in coordinator.transactions.items():
        value = meta.record()
        raw = encode_value(value, empty=meta.state == TxnState.EMPTY)
        fresh.replay(decode_key(encode_key(txn_id)), decode_value(raw))
    return fresh


def test_init_allocates_then_bumps_and_fences() -> None:
    c = make()
    first = c.init_producer_id(TXN, 10_000, now_ms=0)
    assert (first.error, first.producer_id, first.producer_epoch) == (ErrorCode.none, 1000, 0)
    assert first.records and first.records[0][1].status == TxnState.EMPTY
    second = c.init_producer_id(TXN, 10_000, now_ms=1)
    assert (second.producer_id, second.producer_epoch) == (1000, 1)
    stale = c.add_partitions(TXN, 1000, 0, [TP], now_ms=2)
    assert stale.error is ErrorCode.producer_fenced
    assert c.end_transaction(TXN, 1000, 0, True, now_ms=2).error is ErrorCode.producer_fenced
    assert (
        c.add_partitions(TXN, 7, 1, [TP], now_ms=2).error is ErrorCode.invalid_producer_id_mapping
    )
    # the bump to epoch 1 named no epoch (a new instance): epoch 0 is fenced, not a retry
    assert c.init_producer_id(TXN, 10_000, 3, 1000, 0).error is ErrorCode.producer_fenced
    assert c.init_producer_id(TXN, 10_000, 4, 1000, 1).producer_epoch == 2  # KIP-360 bump
    retry = c.init_producer_id(TXN, 10_000, 5, 1000, 1)  # a retry of the bump to epoch 2
    assert (retry.error, retry.producer_epoch) == (ErrorCode.none, 2)
    assert c.init_producer_id(TXN, 10_000, 6, 1000, 0).error is ErrorCode.producer_fenced


def test_timeout_above_the_maximum_is_refused() -> None:
    assert make().init_producer_id(TXN, 60_001, 0).error is ErrorCode.invalid_transaction_timeout


def test_commit_goes_through_prepare_to_complete() -> None:
    c = make()
    c.init_producer_id(TXN, 10_000, 0)
    added = c.add_partitions(TXN, 1000, 0, [TP, ("orders", 1)], now_ms=5)
    assert added.error is ErrorCode.none and added.records[0][1].status == TxnState.ONGOING
    assert c.add_partitions(TXN, 1000, 0, [TP], now_ms=6).records == []  # already in
    ended = c.end_transaction(TXN, 1000, 0, True, now_ms=7)
    assert ended.markers is not None and ended.markers.commit
    assert ended.markers.partitions == {TP, ("orders", 1)}
    assert c.transactions[TXN].state == TxnState.PREPARE_COMMIT
    # a crash here: the loaded coordinator finishes the commit
    assert [m.commit for m in replayed(c).recover()] == [True]
    assert c.add_partitions(TXN, 1000, 0, [TP], 8).error is ErrorCode.concurrent_transactions
    done = c.complete(TXN, now_ms=8)
    assert done[0][1].status == TxnState.COMPLETE_COMMIT and done[0][1].partitions == ()
    assert c.end_transaction(TXN, 1000, 0, True, 9).error is ErrorCode.none  # a retry
    assert c.end_transaction(TXN, 1000, 0, False, 9).error is ErrorCode.invalid_txn_state


def test_commit_of_an_empty_transaction_is_invalid() -> None:
    c = make()
    c.init_producer_id(TXN, 10_000, 0)
    assert c.end_transaction(TXN, 1000, 0, True, 1).error is ErrorCode.invalid_txn_state


def test_init_aborts_the_ongoing_transaction_of_the_previous_producer() -> None:
    c = make()
    c.init_producer_id(TXN, 10_000, 0)
    c.add_partitions(TXN, 1000, 0, [TP], 1)
    fenced = c.init_producer_id(TXN, 10_000, 2)
    assert fenced.markers is not None and not fenced.markers.commit
    assert (fenced.markers.producer_epoch, fenced.producer_epoch) == (1, 1)
    c.complete(TXN, 3)
    assert c.transactions[TXN].state == TxnState.COMPLETE_ABORT


def test_tv2_end_bumps_the_epoch_and_a_retry_gets_the_same_answer() -> None:
    c = make()
    c.init_producer_id(TXN, 10_000, 0)
    c.add_partitions(TXN, 1000, 0, [TP], 1)
    ended = c.end_transaction(TXN, 1000, 0, True, 2, bump_epoch=True)
    assert ended.markers is not None and ended.markers.producer_epoch == 1
    c.complete(TXN, 3)
    retry = c.end_transaction(TXN, 1000, 0, True, 4, bump_epoch=True)
    assert (retry.error, retry.producer_epoch) == (ErrorCode.none, 1)
    aborted_empty = c.end_transaction(TXN, 1000, 1, False, 5, bump_epoch=True)
    assert aborted_empty.error is ErrorCode.none and aborted_empty.producer_epoch == 2


def test_epoch_exhaustion_gives_a_new_producer_id() -> None:
    c = make()
    c.init_producer_id(TXN, 10_000, 0)
    c.transactions[TXN].producer_epoch = 32766
    bumped = c.init_producer_id(TXN, 10_000, 1)
    assert (bumped.producer_id, bumped.producer_epoch) == (1001, 0)


def test_timeout_aborts_with_a_fencing_epoch() -> None:
    c = make()
    c.init_producer_id(TXN, 10_000, 0)
    c.add_partitions(TXN, 1000, 0, [TP], now_ms=100)
    assert c.next_deadline_ms() == 10_100
    assert c.expire(10_099) == []
    (expired,) = c.expire(10_100)
    assert expired.markers is not None and not expired.markers.commit
    assert expired.markers.producer_epoch == 1
    c.complete(TXN, 10_100)
    assert c.next_deadline_ms() == 10_100 + 604_800_000  # now only the id's expiration
    assert c.add_partitions(TXN, 1000, 0, [TP], 10_200).error is ErrorCode.producer_fenced


def test_replay_keeps_an_ongoing_transaction_which_then_times_out() -> None:
    c = make()
    c.init_producer_id(TXN, 5_000, 0)
    c.add_partitions(TXN, 1000, 0, [TP], now_ms=50)
    loaded = replayed(c)
    meta = loaded.transactions[TXN]
    assert (meta.state, meta.partitions, meta.start_ms) == (TxnState.ONGOING, {TP}, 50)
    assert loaded.recover() == []
    assert len(loaded.expire(5_050)) == 1


def test_records_round_trip_and_layout() -> None:
    value = TransactionLogValue(5, 2, 60_000, 1, (("a", (0, 2)),), 11, 10)
    raw = encode_value(value)
    assert raw is not None and raw[:2] == b"\x00\x01"  # version 1, flexible
    assert decode_value(raw) == value
    assert encode_key("t") == b"\x00\x00\x00\x01t"
    empty = encode_value(TransactionLogValue(5, 2, 60_000, 0, (), 11, -1), empty=True)
    assert empty is not None and decode_value(empty) == TransactionLogValue(
        5, 2, 60_000, 0, (), 11, -1
    )


def _partition() -> Partition:
    import uuid

    return Partition("orders", uuid.uuid4(), 0, 1, [1], MemoryLog())


def _append(partition: Partition, producer_id: int, transactional: bool, seq: int) -> None:
    batch = build_batch(
        [(None, b"v")],
        timestamp_ms=0,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=seq,
        transactional=transactional,
    )
    assert partition.append([(read_header(batch), batch)], now_ms=0).error is ErrorCode.none


def test_partition_lso_and_aborted_index() -> None:
    p = _partition()
    _append(p, 1, False, 0)  # 0: plain idempotent
    _append(p, 2, True, 0)  # 1: txn of producer 2
    _append(p, 3, True, 0)  # 2: txn of producer 3
    assert (p.high_watermark, p.last_stable_offset) == (3, 1)
    assert p.write_marker(2, 0, False, now_ms=0) == 3  # abort producer 2
    assert p.last_stable_offset == 2
    p.write_marker(3, 0, True, now_ms=0)
    assert p.last_stable_offset == p.high_watermark == 5
    assert p.transactions.aborted_between(0, 5) == [(2, 1)]
    assert p.aborted_ranges(0, 5) == [(2, 1, 3)]
    assert p.aborted_ranges(4, 5) == []
    rebuilt = Partition("orders", p.topic_id, 0, 1, [1], p.log)
    rebuilt.transactions.rebuild(p.log.batches(0, 5))
    assert rebuilt.transactions.aborted == p.transactions.aborted
    assert rebuilt.transactions.ongoing == {}


def test_aborted_transactions_below_the_log_start_are_forgotten() -> None:
    p = _partition()
    _append(p, 2, True, 0)
    p.write_marker(2, 0, False, now_ms=0)  # aborted [0, 1]
    _append(p, 3, True, 0)
    p.write_marker(3, 0, False, now_ms=0)  # aborted [2, 3]
    p.transactions.forget_below(2)
    assert p.aborted_ranges(0, 4) == [(3, 2, 3)]


def test_unused_transactional_ids_expire_with_a_tombstone() -> None:
    ids = itertools.count(1000)
    c = TransactionCoordinator(lambda: next(ids), max_timeout_ms=60_000, id_expiration_ms=1_000)
    c.init_producer_id(TXN, 10_000, 0)
    c.init_producer_id("busy", 10_000, 0)
    c.add_partitions("busy", 1001, 0, [TP], now_ms=0)
    assert c.next_deadline_ms() == 1_000
    assert c.expire_ids(999) == []
    assert c.expire_ids(1_000) == [(TXN, None)]  # the Ongoing one keeps its id
    assert set(c.transactions) == {"busy"}
    assert encode_value(None) is None
    c.replay("busy", None)
    assert c.transactions == {}


def test_an_exhausted_epoch_ends_the_transaction_under_the_producer_that_wrote_it() -> None:
    c = make()
    c.init_producer_id(TXN, 10_000, 0)
    c.add_partitions(TXN, 1000, 0, [TP], 1)
    c.transactions[TXN].producer_epoch = 32766
    fenced = c.init_producer_id(TXN, 10_000, 2)
    assert fenced.markers is not None
    assert (fenced.markers.producer_id, fenced.markers.producer_epoch) == (1000, 32767)
    assert (fenced.producer_id, fenced.producer_epoch) == (1001, 0)


def test_a_zombie_with_the_previous_epoch_aborts_the_open_transaction_then_is_fenced() -> None:
    # As Kafka 4.4.0 (tests/integration/txn/test_end_txn_retry_parity.py): any epoch of the
    # current id over an Ongoing transaction fences it; the zombie's retry is then fenced (the
    # fenced producer's epoch 1 is the last one, a retry).
    c = make()
    c.init_producer_id(TXN, 10_000, 0)
    c.init_producer_id(TXN, 10_000, 1)  # epoch 1
    c.add_partitions(TXN, 1000, 1, [TP], 2)
    aborted = c.init_producer_id(TXN, 10_000, 3, 1000, 0)
    assert aborted.error is ErrorCode.concurrent_transactions
    assert aborted.markers is not None and not aborted.markers.commit
    c.complete(TXN, 4)
    assert c.init_producer_id(TXN, 10_000, 5, 1000, 0).error is ErrorCode.producer_fenced
    assert c.init_producer_id(TXN, 10_000, 6, 1000, 1).producer_epoch == 2


def test_a_reopened_segment_log_restores_open_and_aborted_transactions(tmp_path: Path) -> None:
    import uuid

    from kemu.storage.segments import SegmentLog

    topic_id = uuid.uuid4()
    first = Partition("orders", topic_id, 0, 1, [1], SegmentLog(tmp_path / "txn"))
    _append(first, 2, True, 0)
    first.write_marker(2, 0, False, now_ms=0)  # aborted [0, 1]
    _append(first, 3, True, 0)  # open from offset 2
    first.log.close()
    reopened = Partition("orders", topic_id, 0, 1, [1], SegmentLog(tmp_path / "txn"))
    assert reopened.last_stable_offset == 2
    assert reopened.aborted_ranges(0, 3) == [(2, 0, 1)]
    plain = Partition("plain", topic_id, 0, 1, [1], SegmentLog(tmp_path / "plain"))
    _append(plain, 4, False, 0)
    plain.log.close()
    assert not SegmentLog(tmp_path / "plain").recovered_producers()[4].transactional


def test_commit_after_a_timeout_abort_is_an_invalid_transition_not_a_fence() -> None:
    # Kafka's TransactionCoordinator: the producer's epoch is the one the timeout bumped from
    # (a TV2 retry), so its other outcome is INVALID_TXN_STATE; the same outcome succeeds.
    c = make()
    c.init_producer_id(TXN, 10_000, 0)
    c.add_partitions(TXN, 1000, 0, [TP], now_ms=100)
    assert len(c.expire(10_100)) == 1
    assert c.transactions[TXN].state == TxnState.PREPARE_ABORT
    # while the markers are written, either outcome waits (Kafka 4.4.0's pending transition)
    for commit in (True, False):
        assert c.end_transaction(TXN, 1000, 0, commit, 10_101, bump_epoch=True).error is (
            ErrorCode.concurrent_transactions
        )
    c.complete(TXN, 10_102)
    assert c.end_transaction(TXN, 1000, 0, True, 10_103, bump_epoch=True).error is (
        ErrorCode.invalid_txn_state
    )
    assert c.end_transaction(TXN, 1000, 0, False, 10_103, bump_epoch=True).error is ErrorCode.none
    # transaction version 1 has no retry by epoch: the old epoch is fenced
    assert c.end_transaction(TXN, 1000, 0, True, 10_104).error is ErrorCode.producer_fenced


def test_init_over_an_ongoing_transaction_aborts_it_then_ends_empty_with_a_second_bump() -> None:
    # What Admin.forceTerminateTransaction (an InitProducerId without producer id) sees in Kafka:
    # CONCURRENT_TRANSACTIONS while the fenced transaction aborts, then Empty at epoch + 2.
    c = make()
    c.init_producer_id(TXN, 10_000, 0)
    c.add_partitions(TXN, 1000, 0, [TP], now_ms=1)
    first = c.init_producer_id(TXN, 10_000, 2)
    assert first.error is ErrorCode.concurrent_transactions
    assert first.markers is not None and first.markers.producer_epoch == 1
    assert first.records  # the PrepareAbort is written all the same
    assert c.init_producer_id(TXN, 10_000, 3).error is ErrorCode.concurrent_transactions
    c.complete(TXN, 4)
    retried = c.init_producer_id(TXN, 10_000, 5)
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (
        ErrorCode.none,
        1000,
        2,
    )
    assert c.transactions[TXN].state == TxnState.EMPTY
    assert c.end_transaction(TXN, 1000, 0, True, 6, bump_epoch=True).error is (
        ErrorCode.producer_fenced
    )


def test_verify_partition_answers_whether_the_client_added_it() -> None:
    """A transactional batch below transaction version 2: Kafka's verify-only check."""
    c = make()
    c.init_producer_id(TXN, 10_000, 0)
    assert c.verify_partition(TXN, 1000, 0, TP) is ErrorCode.transaction_abortable  # Empty
    c.add_partitions(TXN, 1000, 0, [TP], now_ms=5)
    assert c.verify_partition(TXN, 1000, 0, TP) is ErrorCode.none
    assert c.verify_partition(TXN, 1000, 0, ("orders", 1)) is ErrorCode.transaction_abortable
    assert c.verify_partition(TXN, 1000, 1, TP) is ErrorCode.producer_fenced
    assert c.verify_partition(TXN, 7, 0, TP) is ErrorCode.invalid_producer_id_mapping
    assert c.verify_partition("unknown", 1000, 0, TP) is ErrorCode.invalid_producer_id_mapping
    c.end_transaction(TXN, 1000, 0, True, now_ms=6)
    assert c.verify_partition(TXN, 1000, 0, TP) is ErrorCode.concurrent_transactions
    c.complete(TXN, now_ms=7)
    assert c.verify_partition(TXN, 1000, 0, TP) is ErrorCode.transaction_abortable
    assert ("orders", 1) not in c.transactions[TXN].partitions  # verifying never adds
