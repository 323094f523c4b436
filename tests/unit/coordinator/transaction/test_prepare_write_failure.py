"""A prepare whose ``__transaction_state`` write fails leaves the transaction as the log has it.

Kafka's coordinator moves to PrepareCommit/PrepareAbort only once the record is appended (its
pending transition is cleared when the append fails), so the producer's retry of EndTxn ends the
transaction. kemu's ``TransactionCoordinator._prepare`` changes the state in memory before
``TransactionService._carry_out`` writes it: when the write fails, the markers are never written,
``complete`` never runs, and no deadline covers a prepared state, so every request to the id
answers CONCURRENT_TRANSACTIONS (since c8cf4b7 a zombie's too) until the partition is reloaded.
"""

from __future__ import annotations

import pytest

from kemu.cluster.clock import VirtualClock
from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import BatchHeader
from kemu.storage.log import MemoryLog

NOW = 1_700_000_000_000


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


@pytest.mark.xfail(
    strict=True,
    reason="a failed PrepareCommit write leaves the transaction prepared in memory (c8cf4b7 audit)",
)
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
