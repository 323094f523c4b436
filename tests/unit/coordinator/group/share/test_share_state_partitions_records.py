"""The ShareGroupStatePartitionMetadata records (type 15) a share group's operations write, and
the group the log rebuilds from them (sans-IO: the coordinator, ``diff`` and the image builder,
as the service runs them). Against Kafka 4.4.0:
``tests/integration/share/test_share_offsets_new_group_kafka.py``,
``test_share_offsets_restart_kafka.py``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kemu.coordinator.group.modern_group import TopicMeta
from kemu.coordinator.group.registry import GroupRegistry
from kemu.coordinator.group.share import records as share_records
from kemu.coordinator.group.share.group import (
    INITIALIZE_RETRY_INTERVAL_MS,
    InitializePartitions,
    MembershipSettings,
    ShareGroup,
    ShareGroupCoordinator,
    ShareHeartbeat,
)
from kemu.coordinator.group.share.records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    STATE_PARTITIONS,
    TARGET_MEMBER,
    TARGET_METADATA,
    Record,
    ShareImageBuilder,
    ShareStatePartitionsValue,
    TopicPartitionsInfo,
)

TOPIC = uuid.UUID(int=7)
GROUP = "g"
NOW_MS = 1_000_000


@dataclass
class Log:
    """A coordinator whose groups are written as the service writes them: what changed since
    the log last saw the group, replayed into the log's images."""

    registry: GroupRegistry = field(default_factory=GroupRegistry)
    log: ShareImageBuilder = field(default_factory=ShareImageBuilder)
    partitions: int = 2  # of topic t

    def __post_init__(self) -> None:
        self.coordinator = ShareGroupCoordinator(
            self.registry, lambda group_id: MembershipSettings(45_000, 5_000, 200)
        )

    def write(self) -> list[Record]:
        found = self.registry.get(GROUP)
        new = (
            share_records.image_of(found, lambda topic_id: "t")
            if isinstance(found, ShareGroup)
            else None
        )
        written = share_records.diff(GROUP, self.log.images.get(GROUP), new)
        for key, value in written:
            self.log.apply(key, value)
        return written

    def join(self, member: str = "m", now_ms: int = NOW_MS) -> list[InitializePartitions]:
        request = ShareHeartbeat(GROUP, member, 0, None, ("t",), "client", "/127.0.0.1")
        result = self.coordinator.heartbeat(
            request, {"t": TopicMeta(TOPIC, self.partitions)}.get, now_ms
        )
        return [e for e in result.effects if isinstance(e, InitializePartitions)]

    def restarted(self, now_ms: int = NOW_MS) -> Log:
        """A coordinator over the groups the log rebuilds at ``now_ms`` (as the service loads
        them: what is being initialized stamped with the load's time)."""
        again = Log(log=self.log, partitions=self.partitions)
        for group in self.log.groups(NOW_MS):
            group.initializing_since_ms = now_ms
            again.registry.put(group)
        return again


def state(
    initializing: tuple[int, ...] = (), initialized: tuple[int, ...] = ()
) -> ShareStatePartitionsValue:
    return ShareStatePartitionsValue(
        tuple(TopicPartitionsInfo(TOPIC, "t", initializing) for _ in initializing[:1]),
        tuple(TopicPartitionsInfo(TOPIC, "t", initialized) for _ in initialized[:1]),
    )


def shown(records: list[Record]) -> list[tuple[int, object]]:
    return [(key.record_type, value) for key, value in records]


def alter(log: Log, *indexes: int, succeeded: bool = True) -> list[list[Record]]:
    """What AlterShareGroupOffsets writes: before the persister, then after it."""
    partitions = [(TOPIC, index) for index in indexes]
    log.coordinator.empty_group_for_offsets(GROUP, create=True)
    log.coordinator.initializing_again(GROUP, partitions, now_ms=NOW_MS)
    before = log.write()
    log.coordinator.partitions_initialized(GROUP, partitions, succeeded=succeeded)
    return [before, log.write()]


def test_altering_a_new_group_writes_only_its_state_partitions() -> None:
    """Initializing, then initialized; no epoch or target-assignment record (a new group's
    epochs are not written)."""
    log = Log()
    assert [shown(written) for written in alter(log, 0)] == [
        [(STATE_PARTITIONS, state(initializing=(0,)))],
        [(STATE_PARTITIONS, state(initialized=(0,)))],
    ]


def test_the_log_rebuilds_that_group_from_its_state_partitions_alone() -> None:
    """Empty at epoch and assignment epoch 1, the partition initialized; its first member joins
    at epoch 2, gets the partition (the topic's only one) and writes what a first join
    writes."""
    log = Log(partitions=1)
    alter(log, 0)
    restarted = log.restarted()
    group = restarted.coordinator.describe(GROUP)
    assert (group.group_epoch, group.assignment_epoch, group.members) == (1, 1, {})
    assert group.initialized == {TOPIC: {0}}
    restarted.join()
    assert restarted.coordinator.describe(GROUP).members["m"].assigned == {(TOPIC, 0)}
    written = shown(restarted.write())
    assert [record_type for record_type, _ in written] == [
        MEMBER_METADATA,
        GROUP_METADATA,
        TARGET_MEMBER,
        TARGET_METADATA,
        CURRENT_ASSIGNMENT,
    ]
    epoch = written[1][1]
    assert isinstance(epoch, share_records.ShareEpochValue) and epoch.epoch == 2


def test_altering_an_initialized_partition_writes_it_in_both_lists_first() -> None:
    """A group whose member initialized both partitions and left: the altered one initializing
    and still initialized, then initialized; nothing else (the epochs stay)."""
    log = Log()
    (initialize,) = log.join()
    log.coordinator.partitions_initialized(GROUP, initialize.partitions)
    log.coordinator.remove_member(GROUP, "m", "left")
    log.write()
    epochs = (log.coordinator.describe(GROUP).group_epoch, log.log.images[GROUP].epoch)
    assert [shown(written) for written in alter(log, 0)] == [
        [(STATE_PARTITIONS, state(initializing=(0,), initialized=(0, 1)))],
        [(STATE_PARTITIONS, state(initialized=(0, 1)))],
    ]
    assert (log.coordinator.describe(GROUP).group_epoch, log.log.images[GROUP].epoch) == epochs


def test_a_failed_initialization_leaves_an_empty_record_that_keeps_the_group() -> None:
    log = Log()
    assert [shown(written) for written in alter(log, 0, succeeded=False)] == [
        [(STATE_PARTITIONS, state(initializing=(0,)))],
        [(STATE_PARTITIONS, ShareStatePartitionsValue())],
    ]
    assert log.write() == []
    assert [g.group_id for g in log.log.groups(NOW_MS)] == [GROUP]


def test_deleting_a_group_known_from_its_state_partitions_leaves_nothing() -> None:
    log = Log()
    alter(log, 0)
    log.registry.remove(GROUP)
    assert [key.record_type for key, _ in log.write()] == [
        TARGET_METADATA,
        STATE_PARTITIONS,
        GROUP_METADATA,
    ]
    assert log.log.groups(NOW_MS) == [] and GROUP not in log.log.images


def test_a_first_join_writes_the_initializing_state_partitions_last() -> None:
    """After the member, the group epoch, its (empty) target, the target epoch and its current
    assignment, as Kafka's heartbeat adds it; the initialization then writes it alone."""
    log = Log()
    (initialize,) = log.join()
    assert [key.record_type for key, _ in log.write()] == [
        MEMBER_METADATA,
        GROUP_METADATA,
        TARGET_MEMBER,
        TARGET_METADATA,
        CURRENT_ASSIGNMENT,
        STATE_PARTITIONS,
    ]
    assert log.log.images[GROUP].state_partitions == state(initializing=(0, 1))
    log.coordinator.partitions_initialized(GROUP, initialize.partitions)
    assert shown(log.write()) == [(STATE_PARTITIONS, state(initialized=(0, 1)))]


def test_partitions_initializing_at_a_restart_are_asked_again_after_the_retry_interval() -> None:
    """Kafka keeps a group's InitializingTopics as it replays their record, stamped with the
    replay's time, and initializes them again (from offset 0: the topic is known) only once
    group.share.initialize.retry.interval.ms has passed; before, kemu dropped them on load and
    the next heartbeat asked again at once."""
    log = Log()
    log.join()  # asked to initialize both partitions; the persister never answers
    log.write()
    restarted = log.restarted(now_ms=NOW_MS)
    assert restarted.coordinator.describe(GROUP).initializing == {TOPIC: {0, 1}}
    assert restarted.join("n", now_ms=NOW_MS + INITIALIZE_RETRY_INTERVAL_MS - 1) == []
    again = restarted.join("o", now_ms=NOW_MS + INITIALIZE_RETRY_INTERVAL_MS)
    assert again == [InitializePartitions(GROUP, 4, ((TOPIC, 0), (TOPIC, 1)), frozenset({TOPIC}))]
    # asked again: in flight for another interval
    assert restarted.join("p", now_ms=NOW_MS + INITIALIZE_RETRY_INTERVAL_MS + 1) == []
