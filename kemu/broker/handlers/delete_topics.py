"""DeleteTopics (key 20), v1-v6.

Topics by name (v1-v5 ``topic_names``), or from v6 by name or by id (``topics``). Kafka's checks
and messages: a name or id given twice is INVALID_REQUEST ("Duplicate topic name." / "Duplicate
topic id."), as are an entry with both or neither, and a name that maps to an id also given; an
unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID. With
``delete.topic.enable=false`` every topic gets TOPIC_DELETION_DISABLED (INVALID_REQUEST before
v3). A deleted topic's log goes away, it is dropped from every fetch session, and every group's
committed offsets of it are deleted (tombstones), as Kafka's group coordinator deletes them.

Under a ``controller_mutation_rate`` quota each topic about to be deleted is charged its
partitions; from v5 a topic met with the client's token bucket below zero gets
THROTTLING_QUOTA_EXCEEDED and stays, before v5 it is deleted and the answer only throttled.

Deliberate difference: kemu refuses to delete its internal topics (``__consumer_offsets``,
``__transaction_state``, ``__share_group_state``) with INVALID_REQUEST, because its
coordinators keep their state there; Kafka lets an admin delete them.
"""

from __future__ import annotations

import uuid
from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.broker.handlers.fetch import fetch_sessions
from kemu.broker.share.manager import share_partitions
from kemu.broker.throttling import controller_mutation_quota
from kemu.cluster.context import RequestContext
from kemu.cluster.model import INTERNAL_TOPICS
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.share.service import share_coordinator
from kemu.protocol.errors import ErrorCode, default_message
from kemu.protocol.topic_ids import ZERO_UUID, wire_topic_id
from kemu.protocol.views.delete_topics import DeleteTopicsRequestView

API_KEY = 20
STRICT_QUOTA_SINCE = 5  # the first version that knows THROTTLING_QUOTA_EXCEEDED

Outcome = tuple[str | None, uuid.UUID, ErrorCode, str | None]


@handler(API_KEY, 1, 6)
def handle(ctx: RequestContext, request: DeleteTopicsRequestView) -> Any:
    if ctx.version >= 6:
        entries = [(t.name, wire_topic_id(t.topic_id)) for t in request.topics]
    else:
        entries = [(name, ZERO_UUID) for name in request.topic_names]
    denied: list[Outcome] = []
    allowed_entries: list[tuple[str | None, uuid.UUID]] = []
    for name, topic_id in entries:
        known = ctx.cluster.topics_by_id.get(topic_id) if not name else None
        resource = name or (known.name if known is not None else None)
        if resource is not None and not authorize(
            ctx, AclOperation.DELETE, ResourceType.TOPIC, resource
        ):
            denied.append(_error(name, topic_id, ErrorCode.topic_authorization_failed))
        else:
            allowed_entries.append((name, topic_id))
    if not ctx.cluster.config.get_bool("delete.topic.enable"):
        outcomes = [_disabled(ctx, name, topic_id) for name, topic_id in allowed_entries]
    else:
        outcomes = _delete(ctx, allowed_entries) if allowed_entries else []
    outcomes = denied + outcomes
    return ctx.respond(
        responses=tuple(
            ctx.make(
                "DeletableTopicResult",
                name=name,
                topic_id=topic_id,
                error_code=code,
                error_message=message,
            )
            for name, topic_id, code, message in outcomes
        )
    )


def _disabled(ctx: RequestContext, name: str | None, topic_id: uuid.UUID) -> Outcome:
    if ctx.version < 3:
        return name, topic_id, ErrorCode.invalid_request, "Topic deletion is disabled."
    code = ErrorCode.topic_deletion_disabled
    return name, topic_id, code, default_message(code)


def _error(
    name: str | None, topic_id: uuid.UUID, code: ErrorCode, message: str | None = None
) -> Outcome:
    return name, topic_id, code, message or default_message(code)


def _delete(ctx: RequestContext, entries: list[tuple[str | None, uuid.UUID]]) -> list[Outcome]:
    cluster = ctx.cluster
    outcomes: list[Outcome] = []
    names: list[str] = []
    ids: list[uuid.UUID] = []
    for name, topic_id in entries:
        if name is None and topic_id == ZERO_UUID:
            outcomes.append(
                _error(
                    None,
                    ZERO_UUID,
                    ErrorCode.invalid_request,
                    "Neither topic name nor id were specified.",
                )
            )
        elif name is not None and topic_id != ZERO_UUID:
            outcomes.append(
                _error(
                    name,
                    topic_id,
                    ErrorCode.invalid_request,
                    "You may not specify both topic name and topic id.",
                )
            )
        elif name is not None:
            names.append(name)
        else:
            ids.append(topic_id)
    for name in sorted({n for n in names if names.count(n) > 1}):
        outcomes.append(_error(name, ZERO_UUID, ErrorCode.invalid_request, "Duplicate topic name."))
    duplicate_ids = {i for i in ids if ids.count(i) > 1}
    for topic_id in sorted(duplicate_ids):
        outcomes.append(_error(None, topic_id, ErrorCode.invalid_request, "Duplicate topic id."))

    to_delete: dict[uuid.UUID, str] = {}
    for topic_id in dict.fromkeys(i for i in ids if i not in duplicate_ids):
        found = cluster.topics_by_id.get(topic_id)
        if found is None:
            outcomes.append(_error(None, topic_id, ErrorCode.unknown_topic_id))
        else:
            to_delete[topic_id] = found.name
    for name in dict.fromkeys(n for n in names if names.count(n) == 1):
        topic = cluster.topics.get(name)
        if topic is None:
            outcomes.append(_error(name, ZERO_UUID, ErrorCode.unknown_topic_or_partition))
        elif topic.topic_id in to_delete:
            del to_delete[topic.topic_id]
            outcomes.append(
                _error(
                    name,
                    topic.topic_id,
                    ErrorCode.invalid_request,
                    "The provided topic name maps to an ID that was already supplied.",
                )
            )
        else:
            to_delete[topic.topic_id] = name

    sessions = fetch_sessions(ctx.runtime)
    quota = controller_mutation_quota(ctx, STRICT_QUOTA_SINCE)
    for topic_id, name in to_delete.items():
        if name in INTERNAL_TOPICS:
            outcomes.append(
                _error(
                    name,
                    topic_id,
                    ErrorCode.invalid_request,
                    f"Topic {name} is an internal topic of kemu and cannot be deleted.",
                )
            )
            continue
        if not quota.record(len(cluster.topics[name].partitions), ctx.now_ms()):
            outcomes.append(_error(name, topic_id, ErrorCode.throttling_quota_exceeded))
            continue
        cluster.delete_topic(name)
        sessions.remove_topic({name, topic_id})
        # Groups lose the topic's committed offsets, share groups its partitions and their
        # durable state, as in Kafka.
        group_coordinator(ctx.runtime).delete_topic_offsets(name)
        share_partitions(ctx.runtime).forget_topic(topic_id)
        share_coordinator(ctx.runtime).delete_topic_state(topic_id)
        # ... and their ShareGroupStatePartitionMetadata no longer names it.
        group_coordinator(ctx.runtime).share_topic_deleted(topic_id)
        outcomes.append((name, topic_id, ErrorCode.none, None))
    return outcomes
