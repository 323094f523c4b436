"""Admin and cluster handlers through the real wire: requests are built with kio's schemas,
encoded and decoded as a broker would, answered by the registered handler, and the response is
encoded and decoded again. No sockets, so every error path stays cheap to cover."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path
from typing import Any

import pytest

from kemu.broker.fetch_session import SessionPartition
from kemu.broker.handlers.fetch import fetch_sessions
from kemu.config.definitions import (
    ConfigSource,
    ConfigType,
)
from kemu.coordinator.transaction.producer_ids import ProducerIdBlocks, ProducerIds
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch, split_batches
from kemu.testing.harness import HandlerHarness

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, DELETE_RECORDS = 19, 20, 37, 21
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
DESCRIBE_CLUSTER, DESCRIBE_TOPIC_PARTITIONS, OFFSET_FOR_LEADER_EPOCH = 60, 75, 23
GET_TELEMETRY, PUSH_TELEMETRY, INIT_PRODUCER_ID = 71, 72, 22
TOPIC, BROKER = 2, 4
ZERO_UUID = uuid.UUID(int=0)


class Broker(HandlerHarness):
    """A 3-node kemu model whose handlers are reached through encoded frames
    (kemu/testing/harness.py), for synchronous tests: ``send`` takes a built request."""

    def __init__(self, data_dir: Path | None = None, **static: str) -> None:
        super().__init__(config=static, data_dir=data_dir)

    def send(self, body: Any, node_id: int = 1) -> Any:  # type: ignore[override]
        return self.send_body_now(body, node_id)

    def produce(self, topic: str, partition: int, count: int) -> None:
        target = self.cluster.topics[topic].partitions[partition]
        batch = build_batch([(None, b"v")] * count, timestamp_ms=1_700_000_000_000)
        target.append(split_batches(batch), now_ms=1_700_000_000_000)

    # --- request builders -------------------------------------------------------------------

    def create(
        self,
        name: str,
        partitions: int = 1,
        replication: int = 1,
        *,
        version: int = 7,
        configs: dict[str, str | None] | None = None,
        assignments: dict[int, list[int]] | None = None,
        validate_only: bool = False,
        extra: tuple[Any, ...] = (),
    ) -> Any:
        topic = self.creatable(name, partitions, replication, version, configs, assignments)
        request = self.request(
            CREATE_TOPICS,
            version,
            topics=(topic, *extra),
            timeout=datetime.timedelta(seconds=30),
            validate_only=validate_only,
        )
        return self.send(request)

    def creatable(
        self,
        name: str,
        partitions: int = 1,
        replication: int = 1,
        version: int = 7,
        configs: dict[str, str | None] | None = None,
        assignments: dict[int, list[int]] | None = None,
    ) -> Any:
        return self.nested(
            CREATE_TOPICS,
            version,
            "CreatableTopic",
            name=name,
            num_partitions=partitions,
            replication_factor=replication,
            assignments=tuple(
                self.nested(
                    CREATE_TOPICS,
                    version,
                    "CreatableReplicaAssignment",
                    partition_index=index,
                    broker_ids=tuple(brokers),
                )
                for index, brokers in (assignments or {}).items()
            ),
            configs=tuple(
                self.nested(CREATE_TOPICS, version, "CreatableTopicConfig", name=k, value=v)
                for k, v in (configs or {}).items()
            ),
        )

    def describe_configs(
        self,
        resource_type: int,
        name: str,
        keys: tuple[str, ...] | None = None,
        *,
        version: int = 4,
        node_id: int = 1,
        synonyms: bool = True,
        documentation: bool = True,
    ) -> Any:
        resource = self.nested(
            DESCRIBE_CONFIGS,
            version,
            "DescribeConfigsResource",
            resource_type=resource_type,
            resource_name=name,
            configuration_keys=keys,
        )
        request = self.request(
            DESCRIBE_CONFIGS,
            version,
            resources=(resource,),
            include_synonyms=synonyms,
            include_documentation=documentation,
        )
        return self.send(request, node_id).results[0]

    def incremental(
        self,
        resources: list[tuple[int, str, list[tuple[str, int, str | None]]]],
        *,
        validate_only: bool = False,
        node_id: int = 1,
    ) -> list[Any]:
        version = 1
        request = self.request(
            INCREMENTAL_ALTER_CONFIGS,
            version,
            resources=tuple(
                self.nested(
                    INCREMENTAL_ALTER_CONFIGS,
                    version,
                    "AlterConfigsResource",
                    resource_type=resource_type,
                    resource_name=name,
                    configs=tuple(
                        self.nested(
                            INCREMENTAL_ALTER_CONFIGS,
                            version,
                            "AlterableConfig",
                            name=key,
                            config_operation=op,
                            value=value,
                        )
                        for key, op, value in configs
                    ),
                )
                for resource_type, name, configs in resources
            ),
            validate_only=validate_only,
        )
        return list(self.send(request, node_id).responses)

    def alter(
        self,
        resource_type: int,
        name: str,
        configs: dict[str, str | None],
        *,
        version: int = 2,
        validate_only: bool = False,
        node_id: int = 1,
    ) -> Any:
        resource = self.nested(
            ALTER_CONFIGS,
            version,
            "AlterConfigsResource",
            resource_type=resource_type,
            resource_name=name,
            configs=tuple(
                self.nested(ALTER_CONFIGS, version, "AlterableConfig", name=k, value=v)
                for k, v in configs.items()
            ),
        )
        request = self.request(
            ALTER_CONFIGS, version, resources=(resource,), validate_only=validate_only
        )
        return self.send(request, node_id).responses[0]


@pytest.fixture
def broker() -> Broker:
    return Broker()


def configs_by_name(result: Any) -> dict[str, Any]:
    return {entry.name: entry for entry in result.configs}


# --- CreateTopics ----------------------------------------------------------------------------


def test_create_topic_v7_reports_id_counts_and_resolved_configs(broker: Broker) -> None:
    response = broker.create("orders", 3, 2, configs={"retention.ms": "1000"})
    (result,) = response.topics
    assert result.error_code == ErrorCode.none
    assert result.error_message is None
    topic = broker.cluster.topics["orders"]
    assert result.topic_id == topic.topic_id
    assert (result.num_partitions, result.replication_factor) == (3, 2)
    assert all(len(p.replicas) == 2 for p in topic.partitions)
    configs = {c.name: c for c in result.configs}
    assert configs["retention.ms"].value == "1000"
    assert configs["retention.ms"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].config_source == ConfigSource.DEFAULT_CONFIG
    assert not configs["cleanup.policy"].read_only
    assert topic.config.get("retention.ms") == "1000"


def test_create_topic_defaults_come_from_broker_config() -> None:
    broker = Broker(**{"num.partitions": "4", "default.replication.factor": "3"})
    (result,) = broker.create("defaults", -1, -1).topics
    assert result.error_code == ErrorCode.none
    assert (result.num_partitions, result.replication_factor) == (4, 3)
    config = {c.name: c for c in result.configs}["max.message.bytes"]
    assert config.value == "1048588"
    topic = broker.cluster.topics["defaults"]
    assert len(topic.partitions) == 4 and len(topic.partitions[0].replicas) == 3


def test_static_broker_property_is_the_topic_config_source() -> None:
    broker = Broker(**{"log.retention.ms": "5000"})
    (result,) = broker.create("static", 1, 1).topics
    config = {c.name: c for c in result.configs}["retention.ms"]
    assert (config.value, config.config_source) == ("5000", ConfigSource.STATIC_BROKER_CONFIG)


def test_create_topic_old_version_has_no_configs(broker: Broker) -> None:
    (result,) = broker.create("old", 2, 1, version=2).topics
    assert result.error_code == ErrorCode.none
    assert not hasattr(result, "configs")
    assert len(broker.cluster.topics["old"].partitions) == 2


def test_an_excessively_large_creation_is_refused_before_any_work(broker: Broker) -> None:
    (result,) = broker.create("huge", 2**31 - 1, 1).topics
    assert result.error_code == ErrorCode.policy_violation
    assert result.error_message == "Unable to perform excessively large batch operation."
    assert "huge" not in broker.cluster.topics


def test_validate_only_creates_nothing(broker: Broker) -> None:
    (result,) = broker.create("dry", 5, 1, validate_only=True).topics
    assert result.error_code == ErrorCode.none
    assert result.num_partitions == 5
    assert "dry" not in broker.cluster.topics


def test_manual_assignment_sets_replicas_and_leader(broker: Broker) -> None:
    (result,) = broker.create("manual", -1, -1, assignments={0: [3, 1], 1: [2, 3]}).topics
    assert result.error_code == ErrorCode.none
    assert (result.num_partitions, result.replication_factor) == (2, 2)
    partitions = broker.cluster.topics["manual"].partitions
    assert [p.replicas for p in partitions] == [[3, 1], [2, 3]]
    assert [p.leader_id for p in partitions] == [3, 2]


@pytest.mark.parametrize(
    ("partitions", "replication", "assignments", "code", "message"),
    [
        (
            -1,
            2,
            {0: [1, 2]},
            ErrorCode.invalid_request,
            "A manual partition assignment was specified, but replication factor was not set "
            "to -1.",
        ),
        (
            2,
            -1,
            {0: [1, 2]},
            ErrorCode.invalid_request,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ),
        (
            -1,
            -1,
            {0: [1, 9]},
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
        (
            -1,
            -1,
            {0: [1, 1]},
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes the broker 1 more than once.",
        ),
        (
            -1,
            -1,
            {0: [1, 2], 1: [3]},
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes a partition with 1 replica(s), but this "
            "is not consistent with previous partitions, which have 2 replica(s).",
        ),
        (
            -1,
            -1,
            {0: [1], 2: [2]},
            ErrorCode.invalid_replica_assignment,
            "partitions should be a consecutive 0-based integer sequence",
        ),
        (
            -1,
            -1,
            {0: []},
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        ),
    ],
)
def test_bad_manual_assignments(
    broker: Broker,
    partitions: int,
    replication: int,
    assignments: dict[int, list[int]],
    code: ErrorCode,
    message: str,
) -> None:
    (result,) = broker.create("bad", partitions, replication, assignments=assignments).topics
    assert (result.error_code, result.error_message) == (code, message)
    assert result.topic_id in (None, ZERO_UUID)  # kio decodes the zero uuid as None
    assert (result.num_partitions, result.replication_factor) == (-1, -1)
    assert "bad" not in broker.cluster.topics


@pytest.mark.parametrize(
    ("name", "partitions", "replication", "configs", "code", "message"),
    [
        (
            "bad/name",
            1,
            1,
            None,
            ErrorCode.invalid_topic_exception,
            "Topic name is invalid: 'bad/name' contains one or more characters other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        ),
        (
            "",
            1,
            1,
            None,
            ErrorCode.invalid_topic_exception,
            "Topic name is invalid: the empty string is not allowed",
        ),
        (
            "__cluster_metadata",
            1,
            1,
            None,
            ErrorCode.invalid_request,
            "Creation of internal topic __cluster_metadata is prohibited.",
        ),
        (
            "zero",
            0,
            1,
            None,
            ErrorCode.invalid_partitions,
            "Number of partitions was set to an invalid non-positive value.",
        ),
        (
            "zero",
            1,
            0,
            None,
            ErrorCode.invalid_replication_factor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        ),
        (
            "wide",
            1,
            4,
            None,
            ErrorCode.invalid_replication_factor,
            "Unable to replicate the partition 4 time(s): The target replication factor of 4 "
            "cannot be reached because only 3 broker(s) are registered or some brokers have all "
            "their log directories cordoned.",
        ),
        (
            "cfg",
            1,
            1,
            {"no.such.config": "1"},
            ErrorCode.invalid_config,
            "Unknown topic config name: no.such.config",
        ),
        (
            "cfg",
            1,
            1,
            {"retention.ms": "soon"},
            ErrorCode.invalid_config,
            "Invalid value soon for configuration retention.ms: Not a number of type LONG",
        ),
        (
            "cfg",
            1,
            1,
            {"message.timestamp.type": "Whenever"},
            ErrorCode.invalid_config,
            "Invalid value Whenever for configuration message.timestamp.type: String must be "
            "one of: CreateTime, LogAppendTime",
        ),
        (
            "cfg",
            1,
            1,
            {"retention.ms": None},
            ErrorCode.invalid_config,
            "Null value not supported for topic configs: retention.ms",
        ),
    ],
)
def test_create_topic_refusals(
    broker: Broker,
    name: str,
    partitions: int,
    replication: int,
    configs: dict[str, str | None] | None,
    code: ErrorCode,
    message: str,
) -> None:
    (result,) = broker.create(name, partitions, replication, configs=configs).topics
    assert (result.error_code, result.error_message) == (code, message)
    assert name not in broker.cluster.topics


def test_existing_and_colliding_topics(broker: Broker) -> None:
    broker.create("a.b")
    (again,) = broker.create("a.b").topics
    assert again.error_code == ErrorCode.topic_already_exists
    assert again.error_message == "Topic 'a.b' already exists."
    (collision,) = broker.create("a_b").topics
    assert collision.error_code == ErrorCode.invalid_topic_exception
    assert collision.error_message == "Topic 'a_b' collides with existing topic: a.b"


def test_duplicate_names_in_one_request(broker: Broker) -> None:
    twin = broker.creatable("twin")
    response = broker.create("twin", extra=(twin, broker.creatable("single")))
    results = {r.name: r for r in response.topics}
    assert len(response.topics) == 2
    assert results["twin"].error_code == ErrorCode.invalid_request
    assert results["twin"].error_message == "Duplicate topic name."
    assert results["single"].error_code == ErrorCode.none
    assert "twin" not in broker.cluster.topics


# --- DeleteTopics ----------------------------------------------------------------------------


def delete_by_name(broker: Broker, *names: str, version: int = 5) -> dict[str, Any]:
    request = broker.request(DELETE_TOPICS, version, topic_names=names)
    return {r.name: r for r in broker.send(request).responses}


def delete_states(broker: Broker, *states: tuple[str | None, uuid.UUID | None]) -> list[Any]:
    request = broker.request(
        DELETE_TOPICS,
        6,
        topics=tuple(
            broker.nested(DELETE_TOPICS, 6, "DeleteTopicState", name=n, topic_id=i or ZERO_UUID)
            for n, i in states
        ),
    )
    return list(broker.send(request).responses)


def test_delete_by_name_and_unknown_name(broker: Broker) -> None:
    broker.create("gone")
    results = delete_by_name(broker, "gone", "never")
    assert results["gone"].error_code == ErrorCode.none
    assert results["gone"].error_message is None
    assert results["never"].error_code == ErrorCode.unknown_topic_or_partition
    assert results["never"].error_message == "This server does not host this topic-partition."
    assert "gone" not in broker.cluster.topics


def test_delete_by_id_v6_and_unknown_id(broker: Broker) -> None:
    broker.create("by-id")
    topic_id = broker.cluster.topics["by-id"].topic_id
    missing = uuid.uuid4()
    results = delete_states(broker, (None, topic_id), (None, missing))
    by_id = {r.topic_id: r for r in results}
    assert by_id[topic_id].error_code == ErrorCode.none
    assert by_id[topic_id].name == "by-id"
    assert by_id[missing].error_code == ErrorCode.unknown_topic_id
    assert by_id[missing].name is None
    assert "by-id" not in broker.cluster.topics


def test_delete_v6_request_shape_errors(broker: Broker) -> None:
    broker.create("shape")
    topic_id = broker.cluster.topics["shape"].topic_id
    results = delete_states(broker, (None, None), ("shape", topic_id))
    messages = sorted(r.error_message for r in results)
    assert [r.error_code for r in results] == [ErrorCode.invalid_request] * 2
    assert messages == [
        "Neither topic name nor id were specified.",
        "You may not specify both topic name and topic id.",
    ]
    assert "shape" in broker.cluster.topics
    results = delete_states(broker, ("shape", None), ("shape", None))
    assert [(r.error_code, r.error_message) for r in results] == [
        (ErrorCode.invalid_request, "Duplicate topic name.")
    ]


def test_internal_topics_are_refused(broker: Broker) -> None:
    broker.cluster.create_topic("__consumer_offsets", 1, 1)
    result = delete_by_name(broker, "__consumer_offsets")["__consumer_offsets"]
    assert result.error_code == ErrorCode.invalid_request
    assert "internal topic" in result.error_message
    assert "__consumer_offsets" in broker.cluster.topics


def test_deleted_topic_leaves_fetch_sessions(broker: Broker) -> None:
    broker.create("fetched", 2)
    broker.create("kept")
    topic_id = broker.cluster.topics["fetched"].topic_id
    cache = fetch_sessions(broker.runtime)
    session = cache.decide(1, 0, 0, now_ms=0).session
    assert session is not None
    for key in (("fetched", 0), (topic_id, 1), ("kept", 0)):
        session.partitions[key] = SessionPartition(0, 1024)
    delete_by_name(broker, "fetched")
    assert list(session.partitions) == [("kept", 0)]


@pytest.mark.parametrize(
    ("version", "code"),
    [(2, ErrorCode.invalid_request), (6, ErrorCode.topic_deletion_disabled)],
)
def test_deletion_disabled(version: int, code: ErrorCode) -> None:
    broker = Broker(**{"delete.topic.enable": "false"})
    broker.create("stays")
    if version >= 6:
        (result,) = delete_states(broker, ("stays", None))
    else:
        result = delete_by_name(broker, "stays", version=version)["stays"]
    assert result.error_code == code
    assert "stays" in broker.cluster.topics


# --- CreatePartitions ------------------------------------------------------------------------


def create_partitions(
    broker: Broker,
    *topics: tuple[str, int, list[list[int]] | None],
    validate_only: bool = False,
    version: int = 3,
) -> dict[str, Any]:
    request = broker.request(
        CREATE_PARTITIONS,
        version,
        topics=tuple(
            broker.nested(
                CREATE_PARTITIONS,
                version,
                "CreatePartitionsTopic",
                name=name,
                count=count,
                assignments=None
                if assignments is None
                else tuple(
                    broker.nested(
                        CREATE_PARTITIONS,
                        version,
                        "CreatePartitionsAssignment",
                        broker_ids=tuple(ids),
                    )
                    for ids in assignments
                ),
            )
            for name, count, assignments in topics
        ),
        timeout=datetime.timedelta(seconds=30),
        validate_only=validate_only,
    )
    return {r.name: r for r in broker.send(request).results}


@pytest.mark.parametrize("version", [0, 3])
def test_partitions_grow(broker: Broker, version: int) -> None:
    broker.create("grow", 1, 2)
    result = create_partitions(broker, ("grow", 3, None), version=version)["grow"]
    assert result.error_code == ErrorCode.none
    partitions = broker.cluster.topics["grow"].partitions
    assert len(partitions) == 3
    assert all(len(p.replicas) == 2 for p in partitions)


def test_partitions_with_assignments_and_validate_only(broker: Broker) -> None:
    broker.create("assigned", 1, 2)
    dry = create_partitions(broker, ("assigned", 2, [[3, 2]]), validate_only=True)["assigned"]
    assert dry.error_code == ErrorCode.none
    assert len(broker.cluster.topics["assigned"].partitions) == 1
    create_partitions(broker, ("assigned", 2, [[3, 2]]))
    added = broker.cluster.topics["assigned"].partitions[1]
    assert (added.replicas, added.leader_id) == ([3, 2], 3)


@pytest.mark.parametrize(
    ("count", "assignments", "code", "message"),
    [
        (2, None, ErrorCode.invalid_partitions, "Topic already has 2 partition(s)."),
        (
            1,
            None,
            ErrorCode.invalid_partitions,
            "The topic few currently has 2 partition(s); 1 would not be an increase.",
        ),
        (
            4,
            [[1]],
            ErrorCode.invalid_replica_assignment,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        (
            3,
            [[1, 2]],
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes a partition with 2 replica(s), but this "
            "is not consistent with previous partitions, which have 1 replica(s).",
        ),
        (
            3,
            [[7]],
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes broker 7, but no such broker is registered.",
        ),
    ],
)
def test_partitions_refusals(
    broker: Broker,
    count: int,
    assignments: list[list[int]] | None,
    code: ErrorCode,
    message: str,
) -> None:
    broker.create("few", 2, 1)
    result = create_partitions(broker, ("few", count, assignments))["few"]
    assert (result.error_code, result.error_message) == (code, message)
    assert len(broker.cluster.topics["few"].partitions) == 2


def test_partitions_unknown_and_duplicate_topics(broker: Broker) -> None:
    broker.create("dup")
    results = create_partitions(broker, ("dup", 2, None), ("dup", 3, None), ("nope", 2, None))
    assert results["dup"].error_code == ErrorCode.invalid_request
    assert results["dup"].error_message == "Duplicate topic name."
    assert results["nope"].error_code == ErrorCode.unknown_topic_or_partition
    assert len(broker.cluster.topics["dup"].partitions) == 1


# --- DeleteRecords ---------------------------------------------------------------------------


def delete_records(
    broker: Broker, topic: str, partition: int, offset: int, node_id: int = 1
) -> Any:
    version = 2
    request = broker.request(
        DELETE_RECORDS,
        version,
        topics=(
            broker.nested(
                DELETE_RECORDS,
                version,
                "DeleteRecordsTopic",
                name=topic,
                partitions=(
                    broker.nested(
                        DELETE_RECORDS,
                        version,
                        "DeleteRecordsPartition",
                        partition_index=partition,
                        offset=offset,
                    ),
                ),
            ),
        ),
        timeout=datetime.timedelta(seconds=30),
    )
    return broker.send(request, node_id).topics[0].partitions[0]


def test_delete_records_moves_the_low_watermark(broker: Broker) -> None:
    broker.create("trim", -1, -1, assignments={0: [1]})
    for _ in range(4):
        broker.produce("trim", 0, 5)
    result = delete_records(broker, "trim", 0, 10)
    assert (result.error_code, result.low_watermark) == (ErrorCode.none, 10)
    partition = broker.cluster.topics["trim"].partitions[0]
    assert partition.log_start_offset == 10
    lower = delete_records(broker, "trim", 0, 3)
    assert (lower.error_code, lower.low_watermark) == (ErrorCode.none, 10)
    everything = delete_records(broker, "trim", 0, -1)
    assert (everything.error_code, everything.low_watermark) == (ErrorCode.none, 20)


@pytest.mark.parametrize(
    ("topic", "partition", "offset", "node_id", "code"),
    [
        ("edge", 0, 6, 1, ErrorCode.offset_out_of_range),
        ("edge", 0, -5, 1, ErrorCode.offset_out_of_range),
        ("edge", 0, 1, 2, ErrorCode.not_leader_or_follower),
        ("edge", 3, 1, 1, ErrorCode.unknown_topic_or_partition),
        ("absent", 0, 1, 1, ErrorCode.unknown_topic_or_partition),
    ],
)
def test_delete_records_refusals(
    broker: Broker, topic: str, partition: int, offset: int, node_id: int, code: ErrorCode
) -> None:
    broker.create("edge", -1, -1, assignments={0: [1]})
    broker.produce("edge", 0, 5)
    result = delete_records(broker, topic, partition, offset, node_id)
    assert (result.error_code, result.low_watermark) == (code, -1)
    assert broker.cluster.topics["edge"].partitions[0].log_start_offset == 0


def test_delete_records_on_compacted_topic_is_a_policy_violation(broker: Broker) -> None:
    broker.create("compacted", -1, -1, assignments={0: [1]}, configs={"cleanup.policy": "compact"})
    broker.produce("compacted", 0, 2)
    result = delete_records(broker, "compacted", 0, 1)
    assert result.error_code == ErrorCode.policy_violation


# --- DescribeConfigs -------------------------------------------------------------------------


def test_describe_topic_configs_with_synonyms_types_and_docs() -> None:
    broker = Broker(**{"log.retention.bytes": "1000"})
    broker.create("described", configs={"cleanup.policy": "compact"})
    result = broker.describe_configs(TOPIC, "described")
    assert result.error_code == ErrorCode.none
    configs = configs_by_name(result)
    policy = configs["cleanup.policy"]
    assert (policy.value, policy.config_source) == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert policy.config_type == ConfigType.LIST
    assert [(s.name, s.value, s.source) for s in policy.synonyms] == [
        ("cleanup.policy", "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG),
    ]
    assert policy.documentation
    retention = configs["retention.bytes"]
    assert (retention.value, retention.config_source) == (
        "1000",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert configs["max.message.bytes"].config_type == ConfigType.INT
    assert not any(c.read_only or c.is_sensitive for c in result.configs)


def test_describe_topic_configs_filtered_and_without_extras(broker: Broker) -> None:
    broker.create("narrow")
    result = broker.describe_configs(
        TOPIC,
        "narrow",
        ("retention.ms", "unknown.key"),
        synonyms=False,
        documentation=False,
    )
    assert [c.name for c in result.configs] == ["retention.ms"]
    assert result.configs[0].synonyms == ()
    assert result.configs[0].documentation is None


def test_describe_configs_v1_has_no_types_or_docs(broker: Broker) -> None:
    broker.create("v1")
    result = broker.describe_configs(TOPIC, "v1", ("segment.ms",), version=1)
    (entry,) = result.configs
    assert entry.value == "604800000"
    assert not hasattr(entry, "config_type")


@pytest.mark.parametrize(
    ("resource_type", "name", "node_id", "code", "message"),
    [
        (TOPIC, "missing", 1, ErrorCode.unknown_topic_or_partition, None),
        (
            TOPIC,
            "bad name",
            1,
            ErrorCode.invalid_topic_exception,
            "Topic name is invalid: 'bad name' contains one or more characters other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        ),
        (
            BROKER,
            "2",
            1,
            ErrorCode.invalid_request,
            "Unexpected broker id, expected 1 or empty string, but received 2",
        ),
        (
            BROKER,
            "one",
            1,
            ErrorCode.invalid_request,
            "Broker id must be an integer, but it is: one",
        ),
        (99, "x", 1, ErrorCode.invalid_request, "Unknown resource type 99"),
    ],
)
def test_describe_configs_refusals(
    broker: Broker,
    resource_type: int,
    name: str,
    node_id: int,
    code: ErrorCode,
    message: str | None,
) -> None:
    result = broker.describe_configs(resource_type, name, node_id=node_id)
    assert (result.error_code, result.error_message) == (code, message)
    assert result.configs == ()
    assert (result.resource_type, result.resource_name) == (resource_type, name)


def test_describe_broker_node_and_cluster_default() -> None:
    broker = Broker(**{"num.partitions": "6"})
    result = broker.describe_configs(BROKER, "2", node_id=2)
    assert result.error_code == ErrorCode.none
    configs = configs_by_name(result)
    assert configs["node.id"].value == "2"
    assert configs["listeners"].value == "PLAINTEXT://127.0.0.1:19092"
    partitions = configs["num.partitions"]
    assert (partitions.value, partitions.config_source) == (
        "6",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert [s.source for s in partitions.synonyms] == [
        ConfigSource.STATIC_BROKER_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
    ]
    assert configs["log.dirs"].read_only if "log.dirs" in configs else True
    assert configs["message.max.bytes"].read_only is False
    assert configs["delete.topic.enable"].read_only is True
    cluster_default = broker.describe_configs(BROKER, "")
    assert cluster_default.error_code == ErrorCode.none
    # Only the cluster-wide min.insync.replicas Kafka 4.4's controller writes when it starts.
    assert [(c.name, c.value, c.config_source) for c in cluster_default.configs] == [
        ("min.insync.replicas", "1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]


# --- IncrementalAlterConfigs / AlterConfigs --------------------------------------------------


def test_incremental_topic_changes_take_effect_and_persist(tmp_path: Path) -> None:
    broker = Broker(data_dir=tmp_path)
    broker.create("live")
    (response,) = broker.incremental(
        [
            (
                TOPIC,
                "live",
                [
                    ("retention.ms", 0, "60000"),
                    ("message.timestamp.type", 0, "LogAppendTime"),
                    ("max.message.bytes", 0, "2048"),
                    ("cleanup.policy", 2, "compact"),
                ],
            )
        ]
    )
    assert (response.error_code, response.error_message) == (ErrorCode.none, None)
    config = broker.cluster.topics["live"].config
    assert config.get("retention.ms") == "60000"
    assert config.get_int("max.message.bytes") == 2048
    assert config.get("message.timestamp.type") == "LogAppendTime"
    assert config.get("cleanup.policy") == "delete,compact"
    reloaded = Broker(data_dir=tmp_path)
    reloaded.cluster.load_metadata()
    assert reloaded.cluster.topics["live"].config.get("retention.ms") == "60000"

    (response,) = broker.incremental(
        [(TOPIC, "live", [("retention.ms", 1, None), ("cleanup.policy", 3, "delete")])]
    )
    assert response.error_code == ErrorCode.none
    assert config.source("retention.ms") == ConfigSource.DEFAULT_CONFIG
    assert config.get("cleanup.policy") == "compact"


@pytest.mark.parametrize(
    ("resource", "code", "message"),
    [
        (
            (TOPIC, "t", [("retention.ms", 0, "later")]),
            ErrorCode.invalid_config,
            "Invalid value later for configuration retention.ms: Not a number of type LONG",
        ),
        (
            (TOPIC, "t", [("segment.bytes", 0, "10")]),
            ErrorCode.invalid_config,
            "Invalid value 10 for configuration segment.bytes: Value must be at least 1048576",
        ),
        (
            (TOPIC, "t", [("bogus", 0, "1")]),
            ErrorCode.invalid_config,
            "Unknown topic config name: bogus",
        ),
        (
            (TOPIC, "t", [("retention.ms", 2, "1")]),
            ErrorCode.invalid_config,
            "Can't APPEND to key retention.ms because its type is not LIST.",
        ),
        (
            (TOPIC, "t", [("retention.ms", 0, None)]),
            ErrorCode.invalid_request,
            "Null value not supported for : retention.ms",
        ),
        (
            (TOPIC, "t", [("retention.ms", 0, "1"), ("retention.ms", 0, "2")]),
            ErrorCode.invalid_request,
            "Error due to duplicate config keys",
        ),
        (
            (TOPIC, "t", [("retention.ms", 9, "1")]),
            ErrorCode.invalid_request,
            "Unknown operations type 9",
        ),
        (
            (TOPIC, "ghost", [("retention.ms", 0, "1")]),
            ErrorCode.unknown_topic_or_partition,
            "The topic 'ghost' does not exist.",
        ),
        (
            (TOPIC, "", [("retention.ms", 0, "1")]),
            ErrorCode.invalid_request,
            "Default topic resources are not allowed.",
        ),
        (
            (BROKER, "", [("delete.topic.enable", 0, "false")]),
            ErrorCode.invalid_request,
            "Cannot update these configs dynamically: [delete.topic.enable]",
        ),
        (
            (BROKER, "", [("message.max.bytes", 0, "big")]),
            ErrorCode.invalid_request,
            "Invalid value big for configuration message.max.bytes: Not a number of type INT",
        ),
        (
            (BROKER, "3", [("message.max.bytes", 0, "1000")]),
            ErrorCode.invalid_request,
            "Unexpected broker id, expected 1, but received 3",
        ),
        (
            (BROKER, "x", [("message.max.bytes", 0, "1000")]),
            ErrorCode.invalid_request,
            "Node id must be an integer, but it is: x",
        ),
        ((64, "metrics", [("a", 0, "b")]), ErrorCode.invalid_request, "Unknown resource type 64"),
    ],
)
def test_incremental_refusals(
    broker: Broker,
    resource: tuple[int, str, list[tuple[str, int, str | None]]],
    code: ErrorCode,
    message: str,
) -> None:
    broker.create("t")
    (response,) = broker.incremental([resource])
    assert (response.error_code, response.error_message) == (code, message)
    assert broker.cluster.topics["t"].config.overrides == {}
    assert broker.cluster.config.dynamic == {"min.insync.replicas": "1"}  # as it started


def test_duplicate_resources_and_independent_outcomes(broker: Broker) -> None:
    broker.create("one")
    broker.create("two")
    responses = broker.incremental(
        [
            (TOPIC, "one", [("retention.ms", 0, "1")]),
            (TOPIC, "one", [("retention.ms", 0, "2")]),
            (TOPIC, "two", [("retention.ms", 0, "3")]),
        ]
    )
    assert [(r.resource_name, r.error_code) for r in responses] == [
        ("one", ErrorCode.invalid_request),
        ("one", ErrorCode.invalid_request),
        ("two", ErrorCode.none),
    ]
    assert responses[0].error_message == "Each resource must appear at most once."
    assert broker.cluster.topics["two"].config.get("retention.ms") == "3"
    assert broker.cluster.topics["one"].config.overrides == {}


def test_incremental_validate_only_changes_nothing(broker: Broker) -> None:
    broker.create("dry")
    (response,) = broker.incremental(
        [(TOPIC, "dry", [("retention.ms", 0, "5")])], validate_only=True
    )
    assert response.error_code == ErrorCode.none
    assert broker.cluster.topics["dry"].config.overrides == {}


def test_broker_cluster_default_and_per_node_configs(tmp_path: Path) -> None:
    broker = Broker(data_dir=tmp_path)
    broker.create("follows")
    (response,) = broker.incremental([(BROKER, "", [("log.retention.ms", 0, "1234")])])
    assert response.error_code == ErrorCode.none
    assert broker.cluster.topics["follows"].config.get("retention.ms") == "1234"
    described = configs_by_name(broker.describe_configs(BROKER, ""))
    assert described["log.retention.ms"].value == "1234"
    assert described["log.retention.ms"].config_source == (
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    )
    topic_view = configs_by_name(broker.describe_configs(TOPIC, "follows", ("retention.ms",)))
    assert topic_view["retention.ms"].config_source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG

    (response,) = broker.incremental([(BROKER, "2", [("message.max.bytes", 0, "5000")])], node_id=2)
    assert response.error_code == ErrorCode.none
    node_view = configs_by_name(broker.describe_configs(BROKER, "2", node_id=2))
    assert node_view["message.max.bytes"].value == "5000"
    assert node_view["message.max.bytes"].config_source == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert node_view["log.retention.ms"].config_source == (
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    )
    other_node = configs_by_name(broker.describe_configs(BROKER, "1"))
    assert other_node["message.max.bytes"].value == "1048588"

    reloaded = Broker(data_dir=tmp_path)
    reloaded.cluster.load_metadata()
    assert reloaded.cluster.config.dynamic == {
        "log.retention.ms": "1234",
        "min.insync.replicas": "1",
    }
    assert reloaded.cluster.config.node_dynamic == {2: {"message.max.bytes": "5000"}}


def test_legacy_alter_replaces_the_whole_set(broker: Broker) -> None:
    broker.create("legacy", configs={"retention.ms": "100", "segment.ms": "200"})
    response = broker.alter(TOPIC, "legacy", {"retention.bytes": "4096"})
    assert response.error_code == ErrorCode.none
    assert broker.cluster.topics["legacy"].config.overrides == {"retention.bytes": "4096"}
    refused = broker.alter(TOPIC, "legacy", {"retention.bytes": None}, version=0)
    assert refused.error_code == ErrorCode.invalid_request
    assert refused.error_message == "Null value not supported for : retention.bytes"
    unknown = broker.alter(TOPIC, "nowhere", {"retention.bytes": "1"})
    assert unknown.error_code == ErrorCode.unknown_topic_or_partition
    dry = broker.alter(TOPIC, "legacy", {}, validate_only=True)
    assert dry.error_code == ErrorCode.none
    assert broker.cluster.topics["legacy"].config.overrides == {"retention.bytes": "4096"}
    read_only = broker.alter(BROKER, "1", {"log.dirs": "/tmp"})
    assert read_only.error_code == ErrorCode.invalid_request
    assert read_only.error_message == "Cannot update these configs dynamically: [log.dirs]"


# --- DescribeCluster -------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster(broker: Broker, version: int) -> None:
    fields: dict[str, Any] = {"include_cluster_authorized_operations": True}
    if version >= 2:
        fields["include_fenced_brokers"] = True
    response = broker.send(broker.request(DESCRIBE_CLUSTER, version, **fields))
    assert response.error_code == ErrorCode.none
    assert response.cluster_id == "unit-cluster"
    assert response.controller_id == 1
    assert [(b.broker_id, b.port) for b in response.brokers] == [
        (1, 19091),
        (2, 19092),
        (3, 19093),
    ]
    assert response.cluster_authorized_operations > 0


@pytest.mark.parametrize(
    ("version", "endpoint_type", "code"),
    [
        (1, 2, ErrorCode.mismatched_endpoint_type),
        (1, 7, ErrorCode.unsupported_endpoint_type),
    ],
)
def test_describe_cluster_endpoint_types(
    broker: Broker, version: int, endpoint_type: int, code: ErrorCode
) -> None:
    request = broker.request(DESCRIBE_CLUSTER, version, endpoint_type=endpoint_type)
    response = broker.send(request)
    assert response.error_code == code
    assert response.brokers == ()
    assert response.error_message


# --- DescribeTopicPartitions -----------------------------------------------------------------


def describe_partitions(
    broker: Broker, names: tuple[str, ...], limit: int, cursor: tuple[str, int] | None = None
) -> Any:
    request = broker.request(
        DESCRIBE_TOPIC_PARTITIONS,
        0,
        topics=tuple(
            broker.nested(DESCRIBE_TOPIC_PARTITIONS, 0, "TopicRequest", name=n) for n in names
        ),
        response_partition_limit=limit,
        cursor=None
        if cursor is None
        else broker.nested(
            DESCRIBE_TOPIC_PARTITIONS,
            0,
            "Cursor",
            topic_name=cursor[0],
            partition_index=cursor[1],
        ),
    )
    return broker.send(request)


def test_describe_topic_partitions_pages_with_a_cursor(broker: Broker) -> None:
    broker.create("alpha", 3)
    broker.create("beta", 2)
    broker.create("gamma", 1)
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    while True:
        response = describe_partitions(broker, (), 2, cursor)
        pages += 1
        for topic in response.topics:
            assert topic.error_code == ErrorCode.none
            seen.extend((topic.name, p.partition_index) for p in topic.partitions)
        if response.next_cursor is None:
            break
        cursor = (response.next_cursor.topic_name, response.next_cursor.partition_index)
    assert seen == [
        ("alpha", 0),
        ("alpha", 1),
        ("alpha", 2),
        ("beta", 0),
        ("beta", 1),
        ("gamma", 0),
    ]
    assert pages == 3


def test_describe_topic_partitions_named_missing_and_bad_cursor(broker: Broker) -> None:
    broker.create("present", 2, 2)
    response = describe_partitions(broker, ("present", "absent", "bad name"), 100)
    topics = {t.name: t for t in response.topics}
    assert topics["absent"].error_code == ErrorCode.unknown_topic_or_partition
    assert topics["bad name"].error_code == ErrorCode.invalid_topic_exception
    present = topics["present"]
    assert present.topic_id == broker.cluster.topics["present"].topic_id
    assert [len(p.isr_nodes) for p in present.partitions] == [2, 2]
    refused = describe_partitions(broker, ("present",), 100, ("other", 0))
    assert [t.error_code for t in refused.topics] == [ErrorCode.invalid_request]


# --- OffsetForLeaderEpoch --------------------------------------------------------------------


def epoch_end(
    broker: Broker, topic: str, partition: int, epoch: int, current: int = -1, node_id: int = 1
) -> tuple[ErrorCode, int, int]:
    version = 4
    request = broker.request(
        OFFSET_FOR_LEADER_EPOCH,
        version,
        replica_id=-1,
        topics=(
            broker.nested(
                OFFSET_FOR_LEADER_EPOCH,
                version,
                "OffsetForLeaderTopic",
                topic=topic,
                partitions=(
                    broker.nested(
                        OFFSET_FOR_LEADER_EPOCH,
                        version,
                        "OffsetForLeaderPartition",
                        partition=partition,
                        current_leader_epoch=current,
                        leader_epoch=epoch,
                    ),
                ),
            ),
        ),
    )
    result = broker.send(request, node_id).topics[0].partitions[0]
    return result.error_code, result.leader_epoch, result.end_offset


def test_offset_for_leader_epoch(broker: Broker) -> None:
    broker.create("epochs", -1, -1, assignments={0: [1]})
    broker.produce("epochs", 0, 3)
    partition = broker.cluster.topics["epochs"].partitions[0]
    assert epoch_end(broker, "epochs", 0, 0) == (ErrorCode.none, 0, 3)
    assert epoch_end(broker, "epochs", 0, 5) == (ErrorCode.none, -1, -1)
    partition.leader_epoch = 2  # a leader change: epoch 0 ends where epoch 2 starts
    broker.produce("epochs", 0, 2)
    assert epoch_end(broker, "epochs", 0, 2, current=2) == (ErrorCode.none, 2, 5)
    assert epoch_end(broker, "epochs", 0, 1) == (ErrorCode.none, 0, 3)
    assert epoch_end(broker, "epochs", 0, 0) == (ErrorCode.none, 0, 3)
    assert epoch_end(broker, "epochs", 0, 0, current=1)[0] == ErrorCode.fenced_leader_epoch
    assert epoch_end(broker, "epochs", 0, 0, current=3)[0] == ErrorCode.unknown_leader_epoch
    assert epoch_end(broker, "epochs", 0, 2, node_id=2)[0] == ErrorCode.not_leader_or_follower
    assert epoch_end(broker, "epochs", 4, 0)[0] == ErrorCode.unknown_topic_or_partition
    assert epoch_end(broker, "nothing", 0, 0)[0] == ErrorCode.unknown_topic_or_partition


# --- telemetry -------------------------------------------------------------------------------


def test_telemetry_subscription_is_empty_and_pushes_are_accepted(broker: Broker) -> None:
    response = broker.send(broker.request(GET_TELEMETRY, 0, client_instance_id=ZERO_UUID))
    assert response.error_code == ErrorCode.none
    assert response.client_instance_id not in (None, ZERO_UUID)
    assert response.requested_metrics == ()
    assert response.subscription_id == 0
    assert response.push_interval == datetime.timedelta(minutes=5)
    known = uuid.uuid4()
    again = broker.send(broker.request(GET_TELEMETRY, 0, client_instance_id=known))
    assert again.client_instance_id == known
    push = broker.request(
        PUSH_TELEMETRY, 0, client_instance_id=known, subscription_id=0, metrics=b"x"
    )
    assert broker.send(push).error_code == ErrorCode.none
    anonymous = broker.request(PUSH_TELEMETRY, 0, client_instance_id=ZERO_UUID, metrics=b"")
    assert broker.send(anonymous).error_code == ErrorCode.invalid_request


# --- InitProducerId --------------------------------------------------------------------------


def init_producer(broker: Broker, version: int = 5, node_id: int = 1, **fields: Any) -> Any:
    fields.setdefault("transactional_id", None)
    fields.setdefault("transaction_timeout", datetime.timedelta(milliseconds=60000))
    return broker.send(broker.request(INIT_PRODUCER_ID, version, **fields), node_id)


@pytest.mark.parametrize("version", [0, 2, 3, 4, 5])
def test_idempotent_producers_get_increasing_ids(broker: Broker, version: int) -> None:
    first = init_producer(broker, version)
    second = init_producer(broker, version, node_id=3)
    assert (first.error_code, second.error_code) == (ErrorCode.none, ErrorCode.none)
    assert second.producer_id > first.producer_id >= 0
    assert first.producer_epoch == second.producer_epoch == 0


def test_init_producer_id_request_checks(broker: Broker) -> None:
    given = init_producer(broker, producer_id=7, producer_epoch=3)
    assert (given.error_code, given.producer_epoch) == (ErrorCode.none, 0)
    assert given.producer_id != 7
    half = init_producer(broker, producer_id=7, producer_epoch=-1)
    assert (half.error_code, half.producer_id) == (ErrorCode.invalid_request, -1)
    empty = init_producer(broker, transactional_id="")
    assert empty.error_code == ErrorCode.invalid_request
    transactional = init_producer(broker, transactional_id="tx-1")
    assert (transactional.error_code, transactional.producer_epoch) == (ErrorCode.none, 0)
    again = init_producer(broker, transactional_id="tx-1")  # bumps the epoch, same id
    assert (again.producer_id, again.producer_epoch) == (transactional.producer_id, 1)


def test_producer_id_blocks_never_repeat_after_restart(tmp_path: Path) -> None:
    blocks = ProducerIdBlocks(block_size=3)
    allocations = [blocks.allocate() for _ in range(4)]
    assert allocations == [(0, 3), (1, None), (2, None), (3, 6)]
    first = ProducerIds(tmp_path)
    used = [first.allocate() for _ in range(5)]
    second = ProducerIds(tmp_path)  # a restart, even without a clean shutdown
    assert second.allocate() > max(used)
    assert ProducerIds(None).allocate() == 0


# describe APIs on unknown names, as Kafka 4.4.0 answers them (a difference that
# make conformance-diff found, docs/conformance.md)

DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, DESCRIBE_TOPIC_PARTITIONS = 61, 65, 75


def test_describe_apis_answer_unknown_names_as_kafka_does() -> None:
    broker = Broker()
    wanted = broker.nested(
        DESCRIBE_PRODUCERS, 0, "TopicRequest", name="missing", partition_indexes=(0,)
    )
    producers = broker.send(broker.request(DESCRIBE_PRODUCERS, 0, topics=(wanted,)))
    [partition] = producers.topics[0].partitions
    assert partition.error_code is ErrorCode.unknown_topic_or_partition
    assert partition.error_message == "This server does not host this topic-partition."
    transactions = broker.send(
        broker.request(DESCRIBE_TRANSACTIONS, 0, transactional_ids=("missing",))
    )
    [state] = transactions.transaction_states
    assert state.error_code is ErrorCode.transactional_id_not_found
    assert (state.producer_id, state.producer_epoch) == (0, 0)
    topic = broker.nested(DESCRIBE_TOPIC_PARTITIONS, 0, "TopicRequest", name="missing")
    described = broker.send(
        broker.request(DESCRIBE_TOPIC_PARTITIONS, 0, topics=(topic,), response_partition_limit=10)
    )
    [missing] = described.topics
    assert missing.error_code is ErrorCode.unknown_topic_or_partition
    assert missing.topic_authorized_operations == 3576  # every topic operation, as Kafka
