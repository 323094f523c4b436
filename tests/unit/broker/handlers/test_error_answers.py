"""Error answers and their details as Kafka 4.4.0 gives them, through the handlers' wire
encoding: error codes and messages, the fields an error answer still fills (leaders, offsets,
aborted transactions, lock timeouts), unknown names, config refusals and dynamic defaults.

Where they came from: each is a difference from Kafka 4.4.0 that ``make conformance-diff`` found
(docs/conformance.md)."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest

from kemu.broker.share.routing import PartitionAnswer, current_leader
from kemu.cluster.config_resources import topic_config_entries
from kemu.cluster.context import RequestContext
from kemu.config.definitions import (
    TOPIC_CONFIGS,
    BrokerConfig,
    InvalidConfig,
    TopicConfig,
    validate_topic_configs,
)
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_admin_handlers import Broker

FIND_COORDINATOR, LEAVE_GROUP, ELECT_LEADERS, DESCRIBE_CLUSTER = 10, 13, 43, 60


def test_leave_group_of_an_unknown_group_answers_none_with_unknown_members() -> None:
    broker = Broker()
    member = broker.nested(LEAVE_GROUP, 5, "MemberIdentity", member_id="m", group_instance_id="i")
    answer = broker.send(broker.request(LEAVE_GROUP, 5, group_id="nobody", members=(member,)))
    assert answer.error_code is ErrorCode.none
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in answer.members] == [
        ("m", "i", ErrorCode.unknown_member_id)
    ]
    old = broker.send(broker.request(LEAVE_GROUP, 2, group_id="nobody", member_id="m"))
    assert old.error_code is ErrorCode.unknown_member_id  # before v3 the member's error is on top


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


def test_find_coordinator_success_messages_are_kafkas() -> None:
    broker = Broker()
    old = broker.send(broker.request(FIND_COORDINATOR, 2, key="g", key_type=0))
    assert (old.error_code, old.error_message) == (ErrorCode.none, "NONE")
    new = broker.send(broker.request(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=("g",)))
    [found] = new.coordinators
    assert (found.error_code, found.error_message) == (ErrorCode.none, "")


# --- topic configs, as Kafka 4.4.0 validates and lists them --------------------------------


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("cleanup.policy", "-1", "String must be one of: compact, delete"),
        ("compression.lz4.level", "-1", "Value must be at least 1"),
        ("compression.lz4.level", "18", "Value must be no more than 17"),
        ("min.cleanable.dirty.ratio", "-1", "Value must be at least 0"),
        ("max.decompressed.message.bytes", "-1", "Value must be at least 1"),
        ("remote.copy.lag.ms", "-7x", "Not a number of type LONG"),
    ],
)
def test_topic_config_values_are_refused_with_kafkas_messages(
    name: str, value: str, message: str
) -> None:
    with pytest.raises(InvalidConfig) as refused:
        validate_topic_configs({name: value})
    shown = "-1.0" if name == "min.cleanable.dirty.ratio" else value
    assert str(refused.value) == f"Invalid value {shown} for configuration {name}: {message}"


def test_throttled_replica_lists_are_checked_as_kafka_does() -> None:
    name = "leader.replication.throttled.replicas"
    for good in ("", "*", "0:1", "0:1,1:2"):
        validate_topic_configs({name: good})
    with pytest.raises(InvalidConfig) as refused:
        validate_topic_configs({name: "0:1,x"})
    assert str(refused.value) == (
        f"Invalid value [0:1, x] for configuration {name}: {name} must be the literal '*' or a "
        "list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:"
        "[brokerId],..."
    )


def test_kafka_4_4_topic_configs_are_all_listed() -> None:
    assert {"max.decompressed.message.bytes", "remote.copy.lag.bytes", "remote.copy.lag.ms"} <= set(
        TOPIC_CONFIGS
    )
    assert len(TOPIC_CONFIGS) == 37  # as many as Kafka 4.4.0's CreateTopics answer lists
    config = TopicConfig(BrokerConfig())
    assert config.get("max.decompressed.message.bytes") == "2147483639"
    assert (config.get("remote.copy.lag.bytes"), config.get("remote.copy.lag.ms")) == ("-1", "0")


# --- share fetch and acknowledge ------------------------------------------------------------

SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79


def test_share_session_errors_carry_no_acquisition_lock_timeout() -> None:
    broker = Broker()
    broker.create("s")
    topic_id = broker.cluster.topics["s"].topic_id
    partition = broker.nested(SHARE_FETCH, 1, "FetchPartition", partition_index=0)
    topic = broker.nested(SHARE_FETCH, 1, "FetchTopic", topic_id=topic_id, partitions=(partition,))
    fetch = broker.send(
        broker.request(
            SHARE_FETCH,
            1,
            group_id="g",
            member_id="AAAAAAAAAAAAAAAAAAAAAA",
            share_session_epoch=5,
            max_wait=datetime.timedelta(0),
            min_bytes=1,
            max_bytes=1000,
            max_records=10,
            batch_size=10,
            topics=(topic,),
        )
    )
    assert fetch.error_code is ErrorCode.share_session_not_found
    assert fetch.acquisition_lock_timeout == datetime.timedelta(0)
    ack = broker.send(
        broker.request(
            SHARE_ACKNOWLEDGE,
            2,
            group_id="g",
            member_id="AAAAAAAAAAAAAAAAAAAAAA",
            share_session_epoch=5,
            topics=(),
        )
    )
    assert ack.error_code is ErrorCode.share_session_not_found
    assert ack.acquisition_lock_timeout == datetime.timedelta(0)


def test_share_partition_answers_keep_kafkas_unset_current_leader() -> None:
    broker = Broker()
    header = wire.RequestHeader(SHARE_FETCH, 1, 1, "c")
    ctx = RequestContext(broker.cluster.nodes[1], broker.runtime, header)
    unset = current_leader(ctx, PartitionAnswer())
    assert (unset.leader_id, unset.leader_epoch) == (0, 0)


# --- describe APIs on unknown names -------------------------------------------------------

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


# --- fetch errors ---------------------------------------------------------------------------

FETCH = 1


def test_fetch_errors_carry_kafkas_offsets_and_aborted_transactions() -> None:
    broker = Broker()
    broker.create("f", partitions=2)
    broker.produce("f", 0, 3)
    topic = broker.cluster.topics["f"]

    def wanted(index: int, offset: int, epoch: int = -1) -> Any:
        return broker.nested(
            FETCH,
            17,
            "FetchPartition",
            partition=index,
            current_leader_epoch=epoch,
            fetch_offset=offset,
            log_start_offset=-1,
            partition_max_bytes=1000,
        )

    known = broker.nested(
        FETCH, 17, "FetchTopic", topic_id=topic.topic_id, partitions=(wanted(0, 0, 9), wanted(1, 7))
    )
    unknown = broker.nested(
        FETCH, 17, "FetchTopic", topic_id=uuid.UUID(int=7), partitions=(wanted(0, 0),)
    )
    node = topic.partitions[0].leader_id
    answer = broker.send(
        broker.request(
            FETCH,
            17,
            max_wait=datetime.timedelta(0),
            min_bytes=1,
            max_bytes=100000,
            session_id=0,
            session_epoch=-1,
            topics=(known, unknown),
        ),
        node_id=node,
    )
    by_topic = {t.topic_id: t.partitions for t in answer.responses}
    offsets = {
        p.partition_index: (
            p.error_code,
            p.high_watermark,
            p.last_stable_offset,
            p.log_start_offset,
            p.aborted_transactions,
        )
        for p in by_topic[topic.topic_id]
    }
    assert offsets[0] == (ErrorCode.unknown_leader_epoch, -1, -1, -1, None)
    if topic.partitions[1].leader_id == node:
        assert offsets[1] == (ErrorCode.offset_out_of_range, -1, -1, -1, None)
    [missing] = by_topic[uuid.UUID(int=7)]
    assert missing.error_code is ErrorCode.unknown_topic_id
    assert missing.aborted_transactions == ()


def test_find_coordinator_unknown_key_type_has_kafkas_invalid_request_message() -> None:
    broker = Broker()
    answer = broker.send(broker.request(FIND_COORDINATOR, 4, key_type=7, coordinator_keys=("x",)))
    [found] = answer.coordinators
    assert found.error_code is ErrorCode.invalid_request
    assert found.error_message.startswith("This most likely occurs because of a request being")


def test_replication_factor_refusal_and_decompressed_size_synonym_are_kafkas() -> None:
    broker = Broker()
    [refused] = broker.create("rf", replication=4).topics
    assert refused.error_message.endswith(
        "only 3 broker(s) are registered or some brokers have all their log directories cordoned."
    )
    [created] = broker.create("ok").topics
    assert created.error_code is ErrorCode.none
    entries = topic_config_entries(broker.cluster.config, {})
    [entry] = [e for e in entries if e.name == "max.decompressed.message.bytes"]
    assert [(s.name, s.value) for s in entry.synonyms] == [
        ("max.decompressed.message.bytes", "2147483639")
    ]


def test_min_insync_replicas_is_the_cluster_wide_dynamic_default_kafka_4_4_writes() -> None:
    """Kafka 4.4's controller, with ELR enabled, writes a cluster-wide min.insync.replicas (its
    static value) when it first starts, so a topic lists it from DYNAMIC_DEFAULT_BROKER_CONFIG
    with the default below it."""
    from kemu.config.definitions import ConfigSource

    for static, value in (({}, "1"), ({"min.insync.replicas": "2"}, "2")):
        broker = Broker(**static)
        broker.create("t")
        (result,) = broker.describe_configs(2, "t", ("min.insync.replicas",)).configs
        assert (result.value, result.config_source) == (
            value,
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        )
        assert [(s.value, s.source) for s in result.synonyms] == [
            (value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            *([(value, ConfigSource.STATIC_BROKER_CONFIG)] if static else []),
            ("1", ConfigSource.DEFAULT_CONFIG),
        ]


def test_elr_keeps_min_insync_replicas_cluster_wide() -> None:
    """With eligible.leader.replicas.version 1 finalized, as kemu and Kafka 4.4 do, the
    controller refuses a broker-level min.insync.replicas and the removal of the cluster-level
    one (ConfigurationControlManager), with INVALID_CONFIG; the cluster-level value may change."""
    broker = Broker()
    broker_type = 4
    (per_node,) = broker.incremental([(broker_type, "1", [("min.insync.replicas", 0, "2")])])
    assert (per_node.error_code, per_node.error_message) == (
        ErrorCode.invalid_config,
        "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
    )
    (removal,) = broker.incremental([(broker_type, "", [("min.insync.replicas", 1, None)])])
    assert (removal.error_code, removal.error_message) == (
        ErrorCode.invalid_config,
        "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
    )
    # the legacy AlterConfigs replaces the whole set: leaving it out removes it
    legacy = broker.alter(broker_type, "", {"log.retention.ms": "1000"})
    assert legacy.error_code == ErrorCode.invalid_config
    (changed,) = broker.incremental([(broker_type, "", [("min.insync.replicas", 0, "2")])])
    assert changed.error_code == ErrorCode.none
    assert broker.cluster.config.dynamic == {"min.insync.replicas": "2"}
    (other,) = broker.incremental([(broker_type, "1", [("message.max.bytes", 0, "5000")])])
    assert other.error_code == ErrorCode.none
