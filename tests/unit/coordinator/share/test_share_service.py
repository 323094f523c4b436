"""ShareCoordinatorService in-process: a Cluster over MemoryLogs (and SegmentLogs for a restart).

What is appended to ``__share_group_state`` is read back through the decoder, and a fresh
service over the same logs replays to exactly the state the first one answered with.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.share.decode import (
    LogRecord,
    ShareStateDecoder,
    batch_records,
    read_data_dir,
)
from kemu.coordinator.share.keys import coordinator_key, parse_kafka_uuid, partition_for
from kemu.coordinator.share.persister import (
    PersistedBatch,
    PersistedState,
    SharePartitionKey,
    SharePersister,
)
from kemu.coordinator.share.records import SHARE_SNAPSHOT, SHARE_UPDATE, decode_record
from kemu.coordinator.share.service import (
    SHARE_PERSISTER,
    SHARE_STATE_TOPIC,
    ShareCoordinatorService,
    share_coordinator,
    share_persister,
)
from kemu.protocol.errors import ErrorCode
from kemu.storage.log import MemoryLog, PartitionLog

NOW = 1_700_000_000_000


def make_cluster(
    log_factory: Callable[[str, int], PartitionLog] | None = None, **static: str
) -> Cluster:
    nodes = {i: BrokerNode(i, "127.0.0.1", 19190 + i) for i in (1, 2, 3)}
    return Cluster(
        cluster_id="share-unit",
        nodes=nodes,
        config=BrokerConfig({"share.coordinator.state.topic.num.partitions": "3", **static}),
        log_factory=log_factory or (lambda topic, index: MemoryLog()),
    )


def service_for(cluster: Cluster) -> ShareCoordinatorService:
    return share_coordinator(Runtime(cluster=cluster, clock_ms=lambda: NOW))


def run(awaitable: object) -> object:
    return asyncio.run(awaitable)  # type: ignore[arg-type]


def state_log(cluster: Cluster) -> list[LogRecord]:
    records = []
    for partition in cluster.topics[SHARE_STATE_TOPIC].partitions:
        for header, batch in partition.log.batches(0, partition.high_watermark):
            for offset, key, value in batch_records(header, batch):
                records.append(LogRecord(partition.index, offset, key, value))
    return records


@pytest.fixture
def cluster() -> Cluster:
    found = make_cluster()
    found.create_topic("orders", 4, 1)
    return found


def key_for(cluster: Cluster, group: str = "g1", partition: int = 0) -> SharePartitionKey:
    return SharePartitionKey(group, cluster.topics["orders"].topic_id, partition)


def test_is_a_share_persister(cluster: Cluster) -> None:
    persister: SharePersister = service_for(cluster)
    assert isinstance(persister, ShareCoordinatorService)
    runtime = Runtime(cluster=cluster)
    assert share_coordinator(runtime) is runtime.services.built(SHARE_PERSISTER)
    assert share_coordinator(runtime) is share_coordinator(runtime)


def test_both_accessors_give_the_same_object_whoever_asks_first(cluster: Cluster) -> None:
    first_persister = Runtime(cluster=cluster)
    persister = share_persister(first_persister)
    assert share_coordinator(first_persister) is persister
    first_coordinator = Runtime(cluster=cluster)
    coordinator = share_coordinator(first_coordinator)
    assert share_persister(first_coordinator) is coordinator


def test_topic_is_created_on_first_use_with_kafka_configs(cluster: Cluster) -> None:
    service = service_for(cluster)
    assert SHARE_STATE_TOPIC not in cluster.topics
    assert run(service.initialize(key_for(cluster), 0, 0)) is ErrorCode.none
    topic = cluster.topics[SHARE_STATE_TOPIC]
    assert topic.is_internal
    assert len(topic.partitions) == 3
    assert topic.replication_factor == 3
    assert topic.config.overrides == {
        "cleanup.policy": "delete",
        "compression.type": "producer",
        "segment.bytes": "104857600",
        "min.insync.replicas": "2",
        "retention.ms": "-1",
    }


def test_writes_land_in_the_right_partition_as_kafka_records(cluster: Cluster) -> None:
    service = service_for(cluster)
    key = key_for(cluster)
    assert run(service.initialize(key, 1, 0)) is ErrorCode.none
    code = run(
        service.write_state(
            key,
            state_epoch=1,
            leader_epoch=0,
            start_offset=0,
            delivery_complete_count=2,
            batches=(PersistedBatch(0, 1, 2, 1), PersistedBatch(2, 4, 0, 1)),
        )
    )
    assert code is ErrorCode.none
    index = partition_for(key, 3)
    assert (
        service.partition_for(key) == index == service.coordinator_partition(coordinator_key(key))
    )
    records = state_log(cluster)
    assert {r.partition for r in records} == {index}
    decoded = [decode_record(r.key, r.value) for r in records if r.key is not None]
    assert [k.record_type for k, _ in decoded] == [SHARE_SNAPSHOT, SHARE_UPDATE]
    assert [r.offset for r in records] == [0, 1]


def test_read_state_and_summary(cluster: Cluster) -> None:
    service = service_for(cluster)
    key = key_for(cluster)
    uninitialized = run(service.read_state(key, 0))
    assert uninitialized.error is ErrorCode.invalid_request  # type: ignore[attr-defined]
    summary = run(service.read_summary(key, -1))
    assert summary.state == PersistedState(0, -1, 0, -1)  # type: ignore[attr-defined]
    run(service.initialize(key, 2, 10))
    run(
        service.write_state(
            key,
            state_epoch=2,
            leader_epoch=0,
            start_offset=12,
            delivery_complete_count=1,
            batches=(PersistedBatch(12, 12, 2, 1), PersistedBatch(13, 15, 0, 2)),
        )
    )
    read = run(service.read_state(key, 0))
    assert read.error is ErrorCode.none  # type: ignore[attr-defined]
    assert read.state == PersistedState(  # type: ignore[attr-defined]
        2, 12, 0, 1, (PersistedBatch(12, 12, 2, 1), PersistedBatch(13, 15, 0, 2))
    )
    summary = run(service.read_summary(key, 0))
    assert summary.state == PersistedState(2, 12, 0, 1)  # type: ignore[attr-defined]


def test_a_new_leader_epoch_fences_the_old_leader(cluster: Cluster) -> None:
    service = service_for(cluster)
    key = key_for(cluster)
    run(service.initialize(key, 0, 0))
    assert run(service.read_state(key, 3)).error is ErrorCode.none  # type: ignore[attr-defined]
    stale = run(
        service.write_state(
            key,
            state_epoch=0,
            leader_epoch=2,
            start_offset=0,
            delivery_complete_count=0,
            batches=(),
        )
    )
    assert stale is ErrorCode.fenced_leader_epoch


def test_delete_state(cluster: Cluster) -> None:
    service = service_for(cluster)
    key = key_for(cluster)
    run(service.initialize(key, 0, 0))
    assert run(service.delete_state(key)) is ErrorCode.none
    assert run(service.read_state(key, 0)).error is ErrorCode.invalid_request  # type: ignore[attr-defined]
    last = state_log(cluster)[-1]
    assert last.value is None  # a tombstone


def test_unknown_topic(cluster: Cluster) -> None:
    service = service_for(cluster)
    missing = SharePartitionKey("g1", uuid.uuid4(), 0)
    assert run(service.initialize(missing, 0, 0)) is ErrorCode.unknown_topic_or_partition
    beyond = SharePartitionKey("g1", cluster.topics["orders"].topic_id, 4)
    assert run(service.initialize(beyond, 0, 0)) is ErrorCode.unknown_topic_or_partition


def test_snapshot_cadence_follows_the_config() -> None:
    cluster = make_cluster(**{"share.coordinator.snapshot.update.records.per.snapshot": "1"})
    cluster.create_topic("orders", 1, 1)
    service = service_for(cluster)
    key = key_for(cluster)
    written = list(service.initialize_sync(key, 0, 0).records)
    for offset in range(4):
        written += service.write_sync(
            key,
            state_epoch=0,
            leader_epoch=0,
            start_offset=0,
            delivery_complete_count=offset + 1,
            batches=(PersistedBatch(offset, offset, 2, 1),),
        ).records
    types = [record.key.record_type for record in written]
    assert types == [SHARE_SNAPSHOT, SHARE_UPDATE, SHARE_SNAPSHOT, SHARE_UPDATE, SHARE_SNAPSHOT]
    # what the latest snapshot covers is pruned (test_share_state_pruning.py): once the prune
    # timer has run, the log starts at the key's latest snapshot
    service.prune_all()
    partition = cluster.topics[SHARE_STATE_TOPIC].partitions[service.partition_for(key)]
    assert partition.log_start_offset == 4
    assert [r.offset for r in state_log(cluster) if r.key] == [4]


def _exercise(
    service: ShareCoordinatorService, cluster: Cluster
) -> dict[SharePartitionKey, object]:
    """A mix of operations over several keys; returns what each key reads back."""
    keys = [key_for(cluster, group, partition) for group in ("a", "b", "c") for partition in (0, 3)]
    for number, key in enumerate(keys):
        run(service.initialize(key, number, 0))
        for step in range(3):
            run(
                service.write_state(
                    key,
                    state_epoch=number,
                    leader_epoch=0,
                    start_offset=step * 2,
                    delivery_complete_count=step,
                    batches=(
                        PersistedBatch(step * 2, step * 2 + 1, 2, 1),
                        PersistedBatch(step * 2 + 2, step * 2 + 5, 0, step + 1),
                    ),
                )
            )
    run(service.read_state(keys[1], 4))  # a leader epoch bump
    run(service.delete_state(keys[2]))
    return {key: run(service.read_state(key, 4 if key == keys[1] else 0)) for key in keys}


def test_a_new_service_replays_the_log_to_the_same_state(cluster: Cluster) -> None:
    before = _exercise(service_for(cluster), cluster)
    replayed = service_for(cluster)  # a new runtime over the same logs, as after a restart
    after = {key: run(replayed.read_state(key, 4 if i == 1 else 0)) for i, key in enumerate(before)}
    assert after == before


def test_restart_over_segment_logs_and_decode_the_data_dir(tmp_path: Path) -> None:
    from kemu.storage.segments import SegmentLog

    def segment_logs(topic: str, index: int) -> PartitionLog:
        return SegmentLog(tmp_path / f"{topic}-{index}")

    first = make_cluster(segment_logs)
    first.data_dir = tmp_path
    first.create_topic("orders", 4, 1)
    before = _exercise(service_for(first), first)
    for partition in first.all_partitions():
        partition.log.close()

    second = make_cluster(segment_logs)
    second.data_dir = tmp_path
    second.load_metadata()
    after = {
        key: run(service_for(second).read_state(key, 4 if i == 1 else 0))
        for i, key in enumerate(before)
    }
    assert after == before

    decoder = ShareStateDecoder()
    for record in read_data_dir(tmp_path):
        assert "error" not in decoder.add(record)
    decoded = {
        SharePartitionKey(s["groupId"], parse_kafka_uuid(s["topicId"]), s["partition"]): s
        for s in decoder.states()
    }
    for key, read in before.items():
        if read.error is not ErrorCode.none:  # type: ignore[attr-defined]
            assert key not in decoded
            continue
        state = read.state  # type: ignore[attr-defined]
        assert decoded[key]["startOffset"] == state.start_offset
        assert decoded[key]["stateEpoch"] == state.state_epoch
        assert len(decoded[key]["stateBatches"]) == len(state.batches)
    for partition in second.all_partitions():
        partition.log.close()


def test_delete_topic_state_tombstones_its_keys(cluster: Cluster) -> None:
    service = service_for(cluster)
    other = cluster.create_topic("other", 1, 1)
    keep = SharePartitionKey("g1", other.topic_id, 0)
    run(service.initialize(keep, 0, 0))
    for partition in range(3):
        run(service.initialize(key_for(cluster, "g1", partition), 0, 0))
    cluster.delete_topic("orders")
    assert service.delete_topic_state(cluster.topics["other"].topic_id) == 1
    topic_id = next(k.topic_id for s in service.shards.values() for k, _ in s if k != keep)
    assert service.delete_topic_state(topic_id) == 3
    assert [k for s in service.shards.values() for k, _ in s] == []


def test_coordinator_node_is_the_partition_leader(cluster: Cluster) -> None:
    service = service_for(cluster)
    key = key_for(cluster)
    text = coordinator_key(key)
    node = service.coordinator_node(text)
    leader = cluster.topics[SHARE_STATE_TOPIC].partitions[service.partition_for(key)].leader_id
    assert node is not None and node.node_id == leader
    assert service.is_coordinator(leader, key)
    assert not service.is_coordinator(leader % 3 + 1, key)


def test_a_stand_in_persister_is_refused_loudly(cluster: Cluster) -> None:
    from kemu.coordinator.share.persister import InMemorySharePersister

    runtime = Runtime(cluster=cluster)
    stand_in = InMemorySharePersister()
    runtime.services.provide(SHARE_PERSISTER, stand_in)
    assert share_persister(runtime) is stand_in  # the group coordinator may persist through it
    with pytest.raises(RuntimeError, match="not the share coordinator"):
        share_coordinator(runtime)
