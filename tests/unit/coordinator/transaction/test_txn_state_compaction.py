"""``__transaction_state`` is compacted as Kafka's is (``cleanup.policy=compact``): once its
segments roll, the cleaner keeps each transactional id's latest record (and a tombstone for an
expired id until ``delete.retention.ms``), and a restart over the cleaned segment files loads the
same transactions as before, ongoing and prepared ones included, from far fewer records.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from kemu.broker.housekeeping import clean_logs
from kemu.cluster.clock import VirtualClock
from kemu.cluster.context import Runtime
from kemu.cluster.model import TRANSACTION_STATE_TOPIC, BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.transaction.coordinator import Outcome, TransactionCoordinator, TxnState
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.coordinator.transaction.state_log import replay_state_log
from kemu.protocol.errors import ErrorCode
from kemu.storage.log import PartitionLog
from kemu.storage.segments import SegmentLog

NOW = 1_700_000_000_000
TP = ("orders", 0)


def make_cluster(data_dir: Path) -> Cluster:
    def segment_logs(topic: str, index: int) -> PartitionLog:
        return SegmentLog(data_dir / f"{topic}-{index}")

    cluster = Cluster(
        cluster_id="txn-compaction-unit",
        nodes={1: BrokerNode(1, "127.0.0.1", 19392)},
        config=BrokerConfig(
            {
                "transaction.state.log.num.partitions": "1",
                "transaction.state.log.replication.factor": "1",
                "transaction.state.log.segment.bytes": "2048",
                "transactional.id.expiration.ms": "600000",
            }
        ),
        log_factory=segment_logs,
    )
    cluster.data_dir = data_dir
    return cluster


def loaded(runtime: Runtime) -> TransactionCoordinator:
    """The log replayed into a fresh coordinator, as a start-up does before it finishes the
    prepared transactions."""
    fresh = TransactionCoordinator(lambda: -1, max_timeout_ms=900_000)
    for transactional_id, value in replay_state_log(
        runtime.cluster.topics.get(TRANSACTION_STATE_TOPIC)
    ):
        fresh.replay(transactional_id, value)
    return fresh


def record_count(runtime: Runtime) -> int:
    partition = runtime.cluster.topics[TRANSACTION_STATE_TOPIC].partitions[0]
    return sum(
        header.record_count
        for header, _ in partition.log.batches(partition.log_start_offset, partition.high_watermark)
    )


def test_a_restart_after_compaction_loads_the_same_transactions(tmp_path: Path) -> None:
    cluster = make_cluster(tmp_path)
    cluster.create_topic("orders", 1, 1)
    clock = VirtualClock(start_ms=NOW)
    runtime = Runtime(cluster=cluster, clock=clock)
    service = transaction_coordinator(runtime)
    coordinator = service.coordinator

    def write(outcome: Outcome) -> Outcome:
        assert outcome.error is ErrorCode.none
        assert service._write(outcome.records, runtime.clock_ms()) is ErrorCode.none
        return outcome

    producers = {}
    for name in ("done", "ongoing", "prepared", "aborted", "expired"):
        started = write(coordinator.init_producer_id(name, 60_000, now_ms=runtime.clock_ms()))
        producers[name] = (started.producer_id, started.producer_epoch)
    for _ in range(30):  # many committed transactions: a long history of each id
        for name in ("done", "ongoing", "prepared", "aborted"):
            producer_id, epoch = producers[name]
            clock.advance(10)
            write(coordinator.add_partitions(name, producer_id, epoch, [TP], runtime.clock_ms()))
            commit = name != "aborted"
            write(coordinator.end_transaction(name, producer_id, epoch, commit, clock.now_ms()))
            write(Outcome(ErrorCode.none, records=coordinator.complete(name, clock.now_ms())))
    ongoing_id, ongoing_epoch = producers["ongoing"]
    write(coordinator.add_partitions("ongoing", ongoing_id, ongoing_epoch, [TP], clock.now_ms()))
    prepared_id, prepared_epoch = producers["prepared"]
    write(coordinator.add_partitions("prepared", prepared_id, prepared_epoch, [TP], clock.now_ms()))
    now = clock.now_ms()
    write(coordinator.end_transaction("prepared", prepared_id, prepared_epoch, True, now))
    # "expired" was never used since its InitProducerId: its id expires, a tombstone is written
    clock.advance(600_000 - 30 * 40 + 1)
    tombstones = [record for record in coordinator.expire_ids(clock.now_ms()) if record[1] is None]
    assert [transactional_id for transactional_id, _ in tombstones] == ["expired"]
    write(Outcome(ErrorCode.none, records=tombstones))
    # more of the live ids' history after the tombstone, so the segment holding it rolls
    for _ in range(10):
        producer_id, epoch = producers["done"]
        clock.advance(10)
        write(coordinator.add_partitions("done", producer_id, epoch, [TP], clock.now_ms()))
        write(coordinator.end_transaction("done", producer_id, epoch, True, clock.now_ms()))
        write(Outcome(ErrorCode.none, records=coordinator.complete("done", clock.now_ms())))

    before = loaded(runtime).transactions
    assert before == coordinator.transactions
    assert before["ongoing"].state is TxnState.ONGOING
    assert before["prepared"].state is TxnState.PREPARE_COMMIT
    assert "expired" not in before
    partition = cluster.topics[TRANSACTION_STATE_TOPIC].partitions[0]
    records_before = record_count(runtime)
    assert isinstance(partition.log, SegmentLog)
    assert len(partition.log.segment_base_offsets) > 3  # small segments: they rolled

    cleaned = asyncio.run(clean_logs(runtime))
    assert len(cleaned) == 1  # the cleaner took __transaction_state (the only compacted topic)
    records_after = record_count(runtime)
    assert records_after < records_before / 3
    assert loaded(runtime).transactions == before
    for each in cluster.all_partitions():
        each.log.close()

    restarted = make_cluster(tmp_path)
    restarted.load_metadata()
    again = Runtime(cluster=restarted, clock=VirtualClock(start_ms=clock.now_ms()))
    assert record_count(again) == records_after
    # the restart loads the same transactions, then finishes the prepared one (its markers and
    # COMPLETE_COMMIT record) as after any restart; the ongoing one goes on
    restarted_transactions = transaction_coordinator(again).coordinator.transactions
    assert {k: v for k, v in restarted_transactions.items() if k != "prepared"} == {
        k: v for k, v in before.items() if k != "prepared"
    }
    finished = restarted_transactions["prepared"]
    assert finished.state is TxnState.COMPLETE_COMMIT
    assert (finished.producer_id, finished.producer_epoch) == (prepared_id, prepared_epoch)
    assert restarted_transactions["ongoing"].state is TxnState.ONGOING
    for each in restarted.all_partitions():
        each.log.close()
