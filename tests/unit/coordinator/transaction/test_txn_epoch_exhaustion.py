"""A transaction ended by the bump that exhausts its producer's epoch, across a crash.

The bump allocates a new producer id, but the transaction's markers carry the id that wrote it
at the last epoch, 32767. As in Kafka's ``TransactionMetadata`` the PREPARE record keeps that id
and epoch, with the new id in ``NextProducerId`` (tag 1), so a coordinator that loads the log
after a crash at ``txn.prepared`` writes the same markers the live path would have; only the
COMPLETE record switches to the new id at epoch 0 (``PreviousProducerId`` the old one). The
client is answered the new id at once either way.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from dataclasses import replace

import pytest

from kemu.cluster.context import Runtime
from kemu.cluster.crash_points import set_crash_hook
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.transaction.coordinator import (
    MAX_EPOCH,
    Outcome,
    TransactionCoordinator,
    TxnState,
)
from kemu.coordinator.transaction.records import (
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch, read_header
from kemu.storage.log import MemoryLog

TXN = "worn-out"
TP = ("orders", 0)
STATE_TP = ("__share_group_state", 2)
OLD, NEW = 1000, 1001
LAST_USABLE = MAX_EPOCH - 1  # 32766: the last epoch a client holds


def open_at_last_epoch() -> TransactionCoordinator:
    """A coordinator whose producer ``OLD`` holds epoch 32766 with an Ongoing transaction."""
    ids = itertools.count(OLD)
    coordinator = TransactionCoordinator(lambda: next(ids), max_timeout_ms=60_000)
    assert coordinator.init_producer_id(TXN, 10_000, now_ms=0).producer_id == OLD
    coordinator.transactions[TXN].producer_epoch = LAST_USABLE
    opened = coordinator.add_partitions(TXN, OLD, LAST_USABLE, [TP, STATE_TP], now_ms=1)
    assert opened.error is ErrorCode.none
    return coordinator


def through_codec(value: TransactionLogValue | None) -> TransactionLogValue | None:
    raw = encode_value(value, empty=value is not None and value.status == TxnState.EMPTY)
    return decode_value(raw)


def loaded(records: list[tuple[str, TransactionLogValue | None]]) -> TransactionCoordinator:
    """A fresh coordinator (whose own id allocator must not be used) fed ``records`` through
    the codec, as a restart replays ``__transaction_state``."""

    def no_allocation() -> int:
        raise AssertionError("recovery allocates no producer id")

    fresh = TransactionCoordinator(no_allocation, max_timeout_ms=60_000)
    for transactional_id, value in records:
        fresh.replay(decode_key(encode_key(transactional_id)), through_codec(value))
    return fresh


def written(coordinator: TransactionCoordinator) -> list[tuple[str, TransactionLogValue | None]]:
    """Every record the coordinator's live state implies so far: its current one per id."""
    return [(txn_id, meta.record()) for txn_id, meta in coordinator.transactions.items()]


ENDINGS: dict[str, Callable[[TransactionCoordinator], Outcome]] = {
    "EndTxn v5 commit": lambda c: c.end_transaction(
        TXN, OLD, LAST_USABLE, True, 5, bump_epoch=True
    ),
    "EndTxn v5 abort": lambda c: c.end_transaction(
        TXN, OLD, LAST_USABLE, False, 5, bump_epoch=True
    ),
    "timeout": lambda c: c.expire(10_001)[0],
    "fence_and_abort": lambda c: _present(c.fence_and_abort(TXN, 5)),
    "InitProducerId fencing": lambda c: c.init_producer_id(TXN, 10_000, 5),
}


def _present(outcome: Outcome | None) -> Outcome:
    assert outcome is not None
    return outcome


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_the_prepare_record_keeps_the_old_id_at_32767_and_names_the_next(ending: str) -> None:
    coordinator = open_at_last_epoch()
    outcome = ENDINGS[ending](coordinator)
    assert outcome.markers is not None
    assert (outcome.markers.producer_id, outcome.markers.producer_epoch) == (OLD, MAX_EPOCH)
    # the client is answered the new id (InitProducerId with CONCURRENT_TRANSACTIONS: it retries)
    assert (outcome.producer_id, outcome.producer_epoch) == (NEW, 0)
    [(transactional_id, prepare)] = outcome.records
    assert transactional_id == TXN and prepare is not None
    assert prepare.status in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
    assert (prepare.producer_id, prepare.producer_epoch) == (OLD, MAX_EPOCH)
    assert (prepare.next_producer_id, prepare.previous_producer_id) == (NEW, OLD)
    assert through_codec(prepare) == prepare
    raw = encode_value(prepare)
    assert raw is not None
    # Kafka's layout: version 1, ProducerId int64, ProducerEpoch int16 first; then tag 1 (8 bytes)
    assert struct.unpack_from(">hqh", raw) == (1, OLD, MAX_EPOCH)
    assert b"\x01\x08" + struct.pack(">q", NEW) in raw


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_a_crash_at_prepared_recovers_the_markers_the_live_path_writes(ending: str) -> None:
    coordinator = open_at_last_epoch()
    outcome = ENDINGS[ending](coordinator)
    assert outcome.markers is not None
    # kemu dies at txn.prepared: the log holds the PREPARE record, no marker is written
    restarted = loaded(written(coordinator))
    [recovered] = restarted.recover()
    assert recovered == outcome.markers
    assert (recovered.producer_id, recovered.producer_epoch) == (OLD, MAX_EPOCH)
    assert recovered.partitions == {TP, STATE_TP}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_complete_after_the_restart_switches_to_the_new_id_as_the_live_path(ending: str) -> None:
    live = open_at_last_epoch()
    ENDINGS[ending](live)
    restarted = loaded(written(live))
    [(_, recovered_complete)] = restarted.complete(TXN, now_ms=9)
    [(_, live_complete)] = live.complete(TXN, now_ms=9)
    assert recovered_complete == live_complete
    assert recovered_complete is not None
    assert (recovered_complete.producer_id, recovered_complete.producer_epoch) == (NEW, 0)
    assert recovered_complete.previous_producer_id == OLD
    assert recovered_complete.next_producer_id == -1
    assert recovered_complete.partitions == ()
    # the same but for the last epoch, which only the live one remembers (the old id's 32766
    # after an EndTxn v5, a retry's; a loaded Kafka coordinator has none either)
    forgotten = replace(live.transactions[TXN], last_producer_epoch=-1)
    assert restarted.transactions[TXN] == forgotten
    # and a restart after the COMPLETE record loads the same
    assert loaded(written(live)).transactions[TXN] == forgotten


def test_the_new_producer_goes_on_after_the_recovered_commit() -> None:
    live = open_at_last_epoch()
    ended = live.end_transaction(TXN, OLD, LAST_USABLE, True, 5, bump_epoch=True)
    assert (ended.producer_id, ended.producer_epoch) == (NEW, 0)
    restarted = loaded(written(live))
    for markers in restarted.recover():
        restarted.complete(markers.transactional_id, now_ms=6)
    assert restarted.add_partitions(TXN, NEW, 0, [TP], 7).error is ErrorCode.none
    next_end = restarted.end_transaction(TXN, NEW, 0, True, 8, bump_epoch=True)
    assert next_end.markers is not None
    assert (next_end.markers.producer_id, next_end.markers.producer_epoch) == (NEW, 1)
    restarted.complete(TXN, now_ms=8)
    # the old producer is gone
    assert restarted.add_partitions(TXN, OLD, LAST_USABLE, [TP], 9).error is (
        ErrorCode.invalid_producer_id_mapping
    )


def test_requests_while_prepared_get_kafkas_answers() -> None:
    """Kemu writes the markers and COMPLETE record in the same call as PREPARE, so only a load
    could show the prepared state; if a request saw it, it is answered as Kafka 4.4.0 answers
    while it writes the markers (a pending transition to CompleteCommit, checked first; see
    test_prepared_fencing.py): CONCURRENT_TRANSACTIONS, but for an EndTxn v4, which checks the
    producer id first (its coordinator holds the old id at 32767 until the markers are
    written)."""
    coordinator = open_at_last_epoch()
    coordinator.end_transaction(TXN, OLD, LAST_USABLE, True, 5, bump_epoch=True)
    assert coordinator.transactions[TXN].state is TxnState.PREPARE_COMMIT
    waiting = ErrorCode.concurrent_transactions
    assert coordinator.add_partitions(TXN, NEW, 0, [TP], 6).error is waiting
    assert coordinator.end_transaction(TXN, NEW, 0, True, 6, bump_epoch=True).error is waiting
    assert coordinator.end_transaction(TXN, NEW, 0, True, 6).error is (
        ErrorCode.invalid_producer_id_mapping  # the new id is not in use yet
    )
    for commit in (True, False):
        retried = coordinator.end_transaction(TXN, OLD, LAST_USABLE, commit, 6, bump_epoch=True)
        assert retried.error is waiting
    assert coordinator.add_partitions(TXN, OLD, LAST_USABLE, [TP], 6).error is waiting
    assert coordinator.init_producer_id(TXN, 10_000, 6).error is waiting
    assert coordinator.transactions[TXN].state is TxnState.PREPARE_COMMIT


def test_an_exhausted_init_without_a_transaction_switches_at_once() -> None:
    ids = itertools.count(OLD)
    coordinator = TransactionCoordinator(lambda: next(ids), max_timeout_ms=60_000)
    coordinator.init_producer_id(TXN, 10_000, now_ms=0)
    coordinator.transactions[TXN].producer_epoch = LAST_USABLE
    bumped = coordinator.init_producer_id(TXN, 10_000, 1, OLD, LAST_USABLE)
    assert (bumped.error, bumped.producer_id, bumped.producer_epoch) == (ErrorCode.none, NEW, 0)
    [(_, empty)] = bumped.records
    assert empty is not None and empty.status == TxnState.EMPTY
    assert (empty.producer_id, empty.producer_epoch, empty.next_producer_id) == (NEW, 0, -1)
    assert empty.previous_producer_id == OLD


class Crash(Exception):
    """kemu died at a crash point (nothing after it runs, as after SIGKILL)."""


def test_a_start_up_after_a_crash_at_prepared_commits_under_the_old_id() -> None:
    """The transaction service of a fresh runtime over the same logs (a restart): its start-up
    replays ``__transaction_state`` and writes the markers, so the data partition's last stable
    offset moves past the transaction the old id wrote."""
    cluster = Cluster(
        cluster_id="txn-exhaustion-unit",
        nodes={1: BrokerNode(1, "127.0.0.1", 19392)},
        config=BrokerConfig({"transaction.state.log.num.partitions": "1"}),
        log_factory=lambda topic, index: MemoryLog(),
    )
    cluster.create_topic(TP[0], 1, 1)
    now = [1_700_000_000_000]
    before = transaction_coordinator(Runtime(cluster=cluster, clock_ms=lambda: now[0]))
    started = before.init_producer_id(TXN, 60_000, -1, -1)
    old = started.producer_id
    before.coordinator.transactions[TXN].producer_epoch = LAST_USABLE
    assert before.on_transactional_produce(TXN, old, LAST_USABLE, TP) is ErrorCode.none
    batch = build_batch(
        [(None, b"v")],
        timestamp_ms=now[0],
        producer_id=old,
        producer_epoch=LAST_USABLE,
        base_sequence=0,
        transactional=True,
    )
    data = cluster.topics[TP[0]].partitions[TP[1]]
    assert data.append([(read_header(batch), batch)], now_ms=now[0]).error is ErrorCode.none

    def die_at_prepared(name: str) -> None:
        if name == "txn.prepared":
            raise Crash(name)

    set_crash_hook(die_at_prepared)
    try:
        with pytest.raises(Crash):
            before.end_transaction(TXN, old, LAST_USABLE, True, bump_epoch=True)
    finally:
        set_crash_hook(None)
    assert data.last_stable_offset == 0 < data.high_watermark

    after = transaction_coordinator(Runtime(cluster=cluster, clock_ms=lambda: now[0]))
    assert data.last_stable_offset == data.high_watermark
    assert data.transactions.ongoing == {}
    meta = after.coordinator.transactions[TXN]
    assert meta.state is TxnState.COMPLETE_COMMIT
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (old + 1, 0, old)
