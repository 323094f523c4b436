"""Metadata (key 3), v0-v13.

Brokers, cluster id, controller and topics by name or (v12+) topic id. A null topic list (v1+;
an empty one at v0) means every topic. Unknown topics are created on the spot when the request
allows it (v4+, always before) and ``auto.create.topics.enable`` is true, with ``num.partitions``
and ``default.replication.factor``; otherwise UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID for
ids). Every replica of a running broker is reported in sync (kemu keeps one copy); a stopped
broker's is offline, absent from the brokers and the in-sync replicas, and a partition it was the
last in-sync replica of has leader -1 and LEADER_NOT_AVAILABLE (``kemu/cluster/failover.py``).
Authorized operations, when asked (cluster operations at v8-v10, topic operations from v8), come
from ``kemu.broker.authorization``: as Kafka without an authorizer, every operation of the
resource type (7 cluster operations, 8 topic operations), for topics found and for names that
get an error; topics asked for by an unknown id get none.

v10 and v11 carry a topic id and a nullable name but serve neither: a topic with a null name or
a non-zero id makes the whole request INVALID_REQUEST (each topic echoed with that error, a null
name as ""; no brokers), as KafkaApis throws InvalidRequestException for it.

With an authorizer, named topics need DESCRIBE (TOPIC_AUTHORIZATION_FAILED) and one to be
auto-created CREATE on the cluster or the topic, as KafkaApis checks. An auto-creation is charged
to the client's ``controller_mutation_rate`` (``num.partitions`` partitions), as Kafka's broker
forwards it to the controller as the client's CreateTopics; refused, the topic gets
LEADER_NOT_AVAILABLE and is not created (the Metadata answer is not throttled).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from kemu.broker.authorization import (
    CLUSTER_NAME,
    OMITTED,
    AclOperation,
    ResourceType,
    authorize,
    authorized_operations,
)
from kemu.broker.endpoints import advertised_nodes
from kemu.broker.handlers import handler
from kemu.broker.throttling import controller_mutation_quota
from kemu.cluster.context import RequestContext
from kemu.cluster.model import INTERNAL_TOPICS, Cluster, Topic, TopicError, validate_topic_name
from kemu.protocol.errors import ErrorCode
from kemu.protocol.topic_ids import ZERO_UUID, wire_topic_id
from kemu.protocol.views.metadata import MetadataRequestTopicView, MetadataRequestView

API_KEY = 3


def auto_create(cluster: Cluster, name: str) -> Topic:
    partitions = cluster.config.get_int("num.partitions")
    replication = min(cluster.config.get_int("default.replication.factor"), len(cluster.nodes))
    return cluster.create_topic(name, partitions, replication)


@handler(API_KEY, 0, 13)
def handle(ctx: RequestContext, request: MetadataRequestView) -> Any:
    cluster = ctx.cluster
    wanted = request.topics
    if ctx.version == 0 and not wanted:
        wanted = None
    allow_auto = getattr(request, "allow_auto_topic_creation", True)
    operations = bool(getattr(request, "include_topic_authorized_operations", False))
    # Only v8-v10 have the field; given to another version, wire.build would check its name in
    # the other versions' schemas (~12 ms of imports on the first answer).
    cluster_operations: dict[str, int] = {}
    if 8 <= ctx.version <= 10:
        cluster_operations["cluster_authorized_operations"] = OMITTED
        if request.include_cluster_authorized_operations:
            cluster_operations["cluster_authorized_operations"] = authorized_operations(
                ctx, ResourceType.CLUSTER, CLUSTER_NAME
            )

    if (
        10 <= ctx.version <= 11
        and wanted is not None
        and any(
            entry.name is None or wire_topic_id(entry.topic_id) != ZERO_UUID for entry in wanted
        )
    ):
        return _invalid_request(ctx, wanted)
    topics = []
    if wanted is None:
        # Listing every topic shows those the principal may DESCRIBE, as Kafka filters them.
        topics = [
            _topic(ctx, t, operations)
            for t in list(cluster.topics.values())
            if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name, log=False)
        ]
    else:
        for entry in wanted:
            topics.append(_lookup(ctx, entry, allow_auto, operations))

    brokers = tuple(
        ctx.make("MetadataResponseBroker", node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
        for n in advertised_nodes(ctx).values()
    )
    return ctx.respond(
        brokers=brokers,
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        topics=tuple(topics),
        **cluster_operations,
    )


def _invalid_request(ctx: RequestContext, wanted: Sequence[MetadataRequestTopicView]) -> Any:
    """MetadataRequest.getErrorResponse: every topic with INVALID_REQUEST, "" for a null name."""
    topics = tuple(
        ctx.make(
            "MetadataResponseTopic",
            error_code=ErrorCode.invalid_request,
            name=entry.name or "",
            topic_id=entry.topic_id,
            is_internal=False,
            partitions=(),
        )
        for entry in wanted
    )
    return ctx.respond(topics=topics)


def _topic_operations(ctx: RequestContext, name: str | None, wanted: bool) -> int:
    if not wanted or name is None:
        return OMITTED
    return authorized_operations(ctx, ResourceType.TOPIC, name)


def _lookup(
    ctx: RequestContext, entry: MetadataRequestTopicView, allow_auto: bool, operations: bool
) -> Any:
    cluster = ctx.cluster
    name = entry.name
    topic_id = wire_topic_id(getattr(entry, "topic_id", None))
    # Java's describeTopics by id sends an empty name rather than null.
    if not name and topic_id != ZERO_UUID:
        found = cluster.topics_by_id.get(topic_id)
        if found is None:
            return _error(ctx, None, topic_id, ErrorCode.unknown_topic_id, False)
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, found.name):
            return _error(ctx, None, topic_id, ErrorCode.topic_authorization_failed, False)
        return _topic(ctx, found, operations)
    if name is None:
        return _error(ctx, None, ZERO_UUID, ErrorCode.invalid_request, False)
    assert isinstance(name, str)
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return _error(ctx, name, ZERO_UUID, ErrorCode.topic_authorization_failed, False)
    found = cluster.topics.get(name)
    if found is not None:
        return _topic(ctx, found, operations)
    if (
        allow_auto
        and cluster.config.get_bool("auto.create.topics.enable")
        and not authorize(ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log=False)
        and not authorize(ctx, AclOperation.CREATE, ResourceType.TOPIC, name)
    ):
        # KafkaApis: a topic that would be auto-created needs CREATE on the cluster or on it
        return _error(ctx, name, ZERO_UUID, ErrorCode.topic_authorization_failed, False)
    try:
        validate_topic_name(name)
    except TopicError:
        return _error(ctx, name, ZERO_UUID, ErrorCode.invalid_topic_exception, operations)
    if (
        allow_auto
        and cluster.config.get_bool("auto.create.topics.enable")
        and (name not in INTERNAL_TOPICS)
    ):
        # Kafka's broker sends the creation to its controller as the client's own CreateTopics
        # (latest version: strict), so it is charged to the client's controller_mutation_rate;
        # refused, the topic is not created and Metadata says LEADER_NOT_AVAILABLE, as Kafka
        # answers while an auto-creation is pending.
        quota = controller_mutation_quota(ctx, 0, throttles_answer=False)
        if not quota.record(cluster.config.get_int("num.partitions"), ctx.now_ms()):
            return _error(ctx, name, ZERO_UUID, ErrorCode.leader_not_available, operations)
        try:
            return _topic(ctx, auto_create(cluster, name), operations)
        except TopicError as error:
            return _error(ctx, name, ZERO_UUID, error.code, operations)
    return _error(ctx, name, ZERO_UUID, ErrorCode.unknown_topic_or_partition, operations)


def _error(
    ctx: RequestContext, name: str | None, topic_id: uuid.UUID, code: ErrorCode, operations: bool
) -> Any:
    return ctx.make(
        "MetadataResponseTopic",
        error_code=code,
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=_topic_operations(ctx, name, operations),
    )


def _topic(ctx: RequestContext, topic: Topic, operations: bool) -> Any:
    partitions = tuple(
        ctx.make(
            "MetadataResponsePartition",
            # an offline partition (its only in-sync replica's broker is stopped): leader -1
            error_code=ErrorCode.none if p.leader_id >= 0 else ErrorCode.leader_not_available,
            partition_index=p.index,
            leader_id=p.leader_id,
            leader_epoch=p.leader_epoch,
            replica_nodes=tuple(p.replicas),
            isr_nodes=tuple(ctx.cluster.in_sync(p)),
            offline_replicas=tuple(r for r in p.replicas if r in ctx.cluster.stopped),
        )
        for p in topic.partitions
    )
    return ctx.make(
        "MetadataResponseTopic",
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=partitions,
        topic_authorized_operations=_topic_operations(ctx, topic.name, operations),
    )
