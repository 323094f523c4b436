"""AlterShareGroupOffsets (key 91), v0.

Sets the share-partition start offset of the named partitions of an empty share group (created
empty if it does not exist, as Kafka does): each partition's share state is re-initialized through
the share persister with the new start offset and a new state epoch (greater than the stored one
and at least the group epoch), which fences the cached state of the partition's leader. A group
with members gets NON_EMPTY_GROUP, a group of another type GROUP_ID_NOT_FOUND, an empty id
INVALID_GROUP_ID; an unknown topic or partition index gets UNKNOWN_TOPIC_OR_PARTITION on that
partition.

What ``__consumer_offsets`` gets is Kafka's: the group's ShareGroupStatePartitionMetadata with the
partitions initializing (those initialized already staying so; a named topic none of whose named
partitions is in range listed initializing with none, and staying so), written before the
persister is called, then with those it initialized initialized; nothing else (a group this
creates has a new group's epochs, which Kafka does not write: after a restart it is known from
that record alone).

ACLs as KafkaApis checks them: READ on the group (GROUP_AUTHORIZATION_FAILED for the request,
before the group is created) and READ on each topic (TOPIC_AUTHORIZATION_FAILED on its
partitions).

Omissions: start offsets are not checked against the log (neither does Kafka).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.broker.handlers._share_offsets import refusal
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.assignor import TopicPartition
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.share.group import ShareGroup
from kemu.coordinator.share.persister import SharePartitionKey, SharePersister
from kemu.coordinator.share.service import share_persister
from kemu.protocol.errors import ErrorCode, default_message
from kemu.protocol.topic_ids import ZERO_UUID
from kemu.protocol.views.alter_share_group_offsets import AlterShareGroupOffsetsRequestView

API_KEY = 91
NO_LEADER_EPOCH = -1


@handler(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: AlterShareGroupOffsetsRequestView) -> Any:
    refused = refusal(ctx, request.group_id, AclOperation.READ)
    if refused is not None:
        return refused
    checked = [_checked(ctx, entry) for entry in request.topics]
    wanted = {(c.topic_id, index): offset for c in checked for index, offset in c.offsets.items()}
    coordinator = group_coordinator(ctx.runtime)
    try:
        known = [c.topic_id for c in checked if c.known]
        group = coordinator.share_offsets_altering(request.group_id, sorted(wanted), known)
    except GroupError as error:
        return ctx.respond(error_code=error.code, error_message=error.message, responses=())
    codes = await _initialize(group, wanted, share_persister(ctx.runtime))
    done = [partition for partition, code in codes.items() if code == ErrorCode.none]
    failed = [partition for partition, code in codes.items() if code != ErrorCode.none]
    coordinator.share_offsets_altered(group.group_id, done, failed)
    coordinator.forget_share_state(group.group_id, {topic_id for topic_id, _ in done})
    return ctx.respond(
        error_code=ErrorCode.none,
        responses=tuple(_answer(ctx, c, codes) for c in checked),
    )


@dataclass(frozen=True, slots=True)
class _Checked:
    """A requested topic: the partitions refused (and why), the start offset of the others."""

    name: str
    topic_id: uuid.UUID
    indexes: tuple[int, ...]
    refused: dict[int, ErrorCode]
    offsets: dict[int, int]
    known: bool  # an existing topic the principal may read (initializing, even with no partition)


def _checked(ctx: RequestContext, entry: Any) -> _Checked:
    topic = ctx.cluster.topics.get(entry.topic_name)
    readable = authorize(ctx, AclOperation.READ, ResourceType.TOPIC, entry.topic_name)
    refused: dict[int, ErrorCode] = {}
    offsets: dict[int, int] = {}
    for requested in entry.partitions:
        index = requested.partition_index
        if not readable:
            refused[index] = ErrorCode.topic_authorization_failed
        elif topic is None or not 0 <= index < len(topic.partitions):
            refused[index] = ErrorCode.unknown_topic_or_partition
        else:
            offsets[index] = requested.start_offset
    return _Checked(
        entry.topic_name,
        topic.topic_id if topic is not None else ZERO_UUID,
        tuple(p.partition_index for p in entry.partitions),
        refused,
        offsets,
        topic is not None and readable,
    )


async def _initialize(
    group: ShareGroup, wanted: dict[TopicPartition, int], persister: SharePersister
) -> dict[TopicPartition, ErrorCode]:
    """Each partition's share state initialized again at its start offset, with a state epoch
    greater than the stored one (and at least the group epoch); the persister's answers."""
    codes: dict[TopicPartition, ErrorCode] = {}
    for (topic_id, index), start_offset in sorted(wanted.items()):
        key = SharePartitionKey(group.group_id, topic_id, index)
        stored = await persister.read_summary(key, NO_LEADER_EPOCH)
        stored_epoch = stored.state.state_epoch if stored.state is not None else 0
        state_epoch = max(group.group_epoch, stored_epoch + 1)
        codes[topic_id, index] = ErrorCode(
            await persister.initialize(key, state_epoch, start_offset)
        )
    return codes


def _answer(ctx: RequestContext, topic: _Checked, codes: dict[TopicPartition, ErrorCode]) -> Any:
    return ctx.make(
        "AlterShareGroupOffsetsResponseTopic",
        topic_name=topic.name,
        topic_id=topic.topic_id,
        partitions=tuple(
            _partition(
                ctx,
                index,
                topic.refused.get(index) or codes.get((topic.topic_id, index), ErrorCode.none),
            )
            for index in topic.indexes
        ),
    )


def _partition(ctx: RequestContext, index: int, code: ErrorCode) -> Any:
    return ctx.make(
        "AlterShareGroupOffsetsResponsePartition",
        partition_index=index,
        error_code=code,
        error_message=default_message(code),
    )
