"""OffsetCommit, OffsetFetch and OffsetDelete over the classic groups and the offset store, and
the records that make them durable. Sans-IO.

An operation validates against the group (as Kafka's ``OffsetMetadataManager`` does), then
returns its answer together with the ``__consumer_offsets`` records to write; the caller appends
them and only then calls ``replay`` with them, which is also how the records are read back at
start (together with ``load_group`` for group metadata). Topic existence is the caller's check.
A transaction's offsets (TxnOffsetCommit) are replayed with its producer id and wait in
``pending`` (``kemu.coordinator.group.pending_offsets``) until ``end_transaction``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kemu.coordinator.group.assignor import TopicPartition
from kemu.coordinator.group.classic.group import (
    EMPTY,
    STABLE,
    ClassicGroup,
    ClassicGroupCoordinator,
    ClassicMember,
    validate_offset_commit,
)
from kemu.coordinator.group.consumer import offset_commit
from kemu.coordinator.group.consumer.group import ConsumerGroup, ConsumerGroupCoordinator
from kemu.coordinator.group.offsets import CommittedOffset, OffsetStore
from kemu.coordinator.group.pending_offsets import PendingOffsets
from kemu.coordinator.group.records import (
    NO_TIMESTAMP,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordKey,
    RecordValue,
)
from kemu.coordinator.group.streams.model import StreamsGroup
from kemu.protocol.errors import ErrorCode

Record = tuple[RecordKey, RecordValue | None]
TopicIds = Callable[[str], uuid.UUID | None]  # a topic's id by its name (None: no such topic)
DEFAULT_RETENTION = -1  # OffsetCommit v2-v4 RetentionTimeMs: use the broker's retention
NO_OFFSET = -1
NO_PRODUCER_ID = -1
FIRST_VERSION_WITH_GROUP_NOT_FOUND = 9


@dataclass(frozen=True, slots=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class CommitResult:
    error: ErrorCode  # not NONE: every partition of the request gets it
    partitions: dict[tuple[str, int], ErrorCode] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int = NO_OFFSET
    leader_epoch: int = -1
    metadata: str = ""
    unstable: bool = False  # a transaction not ended holds an offset of it (require_stable)


@dataclass(frozen=True, slots=True)
class DeleteResult:
    error: ErrorCode
    partitions: dict[tuple[str, int], ErrorCode] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)


class OffsetManager:
    def __init__(
        self,
        classic: ClassicGroupCoordinator,
        store: OffsetStore,
        consumer: ConsumerGroupCoordinator | None = None,
        metadata_max_bytes: int = 4096,
        topic_ids: TopicIds | None = None,
    ) -> None:
        self.classic = classic
        self.store = store
        self.consumer = consumer
        self.metadata_max_bytes = metadata_max_bytes
        self.topic_ids = topic_ids
        self.pending = PendingOffsets()

    # --- OffsetCommit --------------------------------------------------------------------------

    def commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        partitions: list[CommitPartition],
        now_ms: int,
        *,
        api_version: int,
        retention_ms: int = DEFAULT_RETENTION,
    ) -> CommitResult:
        if not group_id:
            return CommitResult(ErrorCode.invalid_group_id)
        found = self.classic.registry.get(group_id)
        if found is None:
            if generation_id >= 0:
                if api_version >= FIRST_VERSION_WITH_GROUP_NOT_FOUND:
                    return CommitResult(ErrorCode.group_id_not_found)
                return CommitResult(ErrorCode.illegal_generation)
            # An assign()-only consumer or an admin: Kafka creates a "simple" group for it.
            found = self.classic.simple_group(group_id, now_ms)
        if isinstance(found, ConsumerGroup):
            # As Kafka, partitions whose metadata is too large are not checked against the
            # member's assignment epochs (they are answered OFFSET_METADATA_TOO_LARGE).
            checked = [
                self.consumer_partition(found, entry.topic, entry.partition)
                for entry in partitions
                if len(entry.metadata or "") <= self.metadata_max_bytes
            ]
            error = offset_commit.validate_offset_commit(
                found, member_id, generation_id, checked, api_version=api_version
            )
        elif isinstance(found, StreamsGroup):
            committed = [
                (entry.topic, entry.partition)
                for entry in partitions
                if len(entry.metadata or "") <= self.metadata_max_bytes
            ]
            error = found.validate_offset_commit(
                member_id, generation_id, committed, api_version=api_version
            )
        elif isinstance(found, ClassicGroup):
            error = validate_offset_commit(found, member_id, group_instance_id, generation_id)
            self.classic.keep_alive(found, member_id, now_ms)
        else:
            return CommitResult(ErrorCode.group_id_not_found)
        if error is not None:
            return CommitResult(error)
        expire = None if retention_ms == DEFAULT_RETENTION else now_ms + retention_ms
        answers: dict[tuple[str, int], ErrorCode] = {}
        records: list[Record] = []
        for entry in partitions:
            metadata = entry.metadata if entry.metadata is not None else ""
            if len(metadata) > self.metadata_max_bytes:
                answers[(entry.topic, entry.partition)] = ErrorCode.offset_metadata_too_large
                continue
            answers[(entry.topic, entry.partition)] = ErrorCode.none
            value = OffsetCommitValue(
                offset=entry.offset,
                metadata=metadata,
                commit_timestamp=now_ms,
                leader_epoch=entry.leader_epoch,
                expire_timestamp=expire if expire is not None else NO_TIMESTAMP,
            )
            records.append((OffsetCommitKey(group_id, entry.topic, entry.partition), value))
        return CommitResult(ErrorCode.none, answers, records)

    def transactional_records(
        self, group_id: str, partitions: list[CommitPartition], now_ms: int
    ) -> list[Record]:
        """The records of a TxnOffsetCommit's offsets (checked by the caller), written in the
        transaction's batch: no expiry time, as Kafka writes them."""
        return [
            (
                OffsetCommitKey(group_id, entry.topic, entry.partition),
                OffsetCommitValue(
                    offset=entry.offset,
                    metadata=entry.metadata if entry.metadata is not None else "",
                    commit_timestamp=now_ms,
                    leader_epoch=entry.leader_epoch,
                    expire_timestamp=NO_TIMESTAMP,
                ),
            )
            for entry in partitions
        ]

    def consumer_partition(
        self, group: ConsumerGroup, topic: str, partition: int
    ) -> TopicPartition | None:
        """A committed partition as a consumer group's assignments name it (by topic id)."""
        topic_id = self.topic_ids(topic) if self.topic_ids is not None else None
        if topic_id is None and topic in group.subscribed_metadata:
            topic_id = group.subscribed_metadata[topic].topic_id
        return None if topic_id is None else (topic_id, partition)

    # --- OffsetFetch ---------------------------------------------------------------------------

    def fetch(
        self,
        group_id: str,
        requested: list[tuple[str, list[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
        *,
        require_stable: bool = False,
    ) -> tuple[ErrorCode, list[FetchedOffset]]:
        """The committed offsets of the requested partitions (None: every committed one);
        a partition without a commit answers offset -1. A consumer group's member (v9+) must
        name its current epoch. With ``require_stable`` a partition a transaction not ended yet
        holds an offset of is ``unstable`` instead (Kafka: UNSTABLE_OFFSET_COMMIT)."""
        if not group_id:
            return ErrorCode.invalid_group_id, []
        found = self.classic.registry.get(group_id)
        if isinstance(found, ConsumerGroup):
            error = ConsumerGroupCoordinator.validate_offset_fetch(found, member_id, member_epoch)
            if error is not None:
                return error, []
        elif isinstance(found, StreamsGroup):
            error = found.validate_offset_fetch(member_id, member_epoch)
            if error is not None:
                return error, []
        elif found is not None and not isinstance(found, ClassicGroup):
            return ErrorCode.group_id_not_found, []
        held = self.pending.of_group(group_id) if require_stable else set()
        if requested is None:
            return ErrorCode.none, [
                FetchedOffset(topic, partition, unstable=True)
                if (topic, partition) in held
                else _fetched(topic, partition, value)
                for (topic, partition), value in self.store.of_group(group_id).items()
            ]
        return ErrorCode.none, [
            FetchedOffset(topic, partition, unstable=True)
            if (topic, partition) in held
            else _fetched(topic, partition, self.store.get(group_id, topic, partition))
            for topic, partitions in requested
            for partition in partitions
        ]

    # --- OffsetDelete --------------------------------------------------------------------------

    def delete(self, group_id: str, requested: list[tuple[str, list[int]]]) -> DeleteResult:
        if not group_id:
            return DeleteResult(ErrorCode.invalid_group_id)
        group = self.classic.registry.get(group_id)
        if not isinstance(group, ClassicGroup | ConsumerGroup | StreamsGroup):
            return DeleteResult(ErrorCode.group_id_not_found)
        if isinstance(group, ClassicGroup) and (
            group.state != EMPTY and not group.uses_consumer_protocol()
        ):
            return DeleteResult(ErrorCode.non_empty_group)
        answers: dict[tuple[str, int], ErrorCode] = {}
        records: list[Record] = []
        for topic, partitions in requested:
            if isinstance(group, StreamsGroup):
                # Kafka: a non-empty streams group keeps the offsets of the topics it reads.
                subscribed = bool(group.members) and topic in group.input_topics()
            else:
                subscribed = group.is_subscribed_to(topic)
            for partition in partitions:
                if subscribed:
                    answers[(topic, partition)] = ErrorCode.group_subscribed_to_topic
                    continue
                answers[(topic, partition)] = ErrorCode.none
                # a tombstone also ends what an open transaction holds of it, as in Kafka
                if self.store.get(group_id, topic, partition) is not None or self.pending.is_open(
                    group_id, (topic, partition)
                ):
                    records.append((OffsetCommitKey(group_id, topic, partition), None))
        return DeleteResult(ErrorCode.none, answers, records)

    # --- group deletion and expiry ---------------------------------------------------------------

    def group_tombstones(self, group_id: str, *, classic: bool) -> list[Record]:
        """What deleting a group writes: a tombstone per offset (committed, or held by an open
        transaction), then the group's."""
        committed = self.store.of_group(group_id)
        held = sorted(self.pending.of_group(group_id) - committed.keys())
        records: list[Record] = [
            (OffsetCommitKey(group_id, topic, partition), None)
            for topic, partition in [*committed, *held]
        ]
        if classic:
            records.append((GroupMetadataKey(group_id), None))
        return records

    def topic_tombstones(self, topic: str) -> dict[str, list[Record]]:
        """Tombstones for every group's offsets of a deleted topic, committed or held by an
        open transaction, by group (Kafka's ``OffsetMetadataManager.onPartitionsDeleted``)."""
        found: dict[str, set[tuple[str, int]]] = {}
        for group_id in self.store.group_ids():
            found[group_id] = set(self.store.of_group(group_id))
        for group_id, held in self.pending.open_offsets().items():  # open transactions' too
            found.setdefault(group_id, set()).update(held)
        by_group: dict[str, list[Record]] = {}
        for group_id, partitions in found.items():
            for offset_topic, partition in sorted(partitions):
                if offset_topic == topic:
                    key = OffsetCommitKey(group_id, topic, partition)
                    by_group.setdefault(group_id, []).append((key, None))
        return by_group

    def expired_offsets(self, now_ms: int, retention_ms: int) -> dict[str, list[Record]]:
        """Tombstones for every offset past its retention, by group."""

        def base(group_id: str, topic: str, value: CommittedOffset) -> int | None:
            found = self.classic.registry.get(group_id)
            if isinstance(found, ConsumerGroup):
                # Kafka keeps the offsets of the topics a consumer group subscribes to.
                return None if found.is_subscribed_to(topic) else value.commit_timestamp_ms
            if isinstance(found, StreamsGroup):
                if found.members and topic in found.input_topics():
                    return None
                return value.commit_timestamp_ms
            group = self.classic.group(group_id)
            if group is None or not group.protocol_type:
                return value.commit_timestamp_ms  # a simple group
            if group.state == EMPTY:
                return group.state_timestamp_ms or value.commit_timestamp_ms
            subscribed = group.subscribed_topics()
            if group.state == STABLE and subscribed is not None and topic not in subscribed:
                return value.commit_timestamp_ms
            return None

        by_group: dict[str, list[Record]] = {}
        for group_id, topic, partition in self.store.expired(now_ms, retention_ms, base):
            by_group.setdefault(group_id, []).append(
                (OffsetCommitKey(group_id, topic, partition), None)
            )
        return by_group

    # --- records -------------------------------------------------------------------------------

    def replay(
        self,
        records: list[Record],
        *,
        producer_id: int = NO_PRODUCER_ID,
        first_offset: int = -1,
    ) -> None:
        """Apply offset records (and group tombstones) to the store: those of a transaction's
        batch (``producer_id``) to ``pending``. ``first_offset``: the log offset of the first
        record (the others follow it), -1 when not known."""
        for index, (key, value) in enumerate(records):
            if not isinstance(key, OffsetCommitKey):
                continue
            where = (key.topic, key.partition)
            if value is None:
                self.store.remove(key.group, key.topic, key.partition)
                self.pending.remove(key.group, where)
            elif isinstance(value, OffsetCommitValue):
                record_offset = first_offset + index if first_offset >= 0 else -1
                committed = _committed(value, record_offset)
                if producer_id == NO_PRODUCER_ID:
                    self.store.put(key.group, key.topic, key.partition, committed)
                else:
                    self.pending.put(producer_id, key.group, where, committed)

    def end_transaction(
        self, producer_id: int, commit: bool, in_partition: Callable[[str], bool]
    ) -> int:
        """A COMMIT or ABORT marker of ``producer_id`` in the ``__consumer_offsets`` partition
        of the groups ``in_partition`` accepts: its pending offsets there are committed (each
        unless an offset written after it in the log is committed already) or dropped. Returns
        how many were committed."""
        committed = 0
        for group_id, offsets in self.pending.end(producer_id, in_partition).items():
            if not commit:
                continue
            for (topic, partition), value in offsets.items():
                existing = self.store.get(group_id, topic, partition)
                if existing is None or value.record_offset > existing.record_offset:
                    self.store.put(group_id, topic, partition, value)
                    committed += 1
        return committed


def _fetched(topic: str, partition: int, value: CommittedOffset | None) -> FetchedOffset:
    if value is None:
        return FetchedOffset(topic, partition)
    return FetchedOffset(topic, partition, value.offset, value.leader_epoch, value.metadata)


def _committed(value: OffsetCommitValue, record_offset: int = -1) -> CommittedOffset:
    return CommittedOffset(
        offset=value.offset,
        leader_epoch=value.leader_epoch,
        metadata=value.metadata,
        commit_timestamp_ms=value.commit_timestamp,
        expire_timestamp_ms=(
            value.expire_timestamp if value.expire_timestamp != NO_TIMESTAMP else None
        ),
        record_offset=record_offset,
    )


# --- group metadata records ----------------------------------------------------------------------


def group_record(group: ClassicGroup, *, assigned: bool = False) -> Record:
    """The GroupMetadata record of a group as it stands (members only once Stable, as the
    assignment is what the record is for; ``assigned``: with the leader's assignment, which
    makes it Stable once written)."""
    timestamp = group.state_timestamp_ms if group.state_timestamp_ms is not None else NO_TIMESTAMP
    if group.state != STABLE and not assigned:
        value = GroupMetadataValue(
            protocol_type=group.protocol_type if group.state == EMPTY else "",
            generation=group.generation_id if group.state == EMPTY else 0,
            protocol=None,
            leader=None,
            current_state_timestamp=timestamp,
        )
        return GroupMetadataKey(group.group_id), value
    members = tuple(
        MemberMetadata(
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            rebalance_timeout=member.rebalance_timeout_ms,
            session_timeout=member.session_timeout_ms,
            subscription=member.metadata(group.protocol_name),
            assignment=member.assignment,
        )
        for member in group.members.values()
    )
    value = GroupMetadataValue(
        protocol_type=group.protocol_type,
        generation=group.generation_id,
        protocol=group.protocol_name,
        leader=group.leader_id,
        current_state_timestamp=timestamp,
        members=members,
    )
    return GroupMetadataKey(group.group_id), value


def load_group(group_id: str, value: GroupMetadataValue, now_ms: int) -> ClassicGroup:
    """A group as its last metadata record left it: Stable with its members (each with a fresh
    session), or Empty."""
    group = ClassicGroup(
        group_id,
        state=STABLE if value.members else EMPTY,
        generation_id=value.generation,
        protocol_type=value.protocol_type,
        protocol_name=value.protocol,
        leader_id=value.leader,
        state_timestamp_ms=(
            value.current_state_timestamp if value.current_state_timestamp != NO_TIMESTAMP else None
        ),
    )
    for meta in value.members:
        member = ClassicMember(
            member_id=meta.member_id,
            group_instance_id=meta.group_instance_id,
            client_id=meta.client_id,
            client_host=meta.client_host,
            rebalance_timeout_ms=meta.rebalance_timeout,
            session_timeout_ms=meta.session_timeout,
            protocol_type=value.protocol_type,
            protocols=((value.protocol or "", meta.subscription),),
            assignment=meta.assignment,
            heartbeat_deadline_ms=now_ms + meta.session_timeout,
        )
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id
    if group.leader_id not in group.members:
        group.leader_id = next(iter(group.members), None)
    return group
