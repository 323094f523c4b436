"""OffsetCommit (key 8), v2-v10.

Commits offsets for a group into ``__consumer_offsets`` (Kafka's OffsetCommitKey/Value records)
and answers once they are in the log. A group member commits with its generation and member id
(checked: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS while
the group completes a rebalance); generation -1 without a member id is a "simple" commit from an
assign()-only consumer or an admin, accepted when the group is Empty (a group that does not
exist yet is created empty, as Kafka does). A commit with a generation to an unknown group gets
ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND from v9). A commit from a member keeps its session alive.
v2-v4 may set a retention time (the offset then expires at commit time + retention instead of
by ``offsets.retention.minutes``); metadata longer than ``offset.metadata.max.bytes`` gets
OFFSET_METADATA_TOO_LARGE; v6+ stores the leader epoch. v10 names topics by id
(UNKNOWN_TOPIC_ID); unknown topics or partitions get UNKNOWN_TOPIC_OR_PARTITION.

For a KIP-848 consumer group the generation field is the member epoch: the member must be known
(UNKNOWN_MEMBER_ID) and commit with its current epoch (STALE_MEMBER_EPOCH).

Every broker answers (one group coordinator per process). As KafkaApis checks, the group needs
READ (GROUP_AUTHORIZATION_FAILED) and each topic READ (TOPIC_AUTHORIZATION_FAILED per partition).
Omissions: v0-v1 (ZooKeeper-era) are not served, as Kafka 4 does not.
"""

from __future__ import annotations

import datetime
from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, allowed_names, group_read, refused
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.offset_manager import DEFAULT_RETENTION, CommitPartition
from kemu.coordinator.group.service import group_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.topic_ids import wire_topic_id
from kemu.protocol.views.offset_commit import (
    OffsetCommitRequestTopicView,
    OffsetCommitRequestView,
)

API_KEY = 8
FIRST_TOPIC_ID_VERSION = 10


@handler(API_KEY, 2, 10)
def handle(ctx: RequestContext, request: OffsetCommitRequestView) -> Any:
    denied = refused(ctx, request, group_read(request.group_id))
    if denied is not None:
        return denied
    by_id = ctx.version >= FIRST_TOPIC_ID_VERSION
    answers: list[tuple[OffsetCommitRequestTopicView, list[tuple[int, ErrorCode | None]]]] = []
    valid: list[CommitPartition] = []
    names: list[str | None] = []
    readable = allowed_names(
        ctx,
        AclOperation.READ,
        ResourceType.TOPIC,
        (_topic_name(ctx, topic, by_id) or "" for topic in request.topics),
    )
    for topic in request.topics:
        found = ctx.cluster.topics_by_id.get(wire_topic_id(topic.topic_id)) if by_id else None
        name = found.name if found is not None else (None if by_id else topic.name)
        names.append(name)
        unknown = ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
        entries: list[tuple[int, ErrorCode | None]] = []
        for partition in topic.partitions:
            index: int = partition.partition_index
            if name is None:
                entries.append((index, unknown))
            elif name not in readable:
                entries.append((index, ErrorCode.topic_authorization_failed))
            elif ctx.cluster.partition(name, index) is None:
                entries.append((index, ErrorCode.unknown_topic_or_partition))
            else:
                entries.append((index, None))
                valid.append(
                    CommitPartition(
                        topic=name,
                        partition=index,
                        offset=partition.committed_offset,
                        leader_epoch=getattr(partition, "committed_leader_epoch", -1),
                        metadata=partition.committed_metadata,
                    )
                )
        answers.append((topic, entries))
    retention = getattr(request, "retention_time", None)
    result = None
    if valid:
        result = group_coordinator(ctx.runtime).commit_offsets(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            request.generation_id_or_member_epoch,
            valid,
            api_version=ctx.version,
            retention_ms=(
                retention // datetime.timedelta(milliseconds=1)
                if retention is not None
                else DEFAULT_RETENTION
            ),
        )
    topics = []
    for (topic, entries), name in zip(answers, names, strict=True):
        partitions = []
        for index, error in entries:
            if error is None:
                assert result is not None and name is not None
                error = (
                    result.error
                    if result.error != ErrorCode.none
                    else result.partitions.get((name, index), ErrorCode.none)
                )
            partitions.append(
                ctx.make("OffsetCommitResponsePartition", partition_index=index, error_code=error)
            )
        topics.append(
            ctx.make(
                "OffsetCommitResponseTopic",
                name=getattr(topic, "name", None),
                topic_id=getattr(topic, "topic_id", None),
                partitions=tuple(partitions),
            )
        )
    return ctx.respond(throttle_time=datetime.timedelta(0), topics=tuple(topics))


def _topic_name(
    ctx: RequestContext, topic: OffsetCommitRequestTopicView, by_id: bool
) -> str | None:
    if not by_id:
        return str(topic.name)
    found = ctx.cluster.topics_by_id.get(wire_topic_id(topic.topic_id))
    return None if found is None else found.name
