"""The scenarios of ``make conformance-diff``: real clients doing the same things, in the same
order, against whichever broker ``bootstrap`` leads to (the recording proxy in front of it).

Each scenario is a function of the bootstrap string. Its clients are closed before it returns,
so the requests a scenario causes are recorded under its name. Topic, group and transactional
names are fixed, so the two runs name the same things. Scenarios raise nothing for an outcome
a broker chose (an error code is the point of many of them); only a client that cannot go on
stops its scenario, which the driver notes.

Clients: confluent-kafka (librdkafka) for produce/fetch, admin, both group protocols and
transactions; kemu.client for share groups and for single requests on error paths that no
high-level client sends on purpose (stale epochs, unknown ids); Java kafka-clients 4.4.0 through
the probes of tests/java.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
import typing
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from kemu.client import AcknowledgeType, ShareConsumer
from kemu.client.cluster import ClusterClient
from kemu.protocol import wire

ROOT = Path(__file__).resolve().parents[1]
JAVA_SOURCES = ROOT / "tests" / "java" / "src" / "main" / "java" / "kemu" / "probe"
JAVA_LIB = ROOT / "tests" / "java" / "target" / "lib"
TIMEOUT = 30.0
NODE = 1  # the single broker's node id on both sides

Scenario = Callable[[str], None]


def _settle() -> None:
    """Let the client's last responses reach the proxy before the scenario changes."""
    time.sleep(0.3)


def _wait(futures: dict[Any, Any]) -> dict[Any, str]:
    """Each admin future's outcome as text (an error is an outcome here)."""
    outcomes = {}
    for key, future in futures.items():
        try:
            future.result(timeout=TIMEOUT)
            outcomes[key] = "ok"
        except Exception as exc:
            outcomes[key] = str(exc)[:200]
    return outcomes


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "client.id": "diff-admin"})


def _producer(bootstrap: str, **extra: Any) -> Producer:
    config = {"bootstrap.servers": bootstrap, "client.id": "diff-producer", "linger.ms": 5}
    config.update(extra)
    return Producer(config)


def _consume(consumer: Consumer, wanted: int, seconds: float = 20.0) -> int:
    got = 0
    deadline = time.monotonic() + seconds
    while got < wanted and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    return got


def _produce_keyed(producer: Producer, topic: str, count: int, partitions: int = 3) -> None:
    """Records with increasing timestamps of their own (not the clock's, which differs between
    the runs), so a max-timestamp lookup names the same offset on both brokers."""
    base = int(time.time() * 1000) - 60_000
    for i in range(count):
        producer.produce(
            topic,
            key=f"k{i}".encode(),
            value=f"v{i}".encode(),
            partition=i % partitions,
            timestamp=base + i,
        )
    producer.flush(TIMEOUT)


# --- confluent-kafka --------------------------------------------------------------------------


def admin_topics(bootstrap: str) -> None:
    admin = _admin(bootstrap)
    _wait(
        admin.create_topics(
            [
                NewTopic("diff-a", 3, 1),
                NewTopic("diff-compact", 1, 1, config={"cleanup.policy": "compact"}),
                NewTopic("diff-small", 1, 1, config={"max.message.bytes": "2000"}),
            ]
        )
    )
    # error paths: exists, bad config value, unknown config, replication factor, no partitions
    for topic in (
        NewTopic("diff-a", 3, 1),
        NewTopic("diff-bad-policy", 1, 1, config={"cleanup.policy": "sideways"}),
        NewTopic("diff-bad-name", 1, 1, config={"no.such.config": "1"}),
        NewTopic("diff-rf", 1, 3),
        NewTopic("diff-zero", 0, 1),
        NewTopic("bad/name", 1, 1),
    ):
        _wait(admin.create_topics([topic]))
    _wait(admin.create_topics([NewTopic("diff-validate", 2, 1)], validate_only=True))
    _wait(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "diff-compact")]))
    _wait(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "diff-nope")]))
    alter = ConfigResource(
        ConfigResource.Type.TOPIC,
        "diff-a",
        incremental_configs=[
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    _wait(admin.incremental_alter_configs([alter]))
    bad = ConfigResource(
        ConfigResource.Type.TOPIC,
        "diff-a",
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    _wait(admin.incremental_alter_configs([bad]))
    unknown = ConfigResource(
        ConfigResource.Type.TOPIC,
        "diff-nope",
        incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    _wait(admin.incremental_alter_configs([unknown]))
    _wait(admin.create_partitions([NewPartitions("diff-a", 4)]))
    _wait(admin.create_partitions([NewPartitions("diff-a", 2)]))  # fewer: invalid
    _wait(admin.create_partitions([NewPartitions("diff-nope", 2)]))
    admin.list_topics(timeout=TIMEOUT)
    admin.list_topics("diff-a", timeout=TIMEOUT)
    admin.list_topics("diff-unknown-topic", timeout=TIMEOUT)
    _wait({"cluster": admin.describe_cluster(include_authorized_operations=True)})
    _wait(admin.delete_topics(["diff-nope"]))
    _wait(admin.delete_topics(["diff-validate"]))
    _settle()


def produce_fetch(bootstrap: str) -> None:
    producer = _producer(bootstrap, **{"enable.idempotence": True, "acks": "all"})
    _produce_keyed(producer, "diff-a", 60, partitions=4)
    errors: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err.code()))

    plain = _producer(bootstrap, **{"acks": "1", "enable.idempotence": False, "retries": 0})
    plain.produce("diff-small", value=b"x" * 5000, partition=0, on_delivery=report)  # too large
    plain.produce("diff-small", value=b"ok", partition=0, on_delivery=report)
    plain.produce("diff-compact", value=b"no key", partition=0, on_delivery=report)
    plain.produce("diff-compact", key=b"k", value=b"keyed", partition=0, on_delivery=report)
    plain.produce("diff-compact", key=b"k", value=None, partition=0, on_delivery=report)
    plain.produce("diff-a", value=b"no such partition", partition=9, on_delivery=report)
    plain.flush(TIMEOUT)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "diff-unused",
            "enable.auto.commit": False,
            "client.id": "diff-consumer",
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition("diff-a", p, 0) for p in range(4)])
    _consume(consumer, 60)
    consumer.close()
    admin = _admin(bootstrap)
    partitions = [TopicPartition("diff-a", p) for p in range(4)]
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest(), OffsetSpec.max_timestamp()):
        _wait(admin.list_offsets({tp: spec for tp in partitions}))
    _wait(admin.list_offsets({TopicPartition("diff-a", 7): OffsetSpec.latest()}))
    _wait(admin.delete_records([TopicPartition("diff-a", 0, 5)]))
    _wait(admin.delete_records([TopicPartition("diff-a", 1, 1000)]))  # beyond the end
    _wait(admin.list_offsets({TopicPartition("diff-a", 0): OffsetSpec.earliest()}))
    producer.flush(TIMEOUT)
    _settle()


def _group_run(bootstrap: str, group: str, protocol: str, topic: str) -> None:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": f"diff-{protocol}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
        "group.protocol": protocol,
    }
    if protocol == "classic":
        config["session.timeout.ms"] = 10000
        config["heartbeat.interval.ms"] = 1000
    consumer = Consumer(config)
    consumer.subscribe([topic])
    _consume(consumer, 15)
    with contextlib.suppress(KafkaException):
        consumer.commit(asynchronous=False)
    consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=TIMEOUT)
    consumer.close()


def classic_group(bootstrap: str) -> None:
    admin = _admin(bootstrap)
    _wait(admin.create_topics([NewTopic("diff-g", 3, 1)]))
    producer = _producer(bootstrap)
    _produce_keyed(producer, "diff-g", 15)
    _group_run(bootstrap, "diff-classic", "classic", "diff-g")
    _wait({"d": admin.describe_consumer_groups(["diff-classic", "diff-no-group"])})
    _wait({"l": admin.list_consumer_groups()})
    from confluent_kafka import ConsumerGroupTopicPartitions

    _wait(
        {
            "o": admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions("diff-classic")]
            )
        }
    )
    _wait(
        {
            "a": admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions("diff-classic", [TopicPartition("diff-g", 0, 2)])]
            )
        }
    )
    _wait(admin.delete_consumer_groups(["diff-classic", "diff-no-group"]))
    _settle()


def consumer_group(bootstrap: str) -> None:
    admin = _admin(bootstrap)
    _group_run(bootstrap, "diff-848", "consumer", "diff-g")
    _wait({"d": admin.describe_consumer_groups(["diff-848"])})
    _settle()


def transactions(bootstrap: str) -> None:
    admin = _admin(bootstrap)
    _wait(admin.create_topics([NewTopic("diff-t", 2, 1)]))
    producer = _producer(bootstrap, **{"transactional.id": "diff-txn"})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    _produce_keyed(producer, "diff-t", 6, partitions=2)
    producer.commit_transaction(TIMEOUT)
    producer.begin_transaction()
    _produce_keyed(producer, "diff-t", 4, partitions=2)
    producer.abort_transaction(TIMEOUT)
    # offsets in a transaction
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "diff-txn-group",
            "client.id": "diff-txn-consumer",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition("diff-t", p, 0) for p in range(2)])
    _consume(consumer, 6)
    consumer.pause([TopicPartition("diff-t", p) for p in range(2)])  # no fetch races the next txn
    producer.begin_transaction()
    producer.produce("diff-t", key=b"o", value=b"offsets", partition=0)
    producer.send_offsets_to_transaction(
        [TopicPartition("diff-t", 0, 3)], consumer.consumer_group_metadata(), TIMEOUT
    )
    producer.commit_transaction(TIMEOUT)
    consumer.close()
    # fencing: a second instance of the id, then the first one produces again
    newer = _producer(bootstrap, **{"transactional.id": "diff-txn"})
    newer.init_transactions(TIMEOUT)
    try:
        producer.begin_transaction()
        producer.produce("diff-t", key=b"z", value=b"zombie", partition=0)
        producer.flush(5)
        producer.commit_transaction(5)
    except KafkaException:
        pass
    newer.begin_transaction()
    newer.produce("diff-t", key=b"n", value=b"newer", partition=1)
    newer.commit_transaction(TIMEOUT)
    newer.flush(TIMEOUT)
    _wait({"t": admin.list_transactions()}) if hasattr(admin, "list_transactions") else None
    _settle()


# --- kemu.client: share groups and single requests -----------------------------------------


def _nested(cls: Any, value: Any) -> Any:
    """``value`` (dicts and lists for structs and arrays) as the kio types ``cls`` needs."""
    if isinstance(value, dict) and dataclasses.is_dataclass(cls):
        hints = {f.name: f.type for f in dataclasses.fields(cls)}
        return wire.build(cls, **{k: _nested(hints[k], v) for k, v in value.items()})
    if isinstance(value, list):
        item = _array_item(cls)
        return tuple(_nested(item, v) for v in value)
    if cls is datetime.timedelta or "Timedelta" in getattr(cls, "__name__", ""):
        return datetime.timedelta(milliseconds=int(value))
    return value


def _array_item(cls: Any) -> Any:
    for arg in (cls, *typing.get_args(cls)):
        if typing.get_origin(arg) is tuple:
            return typing.get_args(arg)[0]
    return None


async def _call(cc: ClusterClient, key: int, version: int, **fields: Any) -> Any:
    schema = wire.request_schema(key, version)
    hints = {f.name: f.type for f in dataclasses.fields(schema)}
    built = {name: _nested(hints[name], value) for name, value in fields.items()}
    try:
        return await cc.call(NODE, key, version, **built)
    except Exception as exc:  # a closed connection is an outcome too
        return exc


async def _share_run(bootstrap: str) -> None:
    cc = ClusterClient(bootstrap, "diff-raw")
    await cc.start()
    await _call(
        cc, 44, 1,
        resources=[{"resource_type": 32, "resource_name": "diff-share",
                    "configs": [{"name": "share.auto.offset.reset", "config_operation": 0,
                                 "value": "earliest"}]}],
        validate_only=False,
    )  # fmt: skip
    await _call(
        cc, 44, 1,
        resources=[{"resource_type": 32, "resource_name": "diff-share",
                    "configs": [{"name": "share.record.lock.duration.ms", "config_operation": 0,
                                 "value": "-5"}]}],
        validate_only=False,
    )  # fmt: skip
    await _call(
        cc, 19, 7,
        topics=[{"name": "diff-s", "num_partitions": 1, "replication_factor": 1}],
        timeout=30000,
    )
    topic_id = None
    for _ in range(50):
        meta = await _call(cc, 3, 12, topics=[{"name": "diff-s"}])
        if not isinstance(meta, Exception) and meta.topics and meta.topics[0].partitions:
            topic_id = meta.topics[0].topic_id
            break
        await asyncio.sleep(0.2)
    await cc.close()
    producer = _producer(bootstrap)
    for i in range(10):
        producer.produce("diff-s", key=f"s{i}".encode(), value=f"share {i}".encode(), partition=0)
    producer.flush(TIMEOUT)
    consumer = ShareConsumer(bootstrap, "diff-share", acknowledgement_mode="explicit",
                             client_id="diff-share-consumer", max_wait_ms=200)  # fmt: skip
    await consumer.subscribe(["diff-s"])
    seen: dict[int, int] = {}
    deadline = time.monotonic() + 40
    kinds = [AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT]
    released = {offset for offset in range(10) if offset % 3 == 1}
    while time.monotonic() < deadline and (
        len(seen) < 10 or any(seen[offset] < 2 for offset in released)
    ):
        for record in await consumer.poll(timeout=1.0):
            first = record.offset not in seen
            seen[record.offset] = seen.get(record.offset, 0) + 1
            kind = kinds[record.offset % 3] if first else AcknowledgeType.ACCEPT
            consumer.acknowledge(record, kind)
        await consumer.commit() if hasattr(consumer, "commit") else None
    await consumer.close()
    cc = ClusterClient(bootstrap, "diff-raw")
    await cc.start()
    await _call(cc, 77, 1, group_ids=["diff-share", "diff-no-share"],
                include_authorized_operations=False)  # fmt: skip
    await _call(cc, 90, 0, groups=[{"group_id": "diff-share",
                                    "topics": [{"topic_name": "diff-s", "partitions": [0]}]}])
    await _call(cc, 90, 0, groups=[{"group_id": "diff-no-share", "topics": None}])
    await _call(cc, 92, 0, group_id="diff-no-share", topics=[{"topic_name": "diff-s"}])
    await _call(cc, 91, 0, group_id="diff-share",
                topics=[{"topic_name": "diff-s",
                         "partitions": [{"partition_index": 0, "start_offset": 0}]}])
    # unknown member, stale epoch and unknown session against the share group (an epoch no
    # real consumer reaches, so it is never paired with one of theirs)
    await _call(cc, 76, 1, group_id="diff-share", member_id="AAAAAAAAAAAAAAAAAAAAAA",
                member_epoch=999_999, subscribed_topic_names=None)  # fmt: skip
    await _call(cc, 78, 1, group_id="diff-share", member_id="AAAAAAAAAAAAAAAAAAAAAA",
                share_session_epoch=5, max_wait=0, min_bytes=1, max_bytes=1000,
                max_records=10, batch_size=10,
                topics=[{"topic_id": topic_id, "partitions": [{"partition_index": 0}]}])
    await _call(cc, 79, 1, group_id="diff-share", member_id="AAAAAAAAAAAAAAAAAAAAAA",
                share_session_epoch=1,
                topics=[{"topic_id": topic_id, "partitions": [
                    {"partition_index": 0, "acknowledgement_batches": [
                        {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}]}])
    await cc.close()


def share_group(bootstrap: str) -> None:
    asyncio.run(_share_run(bootstrap))
    _settle()


async def _single_requests(bootstrap: str) -> None:
    cc = ClusterClient(bootstrap, "diff-raw")
    await cc.start()
    unknown_id = uuid.UUID(int=0x1234)
    calls: list[tuple[int, int, dict[str, Any]]] = [
        (3, 12, {"topics": [{"name": "diff-missing"}], "allow_auto_topic_creation": False}),
        (3, 12, {"topics": [{"topic_id": unknown_id}]}),
        (3, 8, {"topics": None, "include_cluster_authorized_operations": True,
                "include_topic_authorized_operations": True}),
        (3, 10, {"topics": [{"name": "diff-a"}], "include_topic_authorized_operations": True}),
        (60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1}),
        (60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 2}),
        (2, 10, {"replica_id": -1, "isolation_level": 1, "timeout": 1000, "topics": [
            {"name": "diff-a", "partitions": [
                {"partition_index": 0, "timestamp": -1, "current_leader_epoch": 5},
                {"partition_index": 1, "timestamp": -2, "current_leader_epoch": -1},
                {"partition_index": 2, "timestamp": 0, "current_leader_epoch": -1},
                {"partition_index": 3, "timestamp": -3, "current_leader_epoch": -1},
                {"partition_index": 9, "timestamp": -1, "current_leader_epoch": -1}]},
            {"name": "diff-missing", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}),
        (23, 4, {"replica_id": -1, "topics": [{"topic": "diff-a", "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
            {"partition": 1, "current_leader_epoch": 3, "leader_epoch": 0},
            {"partition": 8, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
        (10, 6, {"key_type": 0, "coordinator_keys": ["diff-classic", ""]}),
        (10, 6, {"key_type": 1, "coordinator_keys": ["diff-txn", "diff-no-txn"]}),
        (10, 6, {"key_type": 7, "coordinator_keys": ["x"]}),
        (10, 6, {"key_type": 2, "coordinator_keys": ["diff-share:" + str(unknown_id) + ":0"]}),
        (12, 4, {"group_id": "diff-no-group", "generation_id": 1, "member_id": "m"}),
        (14, 5, {"group_id": "diff-no-group", "generation_id": 1, "member_id": "m",
                 "protocol_type": "consumer", "protocol_name": "range", "assignments": []}),
        (13, 5, {"group_id": "diff-no-group", "members": [{"member_id": "m"}]}),
        (8, 9, {"group_id": "diff-848", "generation_id_or_member_epoch": 99,
                "member_id": "nobody", "topics": [{"name": "diff-g", "partitions": [
                    {"partition_index": 0, "committed_offset": 1}]}]}),
        (8, 9, {"group_id": "diff-simple", "generation_id_or_member_epoch": -1,
                "member_id": "", "topics": [{"name": "diff-g", "partitions": [
                    {"partition_index": 0, "committed_offset": 1},
                    {"partition_index": 7, "committed_offset": 1}]},
                    {"name": "diff-missing", "partitions": [
                        {"partition_index": 0, "committed_offset": 1}]}]}),
        (9, 9, {"groups": [{"group_id": "diff-simple", "topics": None},
                           {"group_id": "diff-no-group", "topics": [
                               {"name": "diff-g", "partition_indexes": [0]}]}],
                "require_stable": True}),
        (47, 0, {"group_id": "diff-simple", "topics": [
            {"name": "diff-g", "partitions": [{"partition_index": 0}]}]}),
        (47, 0, {"group_id": "diff-no-group", "topics": [
            {"name": "diff-g", "partitions": [{"partition_index": 0}]}]}),
        (68, 1, {"group_id": "diff-848", "member_id": "AAAAAAAAAAAAAAAAAAAAAA",
                 "member_epoch": 5, "rebalance_timeout": 1000}),
        (68, 1, {"group_id": "diff-848-new", "member_id": "AAAAAAAAAAAAAAAAAAAAAA",
                 "member_epoch": 0, "rebalance_timeout": 1000,
                 "subscribed_topic_names": ["diff-g"], "topic_partitions": []}),
        (68, 1, {"group_id": "diff-848-new", "member_id": "AAAAAAAAAAAAAAAAAAAAAA",
                 "member_epoch": 7, "rebalance_timeout": 1000}),
        (68, 1, {"group_id": "diff-848-new", "member_id": "AAAAAAAAAAAAAAAAAAAAAA",
                 "member_epoch": -1, "rebalance_timeout": 1000}),
        (68, 1, {"group_id": "diff-848-bad", "member_id": "BBBBBBBBBBBBBBBBBBBBBB",
                 "member_epoch": 0, "rebalance_timeout": 1000,
                 "subscribed_topic_names": ["diff-g"], "server_assignor": "nope",
                 "topic_partitions": []}),
        (69, 1, {"group_ids": ["diff-848", "diff-classic", "diff-nothing"],
                 "include_authorized_operations": True}),
        (15, 6, {"groups": ["diff-848", "diff-nothing"], "include_authorized_operations": True}),
        (16, 5, {"states_filter": ["Stable", "Empty"], "types_filter": []}),
        (16, 5, {"states_filter": [], "types_filter": ["consumer", "share"]}),
        (42, 2, {"groups_names": ["diff-nothing", "diff-848"]}),
        (22, 5, {"transactional_id": None, "transaction_timeout": -1, "producer_id": -1,
                 "producer_epoch": -1}),
        (22, 5, {"transactional_id": "diff-raw-txn", "transaction_timeout": 10000000,
                 "producer_id": -1, "producer_epoch": -1}),
        (22, 5, {"transactional_id": "diff-txn", "transaction_timeout": 60000,
                 "producer_id": 123456, "producer_epoch": 3}),
        (26, 4, {"transactional_id": "diff-no-txn", "producer_id": 99999,
                 "producer_epoch": 0, "committed": True}),
        (25, 4, {"transactional_id": "diff-no-txn", "producer_id": 99999,
                 "producer_epoch": 0, "group_id": "g"}),
        (24, 3, {"v3_and_below_transactional_id": "diff-no-txn",
                 "v3_and_below_producer_id": 99999, "v3_and_below_producer_epoch": 0,
                 "v3_and_below_topics": [{"name": "diff-t", "partitions": [0]}]}),
        (28, 3, {"transactional_id": "diff-no-txn", "group_id": "g", "producer_id": 99999,
                 "producer_epoch": 0, "generation_id": -1, "member_id": "",
                 "topics": [{"name": "diff-t", "partitions": [
                     {"partition_index": 0, "committed_offset": 1}]}]}),
        (65, 0, {"transactional_ids": ["diff-txn", "diff-no-txn"]}),
        (66, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}),
        (66, 1, {"state_filters": ["Ongoing"], "producer_id_filters": [],
                 "duration_filter": -1}),
        (61, 0, {"topics": [{"name": "diff-t", "partition_indexes": [0, 1, 5]},
                            {"name": "diff-missing", "partition_indexes": [0]}]}),
        (55, 2, {"topics": [{"topic_name": "__cluster_metadata",
                             "partitions": [{"partition_index": 0}]}]}),
        (35, 4, {"topics": [{"topic": "diff-a", "partitions": [0, 1]}]}),
        (43, 2, {"election_type": 0, "topic_partitions": [
            {"topic": "diff-a", "partitions": [0]},
            {"topic": "diff-missing", "partitions": [0]}], "timeout": 1000}),
        (46, 0, {"timeout": 1000, "topics": None}),
        (45, 0, {"timeout": 1000, "topics": [{"name": "diff-missing", "partitions": [
            {"partition_index": 0, "replicas": [1]}]}]}),
        (48, 1, {"components": [], "strict": False}),
        (49, 1, {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": "x"}],
                              "ops": [{"key": "producer_byte_rate", "value": 1024.0,
                                       "remove": False}]}], "validate_only": True}),
        (49, 1, {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": "x"}],
                              "ops": [{"key": "no_such_quota", "value": 1.0,
                                       "remove": False}]}], "validate_only": True}),
        (50, 0, {"users": None}),
        (50, 0, {"users": [{"name": "nobody"}]}),
        (32, 4, {"resources": [{"resource_type": 2, "resource_name": "diff-a",
                                "configuration_keys": ["retention.ms", "cleanup.policy",
                                                       "no.such"]}],
                 "include_synonyms": True, "include_documentation": False}),
        (32, 4, {"resources": [{"resource_type": 4, "resource_name": "1",
                                "configuration_keys": ["num.partitions", "log.retention.ms"]}],
                 "include_synonyms": False, "include_documentation": False}),
        (32, 4, {"resources": [{"resource_type": 4, "resource_name": "7",
                                "configuration_keys": None}],
                 "include_synonyms": False, "include_documentation": False}),
        (33, 2, {"resources": [{"resource_type": 2, "resource_name": "diff-a",
                                "configs": [{"name": "retention.ms", "value": "7200000"}]}],
                 "validate_only": True}),
        (44, 1, {"resources": [{"resource_type": 2, "resource_name": "diff-a",
                                "configs": [{"name": "cleanup.policy", "config_operation": 2,
                                             "value": "compact"},
                                            {"name": "retention.ms", "config_operation": 1,
                                             "value": None}]}],
                 "validate_only": True}),
        (44, 1, {"resources": [{"resource_type": 2, "resource_name": "diff-a",
                                "configs": [{"name": "min.insync.replicas",
                                             "config_operation": 0, "value": "5"}]}],
                 "validate_only": False}),
        (37, 3, {"topics": [{"name": "diff-missing", "count": 3, "assignments": None}],
                 "timeout": 1000, "validate_only": True}),
        (20, 6, {"topics": [{"name": None, "topic_id": unknown_id}], "timeout": 1000}),
        (21, 2, {"topics": [{"name": "diff-missing", "partitions": [
            {"partition_index": 0, "offset": 1}]}], "timeout": 1000}),
        (74, 1, {"resource_types": []}),
        (71, 0, {"client_instance_id": uuid.UUID(int=0)}),
        (75, 0, {"topics": [{"name": "diff-a"}, {"name": "diff-missing"}],
                 "response_partition_limit": 2000, "cursor": None}),
        (29, 3, {"resource_type_filter": 1, "resource_name_filter": None,
                 "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                 "operation": 1, "permission_type": 1}),
    ]
    for key, version, fields in calls:
        try:
            await _call(cc, key, version, **fields)
        except (KeyError, TypeError, ValueError) as exc:  # a field this version lacks
            print(f"    request {key} v{version} not built: {exc!r}", file=sys.stderr)
    # a fetch at a stale leader epoch, an unknown topic id and an out-of-range offset
    meta = await _call(cc, 3, 12, topics=[{"name": "diff-a"}])
    topic_id = meta.topics[0].topic_id
    await _call(
        cc, 1, 17, max_wait=0, min_bytes=1, max_bytes=100000,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=[{"topic_id": topic_id, "partitions": [
            {"partition": 0, "current_leader_epoch": 9, "fetch_offset": 0,
             "log_start_offset": -1, "partition_max_bytes": 1000},
            {"partition": 1, "current_leader_epoch": -1, "fetch_offset": 10000,
             "log_start_offset": -1, "partition_max_bytes": 1000},
            {"partition": 2, "current_leader_epoch": -1, "fetch_offset": 0,
             "log_start_offset": -1, "partition_max_bytes": 1000}]},
            {"topic_id": unknown_id, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                 "log_start_offset": -1, "partition_max_bytes": 1000}]}],
        forgotten_topics_data=[], rack_id="",
    )  # fmt: skip
    await _call(
        cc, 1, 17, max_wait=0, min_bytes=1, max_bytes=100000,
        isolation_level=0, session_id=777, session_epoch=3, topics=[],
        forgotten_topics_data=[], rack_id="",
    )  # fmt: skip
    await cc.close()


def single_requests(bootstrap: str) -> None:
    asyncio.run(_single_requests(bootstrap))
    _settle()


TOPIC_CONFIGS = (
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "errors.deadletterqueue.group.enable",
    "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.decompressed.message.bytes", "max.message.bytes",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
    "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms",
    "min.insync.replicas", "preallocate", "remote.copy.lag.bytes", "remote.copy.lag.ms",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable",
    "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes",
    "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable",
)  # Kafka 4.4.0's topic configs, as its CreateTopics answer lists them  # fmt: skip
WALK_TOPIC, WALK_PARTITIONS, WALK_RECORDS = "diff-walk", 3, 210


async def _configs(bootstrap: str) -> None:
    cc = ClusterClient(bootstrap, "diff-raw")
    await cc.start()
    for name in TOPIC_CONFIGS:  # one key at a time, with synonyms: each default and source
        await _call(cc, 32, 4, resources=[{"resource_type": 2, "resource_name": "diff-compact",
                                           "configuration_keys": [name]}],
                    include_synonyms=True, include_documentation=False)  # fmt: skip
    for name in TOPIC_CONFIGS:  # a value no config accepts (validate only)
        await _call(cc, 44, 1, resources=[{"resource_type": 2, "resource_name": "diff-a",
                                           "configs": [{"name": name, "config_operation": 0,
                                                        "value": "-7x"}]}],
                    validate_only=True)  # fmt: skip
    for name in TOPIC_CONFIGS:
        await _call(cc, 19, 7, topics=[{"name": "diff-v", "num_partitions": 1,
                                        "replication_factor": 1,
                                        "configs": [{"name": name, "value": "-1"}]}],
                    timeout=1000, validate_only=True)  # fmt: skip
    await cc.close()


def configs(bootstrap: str) -> None:
    asyncio.run(_configs(bootstrap))
    _settle()


async def _log_walk(bootstrap: str) -> None:
    cc = ClusterClient(bootstrap, "diff-raw")
    await cc.start()
    meta = await _call(cc, 3, 12, topics=[{"name": WALK_TOPIC}])
    topic_id = meta.topics[0].topic_id
    per = WALK_RECORDS // WALK_PARTITIONS
    for partition in range(WALK_PARTITIONS):
        for offset in range(per):  # one batch per fetch: each answer names one offset's batch
            await _call(
                cc, 1, 17, max_wait=0, min_bytes=1, max_bytes=1, isolation_level=0,
                session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                topics=[{"topic_id": topic_id, "partitions": [
                    {"partition": partition, "current_leader_epoch": -1,
                     "fetch_offset": offset, "log_start_offset": -1,
                     "partition_max_bytes": 1}]}],
            )  # fmt: skip
            if offset % 5 == 0:
                await _call(
                    cc, 8, 9, group_id="diff-walker", generation_id_or_member_epoch=-1,
                    member_id="", topics=[{"name": WALK_TOPIC, "partitions": [
                        {"partition_index": partition, "committed_offset": offset,
                         "committed_metadata": f"at {offset}"}]}],
                )  # fmt: skip
                await _call(cc, 9, 9, groups=[{"group_id": "diff-walker", "topics": [
                    {"name": WALK_TOPIC, "partition_indexes": [partition]}]}],
                            require_stable=False)  # fmt: skip
        for timestamp in (-1, -2, -3, -4, -5):
            await _call(cc, 2, 10, replica_id=-1, isolation_level=0, timeout=1000,
                        topics=[{"name": WALK_TOPIC, "partitions": [
                            {"partition_index": partition, "timestamp": timestamp,
                             "current_leader_epoch": -1}]}])  # fmt: skip
    await cc.close()


def log_walk(bootstrap: str) -> None:
    """One record per Produce (idempotent, so sequences are deterministic), then a Fetch of
    each offset, committed offsets read back, and ListOffsets' special timestamps."""
    admin = _admin(bootstrap)  # kept: a dropped AdminClient abandons its requests
    _wait(admin.create_topics([NewTopic(WALK_TOPIC, WALK_PARTITIONS, 1)]))
    producer = _producer(bootstrap, **{"enable.idempotence": True, "linger.ms": 0})
    for _ in range(100):  # until the producer knows the new topic's partitions
        topic = producer.list_topics(WALK_TOPIC, timeout=TIMEOUT).topics[WALK_TOPIC]
        if topic.error is None and len(topic.partitions) == WALK_PARTITIONS:
            break
        time.sleep(0.2)
    for i in range(WALK_RECORDS):
        producer.produce(WALK_TOPIC, key=f"w{i}".encode(), value=f"walk {i}".encode(),
                         partition=i % WALK_PARTITIONS)  # fmt: skip
        producer.flush(TIMEOUT)
    asyncio.run(_log_walk(bootstrap))
    _settle()


# --- Java kafka-clients 4.4.0 --------------------------------------------------------------


JAVA_PROBES = ("Probe", "ProduceConsume", "TransactionProbe", "ConsumerGroupProbe")


@functools.cache
def _java_classes() -> Path:
    """The probes this run uses, compiled from tests/java's sources into a directory of the run's
    own (against the kafka-clients jars ``make java`` copied), so a stale or shared build is
    never used and never touched."""
    jars = sorted(JAVA_LIB.glob("*.jar"))
    if not any(jar.name.startswith("kafka-clients") for jar in jars):
        raise RuntimeError("tests/java/target/lib has no kafka-clients jar: run make java")
    out = Path(tempfile.mkdtemp(prefix="kemu-diff-probes-"))
    (out / "lib").mkdir()
    for jar in jars:  # a copy: `make java` elsewhere empties target/lib while it rebuilds
        shutil.copy2(jar, out / "lib" / jar.name)
    sources = [str(JAVA_SOURCES / f"{name}.java") for name in JAVA_PROBES]
    subprocess.run(
        ["javac", "-nowarn", "-cp", str(out / "lib" / "*"), "-d", str(out / "classes"), *sources],
        check=True,
        capture_output=True,
    )
    return out


def _java(main_class: str, bootstrap: str, *args: str) -> None:
    built = _java_classes()
    classpath = os.pathsep.join([str(built / "classes"), str(built / "lib" / "*")])
    done = subprocess.run(
        ["java", "-cp", classpath, f"kemu.probe.{main_class}", "--bootstrap", bootstrap,
         "--replication-factor", "1", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    failed = [line for line in done.stdout.splitlines() if '"ok":false' in line]
    if failed:
        print(f"    {main_class}: {failed[0][:300]}", file=sys.stderr)
    _settle()


def java_produce_consume(bootstrap: str) -> None:
    _java("ProduceConsume", bootstrap, "--topic-prefix", "diff-java", "--partitions", "2",
          "--records", "20", "--codecs", "none,gzip,zstd")  # fmt: skip


def java_transactions(bootstrap: str) -> None:
    _java("TransactionProbe", bootstrap, "--topic", "diff-java-txn", "--partitions", "2",
          "--records", "10", "--protocols", "classic,consumer")  # fmt: skip


def java_consumer_group(bootstrap: str) -> None:
    _java("ConsumerGroupProbe", bootstrap, "--topic", "diff-java-group", "--partitions", "3",
          "--records", "30", "--more", "6", "--consumers", "1",
          "--protocol", "consumer")  # fmt: skip


# --- warm-up (not recorded) ---------------------------------------------------------------


WARM_UP_TOPIC = "diff-warm-up"


async def _warm_up_share(bootstrap: str) -> None:
    """A share consumer until it gets a record: its group starts at the latest offset, so a
    record is produced before each poll until one arrives."""
    producer = _producer(bootstrap)
    consumer = ShareConsumer(bootstrap, "diff-warm-up-share", client_id="diff-warm-up")
    await consumer.subscribe([WARM_UP_TOPIC])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        producer.produce(WARM_UP_TOPIC, key=b"s", value=b"share", partition=0)
        producer.flush(TIMEOUT)
        for record in await consumer.poll(timeout=1.0):
            consumer.acknowledge(record, AcknowledgeType.ACCEPT)
            deadline = 0.0
    await consumer.close()


def warm_up(bootstrap: str) -> None:
    """Bring a fresh broker to the state the scenarios compare, straight to the broker (the
    proxy records none of it): a topic and every coordinator loaded, their internal topics
    (``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``) created. Without
    it the first scenarios meet Kafka still creating them (COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE, a share group's first state initialization taking seconds), which
    is start-up timing, not behaviour."""
    _wait(_admin(bootstrap).create_topics([NewTopic(WARM_UP_TOPIC, 1, 1)]))
    producer = _producer(bootstrap, **{"transactional.id": "diff-warm-up-txn"})
    deadline = time.monotonic() + 60
    while True:
        try:
            producer.init_transactions(TIMEOUT)
            producer.begin_transaction()
            producer.produce(WARM_UP_TOPIC, key=b"w", value=b"warm", partition=0)
            producer.commit_transaction(TIMEOUT)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "diff-warm-up-group",
            "client.id": "diff-warm-up",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([WARM_UP_TOPIC])
    if _consume(consumer, 1, seconds=60) == 1:
        consumer.commit(asynchronous=False)
    consumer.close()
    asyncio.run(_warm_up_share(bootstrap))


SCENARIOS: dict[str, Scenario] = {
    "admin_topics": admin_topics,
    "produce_fetch": produce_fetch,
    "classic_group": classic_group,
    "consumer_group": consumer_group,
    "transactions": transactions,
    "share_group": share_group,
    "single_requests": single_requests,
    "configs": configs,
    "log_walk": log_walk,
    "java_produce_consume": java_produce_consume,
    "java_transactions": java_transactions,
    "java_consumer_group": java_consumer_group,
}
