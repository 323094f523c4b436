"""What of a KIP-848 consumer group is written to ``__consumer_offsets``, and reading it back.

A group's durable state is an ``Image``: its epoch, its target assignment (epoch and per
member), per member its metadata and current assignment (epochs, state, partitions and the
epoch each was assigned at), and what each of its regexes matched (``regexes``). After each
change the coordinator writes only the records whose value differs from what the log already
holds (``diff``), tombstones for members that left and regexes nobody subscribes with any more,
and tombstones for everything when the group goes away. Replaying the records rebuilds the
images (``ImageBuilder``) and from them the groups, each member with a fresh session.

A group the log does not hold yet starts, as Kafka 4.4's does, at epoch 1 with a target of
epoch 1: its epoch and target-metadata records are written once they move from there (a member
joining with only a regex, or no topic, writes its member and assignment records alone), and any
record of the group brings it back at load.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from kemu.coordinator.group.consumer.group import (
    STABLE,
    UNRELEASED,
    UNREVOKED,
    ConsumerGroup,
    ConsumerMember,
)
from kemu.coordinator.group.consumer.records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    SUBSCRIPTION_METADATA,
    TARGET_MEMBER,
    TARGET_METADATA,
    ConsumerRecordKey,
    ConsumerRecordValue,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    Partitions,
    TargetEpochValue,
    TargetMemberValue,
)
from kemu.coordinator.group.consumer.regexes import REGULAR_EXPRESSION, ResolvedRegex
from kemu.coordinator.group.modern_group import ImageRecordTypes, image_records

Record = tuple[ConsumerRecordKey, ConsumerRecordValue | None]
STATES = (STABLE, UNREVOKED, UNRELEASED)
INITIAL_EPOCH = 1  # a new group's epoch and target epoch (Kafka 4.4's ModernGroup)


@dataclass
class Image:
    epoch: int = INITIAL_EPOCH
    metadata_hash: int = 0
    assignment_epoch: int = INITIAL_EPOCH
    assignment_timestamp_ms: int = 0
    members: dict[str, MemberMetadataValue] = field(default_factory=dict)
    targets: dict[str, Partitions] = field(default_factory=dict)
    current: dict[str, CurrentAssignmentValue] = field(default_factory=dict)
    regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    # whether the log holds the group (any of its records not a tombstone since its deletion)
    has_metadata: bool = False


def image_of(group: ConsumerGroup) -> Image:
    return Image(
        epoch=group.group_epoch,
        metadata_hash=group.metadata_hash,
        assignment_epoch=group.assignment_epoch,
        assignment_timestamp_ms=group.assignment_timestamp_ms,
        members={m.member_id: _member_value(m) for m in group.members.values()},
        targets=dict(group.target),
        current={
            m.member_id: CurrentAssignmentValue(
                m.member_epoch,
                m.previous_member_epoch,
                m.state,
                m.assigned,
                m.pending_revocation,
                m.epochs_of(m.assigned | m.pending_revocation),
            )
            for m in group.members.values()
        },
        regexes=dict(group.resolved_regexes),
        has_metadata=True,
    )


def _member_value(member: ConsumerMember) -> MemberMetadataValue:
    return MemberMetadataValue(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
        subscribed_topic_regex=member.subscribed_topic_regex,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor,
    )


IMAGE_RECORDS: ImageRecordTypes[ConsumerRecordKey, ConsumerRecordValue] = ImageRecordTypes(
    ConsumerRecordKey,
    group_metadata=GROUP_METADATA,
    member_metadata=MEMBER_METADATA,
    target_metadata=TARGET_METADATA,
    target_member=TARGET_MEMBER,
    current_assignment=CURRENT_ASSIGNMENT,
    epoch_value=GroupEpochValue,
    target_epoch_value=TargetEpochValue,
    target_member_value=TargetMemberValue,
)


def diff(group_id: str, old: Image | None, new: Image | None) -> list[Record]:
    """The records that turn what the log holds (``old``) into ``new`` (None: no group), in
    Kafka's order: a regex's records after the members' (a heartbeat's tombstone of the regex
    its member dropped, a resolution's records, a departure's tombstones), before the epoch."""
    if new is None:
        return _group_tombstones(group_id, old) if old is not None and old.has_metadata else []
    if old is None or not old.has_metadata:
        # a group the log does not hold is at Kafka's initial epochs, which are not written
        old = replace(old or Image(), has_metadata=True)
    return image_records(
        IMAGE_RECORDS,
        group_id,
        old,
        new,
        before_epoch=_regex_records(group_id, old.regexes, new.regexes),
    )


def _group_tombstones(group_id: str, old: Image) -> list[Record]:
    """The tombstones of a group going away, in the order of Kafka's
    ``ConsumerGroup.createGroupTombstoneRecords``: each member's current assignment, then each
    one's target, the target metadata, each member's metadata, each regex, the subscription
    metadata (type 4: Kafka 4.4 still writes its tombstone) and last the group epoch."""

    def per_member(record_type: int, members: Iterable[str]) -> list[Record]:
        return [(ConsumerRecordKey(record_type, group_id, m), None) for m in sorted(members)]

    return [
        *per_member(CURRENT_ASSIGNMENT, old.current),
        *per_member(TARGET_MEMBER, old.targets),
        (ConsumerRecordKey(TARGET_METADATA, group_id), None),
        *per_member(MEMBER_METADATA, old.members),
        *[(_regex_key(group_id, regex), None) for regex in sorted(old.regexes)],
        (ConsumerRecordKey(SUBSCRIPTION_METADATA, group_id), None),
        (ConsumerRecordKey(GROUP_METADATA, group_id), None),
    ]


def _regex_key(group_id: str, regex: str) -> ConsumerRecordKey:
    return ConsumerRecordKey(REGULAR_EXPRESSION, group_id, regex)


def _regex_records(
    group_id: str, old: dict[str, ResolvedRegex], new: dict[str, ResolvedRegex]
) -> list[Record]:
    records: list[Record] = [
        (_regex_key(group_id, regex), None) for regex in sorted(set(old) - set(new))
    ]
    for regex, resolved in sorted(new.items()):
        if old.get(regex) != resolved:
            records.append((_regex_key(group_id, regex), resolved))
    return records


class ImageBuilder:
    """Images rebuilt from replayed records, as Kafka's replay applies them."""

    def __init__(self) -> None:
        self.images: dict[str, Image] = {}

    def apply(self, key: ConsumerRecordKey, value: ConsumerRecordValue | None) -> None:
        if key.record_type == SUBSCRIPTION_METADATA:
            return  # only a deletion's tombstone, before the group epoch's
        image = self.images.setdefault(key.group, Image())
        member = key.member or ""
        if value is not None:
            image.has_metadata = True  # as Kafka's replay creates the group of any record
        if key.record_type == GROUP_METADATA:
            if value is None:
                self.images.pop(key.group, None)
            elif isinstance(value, GroupEpochValue):
                image.epoch = value.epoch
                image.metadata_hash = value.metadata_hash
        elif key.record_type == TARGET_METADATA:
            if isinstance(value, TargetEpochValue):
                image.assignment_epoch = value.assignment_epoch
                image.assignment_timestamp_ms = value.assignment_timestamp_ms
        elif key.record_type == MEMBER_METADATA:
            _set(image.members, member, value, MemberMetadataValue)
        elif key.record_type == TARGET_MEMBER:
            if value is None:
                image.targets.pop(member, None)
            elif isinstance(value, TargetMemberValue):
                image.targets[member] = value.partitions
        elif key.record_type == CURRENT_ASSIGNMENT:
            _set(image.current, member, value, CurrentAssignmentValue)
        elif key.record_type == REGULAR_EXPRESSION:
            _set(image.regexes, member, value, ResolvedRegex)  # ``member``: the regex

    def groups(self, now_ms: int, session_timeout_ms: int) -> list[tuple[ConsumerGroup, Image]]:
        """The groups, each member with a fresh session (and, if it was revoking, a fresh
        rebalance timeout)."""
        return [
            (group_from_image(group_id, image, now_ms, session_timeout_ms), image)
            for group_id, image in self.images.items()
            if image.has_metadata
        ]


def group_from_image(
    group_id: str, image: Image, now_ms: int, session_timeout_ms: int
) -> ConsumerGroup:
    """The group the records replayed into ``image`` hold, each member with a fresh session
    (and, if it was revoking, a fresh rebalance timeout): at load, and after each write."""
    group = ConsumerGroup(
        group_id,
        group_epoch=image.epoch,
        metadata_hash=image.metadata_hash,
        assignment_epoch=image.assignment_epoch,
        assignment_timestamp_ms=image.assignment_timestamp_ms,
        resolved_regexes=dict(image.regexes),
    )
    for member_id, meta in image.members.items():
        current = image.current.get(member_id)
        member = ConsumerMember(
            member_id,
            instance_id=meta.instance_id,
            rack_id=meta.rack_id,
            client_id=meta.client_id,
            client_host=meta.client_host,
            rebalance_timeout_ms=meta.rebalance_timeout_ms,
            subscribed_topic_names=frozenset(meta.subscribed_topic_names),
            subscribed_topic_regex=meta.subscribed_topic_regex,
            server_assignor=meta.server_assignor,
            session_deadline_ms=now_ms + session_timeout_ms,
        )
        if current is not None:
            member = _with_assignment(member, current, now_ms)
        group.members[member_id] = member
    group.target = {m: p for m, p in image.targets.items() if m in group.members}
    return group


def _with_assignment(
    member: ConsumerMember, current: CurrentAssignmentValue, now_ms: int
) -> ConsumerMember:
    revoking = current.state == UNREVOKED
    # A partition the record gives no assignment epoch gets the member epoch (not below 0), as
    # Kafka's Utils.assignmentFromTopicPartitions reads it.
    default_epoch = max(current.member_epoch, 0)
    held = current.assigned | current.pending_revocation
    return replace(
        member,
        member_epoch=current.member_epoch,
        previous_member_epoch=current.previous_member_epoch,
        state=current.state if current.state in STATES else STABLE,
        assigned=current.assigned,
        pending_revocation=current.pending_revocation,
        assignment_epochs={p: current.assignment_epochs.get(p, default_epoch) for p in held},
        revocation_deadline_ms=now_ms + member.rebalance_timeout_ms if revoking else None,
    )


V = TypeVar("V")


def _set(table: dict[str, V], member: str, value: object, kind: type[V]) -> None:
    if value is None:
        table.pop(member, None)
    elif isinstance(value, kind):
        table[member] = value
