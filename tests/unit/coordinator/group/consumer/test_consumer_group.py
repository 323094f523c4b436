"""KIP-848 consumer groups: the sans-IO state machine with a virtual clock (epochs, the
revocation handshake, fencing, expiry), the uniform and range assignors, and
ConsumerGroupHeartbeat/ConsumerGroupDescribe plus member-epoch offset checks through the wire."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest

from kemu.coordinator.group.classic.group import ClassicGroup
from kemu.coordinator.group.consumer import assignor as consumer_assignor
from kemu.coordinator.group.consumer.group import (
    STABLE,
    UNRELEASED,
    UNREVOKED,
    ConsumerGroup,
    ConsumerGroupCoordinator,
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
    ConsumerSettings,
)
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.modern_group import TopicMeta
from kemu.coordinator.group.registry import GroupRegistry
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.share.group import ShareGroup
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_classic_group_handlers import Broker

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
SESSION_MS = 45_000
REBALANCE_MS = 60_000


def parts(*indexes: int, topic: uuid.UUID = T1) -> frozenset[tuple[uuid.UUID, int]]:
    return frozenset((topic, index) for index in indexes)


class Harness:
    def __init__(self) -> None:
        self.registry = GroupRegistry()
        self.topics = {"t": TopicMeta(T1, 6), "u": TopicMeta(T2, 2)}
        self.coordinator = ConsumerGroupCoordinator(
            self.registry,
            lambda group_id: ConsumerSettings(SESSION_MS, 5_000, 3),
            lambda: sorted(self.topics),
        )
        self.now = 0

    def lookup(self, name: str) -> TopicMeta | None:
        return self.topics.get(name)

    def beat(
        self,
        member: str,
        epoch: int,
        owned: frozenset[tuple[uuid.UUID, int]] | None = None,
        **fields: Any,
    ) -> ConsumerHeartbeatResult:
        request = ConsumerHeartbeat("g", member, epoch, owned=owned, **fields)
        return self.coordinator.heartbeat(request, self.lookup, self.now)

    def join(self, member: str, topics: tuple[str, ...] = ("t",), **fields: Any) -> Any:
        return self.beat(
            member,
            0,
            frozenset(),
            rebalance_timeout_ms=REBALANCE_MS,
            subscribed_topic_names=topics,
            **fields,
        )

    @property
    def group(self) -> ConsumerGroup:
        group = self.coordinator.group("g")
        assert group is not None
        return group


@pytest.fixture
def harness() -> Harness:
    return Harness()


def test_a_second_member_waits_until_the_first_revokes(harness: Harness) -> None:
    first = harness.join("a")
    assert (first.member_epoch, first.assignment) == (2, parts(0, 1, 2, 3, 4, 5))
    assert harness.group.state_name == "Stable"

    second = harness.join("b")
    assert second.member_epoch == 3 and second.assignment == frozenset()
    assert harness.group.members["b"].state == UNRELEASED
    assert harness.group.state_name == "Reconciling"

    # a is told to give up three partitions, keeping its epoch until it has.
    told = harness.beat("a", 2)
    assert told.member_epoch == 2 and told.assignment == parts(0, 1, 2)
    assert harness.group.members["a"].state == UNREVOKED
    assert harness.beat("b", 3).assignment is None  # still held by a
    still = harness.beat("a", 2, parts(0, 1, 2, 3, 4, 5))
    assert still.member_epoch == 2
    done = harness.beat("a", 2, parts(0, 1, 2))
    assert done.member_epoch == 3 and harness.group.members["a"].state == STABLE
    given = harness.beat("b", 3)
    assert given.assignment == parts(3, 4, 5)
    assert harness.group.state_name == "Stable"
    assert harness.group.target == {"a": parts(0, 1, 2), "b": parts(3, 4, 5)}


def test_a_member_that_revoked_while_the_target_moved_keeps_its_epoch(harness: Harness) -> None:
    """Kafka's CurrentAssignmentBuilder: a member done revoking is computed again from its own
    epoch; when the target moved meanwhile and takes more from it, it stays at that epoch with
    the new partitions pending revocation (kemu moved it to epoch + 1, an epoch between)."""
    harness.join("a")
    harness.join("b")
    assert harness.beat("a", 2).assignment == parts(0, 1, 2)  # revoking 3, 4, 5 at epoch 2
    assert harness.join("c").member_epoch == 4
    assert harness.group.target["a"] == parts(0, 1)
    done = harness.beat("a", 2, parts(0, 1, 2))
    member = harness.group.members["a"]
    assert (done.member_epoch, member.state) == (2, UNREVOKED)
    assert (member.previous_member_epoch, member.assigned) == (2, parts(0, 1))
    assert member.pending_revocation == parts(2)
    assert harness.beat("a", 2, parts(0, 1)).member_epoch == 4


def test_epochs_count_as_kafka_4_4(harness: Harness) -> None:
    """Kafka 4.4 starts a new group at epoch 1 (group and target assignment), so its first member
    gets epoch 2; when the last member leaves, the empty target takes the new group epoch
    (make conformance-diff: ConsumerGroupHeartbeat 2, then Describe 3/3, then a rejoin 4)."""
    first = harness.join("a")
    assert first.member_epoch == 2
    assert (harness.group.group_epoch, harness.group.assignment_epoch) == (2, 2)
    harness.beat("a", -1)
    assert (harness.group.group_epoch, harness.group.assignment_epoch) == (3, 3)
    assert harness.join("b").member_epoch == 4
    harness.join("c")  # 5; a departure bumps the group epoch and leaves the target to the
    harness.beat("c", -1)  # next heartbeat, as Kafka's member fencing does
    assert (harness.group.group_epoch, harness.group.assignment_epoch) == (6, 5)
    assert harness.beat("b", 4).member_epoch == 6


def test_epoch_fencing(harness: Harness) -> None:
    harness.join("a")
    with pytest.raises(GroupError) as ahead:
        harness.beat("a", 5)
    assert ahead.value.code == ErrorCode.fenced_member_epoch
    harness.join("b")
    harness.beat("a", 2)
    harness.beat("a", 2, parts(0, 1, 2))  # now epoch 3, previous 2
    # The previous epoch is accepted when the member owns no more than its assignment ...
    assert harness.beat("a", 2, parts(0, 1)).member_epoch == 3
    # ... and fenced when it still claims partitions it gave up.
    with pytest.raises(GroupError) as behind:
        harness.beat("a", 2, parts(0, 1, 2, 3))
    assert behind.value.code == ErrorCode.fenced_member_epoch
    with pytest.raises(GroupError) as unknown:
        harness.beat("ghost", 3)
    assert unknown.value.code == ErrorCode.unknown_member_id


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        # the member id is checked before the group id, as Kafka 4.4.0 does
        (ConsumerHeartbeat("", "", 1), "MemberId can't be empty."),
        (ConsumerHeartbeat("", "m", 1), "GroupId can't be empty."),
        # v0 lets the coordinator pick the id on a join, not on a heartbeat or a leave
        (ConsumerHeartbeat("", "", 0, generate_member_id=True), "GroupId can't be empty."),
        (ConsumerHeartbeat("g", " ", 2, generate_member_id=True), "MemberId can't be empty."),
        (ConsumerHeartbeat("g", "", -1, generate_member_id=True), "MemberId can't be empty."),
        (ConsumerHeartbeat("g", "m", 1, instance_id=" "), "InstanceId can't be empty."),
        (ConsumerHeartbeat("g", "m", 1, rack_id=""), "RackId can't be empty."),
        # only a static member leaves with -2
        (ConsumerHeartbeat("g", "m", -2), "InstanceId can't be null."),
        (ConsumerHeartbeat("g", "m", -3), "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests_get_kafkas_messages(
    harness: Harness, request_: ConsumerHeartbeat, message: str
) -> None:
    with pytest.raises(GroupError) as refused:
        harness.coordinator.heartbeat(request_, harness.lookup, 0)
    assert (refused.value.code, refused.value.message) == (ErrorCode.invalid_request, message)


def test_invalid_requests(harness: Harness) -> None:
    cases = [
        ConsumerHeartbeat("", "m", 0, 1000, ("t",), owned=frozenset()),
        ConsumerHeartbeat("g", "", 0, 1000, ("t",), owned=frozenset()),
        ConsumerHeartbeat("g", "m", 0, -1, ("t",), owned=frozenset()),
        ConsumerHeartbeat("g", "m", 0, 1000, None, owned=frozenset()),
        ConsumerHeartbeat("g", "m", 0, 1000, ("t",), owned=None),
        ConsumerHeartbeat("g", "m", 0, 1000, ("t",), owned=parts(1)),
        ConsumerHeartbeat("g", "m", -3),
    ]
    for request in cases:
        with pytest.raises(GroupError) as refused:
            harness.coordinator.heartbeat(request, harness.lookup, 0)
        assert refused.value.code == ErrorCode.invalid_request, request
    with pytest.raises(GroupError) as assignor:
        harness.join("m", server_assignor="sticky")
    assert assignor.value.code == ErrorCode.unsupported_assignor
    with pytest.raises(GroupError) as regex:
        harness.beat("m", 0, frozenset(), rebalance_timeout_ms=1000, subscribed_topic_regex="(")
    assert regex.value.code == ErrorCode.invalid_regular_expression


def test_leave_and_group_max_size(harness: Harness) -> None:
    for member in "abc":
        harness.join(member)
    with pytest.raises(GroupError) as full:
        harness.join("d")
    assert full.value.code == ErrorCode.group_max_size_reached
    epoch = harness.group.group_epoch
    # Kafka checks the size on every heartbeat but a leave: an unknown member id that is not
    # joining finds the group full before it is found unknown.
    with pytest.raises(GroupError) as full:
        harness.beat("d", epoch)
    assert full.value.code == ErrorCode.group_max_size_reached
    with pytest.raises(GroupError) as unknown:
        harness.beat("d", -1)
    assert unknown.value.code == ErrorCode.unknown_member_id
    left = harness.beat("c", -1)
    assert left.member_epoch == -1
    assert "c" not in harness.group.members and harness.group.group_epoch == epoch + 1


def test_session_and_revocation_timeouts(harness: Harness) -> None:
    harness.join("a")
    harness.join("b")
    harness.beat("a", 2)  # a must revoke three partitions ...
    harness.now = REBALANCE_MS  # ... and does not in time, while still heartbeating
    assert harness.coordinator.next_deadline_ms() == SESSION_MS
    harness.beat("b", 3)
    assert harness.coordinator.expire(harness.now, harness.lookup) == [("g", "a")]
    assert harness.beat("b", 3).assignment == parts(0, 1, 2, 3, 4, 5)
    harness.now += SESSION_MS
    assert harness.coordinator.expire(harness.now, harness.lookup) == [("g", "b")]
    assert harness.group.state_name == "Empty"


def test_subscription_by_regex_and_new_partitions(harness: Harness) -> None:
    joined = harness.beat(
        "a", 0, frozenset(), rebalance_timeout_ms=1000, subscribed_topic_regex="t|u"
    )
    assert joined.assignment == frozenset()  # the regex is resolved after the heartbeat
    assert harness.coordinator.resolve_regexes("g", harness.lookup, harness.now)
    joined = harness.beat("a", joined.member_epoch)
    assert joined.assignment == parts(0, 1, 2, 3, 4, 5) | parts(0, 1, topic=T2)
    epoch = harness.group.group_epoch
    harness.topics["u"] = TopicMeta(T2, 3)  # partitions added
    grown = harness.beat("a", joined.member_epoch)
    assert harness.group.group_epoch == epoch + 1
    assert grown.assignment is not None and (T2, 2) in grown.assignment


def test_an_empty_classic_group_is_taken_over(harness: Harness) -> None:
    harness.registry.put(ClassicGroup("g"))
    harness.join("a")
    assert isinstance(harness.registry.get("g"), ConsumerGroup)
    harness.registry.put(ShareGroup("s"))
    with pytest.raises(GroupError) as other:
        harness.coordinator.heartbeat(
            ConsumerHeartbeat("s", "m", 0, 1000, ("t",), owned=frozenset()), harness.lookup, 0
        )
    assert other.value.code == ErrorCode.group_id_not_found


def test_a_group_the_coordinator_does_not_hold(harness: Harness) -> None:
    """GROUP_ID_NOT_FOUND for a heartbeat (epoch > 0) and a leave, as Kafka 4.4.0: its heartbeat
    looks the group up with getOrMaybeCreateConsumerGroup ("Consumer group X not found."), its
    leave with group() ("Group X not found."); an empty classic group is taken over by a join
    only. Kemu once answered UNKNOWN_MEMBER_ID to both."""
    heartbeats = {
        "beat": ConsumerHeartbeat("ghost", "m", 5),
        "leave": ConsumerHeartbeat("ghost", "m", -1),
        "static leave": ConsumerHeartbeat("ghost", "m", -2, instance_id="i"),
    }
    texts = {
        "beat": "Consumer group ghost not found.",
        "leave": "Group ghost not found.",
        "static leave": "Group ghost not found.",
    }
    for empty_classic in (False, True):
        if empty_classic:
            harness.registry.put(ClassicGroup("ghost"))
            texts = dict.fromkeys(texts, "Group ghost is not a consumer group.")
        for name, request in heartbeats.items():
            with pytest.raises(GroupError) as refused:
                harness.coordinator.heartbeat(request, harness.lookup, 0)
            assert (refused.value.code, refused.value.message) == (
                ErrorCode.group_id_not_found,
                texts[name],
            ), name
        assert harness.coordinator.group("ghost") is None


def test_offset_fetches_use_the_member_epoch(harness: Harness) -> None:
    harness.join("a")
    group = harness.group
    fetch = ConsumerGroupCoordinator.validate_offset_fetch
    assert fetch(group, None, -1) is None
    assert fetch(group, "a", 0) == ErrorCode.stale_member_epoch


# --- assignors -----------------------------------------------------------------------------------


def test_range_assignor() -> None:
    subscriptions = {"a": frozenset({T1}), "b": frozenset({T1, T2}), "c": frozenset({T1})}
    result = consumer_assignor.assign("range", subscriptions, {T1: 7, T2: 2}, {})
    assert result == {
        "a": parts(0, 1, 2),
        "b": parts(3, 4) | parts(0, 1, topic=T2),
        "c": parts(5, 6),
    }


def test_uniform_assignor_is_balanced_and_sticky() -> None:
    one = {m: frozenset({T1}) for m in "ab"}
    first = consumer_assignor.assign("uniform", one, {T1: 6}, {})
    assert sorted(len(p) for p in first.values()) == [3, 3]
    three = {m: frozenset({T1}) for m in "abc"}
    second = consumer_assignor.assign("uniform", three, {T1: 6}, first)
    assert sorted(len(p) for p in second.values()) == [2, 2, 2]
    assert second["a"] <= first["a"] and second["b"] <= first["b"]  # nothing moved needlessly
    many = {m: frozenset({T1}) for m in "abcdefgh"}
    spread = consumer_assignor.assign("uniform", many, {T1: 6}, {})
    assert sorted(len(p) for p in spread.values()) == [0, 0, 1, 1, 1, 1, 1, 1]
    assert frozenset().union(*spread.values()) == parts(0, 1, 2, 3, 4, 5)


# --- through the wire ----------------------------------------------------------------------------

HEARTBEAT, DESCRIBE, OFFSET_COMMIT = 68, 69, 8


async def consumer_beat(broker: Broker, version: int, **fields: Any) -> Any:
    values: dict[str, Any] = {
        "group_id": "kip848",
        "member_id": "",
        "member_epoch": 0,
        "rebalance_timeout": datetime.timedelta(seconds=30),
        "subscribed_topic_names": ("t",),
        "topic_partitions": (),
    }
    values.update(fields)
    return await broker.send(broker.request(HEARTBEAT, version, **values))


async def test_heartbeat_and_describe_through_the_wire() -> None:
    broker = Broker()
    member = str(uuid.uuid4())
    joined = await consumer_beat(broker, 1, member_id=member, server_assignor="range")
    assert (joined.error_code, joined.member_id, joined.member_epoch) == (ErrorCode.none, member, 2)
    topic_id = broker.cluster.topics["t"].topic_id
    assert [(tp.topic_id, tp.partitions) for tp in joined.assignment.topic_partitions] == [
        (topic_id, (0, 1, 2))
    ]
    assert joined.heartbeat_interval == datetime.timedelta(seconds=5)
    v0 = await consumer_beat(broker, 0, group_id="kip848-v0")
    assert v0.error_code == ErrorCode.none and v0.member_id  # the coordinator picked the id
    empty_id = await consumer_beat(broker, 1, group_id="other")
    assert empty_id.error_code == ErrorCode.invalid_request

    described = await broker.send(broker.request(DESCRIBE, 1, group_ids=("kip848", "nope", "")))
    group, missing, invalid = described.groups
    assert (group.group_state, group.group_epoch, group.assignor_name) == ("Stable", 2, "range")
    (only,) = group.members
    assert (only.member_id, only.member_epoch, only.subscribed_topic_names) == (member, 2, ("t",))
    assert only.assignment.topic_partitions[0].topic_name == "t"
    assert only.member_type == 1
    assert only.subscribed_topic_regex == ""  # Kafka 4.4.0 shows no regex as "" (conformance-diff)
    assert missing.error_code == ErrorCode.group_id_not_found
    assert invalid.error_code == ErrorCode.invalid_group_id

    partition = broker.nested(
        OFFSET_COMMIT, 9, "OffsetCommitRequestPartition", partition_index=0, committed_offset=3
    )
    topic = broker.nested(
        OFFSET_COMMIT, 9, "OffsetCommitRequestTopic", name="t", partitions=(partition,)
    )
    stale = await broker.commit(
        9, "kip848", 3, generation_id_or_member_epoch=1, member_id=member, topics=(topic,)
    )
    assert stale.topics[0].partitions[0].error_code == ErrorCode.stale_member_epoch
    ok = await broker.commit(
        9, "kip848", 3, generation_id_or_member_epoch=2, member_id=member, topics=(topic,)
    )
    assert ok.topics[0].partitions[0].error_code == ErrorCode.none
    # a member's commit below v9 (no member epoch in it): as Kafka 4.4, UNSUPPORTED_VERSION
    old = await broker.commit(8, "kip848", 3, generation_id_or_member_epoch=2, member_id=member)
    assert old.topics[0].partitions[0].error_code == ErrorCode.unsupported_version

    listed = group_coordinator(broker.runtime).registry.get("kip848")
    assert listed is not None and (listed.group_type, listed.protocol_type) == (
        "consumer",
        "consumer",
    )
    left = await consumer_beat(broker, 1, member_id=member, member_epoch=-1)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    assert listed.state_name == "Empty"


def test_a_consumer_group_keeps_the_offsets_of_its_topics(harness: Harness) -> None:
    from kemu.coordinator.group.classic.group import ClassicGroupCoordinator, ClassicSettings
    from kemu.coordinator.group.offset_manager import CommitPartition, OffsetManager
    from kemu.coordinator.group.offsets import OffsetStore

    harness.join("a")
    classic = ClassicGroupCoordinator(harness.registry, lambda group_id: ClassicSettings())
    manager = OffsetManager(classic, OffsetStore(), harness.coordinator)
    result = manager.commit(
        "g",
        "a",
        None,
        2,
        [CommitPartition("t", 0, 5), CommitPartition("gone", 0, 5)],
        0,
        api_version=9,
    )
    manager.replay(result.records)
    expired = manager.expired_offsets(10_000, 1_000)
    assert [key.topic for key, _ in expired["g"]] == ["gone"]  # type: ignore[union-attr]


# --- __consumer_offsets records -----------------------------------------------------------------


def test_consumer_group_records_bytes() -> None:
    from kemu.coordinator.group.consumer.records import (
        ConsumerRecordKey,
        CurrentAssignmentValue,
        GroupEpochValue,
        MemberMetadataValue,
    )
    from kemu.coordinator.group.records import decode_record, encode_key, encode_value

    key = ConsumerRecordKey(3, "g")
    assert encode_key(key) == b"\x00\x03\x00\x01g"
    assert encode_value(GroupEpochValue(7)) == b"\x00\x00\x00\x00\x00\x07\x00"
    member_key = ConsumerRecordKey(8, "g", "m")
    assert encode_key(member_key) == b"\x00\x08\x00\x01g\x00\x01m"
    current = CurrentAssignmentValue(5, 4, UNREVOKED, parts(0, 2), parts(1))
    assert encode_value(current) == (
        b"\x00\x00"  # version 0
        + b"\x00\x00\x00\x05\x00\x00\x00\x04\x01"  # epochs, state 1 = unrevoked
        + b"\x02"
        + T1.bytes
        + b"\x03\x00\x00\x00\x00\x00\x00\x00\x02\x00"  # assigned
        + b"\x02"
        + T1.bytes
        + b"\x02\x00\x00\x00\x01\x00"  # pending revocation
        + b"\x00"  # tagged fields
    )
    metadata = MemberMetadataValue(None, "r", "c", "/h", ("a", "b"), None, 300, "uniform")
    meta_key = ConsumerRecordKey(5, "g", "m")
    for record_key, value in (
        (key, GroupEpochValue(7)),
        (member_key, current),
        (meta_key, metadata),
    ):
        assert decode_record(encode_key(record_key), encode_value(value)) == (record_key, value)
    assert decode_record(encode_key(meta_key), None) == (meta_key, None)


def test_groups_are_rebuilt_from_their_records(harness: Harness) -> None:
    from kemu.coordinator.group.consumer.persistence import ImageBuilder, diff, image_of

    harness.join("a")
    harness.join("b")
    harness.beat("a", 2)  # a is now revoking
    group = harness.group
    records = diff("g", None, image_of(group))
    builder = ImageBuilder()
    for key, value in records:
        builder.apply(key, value)
    ((rebuilt, image),) = builder.groups(now_ms=1_000, session_timeout_ms=SESSION_MS)
    assert image == image_of(group)
    assert (rebuilt.group_epoch, rebuilt.assignment_epoch) == (3, 3)
    assert rebuilt.target == group.target
    for member_id, member in group.members.items():
        again = rebuilt.members[member_id]
        assert (again.member_epoch, again.state, again.assigned, again.pending_revocation) == (
            member.member_epoch,
            member.state,
            member.assigned,
            member.pending_revocation,
        )
        assert again.subscribed_topic_names == member.subscribed_topic_names
        assert again.session_deadline_ms == 1_000 + SESSION_MS
    assert rebuilt.members["a"].revocation_deadline_ms == 1_000 + REBALANCE_MS

    # Only what changed is written again; a departure writes tombstones.
    assert diff("g", image_of(group), image_of(group)) == []
    harness.beat("b", -1)
    changes = diff("g", image, image_of(harness.group))
    assert [(k.record_type, k.member) for k, v in changes if v is None] == [
        (8, "b"),
        (7, "b"),
        (5, "b"),
    ]
    gone = diff("g", image_of(harness.group), None)
    for key, value in gone:
        builder.apply(key, value)
    assert builder.groups(0, SESSION_MS) == []


async def test_consumer_groups_survive_a_restart_through_the_wire() -> None:
    broker = Broker()
    member = str(uuid.uuid4())
    joined = await consumer_beat(broker, 1, member_id=member)
    assert joined.member_epoch == 2
    broker.restart()  # a fresh coordinator replays __consumer_offsets
    beat = await consumer_beat(
        broker,
        1,
        member_id=member,
        member_epoch=2,
        rebalance_timeout=datetime.timedelta(milliseconds=-1),
        subscribed_topic_names=None,
        topic_partitions=None,
    )
    assert (beat.error_code, beat.member_epoch) == (ErrorCode.none, 2)
    group = group_coordinator(broker.runtime).registry.get("kip848")
    assert isinstance(group, ConsumerGroup) and group.state_name == "Stable"
    # Deleted groups stay deleted.
    await consumer_beat(broker, 1, member_id=member, member_epoch=-1)
    answer = await broker.send(broker.request(42, 2, groups_names=("kip848",)))
    assert answer.results[0].error_code == ErrorCode.none
    broker.restart()
    assert group_coordinator(broker.runtime).registry.get("kip848") is None
