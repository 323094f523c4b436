"""DescribeLogDirs, ElectLeaders, Alter/ListPartitionReassignments and DescribeQuorum through the
wire codecs (requests built with kio's schemas, answered by the registered handler)."""

from __future__ import annotations

import datetime
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_admin_handlers import Broker

LOG_DIRS, ELECT, ALTER_REASSIGN, LIST_REASSIGN, QUORUM, METADATA = 35, 43, 45, 46, 55, 3
PREFERRED, UNCLEAN = 0, 1
TIMEOUT = datetime.timedelta(seconds=30)


def describe_log_dirs(broker: Broker, topics: dict[str, list[int]] | None, node: int = 1) -> Any:
    request = broker.request(
        LOG_DIRS,
        5,
        topics=None
        if topics is None
        else tuple(
            broker.nested(LOG_DIRS, 5, "DescribableLogDirTopic", topic=t, partitions=tuple(p))
            for t, p in topics.items()
        ),
    )
    return broker.send(request, node)


def test_log_dirs_list_hosted_partitions_with_their_sizes(tmp_path: Path) -> None:
    broker = Broker(data_dir=tmp_path)
    broker.cluster.create_topic("sized", 2, 1, assignments=[[1], [2]])
    broker.produce("sized", 0, 5)
    expected = broker.cluster.topics["sized"].partitions[0].log.size_bytes
    assert expected > 0
    response = describe_log_dirs(broker, None)
    assert response.error_code == ErrorCode.none
    (result,) = response.results
    assert result.log_dir == str(tmp_path.resolve())
    assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes
    topics = {t.name: t for t in result.topics}
    # node 1 hosts partition 0 only; partition 1 is on node 2
    assert [
        (p.partition_index, p.partition_size, p.offset_lag) for p in topics["sized"].partitions
    ] == [(0, expected, 0)]
    on_two = describe_log_dirs(broker, {"sized": [0, 1], "missing": [0]}, node=2)
    (result,) = on_two.results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [
        ("sized", [1])
    ]


def test_log_dirs_in_memory_are_virtual() -> None:
    broker = Broker()
    broker.create("mem", partitions=1, replication=3)
    (result,) = describe_log_dirs(broker, {"mem": [0]}).results
    assert result.log_dir == "kemu:memory"
    assert (result.total_bytes, result.usable_bytes) == (-1, -1)
    assert result.topics[0].partitions[0].partition_size == 0


def elect(broker: Broker, election_type: int, partitions: dict[str, list[int]] | None) -> Any:
    request = broker.request(
        ELECT,
        2,
        election_type=election_type,
        topic_partitions=None
        if partitions is None
        else tuple(
            broker.nested(ELECT, 2, "TopicPartitions", topic=t, partitions=tuple(p))
            for t, p in partitions.items()
        ),
        timeout=TIMEOUT,
    )
    response = broker.send(request)
    assert response.error_code == ErrorCode.none
    return {
        (r.topic, p.partition_id): (p.error_code, p.error_message)
        for r in response.replica_election_results
        for p in r.partition_result
    }


def reassign(
    broker: Broker,
    topic: str,
    replicas: dict[int, list[int] | None],
    *,
    version: int = 1,
    allow_rf_change: bool = True,
) -> dict[int, tuple[ErrorCode, str | None]]:
    request = broker.request(
        ALTER_REASSIGN,
        version,
        timeout=TIMEOUT,
        allow_replication_factor_change=allow_rf_change,
        topics=(
            broker.nested(
                ALTER_REASSIGN,
                version,
                "ReassignableTopic",
                name=topic,
                partitions=tuple(
                    broker.nested(
                        ALTER_REASSIGN,
                        version,
                        "ReassignablePartition",
                        partition_index=index,
                        replicas=None if r is None else tuple(r),
                    )
                    for index, r in replicas.items()
                ),
            ),
        ),
    )
    response = broker.send(request)
    assert response.error_code == ErrorCode.none
    (topic_result,) = response.responses
    return {p.partition_index: (p.error_code, p.error_message) for p in topic_result.partitions}


def metadata_leader(broker: Broker, topic: str, index: int) -> tuple[int, int, list[int]]:
    request = broker.request(
        METADATA,
        12,
        topics=(broker.nested(METADATA, 12, "MetadataRequestTopic", name=topic, topic_id=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (found,) = broker.send(request).topics
    partition = next(p for p in found.partitions if p.partition_index == index)
    return partition.leader_id, partition.leader_epoch, list(partition.replica_nodes)


NOT_NEEDED = "Leader election not needed for topic partition."  # Kafka's message


def test_reassignment_moves_replicas_and_leader_and_clients_follow(tmp_path: Path) -> None:
    broker = Broker(data_dir=tmp_path)
    broker.cluster.create_topic("moved", 1, 2, assignments=[[1, 2]])
    assert metadata_leader(broker, "moved", 0) == (1, 0, [1, 2])
    # leader 1 stays while it is still a replica
    assert reassign(broker, "moved", {0: [2, 1]}) == {0: (ErrorCode.none, None)}
    assert metadata_leader(broker, "moved", 0) == (1, 0, [2, 1])
    # a preferred election hands over to replica 2 with a new epoch
    assert elect(broker, PREFERRED, {"moved": [0]}) == {("moved", 0): (ErrorCode.none, None)}
    assert metadata_leader(broker, "moved", 0) == (2, 1, [2, 1])
    assert elect(broker, PREFERRED, {"moved": [0]}) == {
        ("moved", 0): (ErrorCode.election_not_needed, NOT_NEEDED)
    }
    # leaving the replica set moves the leader to the first new replica
    assert reassign(broker, "moved", {0: [3, 1]}) == {0: (ErrorCode.none, None)}
    assert metadata_leader(broker, "moved", 0) == (3, 2, [3, 1])
    partition = broker.cluster.topics["moved"].partitions[0]
    broker.produce("moved", 0, 1)  # the one copy of the log moved with nothing to copy
    # the move survives a restart from the data dir
    again = Broker(data_dir=tmp_path)
    again.cluster.load_metadata()
    reloaded = again.cluster.topics["moved"].partitions[0]
    assert (reloaded.leader_id, reloaded.leader_epoch, reloaded.replicas) == (3, 2, [3, 1])
    assert partition.log.log_end_offset == 1


def test_reassignment_refusals_with_kafkas_messages() -> None:
    broker = Broker()
    broker.cluster.create_topic("checked", 1, 2, assignments=[[1, 2]])
    outcomes = reassign(broker, "checked", {0: [], 1: [1, 2]})
    assert outcomes == {
        0: (
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        ),
        1: (ErrorCode.unknown_topic_or_partition, "Unable to find partition checked:1."),
    }
    assert reassign(broker, "checked", {0: [1, 9]})[0] == (
        ErrorCode.invalid_replica_assignment,
        "The manual partition assignment includes broker 9, but no such broker is registered.",
    )
    assert reassign(broker, "checked", {0: [2, 2]})[0] == (
        ErrorCode.invalid_replica_assignment,
        "The manual partition assignment includes the broker 2 more than once.",
    )
    assert reassign(broker, "checked", {0: [3]}, allow_rf_change=False)[0] == (
        ErrorCode.invalid_replication_factor,
        "The replication factor is changed from 2 to 1",
    )
    assert reassign(broker, "checked", {0: None})[0] == (
        ErrorCode.no_reassignment_in_progress,
        None,
    )
    assert reassign(broker, "nope", {0: [1]})[0] == (
        ErrorCode.unknown_topic_or_partition,
        "Unable to find a topic named nope.",
    )
    # v0 has no flag: a replica count change is allowed
    assert reassign(broker, "checked", {0: [3]}, version=0)[0] == (ErrorCode.none, None)
    listed = broker.send(broker.request(LIST_REASSIGN, 0, timeout=TIMEOUT, topics=None))
    assert (listed.error_code, listed.topics) == (ErrorCode.none, ())


def test_elections_over_everything_list_only_needed_ones() -> None:
    broker = Broker()
    broker.cluster.create_topic("all", 2, 2, assignments=[[1, 2], [2, 3]])
    partition = broker.cluster.topics["all"].partitions[1]
    broker.cluster.reassign(partition, [3, 2])
    assert partition.leader_id == 2
    assert elect(broker, PREFERRED, None) == {("all", 1): (ErrorCode.none, None)}
    assert partition.leader_id == 3
    assert elect(broker, UNCLEAN, {"all": [0, 5], "gone": [0]}) == {
        ("all", 0): (ErrorCode.election_not_needed, NOT_NEEDED),
        ("all", 5): (ErrorCode.unknown_topic_or_partition, "No such partition as all-5"),
        ("gone", 0): (ErrorCode.unknown_topic_or_partition, "No such topic as gone"),
    }


def describe_quorum(broker: Broker, topic: str = "__cluster_metadata", partition: int = 0) -> Any:
    request = broker.request(
        QUORUM,
        2,
        topics=(
            broker.nested(
                QUORUM,
                2,
                "TopicData",
                topic_name=topic,
                partitions=(broker.nested(QUORUM, 2, "PartitionData", partition_index=partition),),
            ),
        ),
    )
    return broker.send(request, node_id=3)


def test_quorum_is_the_single_virtual_controller() -> None:
    broker = Broker()
    response = describe_quorum(broker)
    assert response.error_code == ErrorCode.none
    (topic,) = response.topics
    (partition,) = topic.partitions
    assert (topic.topic_name, partition.leader_id, partition.leader_epoch) == (
        "__cluster_metadata",
        1,
        1,
    )
    assert [v.replica_id for v in partition.current_voters] == [1]
    assert [o.replica_id for o in partition.observers] == [2, 3]
    assert partition.current_voters[0].replica_directory_id != uuid.UUID(int=0)
    assert [n.node_id for n in response.nodes] == [1]


@pytest.mark.parametrize(("topic", "partition"), [("other", 0), ("__cluster_metadata", 1)])
def test_quorum_of_anything_else_is_unknown(topic: str, partition: int) -> None:
    assert describe_quorum(Broker(), topic, partition).error_code == (
        ErrorCode.unknown_topic_or_partition
    )


# DescribeCluster and ElectLeaders as Kafka 4.4.0 answers them (differences that
# make conformance-diff found, docs/conformance.md)

ELECT_LEADERS, DESCRIBE_CLUSTER = 43, 60


def test_describe_cluster_for_a_controller_names_the_broker_endpoint() -> None:
    broker = Broker()
    answer = broker.send(
        broker.request(
            DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False, endpoint_type=2
        )
    )
    assert answer.error_code is ErrorCode.mismatched_endpoint_type
    assert answer.endpoint_type == 1


def test_elect_leaders_not_needed_carries_kafkas_message() -> None:
    broker = Broker()
    broker.create("t")
    wanted = broker.nested(ELECT_LEADERS, 2, "TopicPartitions", topic="t", partitions=(0,))
    answer = broker.send(
        broker.request(
            ELECT_LEADERS,
            2,
            election_type=0,
            topic_partitions=(wanted,),
            timeout=datetime.timedelta(seconds=1),
        )
    )
    [result] = answer.replica_election_results[0].partition_result
    assert result.error_code is ErrorCode.election_not_needed
    assert result.error_message == "Leader election not needed for topic partition."


def test_a_null_partitions_array_inside_electleaders_topics_is_malformed() -> None:
    # found by bench.fuzz. ElectLeaders v1 (legacy): TopicPartitions is nullable, each entry's
    # Partitions is not; the null check skipped the elements of a nullable array and the handler
    # iterated None
    frame = bytes.fromhex(
        "00000027002b0001000033fa000466757a7a0000000001000666757a7a2d62ffffffffffffffff00000064"
    )
    with pytest.raises(wire.MalformedFrame, match="null array"):
        wire.decode_request(frame[4:])
    # the same in v2 (flexible: compact count 0 is null)
    body = (
        b"\x00"  # election type
        + b"\x02"  # one topic
        + b"\x07fuzz-b"
        + b"\x00"  # partitions: null
        + b"\x00"  # the topic's tags
        + struct.pack(">i", 100)  # timeout
        + b"\x00"  # tags
    )
    header = struct.pack(">hhih", 43, 2, 1, 4) + b"fuzz" + b"\x00"
    with pytest.raises(wire.MalformedFrame, match="null array"):
        wire.decode_request(header + body)
    # a null TopicPartitions (every partition) is still served
    broker = Broker()
    broker.create("t")
    response = broker.send(broker.request(43, 1, topic_partitions=None))
    assert response.error_code == ErrorCode.none
