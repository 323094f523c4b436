"""The ACL checks KafkaApis (and Kafka's controller) make on offsets, groups, configs, topic admin
and transactions, each family allowed vs denied with Kafka's error codes, for User:ANONYMOUS on
an in-process 3-broker model with StandardAuthorizer semantics."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kemu.broker.security.acls import (
    AclBinding,
    AclResourceType,
    Operation,
    PatternType,
    Permission,
    acl_store,
)
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_admin_handlers import Broker, create_partitions, delete_records

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ME = "User:ANONYMOUS"
T, G, C, X = (
    AclResourceType.TOPIC,
    AclResourceType.GROUP,
    AclResourceType.CLUSTER,
    AclResourceType.TRANSACTIONAL_ID,
)
TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed
OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE, LIST_GROUPS, DELETE_GROUPS = 8, 9, 47, 16, 42
DESCRIBE_CONFIGS = 32
OFFSET_FOR_LEADER_EPOCH, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN = 23, 22, 24
TOPIC_CONFIG, BROKER_CONFIG = 2, 4


class LoopBroker(Broker):
    """The admin harness with every request answered inside one event loop (the group
    coordinator arms timers)."""

    def __init__(self, **static: str) -> None:
        super().__init__(None, **static)
        self.loop = asyncio.new_event_loop()


@pytest.fixture
def broker() -> Iterator[Broker]:
    b = LoopBroker(
        **{
            "authorizer.class.name": STANDARD,
            "super.users": "User:admin",
            # kemu serve's: a target with every new group epoch (the clock here stands still)
            "group.share.assignment.interval.ms": "0",
        }
    )
    # as an admin would, before ACLs are in force: the topics exist
    for name in ("t1", "t2"):
        b.cluster.create_topic(name, 1, 1)
    yield b
    b.loop.close()


def allow(broker: Broker, resource: int, name: str, operation: int) -> None:
    binding = AclBinding(resource, name, PatternType.LITERAL, ME, "*", operation, Permission.ALLOW)
    acl_store(broker.runtime).create([binding])


def revoke(broker: Broker, resource_name: str) -> None:
    """Take away every ACL on ``resource_name``."""
    store = acl_store(broker.runtime)
    store.acls = [a for a in store.acls if a.resource_name != resource_name]


def commit(broker: Broker, group: str, topics: tuple[str, ...]) -> dict[str, int]:
    v = 8
    request = broker.request(
        OFFSET_COMMIT,
        v,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=tuple(
            broker.nested(
                OFFSET_COMMIT,
                v,
                "OffsetCommitRequestTopic",
                name=name,
                partitions=(
                    broker.nested(
                        OFFSET_COMMIT,
                        v,
                        "OffsetCommitRequestPartition",
                        partition_index=0,
                        committed_offset=5,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            )
            for name in topics
        ),
    )
    answer = broker.send(request)
    return {t.name: t.partitions[0].error_code for t in answer.topics}


def fetch(broker: Broker, group: str, topics: tuple[str, ...] | None) -> Any:
    v = 8
    group_request = broker.nested(
        OFFSET_FETCH,
        v,
        "OffsetFetchRequestGroup",
        group_id=group,
        topics=None
        if topics is None
        else tuple(
            broker.nested(
                OFFSET_FETCH, v, "OffsetFetchRequestTopics", name=name, partition_indexes=(0,)
            )
            for name in topics
        ),
    )
    answer = broker.send(
        broker.request(OFFSET_FETCH, v, groups=(group_request,), require_stable=False)
    )
    return answer.groups[0]


def test_offset_commit_fetch_and_delete_check_group_and_topics(broker: Broker) -> None:
    assert commit(broker, "g", ("t1",)) == {"t1": GROUP_DENIED}
    allow(broker, G, "g", Operation.READ)
    allow(broker, T, "t1", Operation.READ)
    assert commit(broker, "g", ("t1", "t2")) == {"t1": ErrorCode.none, "t2": TOPIC_DENIED}

    allow(broker, T, "t2", Operation.READ)  # commit t2 too, then take the topic's READ away
    assert commit(broker, "g", ("t2",)) == {"t2": ErrorCode.none}
    revoke(broker, "t2")
    # READ on the group implies DESCRIBE
    named = fetch(broker, "g", ("t1", "t2"))
    assert named.error_code == ErrorCode.none
    by_name = {t.name: t.partitions[0] for t in named.topics}
    assert by_name["t1"].committed_offset == 5 and by_name["t1"].error_code == ErrorCode.none
    assert by_name["t2"].committed_offset == -1 and by_name["t2"].error_code == TOPIC_DENIED
    every = fetch(broker, "g", None)
    assert [t.name for t in every.topics] == ["t1"]  # t2's offset is hidden, not refused
    assert fetch(broker, "other", None).error_code == GROUP_DENIED

    def delete(topic: str) -> Any:
        v = 0
        return broker.send(
            broker.request(
                OFFSET_DELETE,
                v,
                group_id="g",
                topics=(
                    broker.nested(
                        OFFSET_DELETE,
                        v,
                        "OffsetDeleteRequestTopic",
                        name=topic,
                        partitions=(
                            broker.nested(
                                OFFSET_DELETE, v, "OffsetDeleteRequestPartition", partition_index=0
                            ),
                        ),
                    ),
                ),
            )
        )

    assert delete("t1").error_code == GROUP_DENIED  # READ does not imply DELETE
    allow(broker, G, "g", Operation.DELETE)
    answer = delete("t2")
    assert answer.error_code == ErrorCode.none
    assert answer.topics[0].partitions[0].error_code == TOPIC_DENIED


def test_list_groups_filters_and_delete_groups_needs_delete(broker: Broker) -> None:
    allow(broker, G, "a", Operation.READ)
    allow(broker, G, "b", Operation.READ)
    allow(broker, T, "t1", Operation.READ)
    assert commit(broker, "a", ("t1",)) == {"t1": ErrorCode.none}
    assert commit(broker, "b", ("t1",)) == {"t1": ErrorCode.none}
    revoke(broker, "b")

    def listed() -> set[str]:
        found: set[str] = set()
        for node in (1, 2, 3):
            answer = broker.send(broker.request(LIST_GROUPS, 4, states_filter=()), node)
            found |= {g.group_id for g in answer.groups}
        return found

    assert listed() == {"a"}
    allow(broker, C, "kafka-cluster", Operation.DESCRIBE)
    assert listed() == {"a", "b"}  # DESCRIBE on the cluster lists every group

    answer = broker.send(broker.request(DELETE_GROUPS, 2, groups_names=("a", "b")))
    assert {r.group_id: r.error_code for r in answer.results} == {
        "a": GROUP_DENIED,
        "b": GROUP_DENIED,
    }
    allow(broker, G, "a", Operation.DELETE)
    answer = broker.send(broker.request(DELETE_GROUPS, 2, groups_names=("a",)))
    assert answer.results[0].error_code == ErrorCode.none


def test_describe_and_alter_configs_by_resource(broker: Broker) -> None:
    v = 4
    request = broker.request(
        DESCRIBE_CONFIGS,
        v,
        resources=tuple(
            broker.nested(
                DESCRIBE_CONFIGS,
                v,
                "DescribeConfigsResource",
                resource_type=kind,
                resource_name=name,
                configuration_keys=("cleanup.policy",) if kind == TOPIC_CONFIG else ("log.dirs",),
            )
            for kind, name in ((TOPIC_CONFIG, "t2"), (TOPIC_CONFIG, "t1"), (BROKER_CONFIG, "1"))
        ),
        include_synonyms=False,
        include_documentation=False,
    )
    allow(broker, T, "t1", Operation.DESCRIBE_CONFIGS)
    results = broker.send(request).results
    # authorized resources first, refusals after them (Kafka's ConfigHelper)
    assert [(r.resource_name, r.error_code) for r in results] == [
        ("t1", ErrorCode.none),
        ("t2", TOPIC_DENIED),
        ("1", CLUSTER_DENIED),
    ]
    assert results[1].error_message == "Topic authorization failed."
    assert results[1].configs == ()
    allow(broker, C, "kafka-cluster", Operation.ALTER_CONFIGS)  # implies DESCRIBE_CONFIGS
    results = broker.send(request).results
    assert [(r.resource_name, r.error_code) for r in results][1:] == [
        ("1", ErrorCode.none),
        ("t2", TOPIC_DENIED),
    ]

    allow(broker, T, "t2", Operation.ALTER_CONFIGS)
    responses = broker.incremental(
        [(TOPIC_CONFIG, name, [("retention.ms", 0, "1000")]) for name in ("t1", "t2")]
    )
    # refusals first (Kafka's controller)
    assert [(r.resource_name, r.error_code) for r in responses] == [
        ("t1", TOPIC_DENIED),
        ("t2", ErrorCode.none),
    ]
    assert broker.cluster.topics["t2"].config.get("retention.ms") == "1000"
    assert broker.cluster.topics["t1"].config.get("retention.ms") != "1000"


def test_topic_admin_apis(broker: Broker) -> None:
    def grow() -> Any:
        return create_partitions(broker, ("t1", 2, None), validate_only=True)["t1"]

    refused = grow()
    assert (refused.error_code, refused.error_message) == (TOPIC_DENIED, None)
    allow(broker, T, "t1", Operation.ALTER)
    assert grow().error_code == ErrorCode.none

    leader = broker.cluster.topics["t1"].partitions[0].leader_id
    refused = delete_records(broker, "t1", 0, -1, leader)
    assert (refused.error_code, refused.low_watermark) == (TOPIC_DENIED, -1)
    allow(broker, T, "t1", Operation.DELETE)
    assert delete_records(broker, "t1", 0, -1, leader).error_code == ErrorCode.none

    def epochs(topics: tuple[str, ...]) -> dict[str, int]:
        v = 4
        request = broker.request(
            OFFSET_FOR_LEADER_EPOCH,
            v,
            replica_id=-1,
            topics=tuple(
                broker.nested(
                    OFFSET_FOR_LEADER_EPOCH,
                    v,
                    "OffsetForLeaderTopic",
                    topic=name,
                    partitions=(
                        broker.nested(
                            OFFSET_FOR_LEADER_EPOCH,
                            v,
                            "OffsetForLeaderPartition",
                            partition=0,
                            current_leader_epoch=-1,
                            leader_epoch=0,
                        ),
                    ),
                )
                for name in topics
            ),
        )
        leader = broker.cluster.topics["t1"].partitions[0].leader_id
        answer = broker.send(request, leader)
        return {t.topic: t.partitions[0].error_code for t in answer.topics}

    # t1: DELETE implies DESCRIBE; t2 refused, after the authorized topics
    answer = epochs(("t2", "t1"))
    assert list(answer) == ["t1", "t2"] and answer["t2"] == TOPIC_DENIED
    assert answer["t1"] != TOPIC_DENIED
    allow(broker, C, "kafka-cluster", Operation.CLUSTER_ACTION)
    assert epochs(("t2",))["t2"] != TOPIC_DENIED


def test_idempotent_and_transactional_producer_checks(broker: Broker) -> None:
    def init() -> int:
        request = broker.request(
            INIT_PRODUCER_ID,
            4,
            transactional_id=None,
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        )
        return int(broker.send(request).error_code)

    assert init() == CLUSTER_DENIED
    binding = AclBinding(
        T, "logs-", PatternType.PREFIXED, ME, "*", Operation.WRITE, Permission.ALLOW
    )
    acl_store(broker.runtime).create([binding])
    assert init() == ErrorCode.none  # WRITE on some topic is enough
    deny = AclBinding(T, "logs-a", PatternType.PREFIXED, ME, "*", Operation.WRITE, Permission.DENY)
    acl_store(broker.runtime).create([deny])
    assert init() == ErrorCode.none  # logs- is wider than the DENY
    acl_store(broker.runtime).acls = []
    allow(broker, C, "kafka-cluster", Operation.IDEMPOTENT_WRITE)
    assert init() == ErrorCode.none

    def add(topics: tuple[str, ...]) -> dict[str, int]:
        v = 3
        request = broker.request(
            ADD_PARTITIONS_TO_TXN,
            v,
            v3_and_below_transactional_id="tx",
            v3_and_below_producer_id=1,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=tuple(
                broker.nested(
                    ADD_PARTITIONS_TO_TXN, v, "AddPartitionsToTxnTopic", name=n, partitions=(0,)
                )
                for n in topics
            ),
        )
        answer = broker.send(request)
        return {
            t.name: t.results_by_partition[0].partition_error_code
            for t in answer.results_by_topic_v3_and_below
        }

    assert add(("t1",)) == {"t1": ErrorCode.transactional_id_authorization_failed}
    allow(broker, X, "tx", Operation.WRITE)
    allow(broker, T, "t1", Operation.WRITE)
    assert add(("t1", "t2", "__consumer_offsets")) == {
        "t1": ErrorCode.operation_not_attempted,
        "t2": TOPIC_DENIED,
        "__consumer_offsets": TOPIC_DENIED,  # internal topics never pass
    }


DESCRIBE_SHARE_OFFSETS, ALTER_SHARE_OFFSETS, DELETE_SHARE_OFFSETS = 90, 91, 92
ELECT_LEADERS, LIST_REASSIGNMENTS, DESCRIBE_QUOTAS, DESCRIBE_QUORUM = 43, 46, 48, 55
INITIALIZE_SHARE_STATE, METADATA, DESCRIBE_LOG_DIRS, LIST_TRANSACTIONS = 83, 3, 35, 66


def test_share_group_offset_admin_apis(broker: Broker) -> None:
    def alter(topics: tuple[str, ...]) -> Any:
        v = 0
        request = broker.request(
            ALTER_SHARE_OFFSETS,
            v,
            group_id="sg",
            topics=tuple(
                broker.nested(
                    ALTER_SHARE_OFFSETS,
                    v,
                    "AlterShareGroupOffsetsRequestTopic",
                    topic_name=name,
                    partitions=(
                        broker.nested(
                            ALTER_SHARE_OFFSETS,
                            v,
                            "AlterShareGroupOffsetsRequestPartition",
                            partition_index=0,
                            start_offset=0,
                        ),
                    ),
                )
                for name in topics
            ),
        )
        return broker.send(request)

    refused = alter(("t1",))
    assert refused.error_code == GROUP_DENIED
    assert refused.error_message == "Group authorization failed."
    assert "sg" not in {g.group_id for g in _groups(broker)}  # refused before it is created
    allow(broker, G, "sg", Operation.READ)
    allow(broker, T, "t1", Operation.READ)
    answer = alter(("t1", "t2"))
    assert answer.error_code == ErrorCode.none
    codes = {t.topic_name: t.partitions[0].error_code for t in answer.responses}
    assert codes == {"t1": ErrorCode.none, "t2": TOPIC_DENIED}

    def describe(group: str, topics: tuple[str, ...] | None) -> Any:
        v = 1
        entry = broker.nested(
            DESCRIBE_SHARE_OFFSETS,
            v,
            "DescribeShareGroupOffsetsRequestGroup",
            group_id=group,
            topics=None
            if topics is None
            else tuple(
                broker.nested(
                    DESCRIBE_SHARE_OFFSETS,
                    v,
                    "DescribeShareGroupOffsetsRequestTopic",
                    topic_name=name,
                    partitions=(0,),
                )
                for name in topics
            ),
        )
        return broker.send(broker.request(DESCRIBE_SHARE_OFFSETS, v, groups=(entry,))).groups[0]

    assert describe("other", None).error_code == GROUP_DENIED
    named = describe("sg", ("t2", "t1"))
    assert [t.topic_name for t in named.topics] == ["t1", "t2"]  # refused topics last
    assert named.topics[0].partitions[0].start_offset == 0
    refused_topic = named.topics[1]
    assert refused_topic.topic_id in (None, uuid.UUID(int=0))  # the zero id
    assert refused_topic.partitions[0].error_code == TOPIC_DENIED
    assert refused_topic.partitions[0].start_offset == -1
    assert [t.topic_name for t in describe("sg", None).topics] == ["t1"]

    def delete(topics: tuple[str, ...]) -> Any:
        v = 0
        request = broker.request(
            DELETE_SHARE_OFFSETS,
            v,
            group_id="sg",
            topics=tuple(
                broker.nested(
                    DELETE_SHARE_OFFSETS, v, "DeleteShareGroupOffsetsRequestTopic", topic_name=n
                )
                for n in topics
            ),
        )
        return broker.send(request)

    assert delete(("t1",)).error_code == GROUP_DENIED  # READ does not imply DELETE
    allow(broker, G, "sg", Operation.DELETE)
    answer = delete(("t2", "t1"))
    assert [(t.topic_name, t.error_code) for t in answer.responses] == [
        ("t2", TOPIC_DENIED),
        ("t1", ErrorCode.none),
    ]


def _groups(broker: Broker) -> list[Any]:
    found: list[Any] = []
    for node in (1, 2, 3):
        found += broker.send(
            broker.request(LIST_GROUPS, 5, states_filter=(), types_filter=()), node
        ).groups
    return found


def test_cluster_admin_apis_need_their_cluster_operation(broker: Broker) -> None:
    log_dirs = broker.request(DESCRIBE_LOG_DIRS, 4, topics=None)
    refused = broker.send(log_dirs)
    assert (refused.error_code, refused.results) == (CLUSTER_DENIED, ())
    # in this order, as ALTER implies DESCRIBE
    requests = {
        Operation.DESCRIBE: broker.request(
            LIST_REASSIGNMENTS, 0, timeout=datetime.timedelta(seconds=5), topics=None
        ),
        Operation.DESCRIBE_CONFIGS: broker.request(DESCRIBE_QUOTAS, 1, components=(), strict=False),
        Operation.CLUSTER_ACTION: broker.request(
            INITIALIZE_SHARE_STATE,
            0,
            group_id="sg",
            topics=(
                broker.nested(
                    INITIALIZE_SHARE_STATE,
                    0,
                    "InitializeStateData",
                    topic_id=broker.cluster.topics["t1"].topic_id,
                    partitions=(
                        broker.nested(
                            INITIALIZE_SHARE_STATE,
                            0,
                            "PartitionData",
                            partition=0,
                            state_epoch=0,
                            start_offset=0,
                        ),
                    ),
                ),
            ),
        ),
        Operation.ALTER: broker.request(
            ELECT_LEADERS,
            2,
            election_type=0,
            topic_partitions=None,
            timeout=datetime.timedelta(seconds=5),
        ),
    }

    def code(answer: Any) -> int:
        if hasattr(answer, "error_code"):
            return int(answer.error_code)
        return int(answer.results[0].partitions[0].error_code)  # the share state RPCs

    for operation, request in requests.items():
        assert code(broker.send(request)) == CLUSTER_DENIED, operation
        allow(broker, C, "kafka-cluster", operation)
        assert code(broker.send(request)) != CLUSTER_DENIED, operation

    # DESCRIBE was granted above
    assert broker.send(log_dirs).results != ()


def test_metadata_auto_creation_needs_create(broker: Broker) -> None:
    def metadata(name: str) -> Any:
        v = 12
        topic = broker.nested(
            METADATA, v, "MetadataRequestTopic", topic_id=uuid.UUID(int=0), name=name
        )
        request = broker.request(
            METADATA,
            v,
            topics=(topic,),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
        return broker.send(request).topics[0]

    assert metadata("new").error_code == TOPIC_DENIED  # no DESCRIBE
    allow(broker, T, "new", Operation.DESCRIBE)
    assert metadata("new").error_code == TOPIC_DENIED  # DESCRIBE, but no CREATE
    assert "new" not in broker.cluster.topics
    allow(broker, T, "new", Operation.CREATE)
    assert metadata("new").error_code == ErrorCode.none
    assert "new" in broker.cluster.topics
    allow(broker, T, "other", Operation.DESCRIBE)
    allow(broker, C, "kafka-cluster", Operation.CREATE)  # CREATE on the cluster is enough
    assert metadata("other").error_code == ErrorCode.none


DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS = 61, 65


def test_describe_producers_and_transactions(broker: Broker) -> None:
    topic = broker.nested(DESCRIBE_PRODUCERS, 0, "TopicRequest", name="t1", partition_indexes=(0,))
    request = broker.request(DESCRIBE_PRODUCERS, 0, topics=(topic,))
    leader = broker.cluster.topics["t1"].partitions[0].leader_id
    refused = broker.send(request, leader).topics[0].partitions[0]
    assert (refused.error_code, refused.error_message) == (
        TOPIC_DENIED,
        "Topic authorization failed.",
    )
    allow(broker, T, "t1", Operation.READ)
    assert broker.send(request, leader).topics[0].partitions[0].error_code == ErrorCode.none

    request = broker.request(DESCRIBE_TRANSACTIONS, 0, transactional_ids=("tx",))
    state = broker.send(request).transaction_states[0]
    assert state.error_code == ErrorCode.transactional_id_authorization_failed
    allow(broker, X, "tx", Operation.DESCRIBE)
    state = broker.send(request).transaction_states[0]
    assert state.error_code == ErrorCode.transactional_id_not_found


CONSUMER_GROUP_HEARTBEAT, SHARE_GROUP_HEARTBEAT = 68, 76


def consumer_join(broker: Broker, topics: tuple[str, ...]) -> Any:
    """ConsumerGroupHeartbeat v1: member m-1 joins group cg subscribed to ``topics``."""
    return broker.request(
        CONSUMER_GROUP_HEARTBEAT,
        1,
        group_id="cg",
        member_id="m-1",
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=topics,
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=(),
    )


def share_heartbeat(broker: Broker, epoch: int, topics: tuple[str, ...] | None) -> Any:
    """ShareGroupHeartbeat v1 of member m-2 of share group sg (``topics`` None: unchanged)."""
    return broker.request(
        SHARE_GROUP_HEARTBEAT,
        1,
        group_id="sg",
        member_id="m-2",
        member_epoch=epoch,
        rack_id=None,
        subscribed_topic_names=topics,
    )


def test_group_heartbeats_need_describe_on_subscribed_topics(broker: Broker) -> None:
    allow(broker, G, "cg", Operation.READ)
    allow(broker, G, "sg", Operation.READ)
    allow(broker, T, "t1", Operation.DESCRIBE)
    consumer = consumer_join(broker, ("t1", "t2"))
    share = share_heartbeat(broker, 0, ("t2",))
    for request in (consumer, share):
        answer = broker.send(request)
        assert answer.error_code == TOPIC_DENIED
        assert answer.member_epoch in (0, -1)
    allow(broker, T, "t2", Operation.READ)  # implies DESCRIBE
    for request in (consumer, share):
        assert broker.send(request).error_code == ErrorCode.none


CONSUMER_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE = 69, 77


def test_group_describes_hide_groups_and_undescribable_assignments(broker: Broker) -> None:
    allow(broker, G, "cg", Operation.READ)
    allow(broker, G, "sg", Operation.READ)
    allow(broker, T, "t1", Operation.READ)
    joined = consumer_join(broker, ("t1",))
    assert broker.send(joined).error_code == ErrorCode.none
    share = share_heartbeat(broker, 0, ("t1",))
    assert broker.send(share).error_code == ErrorCode.none
    # Kafka 4.4 assigns the share partitions on a later heartbeat, once initialized.
    again = share_heartbeat(broker, 2, None)
    assert broker.send(again).member_epoch == 3
    requests = {
        "cg": broker.request(
            CONSUMER_GROUP_DESCRIBE,
            1,
            group_ids=("cg", "other"),
            include_authorized_operations=False,
        ),
        "sg": broker.request(
            SHARE_GROUP_DESCRIBE,
            1,
            group_ids=("sg", "other"),
            include_authorized_operations=False,
        ),
    }
    for group_id, request in requests.items():
        other, described = broker.send(request).groups  # refusals first
        assert (other.group_id, other.error_code) == ("other", GROUP_DENIED)
        assert described.error_code == ErrorCode.none and described.members, group_id
        assert described.members[0].assignment.topic_partitions[0].topic_name == "t1"
    revoke(broker, "t1")
    for group_id, request in requests.items():
        _, described = broker.send(request).groups
        assert (described.group_id, described.error_code) == (group_id, TOPIC_DENIED)
        assert described.error_message == (
            "The group has described topic(s) that the client is not authorized to describe."
        )
        assert described.members == ()
