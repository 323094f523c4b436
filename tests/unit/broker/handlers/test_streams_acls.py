"""StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89) through the handlers: the ACL checks
KafkaApis makes (group READ/DESCRIBE, topic DESCRIBE, CREATE for internal topics), the topology
checks made before the coordinator (internal and invalid topic names), the members' task
offsets in describe, and bad heartbeats answered with Kafka's codes while changing nothing.
User:ANONYMOUS on an in-process 3-broker model with StandardAuthorizer semantics
(``docs/security.md``)."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest

from kemu.broker.security.acls import AclResourceType, Operation, acl_store
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.streams.topology import MISSING_INTERNAL_TOPICS
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_acl_handlers import STANDARD, LoopBroker, allow

T, G, C = AclResourceType.TOPIC, AclResourceType.GROUP, AclResourceType.CLUSTER
HEARTBEAT, DESCRIBE = 88, 89


# No initial rebalance delay (kemu serve's default) and no assignment interval: every heartbeat
# computes its epoch's target, as Kafka's own request tests run.
ASSIGN_AT_ONCE = {
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.assignment.interval.ms": "0",
}


@pytest.fixture
def broker() -> Iterator[LoopBroker]:
    b = LoopBroker(
        **{"authorizer.class.name": STANDARD, "super.users": "User:admin", **ASSIGN_AT_ONCE}
    )
    b.cluster.create_topic("in", 2, 1)
    yield b
    b.loop.close()


def topology(b: LoopBroker, source: str = "in", changelog: str = "app-c") -> Any:
    def info(name: str) -> Any:
        return b.nested(HEARTBEAT, 0, "TopicInfo", name=name, partitions=0,
                        replication_factor=0, topic_configs=())  # fmt: skip

    return b.nested(
        HEARTBEAT, 0, "Topology", epoch=0,
        subtopologies=(
            b.nested(
                HEARTBEAT, 0, "Subtopology", subtopology_id="0", source_topics=(source,),
                repartition_sink_topics=(), state_changelog_topics=(info(changelog),),
                repartition_source_topics=(), copartition_groups=(),
            ),
        ),
    )  # fmt: skip


def join(b: LoopBroker, group: str = "app", member: str = "m1", **fields: Any) -> Any:
    values = _join_fields(b, group, member)
    values.update(fields)
    return b.send(b.request(HEARTBEAT, 0, **values))


def _join_fields(b: LoopBroker, group: str = "app", member: str = "m1") -> dict[str, Any]:
    return {
        "group_id": group,
        "member_id": member,
        "member_epoch": 0,
        "endpoint_information_epoch": 0,
        "rebalance_timeout": datetime.timedelta(seconds=30),
        "topology": topology(b),
        "process_id": "p1",
        "active_tasks": (),
        "standby_tasks": (),
        "warmup_tasks": (),
        "client_tags": (),
        "task_offsets": None,
        "task_end_offsets": None,
    }


def describe(b: LoopBroker, *groups: str, operations: bool = False) -> Any:
    request = b.request(DESCRIBE, 0, group_ids=groups, include_authorized_operations=operations)
    return b.send(request).groups


def streams_group(b: LoopBroker, group_id: str = "app") -> Any:
    return group_coordinator(b.runtime).registry.get(group_id)


def test_heartbeat_needs_group_read_and_describe_on_every_topology_topic(
    broker: LoopBroker,
) -> None:
    denied = join(broker)
    assert denied.error_code == ErrorCode.group_authorization_failed
    assert (denied.error_message, denied.member_id, denied.status) == (None, "", ())
    assert streams_group(broker) is None
    allow(broker, G, "app", Operation.READ)
    allow(broker, T, "in", Operation.DESCRIBE)
    undescribable = join(broker)  # app-c is named too
    assert undescribable.error_code == ErrorCode.topic_authorization_failed
    assert undescribable.error_message is None
    assert streams_group(broker) is None
    allow(broker, T, "app-c", Operation.DESCRIBE)
    joined = join(broker)
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 2)


def test_internal_and_invalid_topic_names_are_refused_before_the_coordinator(
    broker: LoopBroker,
) -> None:
    allow(broker, G, "app", Operation.READ)
    internal = join(broker, topology=topology(broker, source="__consumer_offsets"))
    assert internal.error_code == ErrorCode.streams_invalid_topology
    assert internal.error_message == (
        "Use of Kafka internal topics __consumer_offsets in a Kafka Streams topology is prohibited."
    )
    invalid = join(broker, topology=topology(broker, changelog="no way"))
    assert invalid.error_code == ErrorCode.streams_invalid_topology
    assert invalid.error_message == "Topic names no way are not valid topic names."
    assert streams_group(broker) is None


def test_internal_topics_are_created_only_with_create(broker: LoopBroker) -> None:
    allow(broker, G, "app", Operation.READ)
    allow(broker, T, "in", Operation.DESCRIBE)
    allow(broker, T, "app-c", Operation.DESCRIBE)
    joined = join(broker)
    assert joined.error_code == ErrorCode.none
    assert [s.status_code for s in joined.status] == [MISSING_INTERNAL_TOPICS]
    assert joined.status[0].status_detail.endswith("; Unauthorized to CREATE on topics app-c.")
    assert "app-c" not in broker.cluster.topics
    allow(broker, T, "app-c", Operation.CREATE)  # on the topic is enough
    again = join(broker)
    assert not again.status[0].status_detail.endswith("Unauthorized to CREATE on topics app-c.")
    assert len(broker.cluster.topics["app-c"].partitions) == 2


def test_internal_topics_are_created_with_create_on_the_cluster(broker: LoopBroker) -> None:
    allow(broker, G, "app", Operation.READ)
    allow(broker, T, "in", Operation.DESCRIBE)
    allow(broker, T, "app-c", Operation.DESCRIBE)
    allow(broker, C, "kafka-cluster", Operation.CREATE)
    assert join(broker).error_code == ErrorCode.none
    assert "app-c" in broker.cluster.topics


def test_describe_checks_the_group_then_the_topology_topics(broker: LoopBroker) -> None:
    allow(broker, G, "app", Operation.READ)  # implies DESCRIBE
    allow(broker, T, "in", Operation.READ)
    allow(broker, T, "app-c", Operation.READ)
    allow(broker, C, "kafka-cluster", Operation.CREATE)
    assert join(broker).error_code == ErrorCode.none
    other, described = describe(broker, "app", "other")  # refusals first
    assert (other.group_id, other.error_code) == ("other", ErrorCode.group_authorization_failed)
    assert (other.group_epoch, other.assignment_epoch, other.group_state) == (0, 0, "")
    assert described.error_code == ErrorCode.none and described.members
    store = acl_store(broker.runtime)
    store.acls = [a for a in store.acls if a.resource_name != "app-c"]
    (hidden,) = describe(broker, "app")
    assert (hidden.group_id, hidden.error_code) == ("app", ErrorCode.topic_authorization_failed)
    assert hidden.error_message == (
        "The described group uses topics that the client is not authorized to describe."
    )
    assert hidden.members == () and hidden.topology is None


def test_describe_reports_authorized_operations(broker: LoopBroker) -> None:
    allow(broker, G, "app", Operation.DESCRIBE)
    (group,) = describe(broker, "app", operations=True)
    assert group.error_code == ErrorCode.group_id_not_found
    assert group.authorized_operations == -(2**31)  # not for an error answer
    allow(broker, G, "app", Operation.READ)
    allow(broker, T, "in", Operation.READ)
    allow(broker, T, "app-c", Operation.READ)
    allow(broker, C, "kafka-cluster", Operation.CREATE)
    assert join(broker).error_code == ErrorCode.none
    (group,) = describe(broker, "app", operations=True)
    assert group.authorized_operations == (1 << int(Operation.READ)) | (
        1 << int(Operation.DESCRIBE)
    )


def test_describe_shows_the_task_offsets_members_reported() -> None:
    b = LoopBroker(**ASSIGN_AT_ONCE)
    try:
        b.cluster.create_topic("in", 2, 1)
        offsets = (
            b.nested(HEARTBEAT, 0, "TaskOffset", subtopology_id="0", partition=1, offset=40),
            b.nested(HEARTBEAT, 0, "TaskOffset", subtopology_id="0", partition=0, offset=12),
        )
        ends = (b.nested(HEARTBEAT, 0, "TaskOffset", subtopology_id="0", partition=0, offset=50),)
        joined = join(b, task_offsets=offsets, task_end_offsets=ends)
        assert joined.error_code == ErrorCode.none
        (group,) = describe(b, "app")
        (member,) = group.members
        assert [(t.subtopology_id, t.partition, t.offset) for t in member.task_offsets] == [
            ("0", 0, 12),
            ("0", 1, 40),
        ]
        assert [(t.subtopology_id, t.partition, t.offset) for t in member.task_end_offsets] == [
            ("0", 0, 50)
        ]
        assert member.assignment.warmup_tasks == () and member.target_assignment.warmup_tasks == ()
        duplicate = join(b, member_epoch=joined.member_epoch, topology=None,
                         rebalance_timeout=datetime.timedelta(milliseconds=-1),
                         task_offsets=(offsets[0], offsets[0]))  # fmt: skip
        assert duplicate.error_code == ErrorCode.invalid_request
        (again,) = describe(b, "app")
        assert again.members[0].task_offsets == member.task_offsets
    finally:
        b.loop.close()


def test_bad_heartbeats_get_kafkas_codes_and_change_nothing() -> None:
    b = LoopBroker(**ASSIGN_AT_ONCE)
    try:
        b.cluster.create_topic("in", 2, 1)
        joined = join(b)
        assert joined.error_code == ErrorCode.none
        (before,) = describe(b, "app")
        later: dict[str, Any] = {
            "member_epoch": joined.member_epoch,
            "topology": None,
            "rebalance_timeout": datetime.timedelta(milliseconds=-1),
        }
        # v0 as Kafka 4.4.0 answers it: only v1's int64 AcceptableRecoveryLag is filled.
        assert (joined.acceptable_recovery_lag, len(joined.status)) == (0, 1)  # missing app-c
        partial = join(b, **later, warmup_tasks=None)
        assert (partial.error_code, partial.error_message) == (
            ErrorCode.invalid_request,
            "If one task-type is non-null, all must be non-null.",
        )
        # Error answers are Kafka's new response with the code: every other field at its default.
        assert (partial.member_id, partial.member_epoch, partial.status) == ("", 0, ())
        v1 = b.request(HEARTBEAT, 1, **{**_join_fields(b), **later, "warmup_tasks": None})
        assert b.send(v1).acceptable_recovery_lag == -1
        internal = join(b, member="m2", topology=topology(b, changelog="__transaction_state"))
        assert internal.error_code == ErrorCode.streams_invalid_topology
        fenced = join(b, **{**later, "member_epoch": joined.member_epoch + 5})
        assert fenced.error_code == ErrorCode.fenced_member_epoch
        unknown = join(b, member="ghost", **{**later, "member_epoch": 3})
        assert unknown.error_code == ErrorCode.unknown_member_id
        b.cluster.create_topic("other-in", 1, 1)
        changed = join(b, member="m3", topology=topology(b, source="other-in"))
        assert (changed.error_code, changed.error_message) == (
            ErrorCode.invalid_request,
            "Topology updates are not supported yet.",
        )
        (after,) = describe(b, "app")
        assert after == before
        # A member of another group type: the streams heartbeat is GROUP_ID_NOT_FOUND and the
        # consumer group stays as it was.
        consumer = b.request(
            68, 1, group_id="cg", member_id="c1", member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=("in",),
            subscribed_topic_regex=None, server_assignor=None, topic_partitions=(),
        )  # fmt: skip
        assert b.send(consumer).error_code == ErrorCode.none
        cg = b.request(69, 1, group_ids=("cg",), include_authorized_operations=False)
        consumer_before = b.send(cg).groups
        other_type = join(b, group="cg")
        assert (other_type.error_code, other_type.error_message) == (
            ErrorCode.group_id_not_found,
            "Group cg is not a streams group.",
        )
        assert b.send(cg).groups == consumer_before
        (not_streams,) = describe(b, "cg")
        assert not_streams.error_code == ErrorCode.group_id_not_found
    finally:
        b.loop.close()
