"""Stopping and starting one virtual broker: the cluster model's decisions
(``kemu/cluster/failover.py``) and the coordinators' reload of a moved partition."""

from __future__ import annotations

import pytest

from kemu.cluster.context import Runtime
from kemu.cluster.failover import FailoverError, start_broker, stop_broker
from kemu.cluster.model import NO_LEADER, BrokerNode, Cluster
from kemu.cluster.partition import Partition
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.share.service import ShareCoordinatorService
from kemu.coordinator.transaction.coordinator import TxnState
from kemu.coordinator.transaction.service import TransactionService
from kemu.storage.log import MemoryLog


def cluster() -> Cluster:
    nodes = {i: BrokerNode(i, "127.0.0.1", 19390 + i) for i in (1, 2, 3)}
    made = Cluster(
        cluster_id="failover-unit",
        nodes=nodes,
        config=BrokerConfig({"share.coordinator.state.topic.num.partitions": "3"}),
        log_factory=lambda topic, index: MemoryLog(),
    )
    made.create_topic("rf3", 3, 3, assignments=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    made.create_topic("rf1", 1, 1, assignments=[[2]])
    return made


def test_stop_moves_every_leadership_with_a_new_epoch_and_rf1_goes_offline() -> None:
    model = cluster()
    heard: list[tuple[str, int, int, int]] = []
    model.leader_listeners.append(
        lambda p, previous: heard.append((p.topic_name, p.index, previous, p.leader_id))
    )
    epochs = {(p.topic_name, p.index): p.leader_epoch for p in model.all_partitions()}
    changes = stop_broker(model, 2)
    assert {(c.topic, c.partition, c.leader) for c in changes} == {
        ("rf3", 1, 3),  # the next replica in replica order
        ("rf1", 0, NO_LEADER),  # its only replica is stopped: offline
    }
    assert heard == [(c.topic, c.partition, c.previous, c.leader) for c in changes]
    for p in model.all_partitions():
        moved = (p.topic_name, p.index) in {(c.topic, c.partition) for c in changes}
        assert p.leader_epoch == epochs[(p.topic_name, p.index)] + (1 if moved else 0)
    assert model.in_sync(model.topics["rf3"].partitions[0]) == [1, 3]
    assert model.in_sync(model.topics["rf1"].partitions[0]) == [2]  # offline: its last ISR
    assert model.live_node_ids == [1, 3]
    assert stop_broker(model, 2) == []  # already stopped: nothing more


def test_start_is_a_follower_until_a_preferred_election() -> None:
    model = cluster()
    stop_broker(model, 2)
    back = start_broker(model, 2, elect_preferred=False)
    # only the offline partition, whose last in-sync replica it was, comes back to it
    assert [(c.topic, c.partition, c.leader) for c in back] == [("rf1", 0, 2)]
    assert model.topics["rf3"].partitions[1].leader_id == 3
    stop_broker(model, 2)
    back = start_broker(model, 2, elect_preferred=True)
    assert {(c.topic, c.partition, c.leader) for c in back} == {("rf3", 1, 2), ("rf1", 0, 2)}


def test_the_last_running_broker_cannot_stop() -> None:
    model = cluster()
    stop_broker(model, 1)
    stop_broker(model, 2)
    with pytest.raises(FailoverError):
        stop_broker(model, 3)
    assert model.controller_id == 3  # the controller is a running broker


def test_a_new_topic_is_led_by_a_running_broker() -> None:
    model = cluster()
    stop_broker(model, 1)
    topic = model.create_topic("later", 3, 3)
    assert all(p.leader_id in (2, 3) for p in topic.partitions)


def _state_partition(service: ShareCoordinatorService, index: int) -> Partition:
    return service.topic().partitions[index]


def test_transaction_coordinator_reload_drops_and_replays_its_partition() -> None:
    model = cluster()
    runtime = Runtime(cluster=model)
    service = TransactionService(runtime)
    outcome = service.init_producer_id("t1", 60_000, -1, -1)
    service.add_partitions("t1", outcome.producer_id, outcome.producer_epoch, [("rf3", 0)])
    meta = service.coordinator.transactions["t1"]
    assert meta.state == TxnState.ONGOING
    from kemu.coordinator.group.placement import TRANSACTION, coordinator_partition

    index = coordinator_partition(model, TRANSACTION, "t1").index
    service.coordinator.transactions["t1"].partitions.add(("not-written", 0))  # memory only
    assert service.reload_partition(index) == 1
    loaded = service.coordinator.transactions["t1"]
    assert loaded is not meta  # read again from __transaction_state
    assert loaded.state == TxnState.ONGOING and loaded.partitions == {("rf3", 0)}
    assert loaded.start_ms == meta.start_ms  # the timeout still runs from the start


def test_share_coordinator_reload_replays_its_partition() -> None:
    from kemu.coordinator.share.persister import SharePartitionKey

    model = cluster()
    runtime = Runtime(cluster=model)
    service = ShareCoordinatorService(runtime)
    topic_id = model.topics["rf3"].topic_id
    key = SharePartitionKey("g", topic_id, 0)
    assert service.initialize_sync(key, 0, 5).error.name == "none"
    index = service.partition_for(key)
    before = service.shards[index]
    assert service.reload_partition(index) == 1
    assert service.shards[index] is not before
    assert service.shards[index].states[key].start_offset == 5


async def test_group_coordinator_reload_replays_its_partition() -> None:
    from kemu.coordinator.group.hashing import partition_for
    from kemu.coordinator.group.offset_manager import CommitPartition
    from kemu.coordinator.group.service import GroupCoordinatorService

    model = cluster()
    runtime = Runtime(cluster=model)
    service = GroupCoordinatorService(runtime)
    result = service.commit_offsets(
        "g", "", None, -1, [CommitPartition("rf3", 0, 7)], api_version=8
    )
    assert result.error.name == "none"
    group = service.registry.get("g")
    assert group is not None
    index = partition_for("g", len(model.topics["__consumer_offsets"].partitions))
    service.offsets.drop_group("g")  # in memory only: the log still holds the commit
    service.reload_partition(index)
    assert service.offsets.get("g", "rf3", 0) is not None
    assert service.offsets.get("g", "rf3", 0).offset == 7  # type: ignore[union-attr]
    assert service.registry.get("g") is not group  # loaded again
    service.reload_partition((index + 1) % 50)  # another partition: nothing of g changes
    assert service.offsets.get("g", "rf3", 0) is not None


async def test_a_moved_source_partition_drops_its_share_partitions_state() -> None:
    import asyncio

    from kemu.broker.failover import install_failover
    from kemu.broker.share.manager import share_partitions
    from tests.unit.share_helpers import new_core

    model = cluster()
    runtime = Runtime(cluster=model)
    install_failover(runtime)
    manager = share_partitions(runtime)
    moved = model.topics["rf3"].partitions[1]
    here = manager.actor("g", moved.topic_id, 1)
    elsewhere = manager.actor("g", moved.topic_id, 0)
    here.core, elsewhere.core = new_core(), new_core()
    stop_broker(model, moved.leader_id)  # the listener hears the move
    for _ in range(3):
        await asyncio.sleep(0)  # the reload waits for the operations queued before it
    assert here.core is None  # loaded again from __share_group_state on next use
    assert elsewhere.core is not None
    assert manager.existing("g", moved.topic_id, 1) is here  # TxnShareAcknowledge still finds it
