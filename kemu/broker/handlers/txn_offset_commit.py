"""TxnOffsetCommit (key 28), v0-v6.

Offsets a transactional producer commits for a consumer group. They are checked now and staged
with the transaction; the transaction coordinator hands them to the group coordinator's offset
store when the transaction commits and drops them when it aborts, so OffsetFetch never sees
offsets of an open or aborted transaction.

Checks, as Kafka's group coordinator makes them for a transactional commit: the producer must
hold the transactional id's current epoch (INVALID_PRODUCER_ID_MAPPING; a stale or future epoch,
whether a newer InitProducerId or the coordinator's timeout abort bumped it, INVALID_PRODUCER_EPOCH
at every version, as Kafka 4.4.0 answers v3 and v5; the Java producer makes it fatal, a
ProducerFencedException); with a generation or member id (v3+), a classic group's member
must be known (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) and in that generation (ILLEGAL_GENERATION),
a KIP-848 group's member known and at that epoch, or at an older one at which it already held
every partition committed (KIP-1251, ``consumer.offset_commit``; else STALE_MEMBER_EPOCH); an
unknown group with a generation is ILLEGAL_GENERATION; unknown topics or partitions get
UNKNOWN_TOPIC_OR_PARTITION; metadata above ``offset.metadata.max.bytes`` gets
OFFSET_METADATA_TOO_LARGE.

v5 (transaction version 2) adds the group's ``__consumer_offsets`` partition to the transaction
itself, as the client sends no AddOffsetsToTxn first. Below v5 that partition must be in the
Ongoing transaction already (AddOffsetsToTxn), as Kafka verifies it (KIP-890 part 1): else
INVALID_TXN_STATE (CONCURRENT_TRANSACTIONS while the transaction is being ended), before the group
is checked, and nothing is written.

v6 (KIP-1319) names topics by id: an id no topic has gets UNKNOWN_TOPIC_ID, and the answer
echoes the ids. As Kafka 4.4's OffsetMetadataManager, v6 also answers a generation for an unknown
group with GROUP_ID_NOT_FOUND and a stale member epoch with STALE_MEMBER_EPOCH; older versions
get ILLEGAL_GENERATION for both.

The offsets are written at once to the group's ``__consumer_offsets`` partition, in a
transactional batch of the producer's id and epoch, and committed (or dropped) by the
transaction's marker there, as in Kafka (``kemu.coordinator.group.offset_operations``); while the
transaction is open, OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for them.
A batch that cannot be written answers Kafka's error for the failed append
(COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) on every partition it held.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kemu.broker.authorization import (
    AclOperation,
    ResourceType,
    allowed_names,
    group_read,
    refused,
    txn_write,
)
from kemu.broker.handlers import handler
from kemu.broker.handlers._transactions import as_partition_writer
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.classic.group import DEAD, EMPTY, ClassicGroup
from kemu.coordinator.group.consumer.group import ConsumerGroup
from kemu.coordinator.group.consumer.offset_commit import validate_offset_commit
from kemu.coordinator.group.offset_manager import CommitPartition
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.streams.model import StreamsGroup
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.topic_ids import wire_topic_id
from kemu.protocol.views.txn_offset_commit import (
    TxnOffsetCommitRequestTopicView,
    TxnOffsetCommitRequestView,
)

API_KEY = 28
IMPLICIT_ADD_VERSION = 5  # KIP-890 part 2: no AddOffsetsToTxn before it
TOPIC_ID_VERSION = 6  # KIP-1319: topic ids, GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH


@handler(API_KEY, 0, 6)
def handle(ctx: RequestContext, request: TxnOffsetCommitRequestView) -> Any:
    denied = refused(
        ctx, request, txn_write(request.transactional_id), group_read(request.group_id)
    )
    if denied is not None:
        return denied
    member_id = getattr(request, "member_id", "")
    instance_id = getattr(request, "group_instance_id", None)
    generation = getattr(request, "generation_id", -1)
    transactions = transaction_coordinator(ctx.runtime)
    max_metadata = ctx.cluster.config.get_int("offset.metadata.max.bytes")
    by_id = ctx.version >= TOPIC_ID_VERSION
    names = [_topic_name(ctx, topic, by_id) for topic in request.topics]
    # What a consumer or streams group checks against its member's assignment epochs (KIP-1251).
    committed = [
        (name, entry.partition_index)
        for topic, name in zip(request.topics, names, strict=True)
        for entry in topic.partitions
        if name is not None and len(entry.committed_metadata or "") <= max_metadata
    ]
    error = transactions.check_producer(
        request.transactional_id, request.producer_id, request.producer_epoch
    )
    if error is ErrorCode.none and ctx.version < IMPLICIT_ADD_VERSION:
        error = transactions.verify_offsets(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.group_id,
        )
    if error is ErrorCode.none:
        error = _check_group(ctx, request.group_id, member_id, instance_id, generation, committed)
        error = _group_error_for_version(error, ctx.version)
    if error is ErrorCode.none and ctx.version >= IMPLICIT_ADD_VERSION:
        # Transaction version 2 clients send no AddOffsetsToTxn: the group's offsets partition
        # joins the transaction here, or EndTxn would find a transaction with nothing in it.
        error = transactions.add_offsets(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.group_id,
        ).error
    error = as_partition_writer(error)
    readable = allowed_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, (name or "" for name in names)
    )
    codes: list[list[ErrorCode]] = []
    accepted: dict[tuple[str, int], CommitPartition] = {}
    for topic, name in zip(request.topics, names, strict=True):
        topic_codes = []
        for entry in topic.partitions:
            if name is None:
                code = ErrorCode.unknown_topic_id
            elif name not in readable:
                code = ErrorCode.topic_authorization_failed
            else:
                code = error
            if code is ErrorCode.none and name is not None:
                metadata = entry.committed_metadata
                if ctx.cluster.partition(name, entry.partition_index) is None:
                    code = ErrorCode.unknown_topic_or_partition
                elif metadata is not None and len(metadata) > max_metadata:
                    code = ErrorCode.offset_metadata_too_large
                else:
                    accepted[(name, entry.partition_index)] = CommitPartition(
                        topic=name,
                        partition=entry.partition_index,
                        offset=entry.committed_offset,
                        leader_epoch=getattr(entry, "committed_leader_epoch", -1),
                        metadata=metadata,
                    )
            topic_codes.append(code)
        codes.append(topic_codes)
    if accepted:
        groups = group_coordinator(ctx.runtime)
        if groups.registry.get(request.group_id) is None:
            # Kafka's coordinator makes the simple group (generation -1: any other was refused
            # above), empty: ListGroups shows it while the transaction is open, and the
            # retention check keeps it until the transaction's end
            groups.transactional_commit_group(request.group_id)
        written = groups.commit_transactional_offsets(
            request.group_id, request.producer_id, request.producer_epoch, list(accepted.values())
        )
        if written is not ErrorCode.none:
            # the offsets' batch was not written: every partition it held answers why
            codes = [
                [written if code is ErrorCode.none else code for code in topic_codes]
                for topic_codes in codes
            ]
    answers = [
        ctx.make(
            "TxnOffsetCommitResponseTopic",
            name=getattr(topic, "name", ""),
            topic_id=getattr(topic, "topic_id", None),
            partitions=tuple(
                ctx.make(
                    "TxnOffsetCommitResponsePartition",
                    partition_index=entry.partition_index,
                    error_code=code,
                )
                for entry, code in zip(topic.partitions, topic_codes, strict=True)
            ),
        )
        for topic, topic_codes in zip(request.topics, codes, strict=True)
    ]
    return ctx.respond(topics=tuple(answers))


def _topic_name(
    ctx: RequestContext, topic: TxnOffsetCommitRequestTopicView, by_id: bool
) -> str | None:
    """The topic's name: given before v6, looked up by id from v6 (None: no such topic)."""
    if not by_id:
        return str(topic.name)
    found = ctx.cluster.topics_by_id.get(wire_topic_id(topic.topic_id))
    return None if found is None else found.name


def _group_error_for_version(error: ErrorCode, version: int) -> ErrorCode:
    """Before v6 the client knows neither GROUP_ID_NOT_FOUND nor STALE_MEMBER_EPOCH here
    (``TxnOffsetCommitRequest.supportsGroupIdNotFoundError``/``supportsStaleMemberEpochError``):
    Kafka answers ILLEGAL_GENERATION instead."""
    if version < TOPIC_ID_VERSION and error in (
        ErrorCode.group_id_not_found,
        ErrorCode.stale_member_epoch,
    ):
        return ErrorCode.illegal_generation
    return error


def _check_group(
    ctx: RequestContext,
    group_id: str,
    member_id: str,
    instance_id: str | None,
    generation: int,
    committed: Sequence[tuple[str, int]],
) -> ErrorCode:
    if not group_id:
        return ErrorCode.invalid_group_id
    group = group_coordinator(ctx.runtime).registry.get(group_id)
    identified = generation >= 0 or bool(member_id) or instance_id is not None
    if group is None:
        # v6 reports GROUP_ID_NOT_FOUND, older versions ILLEGAL_GENERATION (mapped above)
        return ErrorCode.group_id_not_found if generation >= 0 else ErrorCode.none
    if isinstance(group, ConsumerGroup):
        topics = ctx.cluster.topics
        checked = [
            (topics[name].topic_id, partition) if name in topics else None
            for name, partition in committed
        ]
        error = validate_offset_commit(
            group, member_id, generation, checked, transactional=True, instance_id=instance_id
        )
        return error or ErrorCode.none
    if isinstance(group, StreamsGroup):
        error = group.validate_offset_commit(
            member_id, generation, committed, transactional=True, instance_id=instance_id
        )
        return error or ErrorCode.none
    if isinstance(group, ClassicGroup):
        if group.state == DEAD:
            return ErrorCode.coordinator_not_available
        if (generation < 0 and group.state == EMPTY) or not identified:
            return ErrorCode.none
        error = group.validate_member(member_id, instance_id)
        if error is not None:
            return error
        if generation != group.generation_id:
            return ErrorCode.illegal_generation
    return ErrorCode.none
