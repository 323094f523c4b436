"""The KIP-1071 streams group coordinator (sans-IO): topology configuration, task assignment,
reconciliation, fencing and Kafka's error codes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.registry import GroupRegistry
from kemu.coordinator.group.streams.assignor import AssignMember, TaskTuple, assign
from kemu.coordinator.group.streams.group import StreamsGroupCoordinator
from kemu.coordinator.group.streams.model import (
    StreamsGroup,
    StreamsHeartbeat,
    StreamsSettings,
)
from kemu.coordinator.group.streams.topology import (
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    STALE_TOPOLOGY,
    CopartitionGroup,
    Subtopology,
    TopicInfo,
    Topology,
    configure,
)
from kemu.protocol.errors import ErrorCode

# A word count: subtopology 0 re-keys input into a repartition topic, 1 counts into a store.
COUNT = Topology(
    1,
    (
        Subtopology("0", source_topics=("in",), repartition_sink_topics=("app-words-repartition",)),
        Subtopology(
            "1",
            repartition_source_topics=(TopicInfo("app-words-repartition"),),
            state_changelog_topics=(TopicInfo("app-counts-changelog"),),
        ),
    ),
)


def counts(topics: dict[str, int]):  # type: ignore[no-untyped-def]
    return topics.get


def test_configure_decides_internal_topics_from_the_sources() -> None:
    configured = configure(COUNT, counts({"in": 4}))
    assert configured.status is not None and configured.status[0] == MISSING_INTERNAL_TOPICS
    assert {(t.name, t.partitions) for t in configured.to_create} == {
        ("app-words-repartition", 4),
        ("app-counts-changelog", 4),
    }
    ready = configure(
        COUNT, counts({"in": 4, "app-words-repartition": 4, "app-counts-changelog": 4})
    )
    assert ready.ready and ready.tasks == {"0": 4, "1": 4}


def test_configure_reports_missing_sources_and_wrong_partitions() -> None:
    assert configure(COUNT, counts({})).status == (
        MISSING_SOURCE_TOPICS,
        "Source topics in are missing.",
    )
    wrong = configure(
        COUNT, counts({"in": 4, "app-words-repartition": 2, "app-counts-changelog": 4})
    )
    assert wrong.status is not None and wrong.status[0] == INCORRECTLY_PARTITIONED_TOPICS
    join = Topology(
        1,
        (
            Subtopology(
                "0",
                source_topics=("a", "b"),
                copartition_groups=(CopartitionGroup(source_topics=(0, 1)),),
            ),
        ),
    )
    assert configure(join, counts({"a": 2, "b": 3})).status == (
        INCORRECTLY_PARTITIONED_TOPICS,
        "Following topics do not have the same number of partitions: [a=2, b=3]",
    )


def test_assignor_is_balanced_sticky_and_places_standbys_on_other_processes() -> None:
    tasks = {"0": 4, "1": 4}
    first = assign([AssignMember("a", "p1"), AssignMember("b", "p2")], tasks, {"1"}, 1)
    assert len(first["a"].active) == len(first["b"].active) == 4
    assert not first["a"].active & first["b"].active
    # Each stateful task's standby is on the other process.
    assert first["a"].standby == {t for t in first["b"].active if t[0] == "1"}
    again = assign(
        [AssignMember("a", "p1", first["a"]), AssignMember("b", "p2", first["b"])],
        tasks,
        {"1"},
        1,
    )
    assert again == first
    third = assign(
        [
            AssignMember("a", "p1", first["a"]),
            AssignMember("b", "p2", first["b"]),
            AssignMember("c", "p3"),
        ],
        tasks,
        set(),
        0,
    )
    assert third["a"].active <= first["a"].active and third["b"].active <= first["b"].active
    assert sorted(len(t.active) for t in third.values()) == [2, 3, 3]


class Harness:
    def __init__(self) -> None:
        self.registry = GroupRegistry()
        self.topics = {"in": 2, "app-words-repartition": 2, "app-counts-changelog": 2}
        self.coordinator = StreamsGroupCoordinator(
            self.registry, lambda _: StreamsSettings(heartbeat_interval_ms=1000)
        )
        self.now = 0

    def beat(self, member: str, epoch: int, **fields):  # type: ignore[no-untyped-def]
        if epoch == 0:
            fields.setdefault("topology", COUNT)
            fields.setdefault("rebalance_timeout_ms", 30_000)
            fields.setdefault("process_id", f"process-{member}")
        request = StreamsHeartbeat("app", member, epoch, **fields)
        return self.coordinator.heartbeat(request, self.topics.get, self.now)


def test_join_assigns_every_task_and_a_second_member_takes_half_after_revocation() -> None:
    h = Harness()
    first = h.beat("a", 0)
    assert first.member_epoch == 2 and first.status == ()
    assert first.assignment is not None and len(first.assignment.active) == 4
    owned_a = first.assignment
    second = h.beat("b", 0)
    assert second.member_epoch == 3
    assert second.assignment == TaskTuple()  # a still owns everything
    # a is told to give two tasks up, keeping its epoch
    step = h.beat("a", 2, owned=owned_a)
    assert step.member_epoch == 2
    assert step.assignment is not None and len(step.assignment.active) == 2
    # once a no longer owns them, it gets epoch 3 and b gets them
    done = h.beat("a", 2, owned=step.assignment)
    assert done.member_epoch == 3
    got = h.beat("b", 3, owned=TaskTuple())
    assert got.assignment is not None and len(got.assignment.active) == 2
    assert not got.assignment.active & step.assignment.active
    group = h.coordinator.group("app")
    assert group is not None and group.state_name == "Stable"


def test_fencing_unknown_members_and_wrong_group_types() -> None:
    h = Harness()
    h.beat("a", 0)
    with pytest.raises(GroupError) as error:
        h.beat("a", 5)
    assert error.value.code == ErrorCode.fenced_member_epoch
    with pytest.raises(GroupError) as error:
        h.beat("ghost", 1)
    assert error.value.code == ErrorCode.unknown_member_id

    class Other:
        group_id = "consumers"
        group_type = "consumer"
        protocol_type = "consumer"
        state_name = "Stable"

        def is_empty(self) -> bool:
            return False

    h.registry.put(Other())
    with pytest.raises(GroupError) as error:
        h.coordinator.heartbeat(
            StreamsHeartbeat(
                "consumers", "m", 0, rebalance_timeout_ms=1000, topology=COUNT, process_id="p"
            ),
            h.topics.get,
            0,
        )
    assert error.value.code == ErrorCode.group_id_not_found


def test_a_group_the_coordinator_does_not_hold() -> None:
    """GROUP_ID_NOT_FOUND, as Kafka 4.4.0: a heartbeat (epoch > 0) looks the group up with
    getStreamsGroupOrThrow ("Streams group X not found."), a leave (-1, -2) with group()
    ("Group X not found.")."""
    h = Harness()
    texts = {
        5: "Streams group app not found.",
        -1: "Group app not found.",
        -2: "Group app not found.",
    }
    for epoch, text in texts.items():
        with pytest.raises(GroupError) as refused:
            h.beat("m", epoch, instance_id="i" if epoch == -2 else None)
        assert (refused.value.code, refused.value.message) == (
            ErrorCode.group_id_not_found,
            text,
        ), epoch
    assert h.coordinator.group("app") is None


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"member_id": ""}, ErrorCode.invalid_request),
        ({"rebalance_timeout_ms": -1}, ErrorCode.invalid_request),
        ({"topology": None}, ErrorCode.invalid_request),
        (
            {"topology": Topology(1, (Subtopology("0", ("in",), (), (TopicInfo("c", 3),)),))},
            ErrorCode.streams_invalid_topology,
        ),
        ({"owned": TaskTuple(frozenset({("0", 0)}))}, ErrorCode.invalid_request),
    ],
)
def test_bad_joins_get_kafkas_codes_and_change_nothing(
    fields: dict[str, object], code: int
) -> None:
    h = Harness()
    request = {
        "group_id": "app",
        "member_id": "m",
        "member_epoch": 0,
        "rebalance_timeout_ms": 1000,
        "topology": COUNT,
        "process_id": "p",
        **fields,
    }
    with pytest.raises(GroupError) as error:
        h.coordinator.heartbeat(StreamsHeartbeat(**request), h.topics.get, 0)  # type: ignore[arg-type]
    assert error.value.code == code
    assert h.registry.get("app") is None


def test_topology_updates_are_refused_and_stale_members_told() -> None:
    h = Harness()
    h.beat("a", 0)
    changed = Topology(1, (Subtopology("0", source_topics=("in",)),))
    with pytest.raises(GroupError) as error:
        h.beat("b", 0, topology=changed)
    assert error.value.code == ErrorCode.invalid_request
    stale = h.beat("c", 0, topology=Topology(0, COUNT.subtopologies))
    assert [code for code, _ in stale.status] == [STALE_TOPOLOGY]


def test_missing_internal_topics_are_returned_to_create_and_nothing_is_assigned() -> None:
    h = Harness()
    h.topics = {"in": 3}
    result = h.beat("a", 0)
    assert [code for code, _ in result.status] == [MISSING_INTERNAL_TOPICS]
    assert {t.name for t in result.topics_to_create} == {
        "app-words-repartition",
        "app-counts-changelog",
    }
    assert result.assignment == TaskTuple()
    h.topics.update({t.name: t.partitions for t in result.topics_to_create})
    after = h.beat("a", result.member_epoch)
    assert after.status == () and after.assignment is not None
    assert len(after.assignment.active) == 6


def test_sessions_expire_and_the_tasks_move() -> None:
    h = Harness()
    a = h.beat("a", 0)
    b = h.beat("b", 0)
    group = h.coordinator.group("app")
    assert isinstance(group, StreamsGroup)
    deadline = h.coordinator.next_deadline_ms()
    assert deadline is not None
    h.now = deadline
    h.beat("b", b.member_epoch)  # b keeps its session
    assert h.coordinator.expire(deadline, h.topics.get) == [("app", "a")]
    assert a.assignment is not None
    result = h.beat("b", group.members["b"].member_epoch, owned=TaskTuple())
    assert result.assignment is not None and len(result.assignment.active) == 4


def test_offset_commit_validation() -> None:
    h = Harness()
    h.beat("a", 0)
    group = h.coordinator.group("app")
    assert group is not None
    assert group.validate_offset_commit("a", 2) is None
    assert group.validate_offset_commit("a", 7) == ErrorCode.stale_member_epoch
    assert group.validate_offset_commit("x", 2) == ErrorCode.unknown_member_id
    assert group.validate_offset_commit("", -1) == ErrorCode.unknown_member_id


def test_offset_fetch_validation() -> None:
    h = Harness()
    h.beat("a", 0)
    group = h.coordinator.group("app")
    assert group is not None
    assert group.validate_offset_fetch(None, -1) is None  # no member epoch: anyone may read
    assert group.validate_offset_fetch("a", 2) is None
    assert group.validate_offset_fetch("a", 1) == ErrorCode.stale_member_epoch
    assert group.validate_offset_fetch("x", 2) == ErrorCode.unknown_member_id


# --- records and the wire ------------------------------------------------------------------


def test_streams_records_are_kafkas_bytes() -> None:
    from kemu.coordinator.group.streams.records import (
        GROUP_METADATA,
        MEMBER_METADATA,
        StreamsGroupValue,
        StreamsMemberValue,
        StreamsRecordKey,
        decode_value,
        encode_value,
    )

    # Written by Kafka 4.4.0's generated StreamsGroupMetadataValue / MemberMetadataValue.
    group = StreamsGroupValue(epoch=3, validated_topology_epoch=1)
    assert encode_value(group).hex() == "000000000003000000000000000001000400000001"
    member = StreamsMemberValue("", "", "c", "h", -1, 0, "p", None, ())
    assert encode_value(member).hex() == "0000010102630268ffffffff000000000270ff0100"
    key = StreamsRecordKey(GROUP_METADATA, "g")
    assert decode_value(key, encode_value(group)) == group
    with_endpoint = replace(member, user_endpoint=("host", 8080), client_tags=(("az", "1"),))
    member_key = StreamsRecordKey(MEMBER_METADATA, "g", "m")
    assert decode_value(member_key, encode_value(with_endpoint)) == replace(
        with_endpoint, instance_id=None, rack_id=None
    )


def test_a_group_is_rebuilt_from_its_records() -> None:
    from kemu.coordinator.group.records import decode_key, decode_value, encode_key, encode_value
    from kemu.coordinator.group.streams.records import StreamsImageBuilder, diff, image_of

    h = Harness()
    owned = h.beat("a", 0).assignment
    h.beat("b", 0)
    h.beat("a", 2, owned=owned)  # a is revoking
    group = h.coordinator.group("app")
    assert group is not None
    builder = StreamsImageBuilder()
    for key, value in diff(None, image_of(group)):
        raw_key, raw_value = encode_key(key), encode_value(value)
        decoded = decode_key(raw_key)
        builder.apply(decoded, decode_value(decoded, raw_value))  # type: ignore[arg-type]
    ((rebuilt, image),) = builder.groups(1_000, 45_000)
    assert image == image_of(group)
    assert rebuilt.topology == group.topology
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
    assert diff(image_of(group), image_of(group)) == []
    tombstones = [(k.record_type, k.member) for k, v in diff(image, None) if v is None]
    assert tombstones[-1] == (17, None)


async def test_heartbeat_describe_commit_and_restart_through_the_wire() -> None:
    import datetime

    from kemu.coordinator.group.service import group_coordinator
    from tests.unit.broker.handlers.test_classic_group_handlers import Broker

    broker = Broker()
    assign_at_once(broker)
    broker.cluster.create_topic("in", 2, 1)

    def topic_info(name: str) -> object:
        return broker.nested(88, 0, "TopicInfo", name=name, partitions=0,
                             replication_factor=0, topic_configs=())  # fmt: skip

    topology = broker.nested(
        88,
        0,
        "Topology",
        epoch=0,
        subtopologies=(
            broker.nested(
                88,
                0,
                "Subtopology",
                subtopology_id="0",
                source_topics=("in",),
                repartition_sink_topics=("app-r",),
                state_changelog_topics=(),
                repartition_source_topics=(),
                copartition_groups=(),
            ),
            broker.nested(
                88,
                0,
                "Subtopology",
                subtopology_id="1",
                source_topics=(),
                repartition_sink_topics=(),
                state_changelog_topics=(topic_info("app-c"),),
                repartition_source_topics=(topic_info("app-r"),),
                copartition_groups=(),
            ),
        ),
    )
    base = {
        "group_id": "app",
        "member_id": "m1",
        "endpoint_information_epoch": 0,
        "active_tasks": None,
        "standby_tasks": None,
        "warmup_tasks": None,
        "client_tags": None,
        "task_offsets": None,
        "task_end_offsets": None,
    }

    async def beat(**fields: object) -> Any:
        return await broker.send(broker.request(88, 0, **{**base, **fields}))

    joined = await beat(
        member_epoch=0,
        rebalance_timeout=datetime.timedelta(seconds=30),
        topology=topology,
        process_id="p1",
        active_tasks=(),
        standby_tasks=(),
        warmup_tasks=(),
        client_tags=(),
    )
    assert joined.error_code == ErrorCode.none and joined.member_epoch == 2
    assert [s.status_code for s in joined.status] == [MISSING_INTERNAL_TOPICS]
    assert len(broker.cluster.topics["app-r"].partitions) == 2
    assert len(broker.cluster.topics["app-c"].partitions) == 2
    ready = await beat(member_epoch=2)
    assert ready.status == () and ready.member_epoch == 3
    assert sorted((t.subtopology_id, t.partitions) for t in ready.active_tasks) == [
        ("0", (0, 1)),
        ("1", (0, 1)),
    ]
    stale = await beat(member_epoch=7)
    assert stale.error_code == ErrorCode.fenced_member_epoch

    described = await broker.send(
        broker.request(89, 0, group_ids=("app", "nope"), include_authorized_operations=False)
    )
    group, missing = described.groups
    assert (group.group_state, group.group_epoch, group.topology.epoch) == ("Stable", 3, 0)
    changelog = group.topology.subtopologies[1].state_changelog_topics[0]
    assert (changelog.name, changelog.partitions) == ("app-c", 2)
    assert missing.error_code == ErrorCode.group_id_not_found
    listed = [
        (g.group_id, g.group_type, g.group_state)
        for node in (1, 2, 3)
        for g in (
            await broker.send(broker.request(16, 5, states_filter=(), types_filter=()), node)
        ).groups
    ]
    assert listed == [("app", "streams", "Stable")]

    partition = broker.nested(
        8, 9, "OffsetCommitRequestPartition", partition_index=0, committed_offset=3
    )
    topic = broker.nested(8, 9, "OffsetCommitRequestTopic", name="in", partitions=(partition,))
    ok = await broker.commit(
        9, "app", 3, generation_id_or_member_epoch=3, member_id="m1", topics=(topic,)
    )
    assert ok.topics[0].partitions[0].error_code == ErrorCode.none
    bad = await broker.commit(
        9, "app", 3, generation_id_or_member_epoch=9, member_id="m1", topics=(topic,)
    )
    assert bad.topics[0].partitions[0].error_code == ErrorCode.stale_member_epoch

    broker.restart()  # a fresh coordinator replays __consumer_offsets
    again = await beat(member_epoch=3)
    assert (again.error_code, again.member_epoch) == (ErrorCode.none, 3)
    reloaded = group_coordinator(broker.runtime).registry.get("app")
    assert isinstance(reloaded, StreamsGroup) and reloaded.state_name == "Stable"
    assert reloaded.members["m1"].assigned.active == {("0", 0), ("0", 1), ("1", 0), ("1", 1)}
    # A consumer-protocol heartbeat for the streams group's id: GROUP_ID_NOT_FOUND.
    consumer = await broker.send(
        broker.request(
            68,
            1,
            group_id="app",
            member_id="c",
            member_epoch=0,
            rebalance_timeout=datetime.timedelta(seconds=30),
            subscribed_topic_names=("in",),
            topic_partitions=(),
        )
    )
    assert consumer.error_code == ErrorCode.group_id_not_found
    left = await beat(member_epoch=-1)
    assert left.member_epoch == -1
    deleted = await broker.send(broker.request(42, 2, groups_names=("app",)))
    assert deleted.results[0].error_code == ErrorCode.none
    broker.restart()
    assert group_coordinator(broker.runtime).registry.get("app") is None


async def test_v1_heartbeat_and_describe() -> None:
    """Kafka 4.4's v1: the heartbeat answers an int64 AcceptableRecoveryLag and
    TopologyDescriptionRequired false; the describe answers the assignor's name."""
    import datetime

    from tests.unit.broker.handlers.test_classic_group_handlers import Broker

    broker = Broker()
    assign_at_once(broker)
    broker.cluster.create_topic("in", 2, 1)
    topology = broker.nested(
        88,
        1,
        "Topology",
        epoch=0,
        subtopologies=(
            broker.nested(
                88, 1, "Subtopology", subtopology_id="0", source_topics=("in",),
                state_changelog_topics=(), repartition_source_topics=(), copartition_groups=(),
            ),
        ),
    )  # fmt: skip
    joined = await broker.send(
        broker.request(
            88, 1, group_id="v1", member_id="m", member_epoch=0, endpoint_information_epoch=0,
            rebalance_timeout=datetime.timedelta(seconds=30), topology=topology,
            process_id="p", active_tasks=(), standby_tasks=(), warmup_tasks=(), client_tags=(),
            task_offsets=None, task_end_offsets=None,
        )
    )  # fmt: skip
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 2)
    assert joined.acceptable_recovery_lag == 10_000
    assert joined.topology_description_required is False
    assert [(t.subtopology_id, t.partitions) for t in joined.active_tasks] == [("0", (0, 1))]
    described = await broker.send(
        broker.request(
            89, 1, group_ids=("v1",), include_authorized_operations=False,
            include_topology_description=True,
        )
    )  # fmt: skip
    (group,) = described.groups
    assert (group.group_state, group.assignor_name, group.topology_description) == (
        "Stable",
        "sticky",
        None,
    )


def test_standby_tasks_go_to_another_process_and_never_beside_the_active() -> None:
    h = Harness()
    h.coordinator.settings = lambda _: StreamsSettings(num_standby_replicas=1)
    a = h.beat("a", 0)
    assert a.assignment is not None and a.assignment.standby == frozenset()  # one process only
    b = h.beat("b", 0)
    a2 = h.beat("a", a.member_epoch, owned=a.assignment)
    a3 = h.beat("a", a2.member_epoch, owned=a2.assignment)
    b2 = h.beat("b", b.member_epoch, owned=TaskTuple())
    group = h.coordinator.group("app")
    assert group is not None
    target_a, target_b = group.target["a"], group.target["b"]
    # Only the stateful subtopology (1, with the changelog) has standbys, on the other process.
    assert target_a.standby == {t for t in target_b.active if t[0] == "1"}
    assert target_b.standby == {t for t in target_a.active if t[0] == "1"}
    assert a3.assignment is not None and b2.assignment is not None
    for tasks in (group.members["a"].assigned, group.members["b"].assigned):
        assert not tasks.active & tasks.standby


def test_static_members_leave_for_now_and_come_back_without_a_rebalance() -> None:
    h = Harness()
    a = h.beat("a", 0, instance_id="i1")
    b = h.beat("b", 0, instance_id="i2")
    h.beat("a", a.member_epoch, owned=a.assignment)
    h.beat("a", a.member_epoch, owned=TaskTuple())  # a released what b needs
    h.beat("b", b.member_epoch, owned=TaskTuple())
    group = h.coordinator.group("app")
    assert group is not None
    epoch = group.group_epoch
    tasks_b = group.members["b"].assigned
    with pytest.raises(GroupError) as error:
        h.beat("x", 0, instance_id="i2")
    assert error.value.code == ErrorCode.unreleased_instance_id
    with pytest.raises(GroupError) as error:
        h.beat("x", 2, instance_id="i2")
    assert error.value.code == ErrorCode.fenced_instance_id
    left = h.beat("b", -2, instance_id="i2")
    assert left.member_epoch == -2
    assert group.members["b"].assigned == tasks_b  # its tasks wait for it
    back = h.beat("b2", 0, instance_id="i2", process_id="process-b")
    assert "b" not in group.members and group.group_epoch == epoch  # no rebalance
    assert back.assignment is not None and back.assignment.active == tasks_b.active
    assert back.member_epoch == epoch


def test_a_full_group_spares_a_held_instance_id_the_size_check() -> None:
    """Kafka 4.4.0's throwIfStreamsGroupIsFull runs on a join only and returns at once for an
    instance id a member holds (StreamsGroup.hasStaticMember, a member at -2 too): the instance
    id's checks answer (UNRELEASED_INSTANCE_ID while its holder is active, under the holder's
    own member id too) and a static member's replacement gets into the full group. Kemu once
    answered GROUP_MAX_SIZE_REACHED to both joins under a new member id, and let the active
    holder rejoin under its own."""
    h = Harness()
    h.coordinator.settings = lambda _: StreamsSettings(heartbeat_interval_ms=1000, max_size=2)
    a = h.beat("a", 0, instance_id="i1")
    h.beat("b", 0)
    h.beat("a", a.member_epoch, owned=a.assignment)
    h.beat("a", a.member_epoch, owned=TaskTuple())  # a released what b needs
    group = h.coordinator.group("app")
    assert group is not None
    epoch, tasks_a = group.group_epoch, group.members["a"].assigned

    def refused(member: str, epoch: int, **fields: Any) -> ErrorCode:
        with pytest.raises(GroupError) as error:
            h.beat(member, epoch, **fields)
        return error.value.code

    assert refused("x", 0) == ErrorCode.group_max_size_reached
    assert refused("x", 0, instance_id="i9") == ErrorCode.group_max_size_reached
    assert refused("x", epoch) == ErrorCode.unknown_member_id  # not a join: not checked
    assert refused("x", 0, instance_id="i1") == ErrorCode.unreleased_instance_id
    assert refused("x", epoch, instance_id="i1") == ErrorCode.fenced_instance_id
    assert refused("a", 0, instance_id="i1") == ErrorCode.unreleased_instance_id
    assert group.members["a"].member_epoch == epoch  # refused: untouched
    assert h.beat("a", -2, instance_id="i1").member_epoch == -2
    back = h.beat("a2", 0, instance_id="i1", process_id="process-a")
    assert set(group.members) == {"a2", "b"} and group.group_epoch == epoch
    assert back.assignment is not None and back.assignment.active == tasks_a.active
    assert refused("x", 0) == ErrorCode.group_max_size_reached  # still full


def test_an_empty_classic_group_is_taken_over() -> None:
    from kemu.coordinator.group.classic.group import ClassicGroupCoordinator, ClassicSettings

    h = Harness()
    classic = ClassicGroupCoordinator(h.registry, lambda _: ClassicSettings(0, 6000, 300000, 10))
    classic.simple_group("app", 0)  # offsets an admin committed before the app's first run
    result = h.beat("a", 0)
    assert result.member_epoch == 2
    assert isinstance(h.registry.get("app"), StreamsGroup)


async def test_offsets_reset_before_the_first_run_do_not_block_the_join() -> None:
    """kafka-streams-groups --reset-offsets before an app's first run commits offsets for a group
    that does not exist (a simple classic group); the app's join then takes it over."""
    import datetime

    from kemu.coordinator.group.service import group_coordinator
    from tests.unit.broker.handlers.test_classic_group_handlers import Broker

    broker = Broker()
    assign_at_once(broker)
    broker.cluster.create_topic("in", 1, 1)
    partition = broker.nested(
        8, 9, "OffsetCommitRequestPartition", partition_index=0, committed_offset=5
    )
    topic = broker.nested(8, 9, "OffsetCommitRequestTopic", name="in", partitions=(partition,))
    reset = await broker.commit(
        9, "pre", 5, generation_id_or_member_epoch=-1, member_id="", topics=(topic,)
    )
    assert reset.topics[0].partitions[0].error_code == ErrorCode.none
    topology = broker.nested(
        88, 0, "Topology", epoch=0,
        subtopologies=(
            broker.nested(
                88, 0, "Subtopology", subtopology_id="0", source_topics=("in",),
                state_changelog_topics=(), repartition_source_topics=(), copartition_groups=(),
            ),
        ),
    )  # fmt: skip
    joined = await broker.send(
        broker.request(
            88, 0, group_id="pre", member_id="m", member_epoch=0, endpoint_information_epoch=0,
            rebalance_timeout=datetime.timedelta(seconds=30), topology=topology,
            process_id="p", active_tasks=(), standby_tasks=(), warmup_tasks=(), client_tags=(),
            task_offsets=None, task_end_offsets=None,
        )
    )  # fmt: skip
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 2)
    service = group_coordinator(broker.runtime)
    assert isinstance(service.registry.get("pre"), StreamsGroup)
    assert service.fetch_offsets("pre", [("in", [0])])[1][0].offset == 5
    broker.restart()
    assert isinstance(group_coordinator(broker.runtime).registry.get("pre"), StreamsGroup)


def test_a_changed_standby_config_triggers_a_rebalance() -> None:
    h = Harness()
    a = h.beat("a", 0)
    group = h.coordinator.group("app")
    assert group is not None and group.assignment_configs == (("num.standby.replicas", "0"),)
    steady = h.beat("a", a.member_epoch)
    assert steady.member_epoch == a.member_epoch
    h.coordinator.settings = lambda _: StreamsSettings(num_standby_replicas=1)
    changed = h.beat("a", a.member_epoch)
    assert changed.member_epoch == a.member_epoch + 1
    assert group.assignment_configs == (("num.standby.replicas", "1"),)


def assign_at_once(broker: Any) -> None:
    """No initial rebalance delay (``kemu serve``'s default) and no assignment interval (as
    Kafka's own request tests run), so each step's target is computed on its heartbeat."""
    broker.cluster.config.static["group.streams.initial.rebalance.delay.ms"] = "0"
    broker.cluster.config.static["group.streams.assignment.interval.ms"] = "0"
