"""What the admin surface shows of a group right after a topic it uses is deleted, on kemu beside
a real Apache Kafka 4.4.0 (bench's jars; that side skipped without java or them). Both servers
get the same hand-built requests and the same assertions; topic ids, epochs (relative to each
other) and the assignors' split are normalised.

The topic is deleted once the group holds it, and the first look waits until Metadata no longer
shows it and the group's describe no longer names it (Kafka's coordinator learns of a deletion
from its metadata publisher, which first deletes the topic's committed offsets and share state,
``onPartitionsDeleted``, then hands the group coordinator the new image).

- A KIP-848 consumer group (one member, both topics, offsets committed for all four partitions,
  ``consumer.assignment.interval.ms`` 15 s holding the next target back). ConsumerGroupDescribe
  leaves the deleted topic out of each member's assignment and target assignment (Kafka lists
  only the topics its metadata image has). The deleted topic's committed offsets are deleted
  with it (Kafka's onPartitionsDeleted writes their tombstones): OffsetFetch of all offsets no
  longer lists them, and one naming the deleted topic answers offset -1 with NONE. By the
  topic's id (v10) both answer UNKNOWN_TOPIC_ID, offset -1. The member's next heartbeat bumps
  the group epoch (Assigning, no target within the interval) and answers no assignment at its
  epoch.
- A KIP-932 share group (two members; the deleted topic has three partitions and the live one
  one, so that each member holds at least one of the deleted topic's; the group's
  ``share.assignment.interval.ms`` 15 s). ShareGroupDescribe leaves the deleted topic out.
  DescribeShareGroupOffsets of all topics lists only the live topic, and one naming the deleted
  topic answers a zero topic id and, per partition, start offset -1, lag -1 and NONE. The first
  member to heartbeat after the deletion is the one whose heartbeat sees the metadata hash
  change: Kafka bumps the group epoch and trims that member's partitions to the live topic's at
  its epoch, as kemu does (``share/test_share_topic_changes_kafka.py`` shows it with one
  member). The other member is not
  trimmed: its heartbeat answers no assignment, and a full heartbeat still gets the deleted
  topic's partitions, on both, until the next target.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.protocol.errors import ErrorCode
from tests.integration.groups.consumer_wire import Broker as ConsumerBroker
from tests.integration.groups.test_group_topic_changes_kafka import Answer as ConsumerAnswer
from tests.integration.groups.test_group_topic_changes_kafka import Member as ConsumerMember
from tests.integration.parity import kemu_or_kafka, nested
from tests.integration.share.test_share_topic_changes_kafka import Answer as ShareAnswer
from tests.integration.share.test_share_topic_changes_kafka import Broker as ShareBroker
from tests.integration.share.test_share_topic_changes_kafka import Member as ShareMember
from tests.integration.txn.wire_parity import Server, coordinator_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

OFFSET_FETCH, DESCRIBE_SHARE_OFFSETS = 9, 90
INTERVAL_MS = "15000"  # the longest a group may ask: holds the next target back
WAIT_S = 60.0  # a bound for failing, not a measurement
BEAT_PAUSE_S = 0.2  # between heartbeats that change nothing

Partition = tuple[str, int]  # topic name, partition index
Offsets = dict[Any, tuple[int, ErrorCode]]  # (topic, partition) -> (offset, error)


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


def wait_for(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while not (found := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return found


def partitions_of(topic: str, count: int) -> frozenset[Partition]:
    return frozenset((topic, index) for index in range(count))


def shown(assignment: Any) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
    """A described assignment: per topic id, the name shown and the partitions (a topic shown
    without partitions left out: Kafka's simple assignor sometimes gives a member an empty entry
    for a topic, which it describes as such)."""
    return {
        uuid.UUID(str(t.topic_id)): (t.topic_name, frozenset(t.partitions))
        for t in assignment.topic_partitions
        if t.partitions
    }


def names_shown(described: Any, *fields: str) -> set[str]:
    return {
        name
        for member in described.members
        for field in fields
        for name, _ in shown(getattr(member, field)).values()
    }


def described_without(describe: Callable[[], Any], topic: str, *fields: str) -> Callable[[], Any]:
    """A condition: the group's describe, once it no longer names ``topic``."""

    def condition() -> Any:
        described = describe()
        return None if topic in names_shown(described, *fields) else described

    return condition


# --- a consumer group --------------------------------------------------------------------------


@dataclass
class ConsumerDeleted:
    """A consumer group member of ``live`` and ``deleted`` (two partitions each), stable at
    ``epoch`` with all four and their offsets committed at 0; then ``deleted`` was deleted."""

    live: str
    deleted: str
    live_id: uuid.UUID
    deleted_id: uuid.UUID
    epoch: int
    described: Any
    fetched_all: Offsets
    fetched_by_name: Offsets
    fetched_by_id: Offsets
    beats: list[ConsumerAnswer]  # until the group epoch went up
    described_after_bump: Any


def offset_fetch(broker: ConsumerBroker, group: str, version: int, topics: Any) -> Offsets:
    """OffsetFetch (v9 by name, v10 by id) as an admin asks (no member): per partition."""
    request = nested(
        OFFSET_FETCH,
        version,
        "OffsetFetchRequestGroup",
        group_id=group,
        member_id=None,
        member_epoch=-1,
        topics=topics,
    )
    answer = broker.client.call(1, OFFSET_FETCH, version, groups=(request,), require_stable=False)
    (fetched,) = answer.groups
    assert fetched.error_code == ErrorCode.none, fetched
    return {
        (t.name if version < 10 else uuid.UUID(str(t.topic_id)), p.partition_index): (
            p.committed_offset,
            ErrorCode(p.error_code),
        )
        for t in fetched.topics
        for p in t.partitions
    }


def requested(version: int, *topics: Any) -> tuple[Any, ...]:
    key = "name" if version < 10 else "topic_id"
    return tuple(
        nested(
            OFFSET_FETCH,
            version,
            "OffsetFetchRequestTopics",
            partition_indexes=(0, 1),
            **{key: topic},
        )
        for topic in topics
    )


@pytest.fixture(scope="module")
def consumer_deleted(server: Server) -> ConsumerDeleted:
    suffix = uuid.uuid4().hex[:8]
    live, deleted, group = f"live-{suffix}", f"deleted-{suffix}", f"consumer-{suffix}"
    broker = ConsumerBroker(server)
    try:
        broker.create_topic(live, 2)
        broker.create_topic(deleted, 2)
        coordinator_ready(broker.client, 0, group)
        broker.set_interval(group, INTERVAL_MS)
        member = ConsumerMember(broker, group)
        member.join((live, deleted))
        member.beat_until(lambda got: len(got) == 4, "the member to own all four partitions")
        epoch = member.epoch
        every = partitions_of(live, 2) | partitions_of(deleted, 2)
        assert set(broker.commit(group, member.member_id, epoch, every).values()) == {
            ErrorCode.none
        }
        live_id, deleted_id = broker.ids[live], broker.ids[deleted]
        broker.delete_topic(deleted)
        fields = ("assignment", "target_assignment")
        described = wait_for(
            described_without(lambda: broker.describe(group), deleted, *fields),
            "the describe to stop naming the deleted topic",
        )
        fetched_all = offset_fetch(broker, group, 9, None)
        fetched_by_name = offset_fetch(broker, group, 9, requested(9, live, deleted))
        fetched_by_id = offset_fetch(broker, group, 10, requested(10, live_id, deleted_id))
        beats: list[ConsumerAnswer] = []

        def bumped() -> Any:
            beats.append(member.heartbeat())
            after = broker.describe(group)
            return after if after.group_epoch > epoch else None

        described_after_bump = wait_for(bumped, "the group epoch to go up")
        return ConsumerDeleted(
            live,
            deleted,
            live_id,
            deleted_id,
            epoch,
            described,
            fetched_all,
            fetched_by_name,
            fetched_by_id,
            beats,
            described_after_bump,
        )
    finally:
        broker.close()


def test_consumer_group_describe_leaves_a_deleted_topic_out(
    consumer_deleted: ConsumerDeleted,
) -> None:
    scenario = consumer_deleted
    live = {scenario.live_id: (scenario.live, frozenset({0, 1}))}
    for described in (scenario.described, scenario.described_after_bump):
        (member,) = described.members
        assert shown(member.assignment) == live
        assert shown(member.target_assignment) == live


def test_a_consumer_heartbeat_after_the_deletion_bumps_the_epoch_without_a_target(
    consumer_deleted: ConsumerDeleted,
) -> None:
    scenario = consumer_deleted
    assert scenario.beats == [ConsumerAnswer(scenario.epoch, None)] * len(scenario.beats)
    described = scenario.described_after_bump
    assert described.group_state == "Assigning"
    assert (described.group_epoch, described.assignment_epoch) == (
        scenario.epoch + 1,
        scenario.epoch,
    )
    (member,) = described.members
    assert member.member_epoch == scenario.epoch
    assert set(member.subscribed_topic_names) == {scenario.live, scenario.deleted}


def committed_at_zero(*partitions: Any) -> Offsets:
    return dict.fromkeys(partitions, (0, ErrorCode.none))


def test_offset_fetch_of_all_offsets_leaves_a_deleted_topic_out(
    consumer_deleted: ConsumerDeleted,
) -> None:
    scenario = consumer_deleted
    assert scenario.fetched_all == committed_at_zero(*partitions_of(scenario.live, 2))


def test_offset_fetch_naming_a_deleted_topic_finds_no_offset(
    consumer_deleted: ConsumerDeleted,
) -> None:
    scenario = consumer_deleted
    expected = committed_at_zero(*partitions_of(scenario.live, 2)) | dict.fromkeys(
        partitions_of(scenario.deleted, 2), (-1, ErrorCode.none)
    )
    assert scenario.fetched_by_name == expected


def test_offset_fetch_by_a_deleted_topics_id_is_an_unknown_topic_id(
    consumer_deleted: ConsumerDeleted,
) -> None:
    scenario = consumer_deleted
    live = committed_at_zero(*((scenario.live_id, index) for index in range(2)))
    unknown = {(scenario.deleted_id, index): (-1, ErrorCode.unknown_topic_id) for index in (0, 1)}
    assert scenario.fetched_by_id == live | unknown


# --- a share group -----------------------------------------------------------------------------

SharedOffsets = dict[tuple[str, uuid.UUID, int], tuple[int, int, ErrorCode]]


@dataclass
class ShareDeleted:
    """Two members of ``live`` (one partition) and ``deleted`` (three), stable at ``epoch``
    holding two each (``first_held``, ``second_held``); the interval then held the next target
    back and ``deleted`` was deleted. ``first`` heartbeat until the group epoch went up, then
    ``second`` once, then once naming its subscription."""

    live: str
    deleted: str
    live_id: uuid.UUID
    epoch: int
    first_held: frozenset[Partition]
    second_held: frozenset[Partition]
    first_id: str
    second_id: str
    described: Any
    offsets_all: SharedOffsets
    offsets_by_name: SharedOffsets
    first_beats: list[ShareAnswer]
    second_beat: ShareAnswer
    described_after: Any
    second_full_beat: ShareAnswer
    offsets_after: SharedOffsets


def create_topic(broker: ShareBroker, topic: str, partitions: int) -> None:
    """The topic, once Metadata shows all its partitions (its id kept)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)

    def created() -> Any:
        found = broker.metadata(topic)
        return found if found.error_code == 0 and len(found.partitions) == partitions else None

    broker.ids[topic] = uuid.UUID(str(wait_for(created, f"{topic} in the metadata").topic_id))


def share_offsets(broker: ShareBroker, group: str, topics: Any) -> SharedOffsets:
    """DescribeShareGroupOffsets v1: per (topic, id, partition) start offset, lag and error."""
    request = nested(
        DESCRIBE_SHARE_OFFSETS,
        1,
        "DescribeShareGroupOffsetsRequestGroup",
        group_id=group,
        topics=topics,
    )
    (answer,) = broker.client.call(1, DESCRIBE_SHARE_OFFSETS, 1, groups=(request,)).groups
    assert answer.error_code == ErrorCode.none, answer
    return {
        (t.topic_name, uuid.UUID(int=0) if t.topic_id is None else t.topic_id, p.partition_index): (
            p.start_offset,
            p.lag,
            ErrorCode(p.error_code),
        )
        for t in answer.topics
        for p in t.partitions
    }


def two_members_split(
    broker: ShareBroker, group: str, every: frozenset[Partition], *topics: str
) -> tuple[ShareMember, ShareMember]:
    """Two members of ``topics``, heartbeating until they are at one epoch holding all of
    ``every`` between them (two partitions each)."""
    first, second = ShareMember(broker, group), ShareMember(broker, group)
    first.heartbeat(subscribed=topics)
    second.heartbeat(subscribed=topics)
    deadline = time.monotonic() + WAIT_S
    while not (
        first.epoch == second.epoch
        and first.held | second.held == every
        and len(first.held) == len(second.held) == 2
    ):
        assert time.monotonic() < deadline, "the two members never split the partitions"
        time.sleep(BEAT_PAUSE_S)
        first.heartbeat()
        second.heartbeat()
    return first, second


@pytest.fixture(scope="module")
def share_deleted(server: Server) -> ShareDeleted:
    suffix = uuid.uuid4().hex[:8]
    live, deleted, group = f"live-{suffix}", f"deleted-{suffix}", f"share-{suffix}"
    broker = ShareBroker(server)
    try:
        create_topic(broker, live, 1)
        create_topic(broker, deleted, 3)
        coordinator_ready(broker.client, 0, group)
        every = partitions_of(live, 1) | partitions_of(deleted, 3)
        first, second = two_members_split(broker, group, every, live, deleted)
        epoch, first_held, second_held = first.epoch, first.held, second.held
        broker.hold_targets_back(group)
        broker.delete_topic(deleted)
        described = wait_for(
            described_without(lambda: broker.describe(group), deleted, "assignment"),
            "the describe to stop naming the deleted topic",
        )
        offsets_all = share_offsets(broker, group, None)
        offsets_by_name = share_offsets(
            broker,
            group,
            tuple(
                nested(
                    DESCRIBE_SHARE_OFFSETS,
                    1,
                    "DescribeShareGroupOffsetsRequestTopic",
                    topic_name=topic,
                    partitions=tuple(range(count)),
                )
                for topic, count in ((live, 1), (deleted, 3))
            ),
        )
        first_beats: list[ShareAnswer] = []

        def bumped() -> Any:
            first_beats.append(first.heartbeat())
            after = broker.describe(group)
            return after if after.group_epoch > epoch else None

        wait_for(bumped, "the group epoch to go up")
        second_beat = second.heartbeat()
        described_after = broker.describe(group)
        second_full_beat = second.heartbeat(subscribed=(live, deleted))
        return ShareDeleted(
            live,
            deleted,
            broker.ids[live],
            epoch,
            first_held,
            second_held,
            first.member_id,
            second.member_id,
            described,
            offsets_all,
            offsets_by_name,
            first_beats,
            second_beat,
            described_after,
            second_full_beat,
            share_offsets(broker, group, None),
        )
    finally:
        broker.close()


def test_the_two_share_members_each_hold_some_of_the_deleted_topic(
    share_deleted: ShareDeleted,
) -> None:
    """The premise of the tests below, whatever the assignor's split."""
    scenario = share_deleted
    for held in (scenario.first_held, scenario.second_held):
        assert any(topic == scenario.deleted for topic, _ in held)


def test_share_group_describe_leaves_a_deleted_topic_out(share_deleted: ShareDeleted) -> None:
    scenario = share_deleted
    for described in (scenario.described, scenario.described_after):
        by_member = {m.member_id: shown(m.assignment) for m in described.members}
        for member_id, held in (
            (scenario.first_id, scenario.first_held),
            (scenario.second_id, scenario.second_held),
        ):
            live = frozenset(index for topic, index in held if topic == scenario.live)
            expected = {scenario.live_id: (scenario.live, live)} if live else {}
            assert by_member[member_id] == expected


def test_describe_share_group_offsets_of_all_topics_leaves_a_deleted_topic_out(
    share_deleted: ShareDeleted,
) -> None:
    scenario = share_deleted
    # nothing was fetched: the live partition's start offset is not initialized yet
    live = {(scenario.live, scenario.live_id, 0): (-1, -1, ErrorCode.none)}
    assert scenario.offsets_all == live
    assert scenario.offsets_after == live


def test_describe_share_group_offsets_naming_a_deleted_topic_answers_no_offsets(
    share_deleted: ShareDeleted,
) -> None:
    scenario = share_deleted
    zero = uuid.UUID(int=0)
    expected = {(scenario.live, scenario.live_id, 0): (-1, -1, ErrorCode.none)} | {
        (scenario.deleted, zero, index): (-1, -1, ErrorCode.none) for index in range(3)
    }
    assert scenario.offsets_by_name == expected


def test_the_share_heartbeat_seeing_the_deletion_trims_that_member(
    server: Server, share_deleted: ShareDeleted
) -> None:
    scenario = share_deleted
    live = frozenset(p for p in scenario.first_held if p[0] == scenario.live)
    *before, on_bump = scenario.first_beats
    assert before == [ShareAnswer(scenario.epoch, None)] * len(before)
    assert on_bump == ShareAnswer(scenario.epoch, live)


def test_the_other_share_member_keeps_the_deleted_topics_partitions(
    share_deleted: ShareDeleted,
) -> None:
    """Its heartbeats do not change the metadata hash any more: until the next target it is
    not reconciled, and a full heartbeat still gets its part of the held target."""
    scenario = share_deleted
    assert scenario.second_beat == ShareAnswer(scenario.epoch, None)
    assert scenario.second_full_beat == ShareAnswer(scenario.epoch, scenario.second_held)
    described = scenario.described_after
    assert (described.group_epoch, described.assignment_epoch) == (
        scenario.epoch + 1,
        scenario.epoch,
    )
    assert {m.member_epoch for m in described.members} == {scenario.epoch}
