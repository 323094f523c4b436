"""Deleting a share group's share state (``share.deletion``): the ShareGroupStatePartitionMetadata
records DeleteShareGroupOffsets and DeleteGroups write, DeletingTopics across a restart, and a
deleting topic initialized again (sans-IO: the coordinator, ``diff`` and the image builder, as the
service runs them). Against Kafka 4.4.0:
``tests/integration/share/test_share_offsets_deletion_records_kafka.py``."""

from __future__ import annotations

import uuid

from kemu.coordinator.group.share import records as share_records
from kemu.coordinator.group.share.deletion import deleting_all, offsets_deleted, offsets_deleting
from kemu.coordinator.group.share.records import (
    GROUP_METADATA,
    STATE_PARTITIONS,
    TARGET_METADATA,
    ShareStatePartitionsValue,
    TopicPartitionsInfo,
)
from tests.unit.coordinator.group.share.test_share_state_partitions_records import (
    GROUP,
    NOW_MS,
    TOPIC,
    Log,
    alter,
    shown,
    state,
)

OTHER = uuid.UUID(int=8)


def deleting(*topic_ids: uuid.UUID) -> ShareStatePartitionsValue:
    return ShareStatePartitionsValue(deleting=tuple((t, "t") for t in topic_ids))


def rewritten(log: Log) -> list[share_records.Record]:
    """The service's forced write: the record as it is, when ``diff`` writes none."""
    group = log.coordinator.describe(GROUP)
    new = share_records.image_of(group, lambda topic_id: "t")
    return share_records.state_partitions_rewritten(GROUP, log.log.images.get(GROUP), new)


def write_forced(log: Log) -> list[share_records.Record]:
    forced = rewritten(log)
    for key, value in forced:
        log.log.apply(key, value)
    return forced + log.write()


def test_deleting_offsets_moves_the_topic_to_deleting_then_drops_it() -> None:
    log = Log()
    alter(log, 0, 1)
    group = log.coordinator.describe(GROUP)
    assert offsets_deleting(group, {TOPIC: 2}) == {TOPIC: (0, 1)}
    assert shown(write_forced(log)) == [(STATE_PARTITIONS, deleting(TOPIC))]
    offsets_deleted(log.coordinator.describe(GROUP), {TOPIC})
    assert shown(write_forced(log)) == [(STATE_PARTITIONS, ShareStatePartitionsValue())]
    # asked again: nothing to delete, the record written as it is
    assert offsets_deleting(log.coordinator.describe(GROUP), {TOPIC: 2}) == {}
    assert shown(write_forced(log)) == [(STATE_PARTITIONS, ShareStatePartitionsValue())]


def test_a_topic_whose_deletion_failed_stays_deleting_across_a_restart() -> None:
    """The next deletion naming it asks for every partition the topic has."""
    log = Log()
    alter(log, 1)
    offsets_deleting(log.coordinator.describe(GROUP), {TOPIC: 2})
    log.write()
    again = log.restarted()
    group = again.coordinator.describe(GROUP)
    assert group.deleting == {TOPIC} and group.initialized == {}
    assert offsets_deleting(group, {TOPIC: 2}) == {TOPIC: (0, 1)}
    assert shown(write_forced(again)) == [(STATE_PARTITIONS, deleting(TOPIC))]


def test_a_heartbeat_initializing_a_deleting_topic_takes_it_out_of_deleting() -> None:
    log = Log()
    alter(log, 0, 1)
    offsets_deleting(log.coordinator.describe(GROUP), {TOPIC: 2})
    log.write()
    (initialize,) = log.join()
    assert initialize.partitions == ((TOPIC, 0), (TOPIC, 1))
    assert log.coordinator.describe(GROUP).deleting == set()
    assert log.write()[-1] == (
        share_records.ShareRecordKey(STATE_PARTITIONS, GROUP),
        state(initializing=(0, 1)),
    )


def test_altering_a_deleting_topic_takes_it_out_of_deleting() -> None:
    log = Log()
    alter(log, 0)
    offsets_deleting(log.coordinator.describe(GROUP), {TOPIC: 2})
    log.write()
    before, after = alter(log, 1)
    assert shown(before) == [(STATE_PARTITIONS, state(initializing=(1,)))]
    assert shown(after) == [(STATE_PARTITIONS, state(initialized=(1,)))]


def test_deleting_the_group_moves_everything_to_deleting_then_tombstones() -> None:
    """Initialized, initializing and still-existing deleting topics; Kafka's tombstone order."""
    log = Log()
    alter(log, 0)
    group = log.coordinator.describe(GROUP)
    group.initializing[OTHER] = {3}
    group.deleting.add(uuid.UUID(int=9))  # since deleted: dropped
    counts = {TOPIC: 2, OTHER: 4}
    assert deleting_all(group, counts.get) == {TOPIC: (0,), OTHER: (3,)}
    assert shown(write_forced(log)) == [(STATE_PARTITIONS, deleting(TOPIC, OTHER))]
    log.registry.remove(GROUP)
    assert [(key.record_type, value) for key, value in log.write()] == [
        (TARGET_METADATA, None),
        (STATE_PARTITIONS, None),
        (GROUP_METADATA, None),
    ]
    assert GROUP not in log.log.images


def test_deleting_a_group_retries_its_deleting_topics_whole() -> None:
    log = Log()
    alter(log, 1)
    offsets_deleting(log.coordinator.describe(GROUP), {TOPIC: 2})
    log.write()
    assert deleting_all(log.coordinator.describe(GROUP), {TOPIC: 2}.get) == {TOPIC: (0, 1)}
    assert shown(write_forced(log)) == [(STATE_PARTITIONS, deleting(TOPIC))]


def test_a_group_deletion_writes_the_state_partitions_tombstone_whatever_the_log_holds() -> None:
    """A group with members once and no state-partitions record still gets its tombstone."""
    log = Log(partitions=0)
    log.join()
    log.write()
    assert log.log.images[GROUP].state_partitions is None
    log.registry.remove(GROUP)
    written = [key.record_type for key, value in log.write() if value is None]
    assert written[-2:] == [STATE_PARTITIONS, GROUP_METADATA]


def test_altering_only_out_of_range_partitions_lists_the_topic_initializing() -> None:
    log = Log()
    log.coordinator.empty_group_for_offsets(GROUP, create=True)
    log.coordinator.initializing_again(GROUP, [(TOPIC, 0)], [TOPIC, OTHER], now_ms=NOW_MS)
    empty = TopicPartitionsInfo(OTHER, "t", ())
    assert shown(log.write()) == [
        (
            STATE_PARTITIONS,
            ShareStatePartitionsValue((TopicPartitionsInfo(TOPIC, "t", (0,)), empty)),
        )
    ]
    log.coordinator.partitions_initialized(GROUP, [(TOPIC, 0)])
    assert shown(log.write()) == [
        (
            STATE_PARTITIONS,
            ShareStatePartitionsValue((empty,), (TopicPartitionsInfo(TOPIC, "t", (0,)),)),
        )
    ]


def test_a_topic_initializing_with_no_partition_stays_listed_across_a_restart() -> None:
    """Kafka replays InitializingTopics, so the state-partitions record it writes after a
    restart still lists a topic AlterShareGroupOffsets named with only out-of-range partitions;
    kemu left it out before (``share/test_share_initializing_restart_kafka.py``)."""
    log = Log()
    log.coordinator.empty_group_for_offsets(GROUP, create=True)
    log.coordinator.initializing_again(GROUP, [(TOPIC, 0)], [TOPIC, OTHER], now_ms=NOW_MS)
    log.write()
    log.coordinator.partitions_initialized(GROUP, [(TOPIC, 0)])
    log.write()
    restarted = log.restarted()
    empty = TopicPartitionsInfo(OTHER, "t", ())
    restarted.coordinator.initializing_again(GROUP, [(TOPIC, 1)], [TOPIC], now_ms=NOW_MS)
    assert shown(restarted.write()) == [
        (
            STATE_PARTITIONS,
            ShareStatePartitionsValue(
                (TopicPartitionsInfo(TOPIC, "t", (1,)), empty),
                (TopicPartitionsInfo(TOPIC, "t", (0,)),),
            ),
        )
    ]


def test_a_deleted_topic_is_no_longer_deleting() -> None:
    log = Log()
    alter(log, 0)
    offsets_deleting(log.coordinator.describe(GROUP), {TOPIC: 2})
    log.write()
    assert log.coordinator.groups_with_state_of(TOPIC) == [GROUP]
    assert log.coordinator.topic_deleted(GROUP, TOPIC)
    assert shown(log.write()) == [(STATE_PARTITIONS, ShareStatePartitionsValue())]
    assert [g.deleting for g in log.log.groups(NOW_MS)] == [set()]
