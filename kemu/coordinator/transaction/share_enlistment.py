"""KIP-1289: share partitions join a producer transaction (spec §2.7, Q2).

The one enlistment both RPCs use: AddShareAcknowledgementsToTxn always, TxnShareAcknowledge
when ``kemu.kip1289.enlist`` is ``implicit``. The ``__share_group_state`` partition of every
(group, topic id, partition) joins the transaction as AddPartitionsToTxn adds a partition, so
EndTxn writes its marker there (also when nothing was produced) and the staged acknowledgements
resolve on it; several share partitions may share one state partition.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from kemu.cluster.context import Runtime
from kemu.coordinator.share.persister import SharePartitionKey
from kemu.coordinator.share.service import SHARE_STATE_TOPIC, share_coordinator
from kemu.coordinator.transaction.coordinator import SharePartition
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode

ENLIST_CONFIG = "kemu.kip1289.enlist"


@dataclass(frozen=True, slots=True)
class TxnProducer:
    """The transaction a request names: its transactional id and the producer's id and epoch."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


def enlist_share_state(
    runtime: Runtime, txn: TxnProducer, group_id: str, partitions: Iterable[tuple[uuid.UUID, int]]
) -> ErrorCode:
    """Enlist the share partitions ``(topic id, partition)`` of ``group_id`` in ``txn``: NONE,
    or the transaction coordinator's error (PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING,
    CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE, ...) and nothing enlisted."""
    shares = sorted({(group_id, topic_id, index) for topic_id, index in partitions})
    if not shares:
        return ErrorCode.none
    persister = share_coordinator(runtime)
    persister.topic()  # the markers go to its partitions: it must exist
    state_partitions = sorted(
        {(SHARE_STATE_TOPIC, persister.partition_for(SharePartitionKey(*key))) for key in shares}
    )
    outcome = transaction_coordinator(runtime).add_share_partitions(
        txn.transactional_id, txn.producer_id, txn.producer_epoch, shares, state_partitions
    )
    return outcome.error


def enlisted_share_partitions(
    runtime: Runtime, txn: TxnProducer
) -> tuple[ErrorCode, frozenset[SharePartition]]:
    """The share partitions enlisted in ``txn`` (for ``kemu.kip1289.enlist=explicit``), or the
    error its producer gets from the transaction coordinator."""
    return transaction_coordinator(runtime).coordinator.enlisted_share_partitions(
        txn.transactional_id, txn.producer_id, txn.producer_epoch
    )


def explicit_enlistment(runtime: Runtime) -> bool:
    return runtime.cluster.config.get(ENLIST_CONFIG) == "explicit"
