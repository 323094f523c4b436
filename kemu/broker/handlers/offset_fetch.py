"""OffsetFetch (key 9), v1-v10.

The committed offsets of a group's partitions; a partition without a commit answers offset -1,
leader epoch -1 and empty metadata. Null topics (v2+) ask for every committed offset of the
group. v8+ asks for several groups at once, each answered with its own error. v10 names topics
by id: an unknown id answers UNKNOWN_TOPIC_ID per partition, and offsets of topics that no longer
exist are left out of an all-offsets answer. A group of another type (share) gets
GROUP_ID_NOT_FOUND; an empty group id INVALID_GROUP_ID. A KIP-848 consumer group member (v9+,
member epoch >= 0) must be known (UNKNOWN_MEMBER_ID) and name its current epoch
(STALE_MEMBER_EPOCH). With ``require_stable`` (v7+; the Java consumer sets it when it reads
read_committed) a partition a transaction not ended yet holds a TxnOffsetCommit offset of answers
UNSTABLE_OFFSET_COMMIT with offset -1, and the client asks again; without it the last committed
offset is answered, as Kafka does.

Every broker answers (one group coordinator per process). As KafkaApis checks, a group needs
DESCRIBE (GROUP_AUTHORIZATION_FAILED for the group); a named topic without DESCRIBE answers
TOPIC_AUTHORIZATION_FAILED with offset -1 per partition, and an all-offsets answer leaves such
topics out.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, allowed_names, authorize
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.offset_manager import FetchedOffset
from kemu.coordinator.group.service import group_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.topic_ids import wire_topic_id
from kemu.protocol.views.offset_fetch import (
    OffsetFetchRequestTopicsView,
    OffsetFetchRequestTopicView,
    OffsetFetchRequestView,
)

# a requested topic: by name (v1-v9) or by id (v10)
RequestedTopic = OffsetFetchRequestTopicsView | OffsetFetchRequestTopicView

API_KEY = 9
FIRST_TOP_LEVEL_ERROR_VERSION = 2
FIRST_MULTI_GROUP_VERSION = 8
FIRST_TOPIC_ID_VERSION = 10


@handler(API_KEY, 1, 10)
def handle(ctx: RequestContext, request: OffsetFetchRequestView) -> Any:
    stable = bool(getattr(request, "require_stable", False))  # only v7+ has it
    if ctx.version >= FIRST_MULTI_GROUP_VERSION:
        groups = tuple(
            ctx.make(
                "OffsetFetchResponseGroup",
                group_id=group.group_id,
                **_group(
                    ctx,
                    group.group_id,
                    group.topics,
                    "OffsetFetchResponseTopics",
                    getattr(group, "member_id", None),
                    getattr(group, "member_epoch", -1),
                    require_stable=stable,
                ),
            )
            for group in request.groups
        )
        return ctx.respond(throttle_time=datetime.timedelta(0), groups=groups)
    answer = _group(
        ctx, request.group_id, request.topics, "OffsetFetchResponseTopic", require_stable=stable
    )
    if ctx.version < FIRST_TOP_LEVEL_ERROR_VERSION and answer["error_code"] != ErrorCode.none:
        answer["topics"] = _with_partition_error(ctx, request.topics, answer["error_code"])
    return ctx.respond(throttle_time=datetime.timedelta(0), **answer)


def _group(
    ctx: RequestContext,
    group_id: str,
    topics: Sequence[RequestedTopic] | None,
    topic_class: str,
    member_id: str | None = None,
    member_epoch: int = -1,
    *,
    require_stable: bool = False,
) -> dict[str, Any]:
    by_id = ctx.version >= FIRST_TOPIC_ID_VERSION
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return {"error_code": ErrorCode.group_authorization_failed, "topics": ()}
    coordinator = group_coordinator(ctx.runtime)
    unknown_ids: dict[uuid.UUID, list[int]] = {}
    requested: list[tuple[str, list[int]]] | None = None
    refused: list[tuple[str, uuid.UUID | None, list[int]]] = []
    if topics is not None:
        requested = []
        for topic in topics:
            if by_id:
                wanted_id = wire_topic_id(getattr(topic, "topic_id", None))  # only v10 has it
                found = ctx.cluster.topics_by_id.get(wanted_id)
                if found is None:
                    unknown_ids[wanted_id] = list(topic.partition_indexes)
                    continue
                requested.append((found.name, list(topic.partition_indexes)))
            else:
                requested.append((topic.name, list(topic.partition_indexes)))
        names = [name for name, _ in requested]
        visible = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        for name, indexes in requested:
            if name not in visible:
                existing = ctx.cluster.topics.get(name) if by_id else None
                refused.append((name, None if existing is None else existing.topic_id, indexes))
        requested = [(name, indexes) for name, indexes in requested if name in visible]
    error, fetched = coordinator.fetch_offsets(
        group_id, requested, member_id, member_epoch, require_stable=require_stable
    )
    by_topic: dict[str, list[FetchedOffset]] = {}
    for entry in fetched:
        by_topic.setdefault(entry.topic, []).append(entry)
    if topics is None:
        visible = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, by_topic)
        by_topic = {name: entries for name, entries in by_topic.items() if name in visible}
    answered = []

    def id_field(topic_id: uuid.UUID | None) -> dict[str, Any]:
        # only the v10+ topic shape has a topic id
        return {"topic_id": topic_id} if by_id else {}

    for name, entries in by_topic.items():
        topic_id = None
        if by_id:
            existing = ctx.cluster.topics.get(name)
            if existing is None:
                continue  # a topic deleted since its commit has no id to answer with
            topic_id = existing.topic_id
        answered.append(
            ctx.make(
                topic_class,
                name=name,
                **id_field(topic_id),
                partitions=tuple(
                    _partition(
                        ctx,
                        e,
                        ErrorCode.unstable_offset_commit if e.unstable else ErrorCode.none,
                    )
                    for e in entries
                ),
            )
        )
    for topic_id, indexes in unknown_ids.items():
        answered.append(
            ctx.make(
                topic_class,
                topic_id=topic_id,
                partitions=tuple(
                    _partition(ctx, FetchedOffset("", index), ErrorCode.unknown_topic_id)
                    for index in indexes
                ),
            )
        )
    for name, topic_id, indexes in refused:
        answered.append(
            ctx.make(
                topic_class,
                name=name,
                **id_field(topic_id),
                partitions=tuple(
                    _partition(
                        ctx, FetchedOffset(name, index), ErrorCode.topic_authorization_failed
                    )
                    for index in indexes
                ),
            )
        )
    return {"error_code": error, "topics": tuple(answered) if error == ErrorCode.none else ()}


def _partition(ctx: RequestContext, entry: FetchedOffset, error: ErrorCode) -> Any:
    class_name = (
        "OffsetFetchResponsePartitions"
        if ctx.version >= FIRST_MULTI_GROUP_VERSION
        else "OffsetFetchResponsePartition"
    )
    return ctx.make(
        class_name,
        partition_index=entry.partition,
        committed_offset=entry.offset,
        committed_leader_epoch=entry.leader_epoch,
        metadata=entry.metadata,
        error_code=error,
    )


def _with_partition_error(
    ctx: RequestContext, topics: Sequence[OffsetFetchRequestTopicView] | None, error: ErrorCode
) -> tuple[Any, ...]:
    """v1 has no group-level error: every requested partition carries it."""
    return tuple(
        ctx.make(
            "OffsetFetchResponseTopic",
            name=topic.name,
            partitions=tuple(
                _partition(ctx, FetchedOffset(topic.name, index), error)
                for index in topic.partition_indexes
            ),
        )
        for topic in topics or ()
    )
