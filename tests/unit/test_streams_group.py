"""The KIP-1071 streams group coordinator (sans-IO): topology configuration, task assignment,
reconciliation, fencing and Kafka's error codes."""

from __future__ import annotations

import pytest

from kemu.coordinator.group.registry import GroupRegistry
from kemu.coordinator.group.share_group import GroupError
from kemu.coordinator.group.streams_assignor import AssignMember, TaskTuple, assign
from kemu.coordinator.group.streams_group import (
    StreamsGroup,
    StreamsGroupCoordinator,
    StreamsHeartbeat,
    StreamsSettings,
)
from kemu.coordinator.group.streams_topology import (
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
    assert first.member_epoch == 1 and first.status == ()
    assert first.assignment is not None and len(first.assignment.active) == 4
    owned_a = first.assignment
    second = h.beat("b", 0)
    assert second.member_epoch == 2
    assert second.assignment == TaskTuple()  # a still owns everything
    # a is told to give two tasks up, keeping its epoch
    step = h.beat("a", 1, owned=owned_a)
    assert step.member_epoch == 1
    assert step.assignment is not None and len(step.assignment.active) == 2
    # once a no longer owns them, it gets epoch 2 and b gets them
    done = h.beat("a", 1, owned=step.assignment)
    assert done.member_epoch == 2
    got = h.beat("b", 2, owned=TaskTuple())
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
    assert group.validate_offset_commit("a", 1) is None
    assert group.validate_offset_commit("a", 7) == ErrorCode.stale_member_epoch
    assert group.validate_offset_commit("x", 1) == ErrorCode.unknown_member_id
    assert group.validate_offset_commit("", -1) == ErrorCode.unknown_member_id
