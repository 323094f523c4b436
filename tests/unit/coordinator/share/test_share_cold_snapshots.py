"""Cold-partition snapshots of ``__share_group_state`` (Kafka 4.4.0's
``ShareCoordinatorShard.snapshotColdPartitions``, run every
``share.coordinator.cold.partition.snapshot.interval.ms``): a key whose latest snapshot is at
least the interval old gets a fresh ShareSnapshot of the same state, so a key written once no
longer holds the state log's prune point; all on a virtual clock.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kemu.cli import _unknown_configs
from kemu.cluster.clock import VirtualClock
from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig, InvalidConfig
from kemu.coordinator.share.persister import PersistedBatch, PersistedState, SharePartitionKey
from kemu.coordinator.share.records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateRecordKey,
    decode_record,
    encode_key,
    encode_value,
)
from kemu.coordinator.share.service import (
    COLD_SNAPSHOT_INTERVAL as COLD_PARTITION_SNAPSHOT_INTERVAL_MS,
)
from kemu.coordinator.share.service import (
    PRUNE_INTERVAL,
    SHARE_STATE_TOPIC,
    ShareCoordinatorService,
)
from kemu.coordinator.share.shard import ShareCoordinatorShard
from kemu.protocol.errors import ErrorCode
from kemu.storage.log import PartitionLog
from kemu.storage.segments import SegmentLog

NOW = 1_700_000_000_000
INTERVAL = 10_000
PER_SNAPSHOT = 5
ACKNOWLEDGED = 2
# Kafka's Uuid(0x0102030405060708, 0x090a0b0c0d0e0f10), as in test_share_records.py
TOPIC = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")


# --- the shard ---------------------------------------------------------------------------------


def snapshot_of(shard: ShareCoordinatorShard, key: SharePartitionKey, **fields: object) -> None:
    values: dict[str, object] = {
        "snapshot_epoch": 0,
        "state_epoch": 0,
        "leader_epoch": 0,
        "start_offset": 0,
        "create_timestamp": NOW,
        "write_timestamp": NOW,
        "state_batches": (PersistedBatch(0, 10, 0, 1),),
        "delivery_complete_count": 11,
    }
    values.update(fields)
    record_key = StateRecordKey(SHARE_SNAPSHOT, key.group_id, key.topic_id, key.partition)
    shard.replay(record_key, ShareSnapshotValue(**values))  # type: ignore[arg-type]


def test_the_cold_snapshot_is_kafkas_record_byte_for_byte() -> None:
    # the state of test_share_records' Kafka-captured snapshot but at snapshot epoch 0, written
    # 123 ms before: the cold snapshot is exactly the record Kafka 4.4.0 serialized there
    shard = ShareCoordinatorShard(lambda _: 4)
    key = SharePartitionKey("g1", TOPIC, 3)
    snapshot_of(
        shard,
        key,
        state_epoch=2,
        leader_epoch=5,
        start_offset=10,
        state_batches=(PersistedBatch(10, 14, 2, 1),),
        delivery_complete_count=7,
    )
    assert not shard.snapshot_cold_partitions(now_ms=NOW + 122, interval_ms=123).records
    result = shard.snapshot_cold_partitions(now_ms=NOW + 123, interval_ms=123)
    [record] = result.records
    kafka_key = "0000000267310102030405060708090a0b0c0d0e0f1000000003"
    kafka_value = (
        "0000000000010000000200000005000000000000000a0000018bcfe568000000018bcfe5687b02"
        "000000000000000a000000000000000e0200010001000400000007"
    )
    assert encode_key(record.key).hex() == kafka_key
    assert encode_value(record.value).hex() == kafka_value  # type: ignore[union-attr]
    assert decode_record(bytes.fromhex(kafka_key), bytes.fromhex(kafka_value)) == (
        record.key,
        record.value,
    )


def test_a_partition_already_cold_snapshotted_is_not_snapshotted_again() -> None:
    # Kafka's testSnapshotColdPartitionsDoesNotPerpetuallySnapshot
    shard = ShareCoordinatorShard(lambda _: 2)
    key = SharePartitionKey("g", TOPIC, 0)
    snapshot_of(shard, key)
    [record] = shard.snapshot_cold_partitions(now_ms=NOW + 12_000, interval_ms=INTERVAL).records
    assert record.value == ShareSnapshotValue(
        1, 0, 0, 0, NOW, NOW + 12_000, (PersistedBatch(0, 10, 0, 1),), 11
    )
    shard.replay(record.key, record.value)
    assert not shard.snapshot_cold_partitions(now_ms=NOW + 24_000, interval_ms=INTERVAL).records


def test_an_update_carries_no_time_and_a_hot_key_keeps_cold_ones_snapshotted() -> None:
    # Kafka's testSnapshotColdPartitionsSnapshotUpdateNotConsidered, then a second key
    shard = ShareCoordinatorShard(lambda _: 2)
    cold, hot = SharePartitionKey("g", TOPIC, 0), SharePartitionKey("g", TOPIC, 1)
    snapshot_of(shard, cold)
    [record] = shard.snapshot_cold_partitions(now_ms=NOW + 12_000, interval_ms=INTERVAL).records
    shard.replay(record.key, record.value)
    update_key = StateRecordKey(SHARE_UPDATE, "g", TOPIC, 0)
    shard.replay(update_key, ShareUpdateValue(0, 0, 0, (PersistedBatch(0, 10, 0, 1),), 11))
    assert shard.states[cold].write_timestamp == NOW + 12_000
    # a fresh (not cold) snapshot of another key: the job runs again, and the cold key, quiet
    # for another interval, gets a newer snapshot; the hot one is too recent
    snapshot_of(shard, hot, create_timestamp=NOW + 20_000, write_timestamp=NOW + 20_000)
    records = shard.snapshot_cold_partitions(now_ms=NOW + 24_000, interval_ms=INTERVAL).records
    assert [(r.key.partition, r.value.snapshot_epoch) for r in records] == [(0, 2)]  # type: ignore[union-attr]


def test_an_empty_shard_writes_nothing() -> None:
    shard = ShareCoordinatorShard(lambda _: 1)
    assert not shard.snapshot_cold_partitions(now_ms=NOW, interval_ms=1).records


# --- the service, on a virtual clock -----------------------------------------------------------


def make_cluster(data_dir: Path, interval: int = INTERVAL) -> Cluster:
    def segment_logs(topic: str, index: int) -> PartitionLog:
        return SegmentLog(data_dir / f"{topic}-{index}")

    cluster = Cluster(
        cluster_id="cold-unit",
        nodes={1: BrokerNode(1, "127.0.0.1", 19391)},
        config=BrokerConfig(
            {
                "share.coordinator.state.topic.num.partitions": "1",
                "share.coordinator.snapshot.update.records.per.snapshot": str(PER_SNAPSHOT),
                COLD_PARTITION_SNAPSHOT_INTERVAL_MS: str(interval),
                # pruned on the same interval, as in the comparison with Kafka (reliability.md)
                PRUNE_INTERVAL: str(interval),
            }
        ),
        log_factory=segment_logs,
    )
    cluster.data_dir = data_dir
    return cluster


def write(service: ShareCoordinatorService, key: SharePartitionKey, step: int) -> None:
    result = service.write_sync(
        key,
        state_epoch=0,
        leader_epoch=0,
        start_offset=step,
        delivery_complete_count=0,
        batches=(PersistedBatch(step, step, ACKNOWLEDGED, 1),),
    )
    assert result.error is ErrorCode.none


def read(service: ShareCoordinatorService, key: SharePartitionKey) -> PersistedState:
    state = service.read_sync(key, 0).state
    assert isinstance(state, PersistedState)
    return state


def test_a_key_written_once_no_longer_pins_the_log_start_and_a_restart_keeps_the_state(
    tmp_path: Path,
) -> None:
    cluster = make_cluster(tmp_path)
    topic = cluster.create_topic("orders", 2, 1)
    clock = VirtualClock(start_ms=NOW)
    service = ShareCoordinatorService(Runtime(cluster=cluster, clock=clock))
    cold, hot = SharePartitionKey("g", topic.topic_id, 0), SharePartitionKey("g", topic.topic_id, 1)
    for key in (cold, hot):
        assert service.initialize_sync(key, 0, 0).error is ErrorCode.none
    write(service, cold, 0)  # written once and never again
    state_partition = cluster.topics[SHARE_STATE_TOPIC].partitions[0]
    for step in range(4 * PER_SNAPSHOT):
        write(service, hot, step)
    assert state_partition.log_start_offset == 0  # the cold key's initial snapshot holds it
    cold_before = read(service, cold)

    clock.advance(INTERVAL - 1)
    assert state_partition.log_start_offset == 0  # not yet due
    end_before = state_partition.high_watermark
    clock.advance(1)  # the timer fires: both keys are quiet since their latest snapshots
    assert state_partition.high_watermark > end_before
    # both got a snapshot (neither was cold-snapshotted yet): the log start is past the cold
    # key's initial snapshot and update
    assert state_partition.log_start_offset == service.redundant_below(0) == end_before
    assert read(service, cold) == cold_before
    for step in range(PER_SNAPSHOT + 1):  # the hot key moves on and snapshots again
        write(service, hot, 100 + step)
    pruned_to = state_partition.log_start_offset
    assert pruned_to >= end_before  # only the cold snapshot and later records are left
    # quiet now (every latest snapshot cold, or younger than the interval): the timers
    # (cold snapshots, pruning) re-armed
    assert clock.pending() == 2
    before = {key: read(service, key) for key in (cold, hot)}
    service.close()
    assert clock.pending() == 0

    for partition in cluster.all_partitions():
        partition.log.close()
    restarted = make_cluster(tmp_path)
    restarted.load_metadata()
    assert restarted.topics[SHARE_STATE_TOPIC].partitions[0].log_start_offset == pruned_to
    again = ShareCoordinatorService(Runtime(cluster=restarted, clock=VirtualClock(start_ms=NOW)))
    assert {key: read(again, key) for key in (cold, hot)} == before
    assert before[cold] == cold_before
    again.close()
    for partition in restarted.all_partitions():
        partition.log.close()


def test_the_timer_re_arms_and_a_quiet_partition_is_written_once(tmp_path: Path) -> None:
    cluster = make_cluster(tmp_path)
    topic = cluster.create_topic("orders", 1, 1)
    clock = VirtualClock(start_ms=NOW)
    service = ShareCoordinatorService(Runtime(cluster=cluster, clock=clock))
    key = SharePartitionKey("g", topic.topic_id, 0)
    assert service.initialize_sync(key, 0, 0).error is ErrorCode.none
    state_partition = cluster.topics[SHARE_STATE_TOPIC].partitions[0]
    assert clock.advance(INTERVAL) == 2  # the cold snapshot, then the prune
    assert state_partition.high_watermark == 2 and state_partition.log_start_offset == 1
    assert clock.advance(5 * INTERVAL) == 10  # every interval, but nothing more to write
    assert state_partition.high_watermark == 2
    service.close()
    for partition in cluster.all_partitions():
        partition.log.close()


def test_no_timer_without_a_loop_or_a_virtual_clock(tmp_path: Path) -> None:
    cluster = make_cluster(tmp_path)
    service = ShareCoordinatorService(Runtime(cluster=cluster, clock_ms=lambda: NOW))
    assert service._cold_timer is None and service._prune_timer is None
    assert service.snapshot_cold_partitions() == 0  # no state topic yet: nothing, none made
    assert SHARE_STATE_TOPIC not in cluster.topics


# --- the config ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [COLD_PARTITION_SNAPSHOT_INTERVAL_MS, PRUNE_INTERVAL])
def test_the_interval_is_kafkas_internal_config_with_its_default_and_floor(name: str) -> None:
    """The cold-snapshot and the prune interval alike (ShareCoordinatorConfig)."""
    assert BrokerConfig().get_int(name) == 300_000
    configured = BrokerConfig.load(None, [f"{name}=60000"])
    assert configured.get_int(name) == 60_000
    # known to kemu serve, so not warned about (nor refused by --strict-config)
    assert _unknown_configs(configured) == []
    for bad, message in (
        ("0", "Value must be at least 1"),
        ("soon", "Not a number of type INT"),
    ):
        with pytest.raises(InvalidConfig) as refused:
            BrokerConfig.load(None, [f"{name}={bad}"])
        assert str(refused.value) == f"Invalid value {bad} for configuration {name}: " + message
