"""TxnOffsetCommit offsets, as Kafka 4.4.0's ``OffsetMetadataManager`` keeps them: written to the
group's ``__consumer_offsets`` partition at once in a transactional batch of the producer, pending
by producer id until that partition's marker commits them (an offset committed later in the log
outside the transaction wins) or drops them; a tombstone drops them too; a load replays records
and markers from the log; OffsetFetch with ``require_stable`` answers the pending ones unstable.
"""

from __future__ import annotations

from kemu.coordinator.group.hashing import partition_for
from kemu.coordinator.group.offset_manager import CommitPartition
from kemu.coordinator.group.offsets_log import TOPIC as OFFSETS_TOPIC
from kemu.coordinator.group.service import GroupCoordinatorService, group_coordinator
from kemu.protocol.errors import ErrorCode
from tests.unit.coordinator.group.test_timers_records_before_state import NOW, VirtualBroker

PRODUCER, EPOCH = 7, 0
WANTED = [("t", [0])]


def broker_with_topic() -> VirtualBroker:
    broker = VirtualBroker(**{"offsets.topic.num.partitions": "5"})
    broker.cluster.create_topic("t", 2, 1)
    return broker


def stage(service: GroupCoordinatorService, group_id: str, offset: int, partition: int = 0) -> None:
    staged = [CommitPartition("t", partition, offset)]
    if service.registry.get(group_id) is None:
        service.transactional_commit_group(group_id)  # as the TxnOffsetCommit handler does
    assert service.commit_transactional_offsets(group_id, PRODUCER, EPOCH, staged) is (
        ErrorCode.none
    )


def commit(service: GroupCoordinatorService, group_id: str, offset: int) -> None:
    done = service.commit_offsets(
        group_id, "", None, -1, [CommitPartition("t", 0, offset)], api_version=9
    )
    assert done.error is ErrorCode.none


def fetched(service: GroupCoordinatorService, group_id: str, *, stable: bool = False) -> int | str:
    [entry] = service.fetch_offsets(group_id, WANTED, require_stable=stable)[1]
    return "unstable" if entry.unstable else entry.offset


def write_marker(broker: VirtualBroker, group_id: str, commit: bool) -> int:
    """The transaction's marker in the group's partition, as the transaction coordinator writes
    it; the partition's index."""
    topic = broker.cluster.topics[OFFSETS_TOPIC]
    index = partition_for(group_id, len(topic.partitions))
    # transaction version 0: the producer keeps its epoch from one transaction to the next
    topic.partitions[index].write_marker(PRODUCER, EPOCH, commit, transaction_version=0, now_ms=NOW)
    return index


def test_the_offsets_are_written_in_the_producers_transaction() -> None:
    broker = broker_with_topic()
    service = group_coordinator(broker.runtime)
    stage(service, "g", 5)
    topic = broker.cluster.topics[OFFSETS_TOPIC]
    partition = topic.partitions[partition_for("g", len(topic.partitions))]
    [(header, _)] = list(partition.log.batches(0, partition.high_watermark))
    assert header.is_transactional and (header.producer_id, header.producer_epoch) == (7, 0)
    assert partition.last_stable_offset == 0  # the transaction holds it until its marker
    assert (fetched(service, "g"), fetched(service, "g", stable=True)) == (-1, "unstable")


def test_a_commit_marker_commits_them_and_an_abort_drops_them() -> None:
    broker = broker_with_topic()
    service = group_coordinator(broker.runtime)
    stage(service, "g", 5)
    service.end_transaction(write_marker(broker, "g", commit=True), PRODUCER, commit=True)
    assert (fetched(service, "g"), fetched(service, "g", stable=True)) == (5, 5)
    stage(service, "g", 9)
    service.end_transaction(write_marker(broker, "g", commit=False), PRODUCER, commit=False)
    assert (fetched(service, "g"), fetched(service, "g", stable=True)) == (5, 5)


def test_an_offset_committed_after_the_transactions_record_stays() -> None:
    """Kafka keeps the offset with the larger record offset when a transaction commits."""
    broker = broker_with_topic()
    service = group_coordinator(broker.runtime)
    commit(service, "before", 1)
    stage(service, "before", 5)  # written after the plain commit: replaces it
    stage(service, "after", 5)
    commit(service, "after", 8)  # written after the transaction's record: stays
    for group_id in ("before", "after"):
        service.end_transaction(write_marker(broker, group_id, commit=True), PRODUCER, commit=True)
    assert (fetched(service, "before"), fetched(service, "after")) == (5, 8)


def test_a_marker_ends_only_the_offsets_of_its_partitions_groups() -> None:
    broker = broker_with_topic()
    service = group_coordinator(broker.runtime)
    count = 5  # offsets.topic.num.partitions
    first, other = (
        "g",
        next(
            g
            for g in (f"g{n}" for n in range(50))
            if partition_for(g, count) != partition_for("g", count)
        ),
    )
    stage(service, first, 5)
    stage(service, other, 6)
    service.end_transaction(write_marker(broker, first, commit=True), PRODUCER, commit=True)
    assert (fetched(service, first), fetched(service, other, stable=True)) == (5, "unstable")


def test_a_tombstone_drops_the_pending_offsets() -> None:
    """OffsetDelete writes a tombstone for an offset only a transaction holds, as Kafka does."""
    broker = broker_with_topic()
    service = group_coordinator(broker.runtime)
    stage(service, "g", 5)
    deleted = service.delete_offsets("g", WANTED)
    assert deleted.error is ErrorCode.none and deleted.records
    assert fetched(service, "g", stable=True) == -1
    service.end_transaction(write_marker(broker, "g", commit=True), PRODUCER, commit=True)
    assert fetched(service, "g") == -1


def test_deleting_the_group_tombstones_the_pending_offsets_too() -> None:
    broker = broker_with_topic()
    service = group_coordinator(broker.runtime)
    commit(service, "g", 1)
    stage(service, "g", 5, partition=1)
    keys = [
        (key.topic, key.partition)
        for key, _ in service.offset_manager.group_tombstones("g", classic=True)[:-1]
    ]
    assert keys == [("t", 0), ("t", 1)]


def test_a_load_replays_the_transactions_records_and_markers() -> None:
    broker = broker_with_topic()
    service = group_coordinator(broker.runtime)
    stage(service, "committed", 5)
    stage(service, "open", 6)
    write_marker(broker, "committed", commit=True)  # the coordinator had not heard of it
    loaded = GroupCoordinatorService(broker.runtime)
    assert fetched(loaded, "committed", stable=True) == 5
    assert (fetched(loaded, "open"), fetched(loaded, "open", stable=True)) == (-1, "unstable")
    assert set(loaded.offset_manager.pending.of_producer(PRODUCER)) == {"open"}
    loaded.end_transaction(write_marker(broker, "open", commit=True), PRODUCER, commit=True)
    assert fetched(loaded, "open", stable=True) == 6


def test_a_partition_loaded_again_replays_its_pending_offsets() -> None:
    broker = broker_with_topic()
    service = group_coordinator(broker.runtime)
    stage(service, "g", 5)
    count = len(broker.cluster.topics[OFFSETS_TOPIC].partitions)
    service.reload_partition(partition_for("g", count))
    assert fetched(service, "g", stable=True) == "unstable"
    assert set(service.offset_manager.pending.of_producer(PRODUCER)) == {"g"}
