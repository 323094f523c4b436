"""The share-group state machine (sans-IO, virtual clock): joining, epochs, assignment spread,
fencing, leaving, session expiry, group size, protocol validation, metadata changes."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest

from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.modern_group import TopicMeta
from kemu.coordinator.group.registry import GroupRegistry
from kemu.coordinator.group.share.group import (
    InitializePartitions,
    MemberRemoved,
    MembershipSettings,
    ShareGroupCoordinator,
    ShareHeartbeat,
    ShareHeartbeatResult,
)
from kemu.protocol.errors import ErrorCode

TOPIC = uuid.UUID(int=7)
OTHER = uuid.UUID(int=8)
GROUP = "g"
SESSION_MS = 45_000


@dataclass
class Harness:
    """A coordinator over a fake topic catalogue and a clock the test moves."""

    topics: dict[str, TopicMeta] = field(
        default_factory=lambda: {"t": TopicMeta(TOPIC, 3), "u": TopicMeta(OTHER, 2)}
    )
    now_ms: int = 1_000_000
    max_size: int = 200
    registry: GroupRegistry = field(default_factory=GroupRegistry)
    # Do what the service does with InitializePartitions at once (between two heartbeats).
    auto_initialize: bool = True

    def __post_init__(self) -> None:
        self.coordinator = ShareGroupCoordinator(
            self.registry, lambda group_id: MembershipSettings(SESSION_MS, 5000, self.max_size)
        )

    def beat(
        self,
        member: str,
        epoch: int,
        topics: tuple[str, ...] | None = None,
        group: str = GROUP,
        rack: str | None = None,
    ) -> ShareHeartbeatResult:
        request = ShareHeartbeat(group, member, epoch, rack, topics, "client", "/127.0.0.1")
        result = self.coordinator.heartbeat(request, self.topics.get, self.now_ms)
        for effect in result.effects:
            if self.auto_initialize and isinstance(effect, InitializePartitions):
                self.coordinator.partitions_initialized(effect.group_id, effect.partitions)
        return result

    def join(self, member: str, topics: tuple[str, ...] = ("t",)) -> ShareHeartbeatResult:
        return self.beat(member, 0, topics)

    def error(self, member: str, epoch: int, topics: tuple[str, ...] | None = None) -> ErrorCode:
        with pytest.raises(GroupError) as raised:
            self.beat(member, epoch, topics)
        return raised.value.code

    def settle(self, members: list[str]) -> dict[str, frozenset[tuple[uuid.UUID, int]]]:
        """Heartbeat every member until all sit at the assignment epoch; their assignments."""
        group = self.coordinator.describe(GROUP)
        for _ in range(3):
            for member in members:
                self.beat(member, group.members[member].member_epoch)
        return {m: group.members[m].assigned for m in members}


def partitions(*indexes: int, topic: uuid.UUID = TOPIC) -> frozenset[tuple[uuid.UUID, int]]:
    return frozenset((topic, i) for i in indexes)


def test_first_join_creates_the_group_and_assigns_once_share_state_is_initialized() -> None:
    """Kafka 4.4: a new group is at epoch 1, the join takes it to 2 and assigns nothing; the
    coordinator initializes the share state after answering, and the next heartbeat bumps the
    epoch and assigns the initialized partitions."""
    h = Harness(auto_initialize=False)
    result = h.join("a")
    assert (result.member_id, result.member_epoch) == ("a", 2)
    assert result.heartbeat_interval_ms == 5000
    assert result.assignment == frozenset()
    group = h.coordinator.describe(GROUP)
    assert (group.group_epoch, group.assignment_epoch, group.state_name) == (2, 2, "Stable")
    assert result.effects == (InitializePartitions(GROUP, 2, ((TOPIC, 0), (TOPIC, 1), (TOPIC, 2))),)
    waiting = h.beat("a", 2)  # not initialized yet: nothing, and not asked again
    assert (waiting.member_epoch, waiting.assignment, waiting.effects) == (2, None, ())
    h.coordinator.partitions_initialized(GROUP, [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)])
    assigned = h.beat("a", 2)
    assert (assigned.member_epoch, assigned.assignment) == (3, partitions(0, 1, 2))
    assert (group.group_epoch, group.assignment_epoch) == (3, 3)
    assert group.initialized == {TOPIC: {0, 1, 2}} and group.initializing == {}
    assert h.beat("a", 3).member_epoch == 3  # all assigned: no further bump


def test_a_failed_initialization_is_asked_again() -> None:
    h = Harness(auto_initialize=False)
    first = h.join("a", ("u",))
    h.coordinator.partitions_initialized(GROUP, [(OTHER, 0)])
    h.coordinator.partitions_initialized(GROUP, [(OTHER, 1)], succeeded=False)
    again = h.beat("a", first.member_epoch)
    # OTHER is initialized (partition 0): Kafka asks for partition 1 from offset 0
    assert again.effects == (InitializePartitions(GROUP, 3, ((OTHER, 1),), frozenset({OTHER})),)
    assert again.assignment == partitions(0, topic=OTHER)


def test_steady_heartbeats_keep_the_epoch_and_omit_the_assignment() -> None:
    h = Harness()
    h.join("a")
    assert h.beat("a", 2).assignment == partitions(0, 1, 2)
    h.now_ms += 5000
    result = h.beat("a", 3)
    assert (result.member_epoch, result.assignment, result.effects) == (3, None, ())
    full = h.beat("a", 3, ("t",))  # a full request always gets the assignment back
    assert full.assignment == partitions(0, 1, 2)


@pytest.mark.parametrize(("count", "loads"), [(1, [3]), (2, [1, 2]), (5, [1, 1, 1, 1, 2])])
def test_spread_over_three_partitions(count: int, loads: list[int]) -> None:
    h = Harness()
    names = [f"m{i}" for i in range(count)]
    for name in names:
        h.join(name)
    assigned = h.settle(names)
    assert sorted(len(p) for p in assigned.values()) == loads
    covered = [p for ps in assigned.values() for p in ps]
    assert set(covered) == partitions(0, 1, 2)
    if count == 5:  # members outnumber partitions: each partition has two members
        assert sorted(covered.count(p) for p in partitions(0, 1, 2)) == [2, 2, 2]


def test_several_members_share_one_partition() -> None:
    h = Harness(topics={"t": TopicMeta(TOPIC, 1)})
    for name in ("a", "b", "c"):
        h.join(name)
    assert h.settle(["a", "b", "c"]) == {m: partitions(0) for m in ("a", "b", "c")}


def test_a_join_bumps_the_group_epoch_and_others_catch_up_on_their_next_heartbeat() -> None:
    h = Harness()
    h.join("a")
    b = h.join("b")
    assert b.member_epoch == 3
    group = h.coordinator.describe(GROUP)
    assert group.members["a"].member_epoch == 2  # not yet reconciled
    a = h.beat("a", 2)
    assert a.member_epoch == 3
    assert a.assignment is not None and len(a.assignment) + len(b.assignment or ()) == 3
    assert group.members["a"].previous_member_epoch == 2


def test_the_previous_epoch_is_accepted_others_are_fenced() -> None:
    h = Harness()
    h.join("a")
    h.join("b")
    h.beat("a", 2)  # a moves to epoch 3; pretend the response was lost
    assert h.beat("a", 2).member_epoch == 3
    assert h.error("a", 4) == ErrorCode.fenced_member_epoch
    h.join("c")
    h.beat("a", 3)  # a moves to 4, previous 3
    assert h.error("a", 2) == ErrorCode.fenced_member_epoch
    assert h.error("a", 0, ("t",)) == ErrorCode.fenced_member_epoch  # rejoin with the same id


def test_unknown_member_and_unknown_group() -> None:
    h = Harness()
    assert h.error("a", 1) == ErrorCode.group_id_not_found
    h.join("a")
    assert h.error("zz", 4) == ErrorCode.unknown_member_id
    assert h.error("zz", -1) == ErrorCode.unknown_member_id


def test_an_unknown_member_with_a_non_zero_epoch_is_unknown_even_in_an_empty_group() -> None:
    """Kafka 4.4's getOrMaybeSubscribeShareGroupMember: only epoch 0 creates a member; any other
    epoch for a member the group does not hold is UNKNOWN_MEMBER_ID with ShareGroup's message,
    whether or not the group has members (make conformance-diff's heartbeat after the
    consumer closed)."""
    h = Harness()
    h.join("a")
    h.beat("a", -1)
    with pytest.raises(GroupError) as raised:
        h.beat("AAAA", 3)
    assert (raised.value.code, raised.value.message) == (
        ErrorCode.unknown_member_id,
        f"Member AAAA is not a member of group {GROUP}.",
    )


def test_leave_bumps_the_epoch_and_releases_the_member() -> None:
    h = Harness()
    h.join("a")
    h.join("b")
    assert h.beat("a", 2).assignment is not None  # a gives a partition to b at epoch 3
    left = h.beat("b", -1)
    assert (left.member_id, left.member_epoch) == ("b", -1)
    assert left.effects == (MemberRemoved(GROUP, "b", "the member left the group"),)
    group = h.coordinator.describe(GROUP)
    assert group.group_epoch == 4 and set(group.members) == {"a"}
    assert h.beat("a", 3).assignment == partitions(0, 1, 2)
    h.beat("a", -1)
    assert group.state_name == "Empty" and h.registry.get(GROUP) is group
    # The last member gone, the empty target takes the new epoch (Kafka's member fencing).
    assert (group.group_epoch, group.assignment_epoch) == (5, 5)


def test_sessions_expire_after_the_session_timeout() -> None:
    h = Harness()
    h.join("a")
    h.now_ms += 10_000
    h.join("b")
    assert h.coordinator.next_deadline_ms() == h.now_ms - 10_000 + SESSION_MS
    h.now_ms += SESSION_MS - 10_000 - 1
    assert h.coordinator.expire_sessions(h.now_ms) == []
    h.now_ms += 1
    expired = h.coordinator.expire_sessions(h.now_ms)
    assert expired == [MemberRemoved(GROUP, "a", "the member session expired")]
    assert h.error("a", 2) == ErrorCode.unknown_member_id
    h.beat("b", 3)  # heartbeats push the deadline
    h.now_ms += SESSION_MS - 1
    assert h.coordinator.expire_sessions(h.now_ms) == []
    assert set(h.coordinator.describe(GROUP).members) == {"b"}


def test_group_max_size() -> None:
    h = Harness(max_size=2)
    h.join("a")
    h.join("b")
    assert h.error("c", 0, ("t",)) == ErrorCode.group_max_size_reached
    assert h.beat("a", 2).member_epoch == 3  # existing members are still served


@pytest.mark.parametrize(
    ("member", "epoch", "topics", "rack", "message"),
    [
        ("", 0, ("t",), None, "MemberId can't be empty."),
        ("  ", 1, None, None, "MemberId can't be empty."),
        ("a", 0, None, None, "SubscribedTopicNames must be set in first request."),
        ("a", 0, (), None, "SubscribedTopicNames must be set in first request."),
        ("a", -2, None, None, "MemberEpoch is invalid."),
        ("a", 0, ("t",), " ", "RackId can't be empty."),
    ],
)
def test_invalid_requests(
    member: str, epoch: int, topics: tuple[str, ...] | None, rack: str | None, message: str
) -> None:
    h = Harness()
    with pytest.raises(GroupError) as raised:
        h.beat(member, epoch, topics, rack=rack)
    assert (raised.value.code, raised.value.message) == (ErrorCode.invalid_request, message)
    with pytest.raises(GroupError) as empty_group:
        h.beat("a", 0, ("t",), group="")
    assert empty_group.value.message == "GroupId can't be empty."


def test_another_group_type_with_the_same_id_is_not_found() -> None:
    @dataclass
    class ClassicGroup:
        group_id: str
        group_type: str = "classic"
        protocol_type: str = "consumer"
        state_name: str = "Empty"

        def is_empty(self) -> bool:
            return True

    h = Harness()
    h.registry.put(ClassicGroup(GROUP))
    assert h.error("a", 0, ("t",)) == ErrorCode.group_id_not_found
    with pytest.raises(GroupError) as raised:
        h.coordinator.describe(GROUP)
    assert raised.value.code == ErrorCode.group_id_not_found


def test_subscription_change_reassigns() -> None:
    h = Harness()
    h.join("a")
    changed = h.beat("a", 2, ("t", "u"))
    assert changed.member_epoch == 3
    assert changed.assignment == partitions(0, 1, 2)  # u's share state is not initialized yet
    assert changed.effects == (InitializePartitions(GROUP, 3, ((OTHER, 0), (OTHER, 1))),)
    both = h.beat("a", 3)
    assert both.member_epoch == 4
    assert both.assignment == partitions(0, 1, 2) | partitions(0, 1, topic=OTHER)
    same = h.beat("a", 4, ("u", "t"))  # same set in another order: no bump
    assert same.member_epoch == 4


def test_partition_count_change_bumps_the_group_epoch() -> None:
    h = Harness()
    h.join("a")
    h.beat("a", 2)
    h.topics["t"] = TopicMeta(TOPIC, 5)
    grown = h.beat("a", 3)
    assert (grown.member_epoch, grown.assignment) == (4, None)  # 3 and 4 not initialized yet
    # partitions added to a topic already initialized start at offset 0, not -1 (Kafka's
    # buildInitializeShareGroupStateRequest): what was produced to them before is read
    assert grown.effects == (
        InitializePartitions(GROUP, 4, ((TOPIC, 3), (TOPIC, 4)), frozenset({TOPIC})),
    )
    assert h.beat("a", 4).assignment == partitions(0, 1, 2, 3, 4)


def test_new_topics_start_uninitialized_beside_grown_ones() -> None:
    """One heartbeat initializing a new topic and partitions added to a known one: only the
    known topic's partitions start at offset 0."""
    h = Harness()
    h.join("a")
    h.beat("a", 2)
    h.topics["t"] = TopicMeta(TOPIC, 4)
    both = h.beat("a", 2, ("t", "u"))
    assert both.effects == (
        InitializePartitions(GROUP, 4, ((TOPIC, 3), (OTHER, 0), (OTHER, 1)), frozenset({TOPIC})),
    )


def test_subscribing_to_a_missing_topic_assigns_it_once_it_exists() -> None:
    h = Harness()
    assert h.beat("a", 0, ("later",)).assignment == frozenset()
    h.topics["later"] = TopicMeta(uuid.UUID(int=9), 1)
    appeared = h.beat("a", 2)
    assert (appeared.member_epoch, appeared.assignment) == (3, None)  # being initialized
    assert h.beat("a", 3).assignment == frozenset({(uuid.UUID(int=9), 0)})


def test_rack_and_client_details_are_kept() -> None:
    h = Harness()
    h.beat("a", 0, ("t",), rack="r1")
    h.beat("a", 2)  # a null rack means unchanged
    member = h.coordinator.describe(GROUP).members["a"]
    assert (member.rack_id, member.client_id, member.client_host) == ("r1", "client", "/127.0.0.1")


def test_offsets_admin_needs_an_empty_share_group() -> None:
    h = Harness()
    created = h.coordinator.empty_group_for_offsets("fresh", create=True)
    assert h.registry.get("fresh") is created and created.state_name == "Empty"
    with pytest.raises(GroupError) as missing:
        h.coordinator.empty_group_for_offsets("nope", create=False)
    assert missing.value.code == ErrorCode.group_id_not_found
    h.join("a")
    with pytest.raises(GroupError) as busy:
        h.coordinator.empty_group_for_offsets(GROUP, create=True)
    assert busy.value.code == ErrorCode.non_empty_group


def test_other_protocols_naming_a_share_group_get_kafkas_errors() -> None:
    h = Harness()
    h.join("a")
    assert h.registry.wrong_type(GROUP, 11, {"classic", "consumer"}) == (
        ErrorCode.inconsistent_group_protocol
    )
    assert h.registry.wrong_type(GROUP, 14, {"classic", "consumer"}) == ErrorCode.unknown_member_id
    assert h.registry.wrong_type(GROUP, 68, {"consumer"}) == ErrorCode.group_id_not_found
    assert h.registry.wrong_type(GROUP, 76, {"share"}) is None
    assert h.registry.wrong_type("missing", 11, {"classic"}) is None


def test_plain_heartbeats_change_nothing_durable() -> None:
    h = Harness()
    assert h.join("a").changed
    assert h.beat("a", 2).changed  # the initialized partitions are assigned at epoch 3
    h.now_ms += 5000
    assert not h.beat("a", 3).changed
    assert h.join("b").changed
    assert h.beat("a", 3).changed  # a moves to epoch 4
    assert not h.beat("a", 4, ("t",)).changed  # the same subscription again
    assert h.beat("a", -1).changed


def test_not_found_texts_are_kafkas() -> None:
    """A heartbeat names a share group, as Kafka's getOrMaybeCreateShareGroup; describe, leave
    and the offsets admin APIs say "Group X not found.", as Kafka's group() lookup does."""
    h = Harness()
    with pytest.raises(GroupError) as heartbeat:
        h.beat("a", 1, group="ghost")
    assert heartbeat.value.message == "Share group ghost not found."
    with pytest.raises(GroupError) as leave:
        h.beat("a", -1, group="ghost")
    with pytest.raises(GroupError) as described:
        h.coordinator.describe("ghost")
    with pytest.raises(GroupError) as offsets:
        h.coordinator.empty_group_for_offsets("ghost", create=False)
    for raised in (leave, described, offsets):
        assert raised.value.code == ErrorCode.group_id_not_found
        assert raised.value.message == "Group ghost not found."
