"""Raw requests for this folder's KIP-848 parity modules: a ``Broker`` (topics made and their
ids, group configs, descriptions, commits) and one ConsumerGroupHeartbeat (v1) builder, so that
each module's members say only what differs (epoch, subscription, ownership)."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kemu.protocol.errors import ErrorCode
from kemu.testing.wire_client import WireClient
from tests.integration.parity import COORDINATOR_STARTING, nested
from tests.integration.txn.wire_parity import Server, until_ready

METADATA, OFFSET_COMMIT, ALTER_CONFIGS = 3, 8, 44
CONSUMER_HEARTBEAT, CONSUMER_DESCRIBE = 68, 69
GROUP_RESOURCE = 32
WAIT_S = 60.0  # a bound for failing, not a measurement
REBALANCE_TIMEOUT = datetime.timedelta(minutes=5)
UNSET_REBALANCE_TIMEOUT = datetime.timedelta(milliseconds=-1)  # a heartbeat that is no join

Partition = tuple[str, int]  # topic name, partition index


def wait_for(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while not (found := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return found


class Broker:
    """Raw requests to one server, with the ids of the topics a module made."""

    def __init__(self, server: Server) -> None:
        self.bootstrap = server.bootstrap
        self.client = WireClient(server.bootstrap, client_id="consumer-wire")
        self.ids: dict[str, uuid.UUID] = {}

    def close(self) -> None:
        self.client.close()

    def metadata(self, topic: str) -> Any:
        answer = self.client.call(
            1,
            METADATA,
            12,
            topics=(nested(METADATA, 12, "MetadataRequestTopic", topic_id=None, name=topic),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        return answer.topics[0]

    def create_topic(self, topic: str, partitions: int) -> None:
        """The topic, once Metadata shows all its partitions (its id kept)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)
        shown = wait_for(
            lambda: (
                lambda t: t if t.error_code == 0 and len(t.partitions) == partitions else None
            )(self.metadata(topic)),
            f"{topic} in the metadata",
        )
        self.ids[topic] = uuid.UUID(str(shown.topic_id))

    def delete_topic(self, topic: str) -> None:
        """The topic deleted, once Metadata no longer shows it."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.delete_topics([topic])[topic].result(timeout=60)
        wait_for(
            lambda: self.metadata(topic).error_code == ErrorCode.unknown_topic_or_partition,
            f"{topic} gone from the metadata",
        )

    def set_interval(self, group: str, value: str) -> None:
        config = nested(
            ALTER_CONFIGS,
            1,
            "AlterableConfig",
            name="consumer.assignment.interval.ms",
            config_operation=0,
            value=value,
        )
        resource = nested(
            ALTER_CONFIGS,
            1,
            "AlterConfigsResource",
            resource_type=GROUP_RESOURCE,
            resource_name=group,
            configs=(config,),
        )
        answer = self.client.call(1, ALTER_CONFIGS, 1, resources=(resource,), validate_only=False)
        assert answer.responses[0].error_code == ErrorCode.none, answer

    def set_session_timeout(self, group: str, session_ms: int) -> None:
        """The group's ``consumer.session.timeout.ms`` (its heartbeat interval below it)."""
        entries = [
            ConfigEntry(name, str(value), incremental_operation=AlterConfigOpType.SET)
            for name, value in (
                ("consumer.heartbeat.interval.ms", session_ms // 5),
                ("consumer.session.timeout.ms", session_ms),
            )
        ]
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.incremental_alter_configs([resource])[resource].result(timeout=60)

    def named(self, topic_partitions: Any) -> frozenset[Partition]:
        names = {topic_id: name for name, topic_id in self.ids.items()}
        return frozenset(
            (names[uuid.UUID(str(t.topic_id))], p) for t in topic_partitions for p in t.partitions
        )

    def describe(self, group: str) -> Any:
        (described,) = self.client.call(
            1, CONSUMER_DESCRIBE, 0, group_ids=(group,), include_authorized_operations=False
        ).groups
        assert described.error_code == ErrorCode.none, described
        return described

    def commit(
        self, group: str, member_id: str, epoch: int, partitions: frozenset[Partition]
    ) -> dict[Partition, ErrorCode]:
        """OffsetCommit v9 of offset 0 for ``partitions`` (by name): each one's answer."""
        topics = tuple(
            nested(
                OFFSET_COMMIT,
                9,
                "OffsetCommitRequestTopic",
                name=topic,
                partitions=tuple(
                    nested(
                        OFFSET_COMMIT,
                        9,
                        "OffsetCommitRequestPartition",
                        partition_index=index,
                        committed_offset=0,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                    for name, index in sorted(partitions)
                    if name == topic
                ),
            )
            for topic in sorted({name for name, _ in partitions})
        )
        answer = self.client.call(
            1,
            OFFSET_COMMIT,
            9,
            group_id=group,
            generation_id_or_member_epoch=epoch,
            member_id=member_id,
            group_instance_id=None,
            topics=topics,
        )
        return {
            (t.name, p.partition_index): ErrorCode(p.error_code)
            for t in answer.topics
            for p in t.partitions
        }

    def commit_by_id(
        self, group: str, member_id: str, epoch: int, topic_id: uuid.UUID, indexes: list[int]
    ) -> set[ErrorCode]:
        """OffsetCommit v10 (topics by id) of offset 0: the distinct answers."""
        commits = tuple(
            nested(
                OFFSET_COMMIT,
                10,
                "OffsetCommitRequestPartition",
                partition_index=index,
                committed_offset=0,
                committed_leader_epoch=-1,
                committed_metadata="",
            )
            for index in indexes
        )
        topic = nested(
            OFFSET_COMMIT, 10, "OffsetCommitRequestTopic", topic_id=topic_id, partitions=commits
        )
        answer = self.client.call(
            1,
            OFFSET_COMMIT,
            10,
            group_id=group,
            generation_id_or_member_epoch=epoch,
            member_id=member_id,
            group_instance_id=None,
            topics=(topic,),
        )
        return {ErrorCode(p.error_code) for t in answer.topics for p in t.partitions}


def owned_topic_partitions(ids: Mapping[str, uuid.UUID], owned: frozenset[Partition]) -> Any:
    """The heartbeat's ``TopicPartitions`` for ``owned`` (by name), each topic by its id."""
    return tuple(
        nested(
            CONSUMER_HEARTBEAT,
            1,
            "TopicPartitions",
            topic_id=ids[topic],
            partitions=tuple(sorted(p for name, p in owned if name == topic)),
        )
        for topic in sorted({name for name, _ in owned})
    )


def heartbeat_once(
    client: WireClient,
    group: str,
    member_id: str,
    epoch: int,
    *,
    topic_partitions: Any = None,
    instance_id: str | None = None,
    subscribed: tuple[str, ...] | None = None,
    regex: str | None = None,
    assignor: str | None = None,
    rebalance_timeout: datetime.timedelta = REBALANCE_TIMEOUT,
) -> Any:
    """One ConsumerGroupHeartbeat v1 (no rack): its answer."""
    return client.call(
        1,
        CONSUMER_HEARTBEAT,
        1,
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance_id,
        rack_id=None,
        rebalance_timeout=rebalance_timeout,
        subscribed_topic_names=subscribed,
        subscribed_topic_regex=regex,
        server_assignor=assignor,
        topic_partitions=topic_partitions,
    )


def heartbeat(client: WireClient, group: str, member_id: str, epoch: int, **fields: Any) -> Any:
    """``heartbeat_once`` (``fields`` its keywords), sent again while the coordinator is still
    loading: the answer."""
    return until_ready(
        lambda: heartbeat_once(client, group, member_id, epoch, **fields),
        lambda answer: answer.error_code not in COORDINATOR_STARTING,
    )
