"""The share coordinator's snapshot-and-prune of ``__share_group_state`` (Kafka's
ShareCoordinatorShard snapshots every ``share.coordinator.snapshot.update.records.per.snapshot``
updates and, every ``share.coordinator.state.topic.prune.interval.ms``, deletes the records
below ``lastRedundantOffset``, the oldest latest snapshot of a live key): the log start moves,
never past a record or a KIP-1289 marker that a key's latest snapshot does not cover, and a
restart over the pruned segment files restores exactly the state — TX_PENDING records
included, and those a marker resolved. Most tests run the service without a timer and prune
with ``prune_all`` where the timer would have fired.
"""

from __future__ import annotations

from pathlib import Path

from kemu.cluster.clock import VirtualClock
from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.share.decode import ShareStateDecoder, read_data_dir
from kemu.coordinator.share.persister import PersistedBatch, PersistedState, SharePartitionKey
from kemu.coordinator.share.service import (
    PRUNE_INTERVAL,
    SHARE_STATE_TOPIC,
    ShareCoordinatorService,
)
from kemu.protocol.errors import ErrorCode
from kemu.storage.log import PartitionLog
from kemu.storage.segments import SegmentLog

NOW = 1_700_000_000_000
PER_SNAPSHOT = 5
ACKNOWLEDGED, TX_PENDING = 2, 5
ACCEPT = 1


def make_cluster(data_dir: Path, **configs: str) -> Cluster:
    def segment_logs(topic: str, index: int) -> PartitionLog:
        return SegmentLog(data_dir / f"{topic}-{index}")

    cluster = Cluster(
        cluster_id="prune-unit",
        nodes={1: BrokerNode(1, "127.0.0.1", 19390)},
        config=BrokerConfig(
            {
                "share.coordinator.state.topic.num.partitions": "1",
                "share.coordinator.snapshot.update.records.per.snapshot": str(PER_SNAPSHOT),
                **configs,
            }
        ),
        log_factory=segment_logs,
    )
    cluster.data_dir = data_dir
    return cluster


def staged(first: int, last: int, pid: int) -> PersistedBatch:
    return PersistedBatch(first, last, TX_PENDING, 1, pid, 3, ACCEPT)


def write(
    service: ShareCoordinatorService, key: SharePartitionKey, start: int, *batches: PersistedBatch
) -> None:
    result = service.write_sync(
        key,
        state_epoch=0,
        leader_epoch=0,
        start_offset=start,
        delivery_complete_count=0,
        batches=batches,
    )
    assert result.error is ErrorCode.none


def states(service: ShareCoordinatorService, keys: list[SharePartitionKey]) -> list[object]:
    found = []
    for key in keys:
        state = service.read_sync(key, 0).state
        assert isinstance(state, PersistedState)
        found.append((state.start_offset, state.delivery_complete_count, state.batches))
    return found


def test_snapshots_prune_the_state_log_and_a_restart_restores_the_exact_state(
    tmp_path: Path,
) -> None:
    cluster = make_cluster(tmp_path)
    topic = cluster.create_topic("orders", 3, 1)
    service = ShareCoordinatorService(Runtime(cluster=cluster, clock_ms=lambda: NOW))
    hot, committed, pending = (SharePartitionKey("g", topic.topic_id, p) for p in range(3))
    keys = [hot, committed, pending]
    for key in keys:
        assert service.initialize_sync(key, 0, 0).error is ErrorCode.none
    state_partition = cluster.topics[SHARE_STATE_TOPIC].partitions[0]

    # staged acknowledgements of two transactions (producers 7 and 8)
    write(service, committed, 0, staged(0, 9, 7))
    write(service, pending, 0, staged(0, 4, 8))
    # many updates of one key: snapshots, but the other keys' latest snapshots are their
    # initial ones, so nothing below them can go
    for step in range(4 * PER_SNAPSHOT):
        write(service, hot, step, PersistedBatch(step, step, ACKNOWLEDGED, 1))
    first_initialize = 1  # offset 0..2 are the three initial snapshots
    service.prune_all()
    assert state_partition.log_start_offset <= first_initialize

    # producer 7 commits: the marker resolves the staged records of ``committed``
    state_partition.write_marker(7, 4, True, now_ms=NOW)
    marker_offset = state_partition.high_watermark - 1
    # every key is written on until each has a snapshot after the marker
    for step in range(PER_SNAPSHOT + 1):
        write(service, committed, 10, PersistedBatch(10 + step, 10 + step, ACKNOWLEDGED, 1))
        write(service, pending, 0, PersistedBatch(5 + step, 5 + step, ACKNOWLEDGED, 1))
        write(service, hot, 100 + step, PersistedBatch(100 + step, 100 + step, ACKNOWLEDGED, 1))
    service.prune_all()
    pruned_to = state_partition.log_start_offset
    assert pruned_to > marker_offset  # the marker went, once every snapshot covered it
    assert pruned_to == service.redundant_below(0)
    batches = list(state_partition.log.batches(0, state_partition.high_watermark))
    assert batches and batches[0][0].base_offset >= pruned_to

    before = states(service, keys)
    # the committed key's staged records were resolved by the (now pruned) marker
    assert [b.delivery_state for b in before[1][2]] == [ACKNOWLEDGED]  # type: ignore[index]
    # the other transaction is still open: its records are TX_PENDING in the latest snapshot
    assert before[2][2][0].delivery_state == TX_PENDING  # type: ignore[index]

    for partition in cluster.all_partitions():
        partition.log.close()
    restarted = make_cluster(tmp_path)
    restarted.load_metadata()
    reopened = restarted.topics[SHARE_STATE_TOPIC].partitions[0]
    assert reopened.log_start_offset == pruned_to
    service = ShareCoordinatorService(Runtime(cluster=restarted, clock_ms=lambda: NOW))
    assert states(service, keys) == before

    # producer 8 aborts after the restart: its TX_PENDING records become AVAILABLE again
    reopened.write_marker(8, 4, False, now_ms=NOW)
    start, _, after_abort = states(service, [pending])[0]  # type: ignore[misc]
    assert start == 0
    assert after_abort[0].first_offset == 0 and after_abort[0].delivery_state == 0
    for partition in restarted.all_partitions():
        partition.log.close()


def test_a_deleted_key_no_longer_holds_the_log_back(tmp_path: Path) -> None:
    cluster = make_cluster(tmp_path)
    topic = cluster.create_topic("orders", 2, 1)
    service = ShareCoordinatorService(Runtime(cluster=cluster, clock_ms=lambda: NOW))
    live = SharePartitionKey("g", topic.topic_id, 0)
    gone = SharePartitionKey("h", topic.topic_id, 1)
    for key in (live, gone):
        assert service.initialize_sync(key, 0, 0).error is ErrorCode.none
    for step in range(2 * PER_SNAPSHOT + 1):
        write(service, live, step, PersistedBatch(step, step, ACKNOWLEDGED, 1))
    state_partition = cluster.topics[SHARE_STATE_TOPIC].partitions[0]
    service.prune_all()
    assert state_partition.log_start_offset <= 1  # held by ``gone``'s initial snapshot
    assert service.delete_sync(gone).error is ErrorCode.none
    for step in range(PER_SNAPSHOT + 1):
        write(service, live, 50 + step, PersistedBatch(50 + step, 50 + step, ACKNOWLEDGED, 1))
    service.prune_all()
    assert state_partition.log_start_offset > 1
    # what lingers in the segment files below the log start is not read back: the deleted key
    # stays deleted for ``kemu decode-share-state --data-dir`` too
    state_partition.log.flush()
    decoder = ShareStateDecoder()
    for record in read_data_dir(tmp_path):
        assert "error" not in decoder.add(record)
    assert [(s["groupId"], s["partition"]) for s in decoder.states()] == [("g", 0)]
    for partition in cluster.all_partitions():
        partition.log.close()


def test_the_log_start_moves_only_when_the_prune_timer_fires(tmp_path: Path) -> None:
    """As Kafka's ``write-state-record-prune`` job: a snapshot that makes records redundant
    moves nothing until the interval has passed since the service started (or last pruned)."""
    interval = 60_000
    cluster = make_cluster(tmp_path, **{PRUNE_INTERVAL: str(interval)})
    topic = cluster.create_topic("orders", 1, 1)
    clock = VirtualClock(start_ms=NOW)
    service = ShareCoordinatorService(Runtime(cluster=cluster, clock=clock))
    key = SharePartitionKey("g", topic.topic_id, 0)
    assert service.initialize_sync(key, 0, 0).error is ErrorCode.none
    for step in range(2 * PER_SNAPSHOT + 1):
        write(service, key, step, PersistedBatch(step, step, ACKNOWLEDGED, 1))
    state_partition = cluster.topics[SHARE_STATE_TOPIC].partitions[0]
    redundant = service.redundant_below(0)
    assert redundant > 0  # the key's latest snapshot is above its first records
    assert state_partition.log_start_offset == 0
    clock.advance(interval - 1)
    assert state_partition.log_start_offset == 0  # not yet due
    clock.advance(1)
    assert state_partition.log_start_offset == redundant
    # the timer re-armed: the next snapshot's redundant records go one interval later
    for step in range(PER_SNAPSHOT + 1):
        write(service, key, 50 + step, PersistedBatch(50 + step, 50 + step, ACKNOWLEDGED, 1))
    assert service.redundant_below(0) > redundant == state_partition.log_start_offset
    clock.advance(interval)
    assert state_partition.log_start_offset == service.redundant_below(0)
    service.close()
    assert clock.pending() == 0
    for partition in cluster.all_partitions():
        partition.log.close()
