"""Which ``__consumer_offsets`` records a group's first heartbeats write, and in what order, on
kemu beside a real Apache Kafka 4.4.0 (the session's plain Kafka; that side skipped without java
or bench's jars). Both servers get the same hand-built requests; the group's records are read
back with a plain consumer (all of a group's records are on one partition, so their log order is
the order they were written) and compared by record type, ids and timestamps left out.

- A KIP-848 consumer group member subscribing with SubscribedTopicRegex only, before any topic
  matches it, then heartbeating after a matching topic is created until it is assigned. Kafka
  writes: the member (5) and its current assignment (8), no group epoch; a
  ConsumerGroupRegularExpression (16; key: group and regex; value: matched topics, metadata
  version, time resolved) naming no topic when the join's resolution ends; then, on a heartbeat
  that sees the new topic, a 16 naming it, the group epoch (3), the target member (7), the
  target metadata (6) and the current assignment (8). kemu writes the same.
- A share group's first member joining, subscribed to a new topic. The heartbeat that
  initializes the partitions writes, on Kafka, the group epoch (11), the target member (13;
  absent when the target stays as it was), the target metadata (12), the current assignment
  (14) and only then the ShareGroupStatePartitionMetadata (15) marking them initializing: 10,
  11, 13, 12, 14, 15 when Kafka's coordinator knew the topic at the join, 10, 11, 13, 12, 14,
  11, 12, 14, 15 when it learned of it a heartbeat later. kemu writes the same (10, 11, 13, 12,
  14, 15).
- A member subscribed with a resolved regex switches to another within 10 s of its
  resolution. Kafka's heartbeat writes the member (5), the old regex's tombstone (16) and the
  member's assignment (8, its topic to revoke), and no group epoch: nothing in its subscription
  it has resolved changed, and only a bump or a metadata refresh (a subscribed topic changed)
  recomputes the metadata hash. It does not resolve the new regex yet (the last resolution,
  still in the group when the heartbeat runs, is under 10 s old); the next heartbeat does, and
  that resolution (16) bumps the epoch (3); the heartbeat after gets the target (7, 6, 8). kemu
  writes the same (it bumped the epoch with the switch: the hash without the old regex's topics
  differed, and resolved the new regex at once).
- DeleteGroups of an emptied KIP-848 consumer group that had committed an offset. Kafka writes,
  in one batch, the offset's tombstone (1) and then ``ConsumerGroup.createGroupTombstoneRecords``'
  order: per member its current assignment (8) and target (7) tombstones, the target metadata
  (6), per member its metadata (5), each resolved regex (16), the subscription metadata (4,
  written though 4.4 no longer writes its value) and the group epoch (3): 1, 6, 4, 3 for a group
  its last member left. kemu writes the same (it wrote 6 after the member tombstones, no 4).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator

import pytest

from kemu.protocol.errors import ErrorCode
from tests.integration.groups import consumer_wire
from tests.integration.groups.consumer_wire import Broker
from tests.integration.groups.test_group_topic_changes_kafka import Member
from tests.integration.parity import kemu_or_kafka
from tests.integration.share.test_share_deleted_topic_state_kafka import (
    OFFSETS_TOPIC,
    internal_records,
    wait_for,
)
from tests.integration.share.test_share_topic_changes_kafka import Broker as ShareBroker
from tests.integration.share.test_share_topic_changes_kafka import Member as ShareMember
from tests.integration.share.test_share_topic_changes_kafka import partitions_of
from tests.integration.txn.wire_parity import Server, coordinator_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

SHARE_MEMBER, SHARE_EPOCH, SHARE_TARGET_EPOCH, SHARE_TARGET_MEMBER, SHARE_CURRENT = (
    10,
    11,
    12,
    13,
    14,
)
SHARE_STATE_PARTITIONS, REGULAR_EXPRESSION = 15, 16
GROUP_EPOCH, MEMBER, TARGET_EPOCH, TARGET_MEMBER, CURRENT = 3, 5, 6, 7, 8
OFFSET_COMMIT_RECORD, SUBSCRIPTION_METADATA = 1, 4
DELETE_GROUPS = 42
WAIT_S = 60.0  # a bound for failing, not a measurement


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


def _string(data: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", data, at)
    return data[at + 2 : at + 2 + length].decode(), at + 2 + length


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def regex_record(key: bytes, value: bytes | None) -> tuple[str, tuple[str, ...] | None]:
    """A ConsumerGroupRegularExpression record: its regex and matched topics (None: a
    tombstone). Key: type, version-0 strings group and regex; value (flexible): version, compact
    array of compact strings, int64 version, int64 timestamp."""
    regex, _ = _string(key, _string(key, 2)[1])
    if value is None:
        return regex, None
    count, at = _varint(value, 2)
    topics = []
    for _ in range(count - 1):
        length, at = _varint(value, at)
        topics.append(value[at : at + length - 1].decode())
        at += length - 1
    metadata_version, resolved_ms = struct.unpack_from(">qq", value, at)
    assert metadata_version >= 0 and resolved_ms > 0, (metadata_version, resolved_ms)
    return regex, tuple(sorted(topics))


def group_records(
    bootstrap: str, group: str, first_type: int = 3
) -> list[tuple[int, bytes, bytes | None]]:
    """The group's records of ``__consumer_offsets`` (types ``first_type``-16), in log order."""
    found = []
    for key, value in internal_records(bootstrap, OFFSETS_TOPIC):
        record_type = int.from_bytes(key[:2], "big")
        if first_type <= record_type <= 16 and _string(key, 2)[0] == group:
            found.append((record_type, key, value))
    return found


def regex_heartbeat(member: Member, regex: str | None) -> frozenset[tuple[str, int]] | None:
    """One ConsumerGroupHeartbeat (naming the regex when joining) owning what the member owns:
    the assignment it answers, the epoch kept."""
    answer = consumer_wire.heartbeat(
        member.broker.client,
        member.group,
        member.member_id,
        member.epoch,
        topic_partitions=consumer_wire.owned_topic_partitions(member.broker.ids, member.owned),
        regex=regex,
        assignor="uniform" if regex is not None else None,
    )
    assert answer.error_code == ErrorCode.none, answer
    member.epoch = int(answer.member_epoch)
    if answer.assignment is None:
        return None
    member.owned = member.broker.named(answer.assignment.topic_partitions)
    return member.owned


def test_a_regex_subscription_writes_its_resolutions(server: Server) -> None:
    suffix = uuid.uuid4().hex[:8]
    broker = Broker(server)
    try:
        group, regex, topic = f"regex-group-{suffix}", f"rx-{suffix}-.*", f"rx-{suffix}-a"
        coordinator_ready(broker.client, 0, group)
        member = Member(broker, group)
        regex_heartbeat(member, regex)
        # the join's resolution (nothing matches yet) before the topic exists
        wait_for(
            lambda: any(
                t == REGULAR_EXPRESSION for t, _, _ in group_records(server.bootstrap, group)
            ),
            "the regex resolved",
        )
        broker.create_topic(topic, 2)
        wanted = frozenset({(topic, 0), (topic, 1)})
        wait_for(
            lambda: (regex_heartbeat(member, None), member.owned)[1] == wanted, f"{topic} assigned"
        )
        regex_heartbeat(member, None)
        written = group_records(server.bootstrap, group)
    finally:
        broker.close()
    # the join: the member and its (empty) assignment, no group epoch; the two resolutions;
    # the one naming the topic bumps the epoch, and the member gets the topic's partitions
    assert [t for t, _, _ in written] == [
        MEMBER,
        CURRENT,
        REGULAR_EXPRESSION,
        REGULAR_EXPRESSION,
        GROUP_EPOCH,
        TARGET_MEMBER,
        TARGET_EPOCH,
        CURRENT,
    ]
    resolutions = [regex_record(key, value) for t, key, value in written if t == REGULAR_EXPRESSION]
    assert resolutions == [(regex, ()), (regex, (topic,))]


def test_a_share_groups_first_join_writes_the_state_partitions_last(
    server: Server,
) -> None:
    suffix = uuid.uuid4().hex[:8]
    broker = ShareBroker(server)
    try:
        group, topic = f"share-order-{suffix}", f"order-{suffix}"
        broker.create_topics(topic)
        coordinator_ready(broker.client, 0, group)
        member = ShareMember(broker, group)
        member.heartbeat(subscribed=(topic,))
        member.beat_until(lambda held: held == partitions_of(topic), f"{topic} assigned")
        written = group_records(server.bootstrap, group)
    finally:
        broker.close()
    types = [t for t, _, _ in written]
    assert types[0] == SHARE_MEMBER
    # the records of the heartbeat that initialized the partitions: from its group epoch to the
    # initializing state-partitions record, which comes last
    first_state = types.index(SHARE_STATE_PARTITIONS)
    start = max(i for i in range(first_state) if types[i] == SHARE_EPOCH)
    initializing = types[start : first_state + 1]
    assert initializing in (
        [
            SHARE_EPOCH,
            SHARE_TARGET_MEMBER,
            SHARE_TARGET_EPOCH,
            SHARE_CURRENT,
            SHARE_STATE_PARTITIONS,
        ],
        # when Kafka's coordinator learned of the topic after the join (an epoch more, and no
        # target member to write: the target stays empty until the partitions are initialized)
        [SHARE_EPOCH, SHARE_TARGET_EPOCH, SHARE_CURRENT, SHARE_STATE_PARTITIONS],
    ), types


def test_deleting_a_consumer_group_writes_kafkas_tombstone_order(server: Server) -> None:
    suffix = uuid.uuid4().hex[:8]
    broker = Broker(server)
    try:
        group, topic = f"delete-order-{suffix}", f"delete-order-{suffix}"
        broker.create_topic(topic, 1)
        coordinator_ready(broker.client, 0, group)
        member = Member(broker, group)
        member.join((topic,))
        member.beat_until(lambda held: held == frozenset({(topic, 0)}), f"{topic} assigned")
        committed = broker.commit(group, member.member_id, member.epoch, member.owned)
        assert committed == {(topic, 0): ErrorCode.none}, committed
        member.epoch = -1
        member.owned = frozenset()
        member.heartbeat()
        before = len(group_records(server.bootstrap, group, OFFSET_COMMIT_RECORD))
        deleted = broker.client.call(1, DELETE_GROUPS, 2, groups_names=(group,))
        assert [r.error_code for r in deleted.results] == [ErrorCode.none], deleted
        written = group_records(server.bootstrap, group, OFFSET_COMMIT_RECORD)
    finally:
        broker.close()
    deletion = written[before:]
    assert all(value is None for _, _, value in deletion), deletion
    assert [t for t, _, _ in deletion] == [
        OFFSET_COMMIT_RECORD,
        TARGET_EPOCH,
        SUBSCRIPTION_METADATA,
        GROUP_EPOCH,
    ]


def test_switching_regex_bumps_the_epoch_only_with_the_new_resolution(server: Server) -> None:
    suffix = uuid.uuid4().hex[:8]
    broker = Broker(server)
    try:
        group = f"regex-switch-{suffix}"
        first, second = f"swa-{suffix}-.*", f"swb-{suffix}-.*"
        topic_a, topic_b = f"swa-{suffix}-1", f"swb-{suffix}-1"
        broker.create_topic(topic_a, 1)
        broker.create_topic(topic_b, 1)
        coordinator_ready(broker.client, 0, group)
        member = Member(broker, group)
        regex_heartbeat(member, first)
        wanted_a = frozenset({(topic_a, 0)})
        wait_for(lambda: (regex_heartbeat(member, None), member.owned)[1] == wanted_a, "a assigned")
        regex_heartbeat(member, None)
        before = len(group_records(server.bootstrap, group))
        epoch_before = member.epoch
        switched = regex_heartbeat(member, second)
        switch_epoch = member.epoch
        epochs = [switch_epoch]

        def resolved_second() -> bool:
            regex_heartbeat(member, None)
            epochs.append(member.epoch)
            return any(
                t == REGULAR_EXPRESSION and regex_record(k, v) == (second, (topic_b,))
                for t, k, v in group_records(server.bootstrap, group)[before:]
            )

        wait_for(resolved_second, "the second regex resolved", pause=0.5)
        wanted_b = frozenset({(topic_b, 0)})
        wait_for(lambda: (regex_heartbeat(member, None), member.owned)[1] == wanted_b, "b assigned")
        written = group_records(server.bootstrap, group)[before:]
    finally:
        broker.close()
    # the switch: the member, the dropped regex's tombstone and the member's assignment
    # (revoking the first regex's topic), no group epoch; the revocation acknowledged; only
    # the new regex's resolution bumps the epoch, and the next heartbeat assigns its topic
    assert [t for t, _, _ in written] == [
        MEMBER,
        REGULAR_EXPRESSION,
        CURRENT,
        CURRENT,
        REGULAR_EXPRESSION,
        GROUP_EPOCH,
        TARGET_MEMBER,
        TARGET_EPOCH,
        CURRENT,
    ]
    resolutions = [regex_record(key, value) for t, key, value in written if t == REGULAR_EXPRESSION]
    assert resolutions == [(first, None), (second, (topic_b,))]
    assert switched == frozenset()  # the first regex's topic taken away with the answer
    assert set(epochs) == {epoch_before}  # no epoch until the new regex is resolved
    assert member.epoch == epoch_before + 1
