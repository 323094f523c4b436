"""What the KIP-848 consumer, KIP-932 share and KIP-1071 streams coordinators share (Kafka's
``modern`` group package and the parts of ``GroupMetadataManager`` its three heartbeats call
alike). Sans-IO: the time is an argument.

* ``can_compute_target``: Kafka's ``canComputeNextTargetAssignment``, the assignment interval
  (``consumer.``/``share.``/``streams.assignment.interval.ms``) that lets a group compute at most
  one target assignment per interval.
* Static membership (``group.instance.id``): who holds an instance id, and the errors a join or
  a heartbeat naming someone else's gets.
* The group state Describe shows.
* Member-epoch fencing: a heartbeat's epoch must be the member's, or the one before when the
  answer carrying the new one was lost and the member owns no more than its assignment; an
  OffsetFetch's must be the member's (``check_offset_fetch``); a member's OffsetCommit outside
  a transaction must be v9 or later, and at the member's epoch or, per partition, an older one
  (``check_offset_commit``).
* Sessions and revocation deadlines: when a member is late and is removed.
* ``TopicMeta``/``TopicLookup``: what the coordinators see of a subscribed topic, and the
  group's metadata hash over them (``subscribed_hash``, KIP-1101).
* ``image_records``: the records that bring what the log holds of a consumer or share group up
  to date, in Kafka's order (a streams group's image is keyed by record, ``streams.records``).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from kemu.coordinator.group.assignor import TopicPartition
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.metadata_hash import group_hash, topic_hash
from kemu.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class TopicMeta:
    """A subscribed topic as the coordinators see it: its id, partition count and Kafka's topic
    hash (KIP-1101, ``metadata_hash.topic_hash``: id, name, partitions and their racks)."""

    topic_id: uuid.UUID
    partitions: int
    metadata_hash: int | None = None  # None: the topic's replicas have no rack


def subscribed_hash(metadata: Mapping[str, TopicMeta]) -> int:
    """The group's metadata hash over its subscribed topics that exist (Kafka's
    ``ModernGroup.computeMetadataHash``): a new one means a new group epoch."""
    return group_hash({name: topic_hash_of(name, meta) for name, meta in metadata.items()})


def topic_hash_of(name: str, meta: TopicMeta) -> int:
    """Kafka's hash of the topic ``name`` (``metadata_hash.topic_hash``)."""
    if meta.metadata_hash is not None:
        return meta.metadata_hash
    return _rackless_hash(meta.topic_id, name, meta.partitions)


@functools.lru_cache(maxsize=4096)
def _rackless_hash(topic_id: uuid.UUID, name: str, partitions: int) -> int:
    return topic_hash(topic_id, name, [()] * partitions)


TopicLookup = Callable[[str], TopicMeta | None]

# --- the assignment interval -----------------------------------------------------------------


def can_compute_target(assignment_timestamp_ms: int, interval_ms: int, now_ms: int) -> bool:
    """Kafka's ``canComputeNextTargetAssignment``: never computed (0: a new group, or one whose
    last member left), no interval, or the interval has passed since the last target."""
    return (
        assignment_timestamp_ms == 0
        or interval_ms == 0
        or now_ms >= assignment_timestamp_ms + interval_ms
    )


# --- members ---------------------------------------------------------------------------------


class ModernMember(Protocol):
    """A consumer, share or streams group member, as these checks read it."""

    @property
    def member_id(self) -> str: ...
    @property
    def member_epoch(self) -> int: ...
    @property
    def previous_member_epoch(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def instance_id(self) -> str | None: ...
    @property
    def session_deadline_ms(self) -> int: ...
    @property
    def revocation_deadline_ms(self) -> int | None: ...


Member = TypeVar("Member", bound=ModernMember)
STABLE = "STABLE"  # a member's state once it holds its whole target


def group_state(group_epoch: int, assignment_epoch: int, members: Collection[ModernMember]) -> str:
    """The state ConsumerGroupDescribe and StreamsGroupDescribe show (Kafka's
    ``ConsumerGroup``/``StreamsGroup`` state): Empty; Assigning while the group epoch is ahead
    of the target's; Reconciling until every member is at the target's epoch and stable."""
    if not members:
        return "Empty"
    if group_epoch > assignment_epoch:
        return "Assigning"
    if any(m.member_epoch != assignment_epoch or m.state != STABLE for m in members):
        return "Reconciling"
    return "Stable"


def unknown_member(member_id: str, group_id: str) -> GroupError:
    """A heartbeat from a member the group does not know."""
    return GroupError(
        ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group_id}."
    )


def static_holder(members: Iterable[Member], instance_id: str | None) -> Member | None:
    """The member holding ``instance_id``, if any."""
    return next((m for m in members if m.instance_id == instance_id), None)


def unreleased_instance_id(member_id: str, instance_id: str, holder_id: str) -> GroupError:
    """A join with an instance id another member still holds."""
    return GroupError(
        ErrorCode.unreleased_instance_id,
        f"Static member {member_id} with instance id {instance_id} cannot join the group "
        f"because the instance id is owned by {holder_id} member.",
    )


def check_static_heartbeat(holder: ModernMember | None, member_id: str, instance_id: str) -> None:
    """A heartbeat (not a join) naming an instance id must come from its holder."""
    if holder is None:
        raise GroupError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
    if holder.member_id != member_id:
        raise GroupError(
            ErrorCode.fenced_instance_id,
            f"Static member {member_id} with instance id {instance_id} was fenced by member "
            f"{holder.member_id}.",
        )


def check_member_epoch(
    kind: str, member: ModernMember, received: int, owns_no_more_than_assigned: bool
) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid`` and its share and streams twins
    (``kind``: "consumer", "share" or "streams"): FENCED_MEMBER_EPOCH for an epoch ahead of the
    member's, or behind it unless it is the previous one and the member owns no more than its
    assignment."""
    if received > member.member_epoch:
        raise _fenced(kind, "greater", received, member.member_epoch)
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not owns_no_more_than_assigned
    ):
        raise _fenced(kind, "smaller", received, member.member_epoch)


FIRST_COMMIT_VERSION_FOR_MEMBERS = 9  # OffsetCommit v9 names a member epoch (KIP-848)


NO_EPOCH = -1


def check_offset_commit(
    members: Mapping[str, Member],
    member_id: str,
    member_epoch: int,
    *,
    transactional: bool,
    instance_id: str | None,
    api_version: int | None,
) -> Member | ErrorCode | None:
    """What Kafka 4.4's ``validateOffsetCommit`` of consumer and streams groups (KIP-1251)
    decides before looking at the committed partitions: None when the commit is taken, the
    error when it is refused, the member when ``member_epoch`` is older than the member's (then
    each committed partition must have been assigned to it at that epoch or before).

    Taken: an admin or an ``assign()``-only consumer (a negative epoch, no members); a
    transactional commit naming no member, no instance and epoch -1; a member at its epoch.
    Refused: an unknown member (UNKNOWN_MEMBER_ID); a member's OffsetCommit below v9 outside a
    transaction (UNSUPPORTED_VERSION: the older versions carry a classic generation, not a
    member epoch; None ``api_version``: not checked; Kafka exempts a consumer group's
    classic-protocol members, which kemu's groups do not have); a newer epoch
    (STALE_MEMBER_EPOCH)."""
    if member_epoch < 0 and not members:
        return None
    if transactional and member_epoch == NO_EPOCH and member_id == "" and instance_id is None:
        return None
    member = members.get(member_id)
    if member is None:
        return ErrorCode.unknown_member_id
    if (
        not transactional
        and api_version is not None
        and (api_version < FIRST_COMMIT_VERSION_FOR_MEMBERS)
    ):
        return ErrorCode.unsupported_version
    if member_epoch == member.member_epoch:
        return None
    if member_epoch > member.member_epoch:
        return ErrorCode.stale_member_epoch
    return member


def check_offset_fetch(
    members: Mapping[str, ModernMember], member_id: str | None, member_epoch: int
) -> ErrorCode | None:
    """Kafka's ``validateOffsetFetch`` of consumer and streams groups: anyone without a member
    epoch (an admin, a classic client) may read; a member must name its current epoch."""
    if member_epoch < 0:
        return None
    member = members.get(member_id or "")
    if member is None:
        return ErrorCode.unknown_member_id
    if member_epoch != member.member_epoch:
        return ErrorCode.stale_member_epoch
    return None


def _fenced(kind: str, relation: str, received: int, known: int) -> GroupError:
    return GroupError(
        ErrorCode.fenced_member_epoch,
        f"The {kind} group member has a {relation} member epoch ({received}) than the one known "
        f"by the group coordinator ({known}). The member must abandon all its partitions and "
        "rejoin.",
    )


# --- sessions and revocation deadlines ---------------------------------------------------------


def member_deadlines(members: Iterable[ModernMember]) -> list[int]:
    """Every session and revocation deadline of ``members``."""
    return [
        deadline
        for member in members
        for deadline in (member.session_deadline_ms, member.revocation_deadline_ms)
        if deadline is not None
    ]


def late_member_ids(members: Iterable[ModernMember], now_ms: int) -> list[str]:
    """The members whose session ran out, or who did not revoke within their rebalance
    timeout, by ``now_ms``: the coordinator removes them."""
    return [
        member.member_id
        for member in members
        if member.session_deadline_ms <= now_ms
        or (member.revocation_deadline_ms is not None and member.revocation_deadline_ms <= now_ms)
    ]


# --- what the log holds of a group --------------------------------------------------------------

Key = TypeVar("Key")
Value = TypeVar("Value")
Value_co = TypeVar("Value_co", covariant=True)
Partitions = frozenset[TopicPartition]


class ModernImage(Protocol[Value_co]):
    """What the log holds of a consumer or share group: the group's epoch and target epoch, and
    per member its metadata, target and current assignment (``has_metadata``: the group's
    records are there)."""

    @property
    def epoch(self) -> int: ...
    @property
    def metadata_hash(self) -> int: ...
    @property
    def assignment_epoch(self) -> int: ...
    @property
    def assignment_timestamp_ms(self) -> int: ...
    @property
    def members(self) -> Mapping[str, Value_co]: ...
    @property
    def targets(self) -> Mapping[str, Partitions]: ...
    @property
    def current(self) -> Mapping[str, Value_co]: ...
    @property
    def has_metadata(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class ImageRecordTypes(Generic[Key, Value]):
    """How a kind of group writes its image: its record key (type, group, member), its record
    types, and the values of its group epoch, target epoch and member target records."""

    key: Callable[[int, str, str | None], Key]
    group_metadata: int
    member_metadata: int
    target_metadata: int
    target_member: int
    current_assignment: int
    epoch_value: Callable[[int, int], Value]
    target_epoch_value: Callable[[int, int], Value]
    target_member_value: Callable[[Partitions], Value]


def image_records(
    types: ImageRecordTypes[Key, Value],
    group_id: str,
    old: ModernImage[Value],
    new: ModernImage[Value] | None,
    *,
    group_tombstones: Sequence[tuple[Key, Value | None]] = (),
    before_epoch: Sequence[tuple[Key, Value | None]] = (),
) -> list[tuple[Key, Value | None]]:
    """The records that turn what the log holds (``old``) into ``new`` (None: no group), only
    those whose value changed, in Kafka's order. A type adds its own records (a consumer
    group's regexes): ``group_tombstones`` go before the group's own tombstones,
    ``before_epoch`` after the members' records, before the epoch."""
    records: list[tuple[Key, Value | None]] = []

    def key(record_type: int, member: str | None = None) -> Key:
        return types.key(record_type, group_id, member)

    # Departures first, in Kafka's order: current assignment, target, member.
    for record_type, before, after in (
        (types.current_assignment, old.current, new.current if new else {}),
        (types.target_member, old.targets, new.targets if new else {}),
        (types.member_metadata, old.members, new.members if new else {}),
    ):
        records += [(key(record_type, member), None) for member in sorted(set(before) - set(after))]
    if new is None:
        if old.has_metadata:
            records += group_tombstones
            records.append((key(types.target_metadata), None))
            records.append((key(types.group_metadata), None))
        return records
    for member, value in sorted(new.members.items()):
        if old.members.get(member) != value:
            records.append((key(types.member_metadata, member), value))
    records += before_epoch
    if not old.has_metadata or (old.epoch, old.metadata_hash) != (new.epoch, new.metadata_hash):
        records.append((key(types.group_metadata), types.epoch_value(new.epoch, new.metadata_hash)))
    for member, partitions in sorted(new.targets.items()):
        if old.targets.get(member) != partitions:
            value = types.target_member_value(partitions)
            records.append((key(types.target_member, member), value))
    target_metadata = (new.assignment_epoch, new.assignment_timestamp_ms)
    if not old.has_metadata or (old.assignment_epoch, old.assignment_timestamp_ms) != (
        target_metadata
    ):
        records.append((key(types.target_metadata), types.target_epoch_value(*target_metadata)))
    for member, current in sorted(new.current.items()):
        if old.current.get(member) != current:
            records.append((key(types.current_assignment, member), current))
    return records
