"""A transaction committed by another producer instance that only knows its producer id and epoch,
as Flink's KafkaSink committer does after a restore (examples/flink): it resumes the transaction
with the (id, epoch) saved in the checkpoint and sends EndTxn v4, without the epoch bump of
transaction version 2.

- The transaction is still open (the job failed before the commit): the commit goes through
  with that epoch.
- The first attempt already committed it with EndTxn v5, which bumped the epoch: the re-commit
  with the saved epoch is PRODUCER_FENCED, which the connector logs and drops. Apache Kafka
  4.4.0 answers the same at the same point (``examples/flink/run.py --against kafka``).
"""

from __future__ import annotations

import itertools

from kemu.coordinator.transaction.coordinator import TransactionCoordinator, TxnState
from kemu.protocol.errors import ErrorCode

TXN = "kemu-flink-0-17"
TP = ("flink-output", 0)


def coordinator_with_an_open_transaction() -> tuple[TransactionCoordinator, int, int]:
    ids = itertools.count(33)
    coordinator = TransactionCoordinator(lambda: next(ids), max_timeout_ms=900_000)
    started = coordinator.init_producer_id(TXN, 120_000, now_ms=0)
    assert started.error is ErrorCode.none
    opened = coordinator.add_partitions(TXN, started.producer_id, started.producer_epoch, [TP], 1)
    assert opened.error is ErrorCode.none
    return coordinator, started.producer_id, started.producer_epoch


def test_a_resumed_producer_commits_the_open_transaction_with_its_saved_epoch() -> None:
    coordinator, producer_id, epoch = coordinator_with_an_open_transaction()
    resumed = coordinator.end_transaction(TXN, producer_id, epoch, True, 2)  # EndTxn v4
    assert resumed.error is ErrorCode.none
    assert resumed.markers is not None and resumed.markers.commit
    assert (resumed.markers.producer_id, resumed.markers.producer_epoch) == (producer_id, epoch)
    coordinator.complete(TXN, 3)
    assert coordinator.transactions[TXN].state is TxnState.COMPLETE_COMMIT


def test_recommitting_a_transaction_v2_already_committed_is_producer_fenced() -> None:
    coordinator, producer_id, epoch = coordinator_with_an_open_transaction()
    committed = coordinator.end_transaction(TXN, producer_id, epoch, True, 2, bump_epoch=True)
    assert committed.error is ErrorCode.none and committed.producer_epoch == epoch + 1
    coordinator.complete(TXN, 3)
    again = coordinator.end_transaction(TXN, producer_id, epoch, True, 4)  # EndTxn v4, saved epoch
    assert again.error is ErrorCode.producer_fenced
    assert again.markers is None and again.records == []
    assert coordinator.transactions[TXN].state is TxnState.COMPLETE_COMMIT
