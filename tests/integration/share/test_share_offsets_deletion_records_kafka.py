"""The ShareGroupStatePartitionMetadata records (type 15) of ``__consumer_offsets`` that deleting a
share group's offsets or the group, and altering offsets out of range, write, on kemu beside a
real Apache Kafka 4.4.0 (the session's plain Kafka; that side skipped without java or bench's
jars). Both servers get the same hand-built requests and the same assertions; the records, and
``__share_group_state``'s, are read with a plain consumer and decoded with kemu's serdes.

Two groups each have a member consume both partitions of ``consumed`` and leave; a third is
created by AlterShareGroupOffsets.

- DeleteShareGroupOffsets of ``consumed``: the record with the topic moved from InitializedTopics
  to DeletingTopics (before the share coordinator deletes the state), then without it (once
  deleted). Asked again, the topic has no offset information, and the record is written again
  as it is.
- DeleteGroups: the record with every topic moved to DeletingTopics, then the tombstones of the
  target-assignment metadata, of the state-partitions record and of the group epoch.
- A group whose member subscribed only to a missing topic has no state-partitions record: its
  DeleteShareGroupOffsets answers no topic at all and writes nothing; DeleteGroups writes the
  tombstones (the state-partitions one too).
- The answer of a DeleteShareGroupOffsets naming a missing topic, a consumed one and one never
  consumed lists the deleted topic first, then the others in request order.
- AlterShareGroupOffsets of a new group naming partition 0 and an index past the end of
  ``consumed``, and only an index past the end of ``small``: ``small`` is listed initializing
  with no partition, and stays so once ``consumed``'s partition is initialized. Deleting that
  group moves both topics to DeletingTopics and fails (UNKNOWN_SERVER_ERROR: Kafka's share
  coordinator refuses a topic without partitions), no share state deleted; a second DeleteGroups
  deletes every partition of both, and the group.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kemu.coordinator.group.share import records as group_records
from kemu.protocol.errors import ErrorCode
from tests.integration.groups.test_deleted_topic_admin_kafka import create_topic
from tests.integration.parity import kemu_or_kafka, nested
from tests.integration.share.test_share_deleted_topic_state_kafka import (
    ALTER_OFFSETS,
    delete_offsets,
    describe_offsets,
    group_share_records,
    replayed,
    share_state_of,
    state_partitions,
    wait_for,
)
from tests.integration.share.test_share_offsets_new_group_kafka import normalised
from tests.integration.share.test_share_offsets_restart_kafka import leave
from tests.integration.share.test_share_topic_changes_kafka import COORDINATOR_STARTING, Broker
from tests.integration.share.test_share_topic_changes_kafka import Member as ShareMember
from tests.integration.txn.wire_parity import Server, coordinator_ready, until_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

DELETE_GROUPS = 42
STATE = group_records.STATE_PARTITIONS
DELETE_OFFSETS = 92
NO_OFFSETS = "There is no offset information to delete."
UNKNOWN_TOPIC = "This server does not host this topic-partition."


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


def consumed_and_left(broker: Broker, group: str, topic: str) -> int:
    """A member of ``group`` given both partitions of ``topic``, gone: how many share records
    the group has then."""
    coordinator_ready(broker.client, 0, group)
    member = ShareMember(broker, group)
    member.heartbeat(subscribed=(topic,))
    member.beat_until(lambda held: held == {(topic, 0), (topic, 1)}, "both partitions")
    assert leave(member) == ErrorCode.none
    return len(group_share_records(broker.bootstrap, group))


def share_state(broker: Broker, group: str) -> list[tuple[str, int, bool]]:
    """The group's share partitions in ``__share_group_state``: (topic, partition, whether
    the last record is a tombstone)."""
    names = {topic_id: name for name, topic_id in broker.ids.items()}
    return sorted(
        (names[topic_id], partition, state.deleted)
        for (_, topic_id, partition), state in replayed(
            share_state_of(broker.bootstrap, group)
        ).items()
    )


def delete_topics_offsets(broker: Broker, group: str, *topics: str) -> Any:
    named = tuple(
        nested(DELETE_OFFSETS, 0, "DeleteShareGroupOffsetsRequestTopic", topic_name=topic)
        for topic in topics
    )
    return broker.client.call(1, DELETE_OFFSETS, 0, group_id=group, topics=named)


def in_order(answer: Any) -> Any:
    return (
        ErrorCode(answer.error_code),
        [(t.topic_name, ErrorCode(t.error_code), t.error_message) for t in answer.responses],
    )


def delete_group(broker: Broker, group: str) -> ErrorCode:
    (result,) = broker.client.call(1, DELETE_GROUPS, 2, groups_names=(group,)).results
    return ErrorCode(result.error_code)


def alter(broker: Broker, group: str, wanted: dict[str, tuple[int, ...]]) -> Any:
    topics = tuple(
        nested(
            ALTER_OFFSETS,
            0,
            "AlterShareGroupOffsetsRequestTopic",
            topic_name=name,
            partitions=tuple(
                nested(
                    ALTER_OFFSETS,
                    0,
                    "AlterShareGroupOffsetsRequestPartition",
                    partition_index=index,
                    start_offset=0,
                )
                for index in indexes
            ),
        )
        for name, indexes in wanted.items()
    )
    return until_ready(
        lambda: broker.client.call(1, ALTER_OFFSETS, 0, group_id=group, topics=topics),
        lambda answer: answer.error_code not in COORDINATOR_STARTING,
    )


def answered(answer: Any) -> Any:
    return (
        ErrorCode(answer.error_code),
        sorted((t.topic_name, ErrorCode(t.error_code), t.error_message) for t in answer.responses),
    )


@dataclass
class Scenario:
    topic: str
    topic_id: uuid.UUID
    small: str
    small_id: uuid.UUID
    # DeleteShareGroupOffsets, twice
    offsets_deleted: Any
    records_of_offsets_deletion: list[Any]
    offsets_after: Any
    offsets_deleted_again: Any
    records_of_second_deletion: list[Any]
    # DeleteGroups of a group that consumed
    group_deleted: ErrorCode
    records_of_group_deletion: list[Any]
    # AlterShareGroupOffsets out of range, then DeleteGroups of that group
    altered: Any
    records_of_alteration: list[Any]
    altered_group_deleted: ErrorCode
    records_of_altered_group_deletion: list[Any]
    altered_group_deleted_again: ErrorCode
    records_of_second_group_deletion: list[Any]
    # ``__share_group_state``: before and after each deletion
    state_before_offsets_deletion: Any
    state_after_offsets_deletion: Any
    state_after_group_deletion: Any
    state_after_failed_deletion: Any
    state_after_second_deletion: Any
    # a group whose member subscribed to a missing topic only: no state-partitions record
    bare_offsets_deleted: Any
    records_of_bare_offsets_deletion: list[Any]
    bare_deleted: ErrorCode
    records_of_bare_deletion: list[Any]
    # offsets deletion naming a missing topic, a consumed one and a never consumed one
    mixed_offsets_deleted: Any


@pytest.fixture(scope="module")
def s(server: Server) -> Scenario:
    suffix = uuid.uuid4().hex[:8]
    topic, small = f"consumed-{suffix}", f"small-{suffix}"
    offsets_group, deleted_group, altered_group = (
        f"offsets-{suffix}",
        f"deleted-{suffix}",
        f"altered-{suffix}",
    )
    broker = Broker(server)
    try:
        create_topic(broker, topic, 2)
        create_topic(broker, small, 1)

        before = consumed_and_left(broker, offsets_group, topic)
        state_before_offsets_deletion = share_state(broker, offsets_group)
        offsets_deleted = delete_offsets(broker, offsets_group, topic)
        state_after_offsets_deletion = share_state(broker, offsets_group)
        records = group_share_records(broker.bootstrap, offsets_group)
        records_of_offsets_deletion = records[before:]
        offsets_after = describe_offsets(broker, offsets_group)
        offsets_deleted_again = delete_offsets(broker, offsets_group, topic)
        records_of_second_deletion = group_share_records(broker.bootstrap, offsets_group)[
            len(records) :
        ]

        before = consumed_and_left(broker, deleted_group, topic)
        group_deleted = delete_group(broker, deleted_group)
        state_after_group_deletion = share_state(broker, deleted_group)
        records_of_group_deletion = group_share_records(broker.bootstrap, deleted_group)[before:]

        coordinator_ready(broker.client, 0, altered_group)
        altered = alter(broker, altered_group, {topic: (0, 5), small: (3,)})

        def settled() -> list[Any] | None:
            records = group_share_records(broker.bootstrap, altered_group)
            found = state_partitions(records)
            return records if found is not None and found["initialized"] else None

        records_of_alteration = wait_for(settled, "the altered partition initialized")
        altered_group_deleted = delete_group(broker, altered_group)
        records = group_share_records(broker.bootstrap, altered_group)
        records_of_altered_group_deletion = records[len(records_of_alteration) :]
        state_after_failed_deletion = share_state(broker, altered_group)
        altered_group_deleted_again = delete_group(broker, altered_group)
        state_after_second_deletion = share_state(broker, altered_group)
        records_of_second_group_deletion = group_share_records(broker.bootstrap, altered_group)[
            len(records) :
        ]
        bare_group, mixed_group, missing = f"bare-{suffix}", f"mixed-{suffix}", f"missing-{suffix}"
        coordinator_ready(broker.client, 0, bare_group)
        member = ShareMember(broker, bare_group)
        member.heartbeat(subscribed=(missing,))
        assert leave(member) == ErrorCode.none
        before = len(group_share_records(broker.bootstrap, bare_group))
        bare_offsets_deleted = delete_topics_offsets(broker, bare_group, missing, topic)
        records = group_share_records(broker.bootstrap, bare_group)
        records_of_bare_offsets_deletion = records[before:]
        bare_deleted = delete_group(broker, bare_group)
        records_of_bare_deletion = group_share_records(broker.bootstrap, bare_group)[len(records) :]
        consumed_and_left(broker, mixed_group, topic)
        mixed_offsets_deleted = delete_topics_offsets(broker, mixed_group, missing, topic, small)
        return Scenario(
            topic,
            broker.ids[topic],
            small,
            broker.ids[small],
            offsets_deleted,
            records_of_offsets_deletion,
            offsets_after,
            offsets_deleted_again,
            records_of_second_deletion,
            group_deleted,
            records_of_group_deletion,
            altered,
            records_of_alteration,
            altered_group_deleted,
            records_of_altered_group_deletion,
            altered_group_deleted_again,
            records_of_second_group_deletion,
            state_before_offsets_deletion,
            state_after_offsets_deletion,
            state_after_group_deletion,
            state_after_failed_deletion,
            state_after_second_deletion,
            bare_offsets_deleted,
            records_of_bare_offsets_deletion,
            bare_deleted,
            records_of_bare_deletion,
            mixed_offsets_deleted,
        )
    finally:
        broker.close()


def partitions(s: Scenario, *pairs: tuple[str, tuple[int, ...]]) -> set[Any]:
    ids = {s.topic: s.topic_id, s.small: s.small_id}
    return {(ids[name], name, indexes) for name, indexes in pairs}


def test_deleting_share_group_offsets_moves_the_topic_through_deleting(s: Scenario) -> None:
    """The topic deleting before the share coordinator deletes its state, then gone."""
    assert answered(s.offsets_deleted) == (ErrorCode.none, [(s.topic, ErrorCode.none, None)])
    assert normalised(s.records_of_offsets_deletion) == [
        (STATE, None, (set(), set(), {(s.topic_id, s.topic)})),
        (STATE, None, (set(), set(), set())),
    ]
    assert s.offsets_after == {}


def test_deleting_them_again_writes_the_record_as_it_is(s: Scenario) -> None:
    assert answered(s.offsets_deleted_again) == (
        ErrorCode.none,
        [(s.topic, ErrorCode.unknown_topic_or_partition, NO_OFFSETS)],
    )
    assert normalised(s.records_of_second_deletion) == [(STATE, None, (set(), set(), set()))]


def test_deleting_a_share_group_writes_its_topics_deleting_then_its_tombstones(
    s: Scenario,
) -> None:
    """Kafka's ShareGroup.createGroupTombstoneRecords order: target-assignment metadata, the
    state-partitions record, the group epoch."""
    assert s.group_deleted == ErrorCode.none
    assert normalised(s.records_of_group_deletion) == [
        (STATE, None, (set(), set(), {(s.topic_id, s.topic)})),
        (group_records.TARGET_METADATA, None, None),
        (STATE, None, None),
        (group_records.GROUP_METADATA, None, None),
    ]


def test_altering_only_out_of_range_partitions_lists_the_topic_initializing(s: Scenario) -> None:
    """``small`` initializing with no partition, before the persister and after."""
    assert [
        (t.topic_name, [(p.partition_index, ErrorCode(p.error_code)) for p in t.partitions])
        for t in s.altered.responses
    ] == [
        (s.topic, [(0, ErrorCode.none), (5, ErrorCode.unknown_topic_or_partition)]),
        (s.small, [(3, ErrorCode.unknown_topic_or_partition)]),
    ]
    assert normalised(s.records_of_alteration) == [
        (STATE, None, (partitions(s, (s.topic, (0,)), (s.small, ())), set(), set())),
        (STATE, None, (partitions(s, (s.small, ())), partitions(s, (s.topic, (0,))), set())),
    ]


def test_deleting_a_group_with_a_topic_initializing_no_partition(s: Scenario) -> None:
    """Kafka 4.4.0 moves both topics to deleting, and its share coordinator refuses to delete
    a topic with no partition: UNKNOWN_SERVER_ERROR, the group stays. A second DeleteGroups
    deletes every partition of both (still deleting) and the group."""
    assert s.altered_group_deleted == ErrorCode.unknown_server_error
    both = {(s.topic_id, s.topic), (s.small_id, s.small)}
    assert normalised(s.records_of_altered_group_deletion) == [(STATE, None, (set(), set(), both))]
    assert s.altered_group_deleted_again == ErrorCode.none
    assert normalised(s.records_of_second_group_deletion) == [
        (STATE, None, (set(), set(), both)),
        (group_records.TARGET_METADATA, None, None),
        (STATE, None, None),
        (group_records.GROUP_METADATA, None, None),
    ]


def test_the_share_state_each_deletion_leaves(s: Scenario) -> None:
    """``__share_group_state``: both partitions tombstoned by DeleteShareGroupOffsets and by
    DeleteGroups; the failed DeleteGroups deletes nothing (the altered partition's state stays),
    the second one tombstones it (``small``, never initialized, has none)."""
    both = [(s.topic, 0, True), (s.topic, 1, True)]
    assert s.state_before_offsets_deletion == [(s.topic, 0, False), (s.topic, 1, False)]
    assert s.state_after_offsets_deletion == both
    assert s.state_after_group_deletion == both
    assert s.state_after_failed_deletion == [(s.topic, 0, False)]
    assert s.state_after_second_deletion == [(s.topic, 0, True)]


def test_a_group_without_share_state_record_gets_no_topic(s: Scenario) -> None:
    """Its member subscribed to a missing topic only, so no state-partitions record: Kafka's
    coordinator answers no topic (not even the missing one) and writes nothing; deleting the
    group still writes the state-partitions tombstone."""
    assert in_order(s.bare_offsets_deleted) == (ErrorCode.none, [])
    assert s.records_of_bare_offsets_deletion == []
    assert s.bare_deleted == ErrorCode.none
    assert normalised(s.records_of_bare_deletion) == [
        (group_records.TARGET_METADATA, None, None),
        (STATE, None, None),
        (group_records.GROUP_METADATA, None, None),
    ]


def test_the_topics_deleted_come_first_then_the_refused_in_request_order(s: Scenario) -> None:
    missing = s.mixed_offsets_deleted.responses[1].topic_name
    assert in_order(s.mixed_offsets_deleted) == (
        ErrorCode.none,
        [
            (s.topic, ErrorCode.none, None),
            (missing, ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC),
            (s.small, ErrorCode.unknown_topic_or_partition, NO_OFFSETS),
        ],
    )
