"""A partition that refuses a transaction's marker cancels the transaction's markers.

Apache Kafka 4.4.0's ``TransactionMarkerRequestCompletionHandler`` sends a marker again on
KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER, ... (``test_marker_write_failure.py``), but on
INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED it cancels the transaction's markers
(``removeMarkersForTxn``) and sends nothing of that answer again: the COMPLETE record is never
written, and the transaction stays PrepareCommit/PrepareAbort (its producer gets
CONCURRENT_TRANSACTIONS, it neither times out nor expires) until its ``__transaction_state``
partition is loaded again, which sends its markers again. A partition refuses the coordinator's
marker when a later epoch of the producer wrote there, e.g. a tool's marker
(``kafka-transactions.sh abort`` with a later epoch).

The parity test on a real Kafka 4.4.0: tests/integration/txn/test_marker_refused_kafka.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kemu.cluster.clock import VirtualClock
from kemu.cluster.model import Cluster
from kemu.coordinator.transaction.coordinator import Markers, TxnState
from kemu.coordinator.transaction.marker_answers import MarkerAction, marker_action, sort_answers
from kemu.coordinator.transaction.service import TransactionService
from kemu.protocol.errors import ErrorCode
from tests.unit.coordinator.transaction.test_marker_write_failure import (
    AUDIT,
    NOW,
    ORDERS,
    RETRY_WAIT_MS,
    TIMEOUT_MS,
    TopicFailingLog,
    _cluster,
    _disk_error,
    _markers_in,
    _open,
    _restarted,
    _stable,
    _state,
)

# far past the transaction's timeout and many marker retries
LONG_WAIT_MS = 10 * TIMEOUT_MS


@pytest.fixture(autouse=True)
def _healthy_disk() -> Iterator[None]:
    TopicFailingLog.failing = set()
    yield
    TopicFailingLog.failing = set()


@pytest.mark.parametrize(
    ("error", "action"),
    [
        (ErrorCode.none, MarkerAction.WRITTEN),
        (ErrorCode.kafka_storage_error, MarkerAction.RETRY),
        (ErrorCode.not_leader_or_follower, MarkerAction.RETRY),
        (ErrorCode.unknown_topic_or_partition, MarkerAction.RETRY),
        (ErrorCode.not_enough_replicas, MarkerAction.RETRY),
        (ErrorCode.not_enough_replicas_after_append, MarkerAction.RETRY),
        (ErrorCode.request_timed_out, MarkerAction.RETRY),
        (ErrorCode.unsupported_for_message_format, MarkerAction.NOT_NEEDED),
        (ErrorCode.unsupported_version, MarkerAction.NOT_NEEDED),
        (ErrorCode.invalid_producer_epoch, MarkerAction.CANCEL),
        (ErrorCode.transaction_coordinator_fenced, MarkerAction.CANCEL),
        (ErrorCode.corrupt_message, MarkerAction.CANCEL),  # Kafka: IllegalStateException
    ],
)
def test_each_answer_is_sorted_as_kafkas_completion_handler_sorts_it(
    error: ErrorCode, action: MarkerAction
) -> None:
    assert marker_action(error) is action


def test_a_cancelling_answer_leaves_nothing_to_retry() -> None:
    retried = sort_answers({ORDERS: ErrorCode.kafka_storage_error, AUDIT: ErrorCode.none})
    assert (retried.written, retried.to_retry) == ({AUDIT}, {ORDERS})
    assert not retried.complete and not retried.cancelled
    cancelled = sort_answers(
        {ORDERS: ErrorCode.invalid_producer_epoch, AUDIT: ErrorCode.kafka_storage_error}
    )
    assert cancelled.cancelled and not cancelled.complete
    assert cancelled.to_retry == frozenset()
    assert dict(cancelled.cancelled_by) == {ORDERS: ErrorCode.invalid_producer_epoch}
    dropped = sort_answers({ORDERS: ErrorCode.unsupported_version, AUDIT: ErrorCode.none})
    assert dropped.complete and dropped.written == {AUDIT}


def _tool_marker(cluster: Cluster, tp: tuple[str, int], producer_id: int, epoch: int) -> None:
    """An ABORT marker at ``epoch`` written to ``tp`` by a tool (WriteTxnMarkers): the
    partition's producer is at that epoch from then on."""
    partition = cluster.topics[tp[0]].partitions[tp[1]]
    partition.write_marker(producer_id, epoch, False, coordinator_epoch=0, now_ms=NOW)


def _assert_stuck(service: TransactionService, prepared: TxnState, pid: int, epoch: int) -> None:
    """Prepared, its producer told to wait, whatever it asks."""
    assert _state(service) is prepared
    assert service.add_partitions("t", pid, epoch, [ORDERS]).error is (
        ErrorCode.concurrent_transactions
    )
    assert service.init_producer_id("t", TIMEOUT_MS, -1, -1).error is (
        ErrorCode.concurrent_transactions
    )


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
@pytest.mark.parametrize("version", [1, 2], ids=["tv1", "tv2"])
def test_a_refused_marker_leaves_the_transaction_prepared(commit: bool, version: int) -> None:
    clock = VirtualClock(start_ms=NOW)
    cluster = _cluster()
    service, pid, epoch = _open(cluster, clock, [ORDERS, AUDIT])
    _tool_marker(cluster, ORDERS, pid, epoch + 3)
    assert _markers_in(cluster, ORDERS) == 1
    heard: list[Markers] = []
    service.add_marker_listener(heard.append)

    ended = service.end_transaction("t", pid, epoch, commit, bump_epoch=version == 2)
    assert ended.error is ErrorCode.none  # answered at the PREPARE record, as Kafka does
    held = epoch + 1 if version == 2 else epoch
    assert ended.producer_epoch == held
    # the other partition has its marker; the refusing one has the tool's alone
    assert (_markers_in(cluster, ORDERS), _markers_in(cluster, AUDIT)) == (1, 1)
    assert _stable(cluster, AUDIT)
    assert [m.partitions for m in heard] == [frozenset({AUDIT})]
    prepared = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    assert "t" not in service.pending_markers
    assert service.cancelled_markers["t"].partitions == {ORDERS}
    _assert_stuck(service, prepared, pid, held)
    # nothing is written again, no COMPLETE record, no timeout, no expiry
    clock.advance(LONG_WAIT_MS)
    assert (_markers_in(cluster, ORDERS), _markers_in(cluster, AUDIT)) == (1, 1)
    _assert_stuck(service, prepared, pid, held)
    # a load writes its markers again: refused again, the transaction stays prepared
    restarted = _restarted(cluster, clock)
    assert (_markers_in(cluster, ORDERS), _markers_in(cluster, AUDIT)) == (1, 2)
    _assert_stuck(restarted, prepared, pid, held)
    assert service.reload_partition(0) == 1
    _assert_stuck(service, prepared, pid, held)
    assert service.cancelled_markers["t"].partitions == {ORDERS}


def test_a_refusal_cancels_the_retry_of_a_marker_that_failed_to_write() -> None:
    clock = VirtualClock(start_ms=NOW)
    cluster = _cluster()
    service, pid, epoch = _open(cluster, clock, [ORDERS, AUDIT])
    _tool_marker(cluster, ORDERS, pid, epoch + 3)
    with _disk_error("audit"):  # in the same round as the refusal
        assert service.end_transaction("t", pid, epoch, True, bump_epoch=True).error is (
            ErrorCode.none
        )
    clock.advance(LONG_WAIT_MS)
    # neither is written again: Kafka sends nothing of an answer that cancelled the markers
    assert (_markers_in(cluster, ORDERS), _markers_in(cluster, AUDIT)) == (1, 0)
    assert service.cancelled_markers["t"].partitions == {ORDERS, AUDIT}
    assert _state(service) is TxnState.PREPARE_COMMIT


def test_a_retried_marker_the_partition_then_refuses_cancels_the_markers() -> None:
    clock = VirtualClock(start_ms=NOW)
    cluster = _cluster()
    service, pid, epoch = _open(cluster, clock, [ORDERS, AUDIT])
    with _disk_error("orders"):
        assert service.end_transaction("t", pid, epoch, True, bump_epoch=True).error is (
            ErrorCode.none
        )
    assert service.pending_markers["t"].partitions == {ORDERS}
    # before the retry, a tool ends the transaction there with a later epoch
    _tool_marker(cluster, ORDERS, pid, epoch + 3)
    clock.advance(RETRY_WAIT_MS)
    assert "t" not in service.pending_markers
    assert service.cancelled_markers["t"].partitions == {ORDERS}
    assert (_markers_in(cluster, ORDERS), _markers_in(cluster, AUDIT)) == (1, 1)
    clock.advance(LONG_WAIT_MS)
    assert _state(service) is TxnState.PREPARE_COMMIT


def test_a_marker_written_by_the_reload_completes_a_cancelled_transaction() -> None:
    """Once the partition accepts the marker (here: its producer state forgotten, as after the
    producer expired there), the next load completes the transaction."""
    clock = VirtualClock(start_ms=NOW)
    cluster = _cluster()
    service, pid, epoch = _open(cluster, clock, [ORDERS, AUDIT])
    _tool_marker(cluster, ORDERS, pid, epoch + 3)
    assert service.end_transaction("t", pid, epoch, True, bump_epoch=True).error is ErrorCode.none
    assert _state(service) is TxnState.PREPARE_COMMIT
    cluster.topics["orders"].partitions[0].producers.clear()
    assert service.reload_partition(0) == 1
    assert _state(service) is TxnState.COMPLETE_COMMIT
    assert "t" not in service.cancelled_markers
    assert _markers_in(cluster, ORDERS) == 2
