"""The share consumer's values (records, acknowledge types, acknowledgement batches, a share
session with one leader, member ids) and how a set of acknowledgements becomes a ShareFetch or
ShareAcknowledge request's topics."""

from __future__ import annotations

import asyncio
import base64
import enum
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kemu.client.cluster import ClusterClient, TopicIdPartition
from kemu.client.codec import batch_records, whole_batches

OPEN_SESSION, CLOSE_SESSION = 0, -1
MAX_SESSION_EPOCH = 0x7FFFFFFF


def new_member_id() -> str:
    """A random member id the way Java's client makes one (a UUID, URL-safe base64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


# What a ShareFetch brought back: each partition's answer with acquired records, decoded into
# ShareRecords only when a poll takes them in (as Java's consumer parses in poll), so a fetch
# completing in the background costs the application nothing until it wants the records.
# With each partition, how many sessions the consumer had lost when the answer came.
Fetched = list[tuple[TopicIdPartition, Any, int]]


@dataclass
class ShareSession:
    """A share session with one leader: its next epoch and the partitions it holds."""

    epoch: int = OPEN_SESSION
    partitions: set[TopicIdPartition] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    fetch: asyncio.Task[Fetched] | None = None
    flush: asyncio.Task[None] | None = None  # a ShareAcknowledge of acks no fetch took

    def advance(self) -> None:
        self.epoch = 1 if self.epoch >= MAX_SESSION_EPOCH else self.epoch + 1


class AcknowledgeType(enum.IntEnum):
    """Kafka's acknowledge types (ShareFetch/ShareAcknowledge ``AcknowledgeTypes``)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


TRANSACTIONAL_TYPES = frozenset(
    {AcknowledgeType.GAP, AcknowledgeType.ACCEPT, AcknowledgeType.REJECT}
)


@dataclass(frozen=True, slots=True)
class ShareRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...]
    delivery_count: int
    topic_id: uuid.UUID
    # The consumer's own TopicIdPartition, shared by the records of a fetch (not a new one per
    # acknowledgement: it is a dictionary key on every poll and acknowledge).
    _tp: TopicIdPartition | None = field(default=None, repr=False, compare=False)

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        if self._tp is not None:
            return self._tp
        return TopicIdPartition(self.topic_id, self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class ShareGroupMetadata:
    """Who acknowledges: what TxnShareAcknowledge carries for the broker's member check."""

    group_id: str
    member_id: str
    member_epoch: int


@dataclass(frozen=True, slots=True)
class ShareAcknowledgementBatch:
    """Offsets first..last (inclusive) and their types: one for the range, or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True)
class ShareAcknowledgements:
    """Acknowledgements per partition, as ``acknowledgements_for_transaction()`` hands them over."""

    acknowledgements: dict[TopicIdPartition, list[ShareAcknowledgementBatch]] = field(
        default_factory=dict
    )

    def is_empty(self) -> bool:
        return not any(self.acknowledgements.values())

    @staticmethod
    def from_offsets(
        by_partition: dict[TopicIdPartition, dict[int, int]],
    ) -> ShareAcknowledgements:
        return ShareAcknowledgements(
            {tp: to_batches(types) for tp, types in by_partition.items() if types}
        )


def to_batches(types_by_offset: dict[int, int]) -> list[ShareAcknowledgementBatch]:
    """Contiguous runs of offsets, each one batch; a run of one type sends that type once."""
    batches: list[ShareAcknowledgementBatch] = []
    run: list[tuple[int, int]] = []
    for offset in sorted(types_by_offset):
        if run and offset != run[-1][0] + 1:
            batches.append(_batch(run))
            run = []
        run.append((offset, types_by_offset[offset]))
    if run:
        batches.append(_batch(run))
    return batches


def _batch(run: list[tuple[int, int]]) -> ShareAcknowledgementBatch:
    types = tuple(kind for _, kind in run)
    if len(set(types)) == 1:
        types = types[:1]
    return ShareAcknowledgementBatch(run[0][0], run[-1][0], types)


def ack_topics(
    cluster: ClusterClient,
    api_key: int,
    version: int,
    topic_class: str,
    partition_class: str,
    partitions: Iterable[TopicIdPartition],
    acks: dict[TopicIdPartition, dict[int, int]],
) -> tuple[Any, ...]:
    """The topics of a ShareFetch or ShareAcknowledge request (``topic_class``, each with its
    ``partition_class`` entries) carrying ``acks`` for ``partitions``, by topic id."""
    by_topic: dict[uuid.UUID, list[TopicIdPartition]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic_id, []).append(tp)
    topics = []
    for topic_id, tps in by_topic.items():
        entries = tuple(
            cluster.nested(
                api_key,
                version,
                partition_class,
                partition_index=tp.partition,
                acknowledgement_batches=tuple(
                    cluster.nested(
                        api_key,
                        version,
                        "AcknowledgementBatch",
                        first_offset=batch.first_offset,
                        last_offset=batch.last_offset,
                        acknowledge_types=batch.acknowledge_types,
                    )
                    for batch in to_batches(acks.get(tp, {}))
                ),
            )
            for tp in sorted(tps, key=lambda tp: tp.partition)
        )
        topics.append(
            cluster.nested(api_key, version, topic_class, topic_id=topic_id, partitions=entries)
        )
    return tuple(topics)


def held_again(
    tp: TopicIdPartition,
    partition: Any,
    acknowledged: Iterable[dict[TopicIdPartition, dict[int, int]]],
    delivered: dict[tuple[TopicIdPartition, int], Any],
) -> set[tuple[TopicIdPartition, int]]:
    """The records of a ShareFetch answer's partition that the consumer still holds (handed
    out, or acknowledged and not sent): acquired again, as their acquisition ended first (its
    lock expired in a long pause, its share session closed with its connection). They are not
    handed out again: the acknowledgement made of them names offsets, so the broker applies it
    to this acquisition (the simulation found an ACCEPT confirmed, then the record handed out
    again). Records handed over to a transaction are not held: staged, they cannot be acquired
    until the transaction aborts, and then they are due again; the consumer cannot tell that
    from an acquisition that came before the stage (which the stage then applies to). Such a
    record, handed out again after the commit, is complete: a transaction naming it is refused
    (INVALID_RECORD_STATE) and aborts, so its output is not committed twice."""
    held = {offset for (of, offset) in delivered if of == tp}
    for pending in acknowledged:
        held.update(pending.get(tp, {}))
    spans = [(int(e.first_offset), int(e.last_offset)) for e in partition.acquired_records]
    return {(tp, o) for o in held if any(first <= o <= last for first, last in spans)}


def acquired_records(tp: TopicIdPartition, partition: Any) -> tuple[list[ShareRecord], list[int]]:
    """The records of a ShareFetch answer's partition that its AcquiredRecords hand out, each
    with its delivery count, and the acquired offsets that hold no record to hand out (markers,
    records compacted away): those are acknowledged as GAP."""
    acquired: dict[int, int] = {}
    for entry in partition.acquired_records:
        for offset in range(int(entry.first_offset), int(entry.last_offset) + 1):
            acquired[offset] = int(entry.delivery_count)
    if not acquired:
        return [], []
    out = []
    lowest, highest = min(acquired), max(acquired)
    for header, batch in whole_batches(partition.records):
        if header.last_offset < lowest or header.base_offset > highest or header.is_control:
            continue
        for record in batch_records(batch):
            count = acquired.pop(record.offset, None)
            if count is None:
                continue
            out.append(
                ShareRecord(
                    tp.topic,
                    tp.partition,
                    record.offset,
                    record.key,
                    record.value,
                    record.timestamp,
                    record.headers,
                    count,
                    tp.topic_id,
                    tp,
                )
            )
    return out, list(acquired)


def note_unharvested_failure(task: asyncio.Task[Any]) -> None:
    """Mark a share fetch's failure as seen. A fetch whose connection died drops its own session
    (its acknowledgements already restored), so no poll may harvest it; without this asyncio
    reports "Task exception was never retrieved". A poll that harvests it still gets the
    exception."""
    if not task.cancelled() and task.exception() is not None:
        logging.getLogger("kemu.client.share").debug("share fetch ended: %s", task.exception())
