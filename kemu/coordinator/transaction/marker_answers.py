"""What the transaction coordinator does with each partition's answer to a marker, sans-IO.

Kafka 4.4.0's ``TransactionMarkerRequestCompletionHandler`` (core, Scala) sorts the error of
each partition of a WriteTxnMarkers answer:

- NONE: the partition has its marker (``removePartition``);
- UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR: sent again (``addTxnMarkersToBrokerQueue``);
- UNSUPPORTED_FOR_MESSAGE_FORMAT, UNSUPPORTED_VERSION: the partition needs no marker any more
  (``removePartition``: the producer could not have written there);
- INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: the transaction's markers are
  cancelled (``removeMarkersForTxn``: it leaves the set of transactions with pending markers)
  and nothing of that answer is sent again; the COMPLETE record is never written, so the
  transaction stays PrepareCommit/PrepareAbort (with its pending transition to Complete*: no
  timeout, no expiry, CONCURRENT_TRANSACTIONS to its producer) until its
  ``__transaction_state`` partition is loaded again, which sends its markers again;
- any other error: an ``IllegalStateException`` in the completion handler, which then neither
  sends again nor completes: the transaction stays prepared as well (here: cancelled).

The COMPLETE record is written once every partition has its marker (or needs none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from kemu.coordinator.transaction.coordinator import TopicPartition
from kemu.protocol.errors import ErrorCode


class MarkerAction(Enum):
    WRITTEN = "written"
    RETRY = "retry"
    NOT_NEEDED = "not_needed"  # the partition leaves the transaction without its marker
    CANCEL = "cancel"  # the transaction's markers are dropped; it stays prepared


RETRIABLE = frozenset(
    {
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_leader_or_follower,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
        ErrorCode.kafka_storage_error,
    }
)
NOT_NEEDED = frozenset({ErrorCode.unsupported_for_message_format, ErrorCode.unsupported_version})


def marker_action(error: ErrorCode) -> MarkerAction:
    if error is ErrorCode.none:
        return MarkerAction.WRITTEN
    if error in RETRIABLE:
        return MarkerAction.RETRY
    if error in NOT_NEEDED:
        return MarkerAction.NOT_NEEDED
    return MarkerAction.CANCEL  # INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, ...


@dataclass(frozen=True, slots=True)
class MarkerRound:
    """One round of a transaction's markers, each partition's answer sorted."""

    written: frozenset[TopicPartition]
    retry: frozenset[TopicPartition]
    # the partitions whose answer cancelled the transaction's markers, with that answer
    cancelled_by: Mapping[TopicPartition, ErrorCode]

    @property
    def cancelled(self) -> bool:
        return bool(self.cancelled_by)

    @property
    def complete(self) -> bool:
        """Every partition has its marker or needs none: the COMPLETE record is next."""
        return not self.retry and not self.cancelled

    @property
    def to_retry(self) -> frozenset[TopicPartition]:
        """The partitions to write again later: none once the markers are cancelled (Kafka
        sends nothing of an answer that cancelled them)."""
        return frozenset() if self.cancelled else self.retry


def sort_answers(answers: Mapping[TopicPartition, ErrorCode]) -> MarkerRound:
    """Sort the answer of each partition a round of markers went to."""
    actions = {tp: marker_action(error) for tp, error in answers.items()}
    return MarkerRound(
        written=frozenset(tp for tp, action in actions.items() if action is MarkerAction.WRITTEN),
        retry=frozenset(tp for tp, action in actions.items() if action is MarkerAction.RETRY),
        cancelled_by={
            tp: answers[tp] for tp, action in actions.items() if action is MarkerAction.CANCEL
        },
    )
