"""A transaction's marker or completion record that fails to write (a disk error) is retried.

Apache Kafka's transaction coordinator answers EndTxn once the PREPARE record is written, then
sends the markers (``TransactionMarkerChannelManager``): a partition answering a retriable error
(KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER, ...) is sent its marker again
(``TransactionMarkerRequestCompletionHandler`` re-enqueues it) and the COMPLETE record is written
only once every partition has its marker; a COMPLETE record that fails to append is appended
again (its log-append retry queue). Until then the transaction stays PrepareCommit/PrepareAbort:
the producer's next operations get CONCURRENT_TRANSACTIONS. A partition left without its marker
would keep its last stable offset, and READ_COMMITTED consumers, stuck for good.

Likewise an expired transactional id whose tombstone fails to append stays in Kafka's cache
(``TransactionStateManager.removeExpiredTransactionalIds``) and is tried again at the next pass.
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
from kemu.coordinator.group.offset_manager import CommitPartition
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.transaction.coordinator import Markers, TxnState
from kemu.coordinator.transaction.service import TransactionService, transaction_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import BatchHeader, build_batch, read_header
from kemu.storage.log import MemoryLog

NOW = 1_700_000_000_000
TIMEOUT_MS = 60_000
# longer than any retry backoff of the coordinator's, shorter than the transaction's timeout
RETRY_WAIT_MS = 5_000
EXPIRATION_MS = 600_000
CLEANUP_INTERVAL_MS = 120_000
STATE_LOG = "__transaction_state"
ORDERS = ("orders", 0)
AUDIT = ("audit", 0)
SHARE = ("g", uuid.UUID(int=7), 0)
SHARE_STATE = ("__share_group_state", 0)


class TopicFailingLog(MemoryLog):
    """A log whose appends fail while its topic is in ``failing`` (a disk error there)."""

    failing: set[str] = set()

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic

    def append(self, header: BatchHeader, batch: bytes, *, now_ms: int) -> None:
        if self.topic in TopicFailingLog.failing:
            raise OSError("Input/output error")
        super().append(header, batch, now_ms=now_ms)


@contextmanager
def _disk_error(*topics: str) -> Iterator[None]:
    TopicFailingLog.failing = set(topics)
    try:
        yield
    finally:
        TopicFailingLog.failing = set()


@pytest.fixture(autouse=True)
def _healthy_disk() -> Iterator[None]:
    TopicFailingLog.failing = set()
    yield
    TopicFailingLog.failing = set()


def _cluster() -> Cluster:
    cluster = Cluster(
        cluster_id="txn-marker-write-failure",
        nodes={1: BrokerNode(1, "127.0.0.1", 19393)},
        config=BrokerConfig(
            {
                "transaction.state.log.num.partitions": "1",
                "transaction.state.log.replication.factor": "1",
                "offsets.topic.num.partitions": "1",
                "offsets.topic.replication.factor": "1",
                "transactional.id.expiration.ms": str(EXPIRATION_MS),
                "transaction.remove.expired.transaction.cleanup.interval.ms": str(
                    CLEANUP_INTERVAL_MS
                ),
            }
        ),
        log_factory=lambda topic, index: TopicFailingLog(topic),
    )
    for topic, _ in (ORDERS, AUDIT, SHARE_STATE):
        cluster.create_topic(topic, 1, 1)
    return cluster


def _service(cluster: Cluster, clock: VirtualClock) -> TransactionService:
    """The coordinator of a process started over ``cluster`` (a restart: it replays the log)."""
    return transaction_coordinator(Runtime(cluster=cluster, clock=clock))


def _restarted(cluster: Cluster, clock: VirtualClock) -> TransactionService:
    """A coordinator started over ``cluster`` now, its timers on a clock of its own (the test's
    clock moves the first one's alone)."""
    return _service(cluster, VirtualClock(start_ms=clock.now_ms()))


def _produce(cluster: Cluster, tp: tuple[str, int], producer_id: int, epoch: int) -> None:
    """One transactional record of the producer in ``tp``: its last stable offset waits."""
    batch = build_batch(
        [(None, b"v")],
        timestamp_ms=NOW,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=0,
        transactional=True,
    )
    partition = cluster.topics[tp[0]].partitions[tp[1]]
    assert partition.append([(read_header(batch), batch)], now_ms=NOW).error is ErrorCode.none


def _stable(cluster: Cluster, tp: tuple[str, int]) -> bool:
    """Whether ``tp`` has no open transaction (its last stable offset is its high watermark)."""
    partition = cluster.topics[tp[0]].partitions[tp[1]]
    return partition.last_stable_offset == partition.high_watermark


def _markers_in(cluster: Cluster, tp: tuple[str, int]) -> int:
    partition = cluster.topics[tp[0]].partitions[tp[1]]
    return sum(
        1
        for header, _ in partition.log.batches(partition.log_start_offset, partition.high_watermark)
        if header.is_control
    )


def _state(service: TransactionService) -> TxnState:
    return service.coordinator.transactions["t"].state


def _open(
    cluster: Cluster, clock: VirtualClock, partitions: list[tuple[str, int]]
) -> tuple[TransactionService, int, int]:
    """A coordinator whose id ``t`` has an Ongoing transaction with a record in each partition."""
    service = _service(cluster, clock)
    started = service.init_producer_id("t", TIMEOUT_MS, -1, -1)
    pid, epoch = started.producer_id, started.producer_epoch
    assert service.add_partitions("t", pid, epoch, partitions).error is ErrorCode.none
    for tp in partitions:
        _produce(cluster, tp, pid, epoch)
    return service, pid, epoch


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_marker_that_fails_to_write_keeps_the_transaction_prepared_until_retried(
    commit: bool,
) -> None:
    clock = VirtualClock(start_ms=NOW)
    cluster = _cluster()
    service, pid, epoch = _open(cluster, clock, [ORDERS, AUDIT])
    with _disk_error("orders"):
        ended = service.end_transaction("t", pid, epoch, commit, bump_epoch=True)
        # the producer's EndTxn is answered once the PREPARE record is written
        assert (ended.error, ended.producer_epoch) == (ErrorCode.none, epoch + 1)
        assert _stable(cluster, AUDIT) and not _stable(cluster, ORDERS)
        prepared = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        assert _state(service) is prepared
        # its next transaction waits while the marker is outstanding
        assert service.add_partitions("t", pid, epoch + 1, [ORDERS]).error is (
            ErrorCode.concurrent_transactions
        )
        assert service.init_producer_id("t", TIMEOUT_MS, pid, epoch + 1).error is (
            ErrorCode.concurrent_transactions
        )
        clock.advance(RETRY_WAIT_MS)  # still failing: still prepared
        assert _state(service) is prepared
    clock.advance(RETRY_WAIT_MS)
    assert _stable(cluster, ORDERS)
    assert (_markers_in(cluster, ORDERS), _markers_in(cluster, AUDIT)) == (1, 1)
    completed = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    assert _state(service) is completed
    assert _state(_restarted(cluster, clock)) is completed  # durably
    assert service.add_partitions("t", pid, epoch + 1, [ORDERS]).error is ErrorCode.none


def test_a_restart_while_a_marker_is_outstanding_writes_it() -> None:
    clock = VirtualClock(start_ms=NOW)
    cluster = _cluster()
    service, pid, epoch = _open(cluster, clock, [ORDERS, AUDIT])
    with _disk_error("orders"):
        assert service.end_transaction("t", pid, epoch, True, bump_epoch=True).error is (
            ErrorCode.none
        )
    # kemu restarts before the retry: the log still has the transaction prepared
    restarted = _restarted(cluster, clock)
    assert _stable(cluster, ORDERS)
    assert _markers_in(cluster, ORDERS) == 1
    assert _state(restarted) is TxnState.COMPLETE_COMMIT


def test_a_reload_of_the_state_partition_while_a_marker_is_outstanding_writes_it() -> None:
    clock = VirtualClock(start_ms=NOW)
    cluster = _cluster()
    service, pid, epoch = _open(cluster, clock, [ORDERS, AUDIT])
    with _disk_error("orders"):
        assert service.end_transaction("t", pid, epoch, True, bump_epoch=True).error is (
            ErrorCode.none
        )
        # the coordinator's partition moves while the disk still fails: the load tries again
        assert service.reload_partition(0) == 1
        assert _state(service) is TxnState.PREPARE_COMMIT
    assert service.reload_partition(0) == 1
    assert _stable(cluster, ORDERS)
    # every load writes the markers of a prepared transaction again, as Kafka's does: audit-0's
    # are duplicates, which a partition accepts from a producer with no open transaction there
    assert _markers_in(cluster, ORDERS) == 1
    assert _state(service) is TxnState.COMPLETE_COMMIT


def test_offsets_and_share_acks_wait_for_the_marker_of_their_partition() -> None:
    clock = VirtualClock(start_ms=NOW)
    cluster = _cluster()
    service, pid, epoch = _open(cluster, clock, [ORDERS])
    assert service.add_offsets("t", pid, epoch, "group").error is ErrorCode.none
    assert service.add_share_partitions("t", pid, epoch, [SHARE], [SHARE_STATE]).error is (
        ErrorCode.none
    )
    groups = group_coordinator(service.runtime)
    assert groups.commit_transactional_offsets(
        "group", pid, epoch, [CommitPartition("orders", 0, 5)]
    ) is (ErrorCode.none)
    events: list[str] = []

    def committed() -> int:
        return groups.fetch_offsets("group", [("orders", [0])])[1][0].offset

    def heard(markers: Markers) -> None:
        for topic, index in sorted(markers.partitions):
            marked = _markers_in(cluster, (topic, index))
            events.append(f"{topic}-{index} heard, {marked} marker(s) there, offset {committed()}")

    service.add_marker_listener(heard)
    with _disk_error("__consumer_offsets", "__share_group_state"):
        assert service.end_transaction("t", pid, epoch, True, bump_epoch=True).error is (
            ErrorCode.none
        )
        assert events == ["orders-0 heard, 1 marker(s) there, offset -1"]
        clock.advance(RETRY_WAIT_MS)
    assert events[1:] == []
    clock.advance(RETRY_WAIT_MS)
    # the group coordinator heard first: the offset is committed when the others hear
    assert events[1:] == [
        "__consumer_offsets-0 heard, 1 marker(s) there, offset 5",
        "__share_group_state-0 heard, 1 marker(s) there, offset 5",
    ]
    assert _state(service) is TxnState.COMPLETE_COMMIT
    assert groups.offset_manager.pending.of_producer(pid) == {}


def test_a_completion_record_that_fails_to_write_is_written_again() -> None:
    clock = VirtualClock(start_ms=NOW)
    cluster = _cluster()
    service, pid, epoch = _open(cluster, clock, [ORDERS])
    # the state log fails once the markers are written, before the COMPLETE record
    service.add_marker_listener(lambda markers: TopicFailingLog.failing.add(STATE_LOG))
    assert service.end_transaction("t", pid, epoch, True, bump_epoch=True).error is ErrorCode.none
    assert _stable(cluster, ORDERS)
    assert _state(service) is TxnState.PREPARE_COMMIT
    assert service.add_partitions("t", pid, epoch + 1, [ORDERS]).error is (
        ErrorCode.concurrent_transactions
    )
    TopicFailingLog.failing = set()
    clock.advance(RETRY_WAIT_MS)
    assert _state(service) is TxnState.COMPLETE_COMMIT
    assert _state(_restarted(cluster, clock)) is (TxnState.COMPLETE_COMMIT)
    assert _markers_in(cluster, ORDERS) == 1


def test_an_expired_id_whose_tombstone_fails_to_write_stays_until_written() -> None:
    clock = VirtualClock(start_ms=NOW)
    cluster = _cluster()
    service = _service(cluster, clock)
    assert service.init_producer_id("t", TIMEOUT_MS, -1, -1).error is ErrorCode.none
    with _disk_error(STATE_LOG):
        assert clock.advance(EXPIRATION_MS) == 1  # the expiry's tombstone fails to write
        assert "t" in service.coordinator.transactions  # as the log has it
        # tried again at the next expiration pass, not at once
        assert clock.advance(CLEANUP_INTERVAL_MS - 1) == 0
    assert "t" in _restarted(cluster, clock).coordinator.transactions
    assert clock.advance(1) == 1
    assert "t" not in service.coordinator.transactions
    assert "t" not in _restarted(cluster, clock).coordinator.transactions
