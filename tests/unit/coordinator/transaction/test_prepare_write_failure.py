"""An operation whose ``__transaction_state`` write fails leaves the transaction as the log has it.

Kafka's coordinator moves to PrepareCommit/PrepareAbort only once the record is appended (its
pending transition is cleared when the append fails), so the producer's retry of EndTxn ends the
transaction. kemu's ``TransactionCoordinator`` changes its metadata in memory before
``TransactionService`` writes the record: the service puts the metadata back when the write fails
(else a failed prepare would leave the id answering CONCURRENT_TRANSACTIONS until a reload).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kemu.cluster.clock import VirtualClock
from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.transaction.coordinator import TransactionMetadata, TxnState
from kemu.coordinator.transaction.service import TransactionService, transaction_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import BatchHeader
from kemu.storage.log import MemoryLog

NOW = 1_700_000_000_000
TIMEOUT_MS = 60_000
SHARE = ("g", uuid.UUID(int=7), 0)
STATE = ("__share_group_state", 0)


class FailingLog(MemoryLog):
    """A log whose appends fail while ``failing`` (a full disk)."""

    failing = False

    def append(self, header: BatchHeader, batch: bytes, *, now_ms: int) -> None:
        if FailingLog.failing:
            raise OSError("No space left on device")
        super().append(header, batch, now_ms=now_ms)


def _runtime(clock: VirtualClock) -> Runtime:
    cluster = Cluster(
        cluster_id="txn-prepare-write-failure",
        nodes={1: BrokerNode(1, "127.0.0.1", 19393)},
        config=BrokerConfig(
            {
                "transaction.state.log.num.partitions": "1",
                "transaction.state.log.replication.factor": "1",
            }
        ),
        log_factory=lambda topic, index: FailingLog(),
    )
    cluster.create_topic("orders", 1, 1)
    return Runtime(cluster=cluster, clock=clock)


def test_a_failed_prepare_write_leaves_the_transaction_ongoing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = VirtualClock(start_ms=NOW)
    runtime = _runtime(clock)
    service = transaction_coordinator(runtime)
    assert service.init_producer_id("t", 60_000, -1, -1).error is ErrorCode.none
    started = service.init_producer_id("t", 60_000, -1, -1)  # epoch 1: epoch 0 is a zombie
    assert started.error is ErrorCode.none
    pid, epoch = started.producer_id, started.producer_epoch
    assert service.add_partitions("t", pid, epoch, [("orders", 0)]).error is ErrorCode.none

    monkeypatch.setattr(FailingLog, "failing", True)
    failed = service.end_transaction("t", pid, epoch, True, bump_epoch=False)
    monkeypatch.setattr(FailingLog, "failing", False)
    assert failed.error is ErrorCode.coordinator_not_available

    # What a zombie (an older epoch) gets now: CONCURRENT_TRANSACTIONS, not PRODUCER_FENCED.
    zombie = service.add_partitions("t", pid, epoch - 1, [("orders", 0)])
    # The producer retries its EndTxn, as the Java client does on COORDINATOR_NOT_AVAILABLE.
    retried = service.end_transaction("t", pid, epoch, True, bump_epoch=False)
    # Past the transaction timeout nothing aborts it either.
    clock.advance(120_000)
    restarted = service.init_producer_id("t", 60_000, -1, -1)
    assert (zombie.error, retried.error, restarted.error) == (
        ErrorCode.producer_fenced,
        ErrorCode.none,
        ErrorCode.none,
    )


@contextmanager
def _disk_full() -> Iterator[None]:
    FailingLog.failing = True
    try:
        yield
    finally:
        FailingLog.failing = False


def _ongoing(clock: VirtualClock) -> tuple[TransactionService, int, int]:
    """A service whose id ``t`` has an Ongoing transaction on ``orders-0``."""
    service = transaction_coordinator(_runtime(clock))
    started = service.init_producer_id("t", TIMEOUT_MS, -1, -1)
    pid, epoch = started.producer_id, started.producer_epoch
    assert service.add_partitions("t", pid, epoch, [("orders", 0)]).error is ErrorCode.none
    return service, pid, epoch


def _meta(service: TransactionService) -> TransactionMetadata:
    return service.coordinator.transactions["t"].snapshot()


def test_a_failed_first_init_producer_id_leaves_no_transactional_id() -> None:
    service = transaction_coordinator(_runtime(VirtualClock(start_ms=NOW)))
    with _disk_full():
        failed = service.init_producer_id("t", TIMEOUT_MS, -1, -1)
    assert failed.error is ErrorCode.coordinator_not_available
    assert "t" not in service.coordinator.transactions
    retried = service.init_producer_id("t", TIMEOUT_MS, -1, -1)
    assert (retried.error, retried.producer_epoch) == (ErrorCode.none, 0)


def test_a_failed_epoch_bump_keeps_the_epoch_and_its_retry_bumps_once() -> None:
    service = transaction_coordinator(_runtime(VirtualClock(start_ms=NOW)))
    first = service.init_producer_id("t", TIMEOUT_MS, -1, -1)
    before = _meta(service)
    with _disk_full():
        failed = service.init_producer_id("t", TIMEOUT_MS, first.producer_id, 0)
    assert failed.error is ErrorCode.coordinator_not_available
    assert _meta(service) == before
    retried = service.init_producer_id("t", TIMEOUT_MS, first.producer_id, 0)
    assert (retried.error, retried.producer_epoch) == (ErrorCode.none, 1)


def test_a_failed_fence_by_init_producer_id_leaves_the_transaction_to_its_producer() -> None:
    service, pid, epoch = _ongoing(VirtualClock(start_ms=NOW))
    before = _meta(service)
    with _disk_full():
        failed = service.init_producer_id("t", TIMEOUT_MS, -1, -1)
    assert failed.error is ErrorCode.coordinator_not_available
    assert _meta(service) == before
    ended = service.end_transaction("t", pid, epoch, True, bump_epoch=False)
    assert ended.error is ErrorCode.none
    assert service.coordinator.transactions["t"].state is TxnState.COMPLETE_COMMIT


def test_a_failed_first_add_leaves_no_transaction() -> None:
    service = transaction_coordinator(_runtime(VirtualClock(start_ms=NOW)))
    started = service.init_producer_id("t", TIMEOUT_MS, -1, -1)
    pid, epoch = started.producer_id, started.producer_epoch
    before = _meta(service)
    with _disk_full():
        failed = service.add_partitions("t", pid, epoch, [("orders", 0)])
    assert failed.error is ErrorCode.coordinator_not_available
    assert _meta(service) == before
    assert service.coordinator.next_deadline_ms() != NOW + TIMEOUT_MS  # no timeout started


def test_a_failed_add_leaves_the_partition_out_of_the_transaction() -> None:
    service, pid, epoch = _ongoing(VirtualClock(start_ms=NOW))
    before = _meta(service)
    with _disk_full():
        failed = service.add_partitions("t", pid, epoch, [("orders", 1)])
    assert failed.error is ErrorCode.coordinator_not_available
    assert _meta(service) == before
    assert service.verify_transactional_produce("t", pid, epoch, ("orders", 1)) is (
        ErrorCode.transaction_abortable
    )


def test_a_failed_share_enlistment_enlists_nothing() -> None:
    service, pid, epoch = _ongoing(VirtualClock(start_ms=NOW))
    before = _meta(service)
    with _disk_full():
        failed = service.add_share_partitions("t", pid, epoch, [SHARE], [STATE])
    assert failed.error is ErrorCode.coordinator_not_available
    assert _meta(service) == before
    assert service.coordinator.enlisted_share_partitions("t", pid, epoch) == (
        ErrorCode.none,
        frozenset(),
    )


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_failed_resolve_now_leaves_the_transaction_ongoing(commit: bool) -> None:
    service = _ongoing(VirtualClock(start_ms=NOW))[0]
    before = _meta(service)
    with _disk_full():
        failed = service.resolve_now("t", commit)
    assert failed is not None and failed.error is ErrorCode.coordinator_not_available
    assert _meta(service) == before
    resolved = service.resolve_now("t", commit)
    assert resolved is not None and resolved.error is ErrorCode.none


def test_a_failed_timeout_abort_is_tried_again_after_the_cleanup_interval() -> None:
    clock = VirtualClock(start_ms=NOW)
    service, _, epoch = _ongoing(clock)
    before = _meta(service)
    with _disk_full():
        assert clock.advance(TIMEOUT_MS) == 1  # the timeout's abort fails to write
        assert _meta(service) == before
        # not at once again: Kafka looks for timed-out transactions at its cleanup interval
        assert clock.advance(service.abort_retry_ms - 1) == 0
    assert clock.advance(1) == 1
    meta = service.coordinator.transactions["t"]
    assert (meta.state, meta.producer_epoch) == (TxnState.COMPLETE_ABORT, epoch + 1)
