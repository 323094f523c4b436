"""What ShareFetch and ShareAcknowledge share: finding the partition a request names, turning
wire acknowledgement batches into core ones, and building per-partition answers."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kemu.broker.leadership import leader_fields, node_endpoints
from kemu.broker.share.partition import AckBatch
from kemu.broker.share.sessions import SharePartitionRef
from kemu.broker.share.states import AckType
from kemu.cluster.context import RequestContext
from kemu.cluster.partition import Partition
from kemu.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class Route:
    partition: Partition | None
    error: ErrorCode = ErrorCode.none
    leader_id: int | None = None  # for NOT_LEADER_OR_FOLLOWER: where to go instead


def route(ctx: RequestContext, topic_id: uuid.UUID, index: int) -> Route:
    topic = ctx.cluster.topics_by_id.get(topic_id)
    if topic is None:
        return Route(None, ErrorCode.unknown_topic_id)
    if not 0 <= index < len(topic.partitions):
        return Route(None, ErrorCode.unknown_topic_or_partition)
    partition = topic.partitions[index]
    if partition.leader_id != ctx.node.node_id:
        return Route(partition, ErrorCode.not_leader_or_follower, partition.leader_id)
    return Route(partition)


class AcknowledgementBatchFields(Protocol):
    """An AcknowledgementBatch of ShareFetch, ShareAcknowledge or TxnShareAcknowledge (each
    request's view of it has these fields)."""

    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def acknowledge_types(self) -> Sequence[int]: ...


def ack_batches(raw: Iterable[AcknowledgementBatchFields], version: int) -> list[AckBatch] | None:
    """Core acknowledgement batches, or None when the version cannot carry them (RENEW < v2)."""
    batches = []
    for batch in raw:
        types = tuple(int(t) for t in batch.acknowledge_types)
        if version < 2 and AckType.RENEW in types:
            return None
        batches.append(AckBatch(int(batch.first_offset), int(batch.last_offset), types))
    return batches


def millis(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


@dataclass(slots=True)
class PartitionAnswer:
    """Everything one partition's response entry says."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    ack_error: ErrorCode = ErrorCode.none
    ack_message: str | None = None
    leader: Partition | None = None  # set for NOT_LEADER_OR_FOLLOWER
    records: bytes = b""
    acquired: list[tuple[int, int, int]] = field(default_factory=list)


def current_leader(ctx: RequestContext, answer: PartitionAnswer) -> Any:
    if answer.leader is not None:
        return leader_fields(ctx, answer.leader)
    # Kafka sets CurrentLeader only for NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH; elsewhere it
    # keeps the schema's defaults, 0 and 0 (no -1 defaults in the ShareFetch/ShareAcknowledge JSON).
    return ctx.make("LeaderIdAndEpoch", leader_id=0, leader_epoch=0)


def group_by_topic(
    answers: dict[SharePartitionRef, PartitionAnswer],
) -> dict[uuid.UUID, list[tuple[int, PartitionAnswer]]]:
    grouped: dict[uuid.UUID, list[tuple[int, PartitionAnswer]]] = {}
    for (topic_id, index), answer in answers.items():
        grouped.setdefault(topic_id, []).append((index, answer))
    return grouped


def other_leaders(answers: Iterable[PartitionAnswer]) -> set[int]:
    return {a.leader.leader_id for a in answers if a.leader is not None}


def answered(
    ctx: RequestContext,
    lock_ms: int,
    topics: Iterable[Any],
    answers: dict[SharePartitionRef, PartitionAnswer],
) -> Any:
    """The whole response once every partition has its answer."""
    return ctx.respond(
        error_code=ErrorCode.none,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
        responses=tuple(topics),
        node_endpoints=node_endpoints(ctx, other_leaders(answers.values())),
    )


def refused(ctx: RequestContext, code: ErrorCode, lock_ms: int, message: str | None = None) -> Any:
    """A response that answers the whole request with one error."""
    return ctx.respond(
        error_code=code,
        error_message=message,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
        responses=(),
    )
