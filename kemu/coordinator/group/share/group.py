"""Share groups (KIP-932): membership, epochs and the server-side target assignment. Sans-IO.

Theory of operation, as in Kafka's ``GroupMetadataManager`` share-group path:

* A member picks its own id (a UUID, KIP-1082) and joins with member epoch 0 and its subscribed
  topic names; it leaves with epoch -1; otherwise it echoes the epoch it was last given.
* A new group starts at epoch 1 (group and assignment), as Kafka 4.4's groups do. The group
  epoch goes up when a member joins or leaves, changes its subscription, when the subscribed
  topics change (created, deleted, more partitions), and when share partitions whose state was
  initialized since the last target assignment wait to be assigned.
* Only partitions whose share state is initialized are assigned. A heartbeat subscribing to
  partitions that are neither initialized nor being initialized asks the outside world to
  initialize them (``InitializePartitions``, after the answer, as Kafka's coordinator calls the
  persister once the heartbeat is written); when that is done (``partitions_initialized``) a
  later heartbeat bumps the epoch and assigns them. So a member's first heartbeat assigns
  nothing, as in Kafka (under ``--timing fast`` the service initializes before answering and
  runs that later heartbeat at once: ``GroupCoordinatorService.share_heartbeat``).
* When the group epoch is ahead of the assignment epoch the coordinator computes a new target
  assignment for everybody (``assignor``) and stamps it with the group epoch, unless the last
  one is younger than ``share.assignment.interval.ms`` (Kafka's
  ``canComputeNextTargetAssignment``): then members are brought to the last target and the
  first heartbeat after the interval computes the new one (no timer, as in Kafka). When the
  last member leaves, the empty target takes the new epoch at once and the assignment time is
  reset, so a new first member is assigned at once.
* A member is brought to the target on its own next heartbeat: its epoch becomes the assignment
  epoch and its partitions the target's. Share groups have no revocation handshake.
* A heartbeat that changes the member's subscription, or the group's metadata hash (a subscribed
  topic deleted, ...), reconciles the member even at the assignment epoch (Kafka's
  ``ShareGroupAssignmentBuilder`` told ``hasSubscriptionChanged``): its partitions become its
  part of the target filtered by the topics it subscribes to that exist, so a dropped or deleted
  topic's partitions go at once while the interval holds the next target back (and a topic named
  again gets the target's partitions back).
* A member that has not heartbeated for the session timeout is removed as if it had left.

Time comes in as ``now_ms``; what the outside world must do comes out as effects (a member left:
release its records; partitions became subscribed: initialize their share state).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from kemu.coordinator.group import assignor
from kemu.coordinator.group.assignor import TopicPartition
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.modern_group import (
    STABLE,
    TopicLookup,
    TopicMeta,
    can_compute_target,
    check_member_epoch,
    late_member_ids,
    member_deadlines,
    subscribed_hash,
    unknown_member,
)
from kemu.coordinator.group.registry import GroupRegistry
from kemu.protocol.errors import ErrorCode

JOIN_EPOCH = 0
# A new group's epoch and assignment epoch, as Kafka 4.4's ModernGroup and
# TargetAssignmentMetadata.INITIAL.
INITIAL_EPOCH = 1
LEAVE_EPOCH = -1
GROUP_TYPE = "share"
PROTOCOL_TYPE = "share"
ASSIGNOR_NAME = "simple"
# The default of Kafka's group.share.initialize.retry.interval.ms (an internal broker config;
# ``settings.py`` reads it): share partitions being initialized for longer are asked to be
# initialized again.
INITIALIZE_RETRY_INTERVAL_MS = 30_000


@dataclass(frozen=True, slots=True)
class MembershipSettings:
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_size: int
    # Kafka's default is 1000; 0 (a target with every new group epoch) is what ``kemu serve``
    # sets (docs/conformance.md).
    assignment_interval_ms: int = 0
    initialize_retry_interval_ms: int = INITIALIZE_RETRY_INTERVAL_MS


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareMember:
    member_id: str
    member_epoch: int = JOIN_EPOCH
    previous_member_epoch: int = LEAVE_EPOCH
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    assigned: frozenset[TopicPartition] = frozenset()
    session_deadline_ms: int = 0

    # What ``modern_group``'s checks read of a member (Kafka's ``ShareGroupMember extends
    # ModernGroupMember``): a share member has no static membership and no revocation (it is
    # given its target at once), so it is always stable.
    @property
    def state(self) -> str:
        return STABLE

    @property
    def instance_id(self) -> str | None:
        return None

    @property
    def revocation_deadline_ms(self) -> int | None:
        return None


@dataclass(eq=False)
class ShareGroup:
    group_id: str
    group_epoch: int = INITIAL_EPOCH
    assignment_epoch: int = INITIAL_EPOCH
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    # The subscribed topics as last seen; a difference bumps the group epoch.
    subscribed_metadata: dict[str, TopicMeta] = field(default_factory=dict)
    # Kafka's MetadataHash (KIP-1101) of the subscribed topics; another one bumps the epoch.
    metadata_hash: int = 0
    # Share partitions whose state was initialized for this group (offsets admin lists these);
    # only these are assigned.
    initialized: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    # Share partitions asked to be initialized and not done yet (kept across a restart, as
    # Kafka's InitializingTopics: a heartbeat asks for them again only once they have been
    # initializing for the retry interval).
    initializing: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    # When ``initializing`` was last asked for or loaded (Kafka stamps its InitializingTopics
    # as it replays their record); only memory holds it.
    initializing_since_ms: int = 0
    # Topics whose share state is being deleted (DeleteShareGroupOffsets, DeleteGroups): Kafka's
    # DeletingTopics, kept across a restart; a deletion that failed is retried by the next one.
    deleting: set[uuid.UUID] = field(default_factory=set)
    # When the last target was computed (0: never, or the group emptied), for the interval.
    assignment_timestamp_ms: int = 0

    group_type = GROUP_TYPE
    protocol_type = PROTOCOL_TYPE

    @property
    def state_name(self) -> str:
        return "Stable" if self.members else "Empty"

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topic_names(self) -> set[str]:
        return {name for member in self.members.values() for name in member.subscribed_topic_names}


@dataclass(frozen=True, slots=True)
class MemberRemoved:
    """The member is gone: its acquired records must be released."""

    group_id: str
    member_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class InitializePartitions:
    """These share partitions became subscribed: create their share state, with start offset
    -1 (``share.auto.offset.reset`` decides where the leader starts), but 0 for the partitions
    of ``from_start``: topics the group already had initialized or being initialized (Kafka's
    buildInitializeShareGroupStateRequest), whose new partitions (CreatePartitions) are read
    from their start so that records produced before the group noticed them are not missed."""

    group_id: str
    state_epoch: int
    partitions: tuple[TopicPartition, ...]
    from_start: frozenset[uuid.UUID] = frozenset()


Effect = MemberRemoved | InitializePartitions


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: frozenset[TopicPartition] | None
    effects: tuple[Effect, ...] = ()
    # Something durable changed (membership, epochs, assignment, member details): worth saving.
    changed: bool = True


SettingsProvider = Callable[[str], MembershipSettings]


class ShareGroupCoordinator:
    def __init__(self, registry: GroupRegistry, settings: SettingsProvider) -> None:
        self.registry = registry
        self.settings = settings

    # --- ShareGroupHeartbeat -------------------------------------------------------------------

    def heartbeat(
        self, request: ShareHeartbeat, topics: TopicLookup, now_ms: int
    ) -> ShareHeartbeatResult:
        validate_heartbeat(request)
        if request.member_epoch == LEAVE_EPOCH:
            return self._leave(request)
        joining = request.member_epoch == JOIN_EPOCH
        # Kafka's getOrMaybeCreateShareGroup says "Share group X not found."; every other
        # lookup goes through group(), whose text is "Group X not found.".
        group = self._share_group(request.group_id, create=joining, kind="Share group")
        settings = self.settings(request.group_id)
        if len(group.members) >= settings.max_size and request.member_id not in group.members:
            raise GroupError(
                ErrorCode.group_max_size_reached,
                f"The share group has reached its maximum capacity of {settings.max_size} members.",
            )
        member = group.members.get(request.member_id)
        if member is None:
            if not joining:
                raise unknown_member(request.member_id, group.group_id)
            member = ShareMember(request.member_id)
        # No revocation: a member never owns more than its assignment, so the previous epoch is
        # always accepted (the answer that carried the new one may have been lost).
        check_member_epoch("share", member, request.member_epoch, owns_no_more_than_assigned=True)
        epochs_before = (group.group_epoch, group.assignment_epoch)
        # Kafka's initializedAssignmentPending, on the group as it was before this heartbeat.
        pending = group.assignment_epoch >= group.group_epoch and _initialized_unassigned(group)

        subscribed = (
            frozenset(request.subscribed_topic_names)
            if request.subscribed_topic_names is not None
            else member.subscribed_topic_names
        )
        updated = replace(
            member,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            client_id=request.client_id,
            client_host=request.client_host,
            subscribed_topic_names=subscribed,
            session_deadline_ms=now_ms + settings.session_timeout_ms,
        )
        group.members[updated.member_id] = updated
        # Kafka's hasSubscriptionChanged, as its maybeReconcile reads it: the member's topics,
        # a pending initialized assignment or the metadata hash changed.
        bump = subscribed != member.subscribed_topic_names or pending
        group.subscribed_metadata = _subscribed_metadata(group.subscribed_topic_names(), topics)
        new_hash = subscribed_hash(group.subscribed_metadata)
        if new_hash != group.metadata_hash:
            group.metadata_hash = new_hash
            bump = True
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch and can_compute_target(
            group.assignment_timestamp_ms, settings.assignment_interval_ms, now_ms
        ):
            self._update_target(group, now_ms)
        updated = _reconcile(group, updated, subscription_changed=bump)
        group.members[updated.member_id] = updated
        if self.registry.get(group.group_id) is not group:
            self.registry.put(group)

        full_request = request.subscribed_topic_names is not None
        send_assignment = joining or full_request or updated.assigned != member.assigned
        effects: list[Effect] = []
        known = _topics_with_state(group)  # before this heartbeat marks more initializing
        initialize = _newly_subscribed(group, now_ms, settings.initialize_retry_interval_ms)
        if initialize:
            from_start = frozenset(topic_id for topic_id, _ in initialize if topic_id in known)
            effects.append(
                InitializePartitions(group.group_id, group.group_epoch, initialize, from_start)
            )
        changed = (
            bool(effects)
            or epochs_before != (group.group_epoch, group.assignment_epoch)
            or replace(updated, session_deadline_ms=0) != replace(member, session_deadline_ms=0)
        )
        return ShareHeartbeatResult(
            member_id=updated.member_id,
            member_epoch=updated.member_epoch,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            assignment=updated.assigned if send_assignment else None,
            effects=tuple(effects),
            changed=changed,
        )

    def _leave(self, request: ShareHeartbeat) -> ShareHeartbeatResult:
        group = self._share_group(request.group_id, create=False)
        if request.member_id not in group.members:
            raise unknown_member(request.member_id, group.group_id)
        effect = self._remove_member(group, request.member_id, "the member left the group")
        return ShareHeartbeatResult(request.member_id, LEAVE_EPOCH, 0, None, (effect,))

    # --- session expiry ------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        return min(
            (d for g in self._share_groups() for d in member_deadlines(g.members.values())),
            default=None,
        )

    def expire_sessions(self, now_ms: int) -> list[Effect]:
        return [e for group in self._share_groups() for e in self.expire_group(group, now_ms)]

    def expire_group(self, group: ShareGroup, now_ms: int) -> list[Effect]:
        """One group's timers: remove the members whose session ran out."""
        return [
            self._remove_member(group, member_id, "the member session expired")
            for member_id in late_member_ids(group.members.values(), now_ms)
        ]

    def remove_member(self, group_id: str, member_id: str, reason: str) -> MemberRemoved:
        """An operator removes a member (the control plane's kick): its next heartbeat gets
        UNKNOWN_MEMBER_ID and it rejoins, as after a session expiry."""
        group = self._share_group(group_id, create=False)
        if member_id not in group.members:
            raise unknown_member(member_id, group_id)
        return self._remove_member(group, member_id, reason)

    # --- lookups for the other share-group APIs ------------------------------------------------

    def describe(self, group_id: str) -> ShareGroup:
        return self._share_group(group_id, create=False)

    def empty_group_for_offsets(self, group_id: str, *, create: bool) -> ShareGroup:
        """The group whose offsets an admin alters or deletes: it must have no members."""
        group = self._share_group(group_id, create=create)
        if group.members:
            raise GroupError(ErrorCode.non_empty_group, "The group is not empty.")
        if self.registry.get(group_id) is not group:
            self.registry.put(group)
        return group

    # --- internals -----------------------------------------------------------------------------

    def _share_groups(self) -> Iterable[ShareGroup]:
        return [g for g in self.registry if isinstance(g, ShareGroup)]

    def _share_group(self, group_id: str, *, create: bool, kind: str = "Group") -> ShareGroup:
        found = self.registry.get(group_id)
        if found is None:
            if not create:
                raise GroupError(ErrorCode.group_id_not_found, f"{kind} {group_id} not found.")
            return ShareGroup(group_id)
        if not isinstance(found, ShareGroup):
            raise GroupError(
                ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
            )
        return found

    def _remove_member(self, group: ShareGroup, member_id: str, reason: str) -> MemberRemoved:
        del group.members[member_id]
        group.target.pop(member_id, None)
        group.subscribed_metadata = {
            name: meta
            for name, meta in group.subscribed_metadata.items()
            if name in group.subscribed_topic_names()
        }
        group.metadata_hash = subscribed_hash(group.subscribed_metadata)
        group.group_epoch += 1
        if not group.members:  # Kafka's fencing of the last member stamps the empty target
            group.assignment_epoch = group.group_epoch
            group.assignment_timestamp_ms = 0
        return MemberRemoved(group.group_id, member_id, reason)

    def initializing_again(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        topic_ids: Iterable[uuid.UUID] = (),
        *,
        now_ms: int,
    ) -> None:
        """AlterShareGroupOffsets is about to initialize the share state of ``partitions`` (of
        the group, empty) again: they are being initialized, those initialized staying so until
        ``partitions_initialized`` (Kafka's addInitializingTopicsRecords: its record, written
        before the persister is called, holds them initializing and still initialized, and no
        longer deleting). Each of ``topic_ids`` (the existing topics named) is initializing,
        with no partition when none named is in range, as Kafka lists it."""
        group = self._share_group(group_id, create=False)
        for topic_id in topic_ids:
            group.initializing.setdefault(topic_id, set())
        for topic_id, index in partitions:
            group.initializing.setdefault(topic_id, set()).add(index)
        group.deleting.difference_update(group.initializing)
        group.initializing_since_ms = now_ms

    def partitions_initialized(
        self, group_id: str, partitions: Iterable[TopicPartition], *, succeeded: bool = True
    ) -> bool:
        """The share state of ``partitions`` was initialized (or, ``succeeded`` false, could not
        be): they become assignable, from the group's next heartbeat on (Kafka's
        initializeShareGroupState / uninitializeShareGroupState). Whether the group changed."""
        group = self.registry.get(group_id)
        if not isinstance(group, ShareGroup):
            return False
        changed = False
        for topic_id, index in partitions:
            waiting = group.initializing.get(topic_id)
            if waiting is not None:
                waiting.discard(index)
                if not waiting:
                    del group.initializing[topic_id]
            if succeeded and index not in group.initialized.setdefault(topic_id, set()):
                group.initialized[topic_id].add(index)
                changed = True
        return changed

    def groups_with_state_of(self, topic_id: uuid.UUID) -> list[str]:
        """The share groups whose share state of the topic is initialized or being
        initialized."""
        return [
            group.group_id
            for group in self.registry
            if isinstance(group, ShareGroup)
            and (
                topic_id in group.initialized
                or topic_id in group.initializing
                or topic_id in group.deleting
            )
        ]

    def topic_deleted(self, group_id: str, topic_id: uuid.UUID) -> bool:
        """The topic was deleted (its share state with it): the group no longer counts its
        partitions as initialized or being initialized, as Kafka's coordinator rewrites the
        group's ShareGroupStatePartitionMetadata on topic deletion. Whether the group changed."""
        group = self.registry.get(group_id)
        if not isinstance(group, ShareGroup):
            return False
        dropped = group.initialized.pop(topic_id, None)
        waiting = group.initializing.pop(topic_id, None)
        was_deleting = topic_id in group.deleting
        group.deleting.discard(topic_id)
        return dropped is not None or waiting is not None or was_deleting

    def _update_target(self, group: ShareGroup, now_ms: int) -> None:
        metadata = group.subscribed_metadata
        subscriptions = {
            member.member_id: frozenset(
                metadata[name].topic_id
                for name in member.subscribed_topic_names
                if name in metadata
            )
            for member in group.members.values()
        }
        # Kafka's topicAssignablePartitionsMap: initialized partitions only.
        assignable = {
            meta.topic_id: frozenset(
                i for i in group.initialized.get(meta.topic_id, ()) if i < meta.partitions
            )
            for meta in metadata.values()
        }
        group.target = assignor.assign(subscriptions, assignable, group.target)
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp_ms = now_ms


def validate_heartbeat(request: ShareHeartbeat) -> None:
    """Kafka's ``throwIfShareGroupHeartbeatRequestIsInvalid``."""
    if not request.member_id.strip():
        raise GroupError(ErrorCode.invalid_request, "MemberId can't be empty.")
    if not request.group_id.strip():
        raise GroupError(ErrorCode.invalid_request, "GroupId can't be empty.")
    if request.rack_id is not None and not request.rack_id.strip():
        raise GroupError(ErrorCode.invalid_request, "RackId can't be empty.")
    if request.member_epoch == JOIN_EPOCH:
        if not request.subscribed_topic_names:
            raise GroupError(
                ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request."
            )
    elif request.member_epoch < LEAVE_EPOCH:
        raise GroupError(ErrorCode.invalid_request, "MemberEpoch is invalid.")


def _subscribed_metadata(names: set[str], topics: TopicLookup) -> dict[str, TopicMeta]:
    metadata: dict[str, TopicMeta] = {}
    for name in sorted(names):
        meta = topics(name)
        if meta is not None:
            metadata[name] = meta
    return metadata


def _reconcile(
    group: ShareGroup, member: ShareMember, *, subscription_changed: bool
) -> ShareMember:
    """Kafka's ``ShareGroupAssignmentBuilder``: a member behind the assignment epoch moves to it;
    one at it whose subscription changed is given its target again; in both cases only the
    partitions of the topics it subscribes to that exist."""
    if member.member_epoch != group.assignment_epoch:
        return replace(
            member,
            previous_member_epoch=member.member_epoch,
            member_epoch=group.assignment_epoch,
            assigned=_subscribed_target(group, member),
        )
    if subscription_changed:
        return replace(member, assigned=_subscribed_target(group, member))
    return member


def _subscribed_target(group: ShareGroup, member: ShareMember) -> frozenset[TopicPartition]:
    """The member's part of the target, less the topics it does not subscribe to or that no
    longer exist (Kafka's ``filterAssignedPartitions``, by the ids the metadata has now)."""
    metadata = group.subscribed_metadata
    topic_ids = {
        metadata[name].topic_id for name in member.subscribed_topic_names if name in metadata
    }
    target = group.target.get(member.member_id, frozenset())
    return frozenset(p for p in target if p[0] in topic_ids)


def _newly_subscribed(
    group: ShareGroup, now_ms: int, retry_interval_ms: int
) -> tuple[TopicPartition, ...]:
    """Subscribed partitions neither initialized nor being initialized (for less than the
    retry interval), now marked as being initialized (Kafka's subscribedTopicsChangeMap); a
    topic being deleted whose partitions are is no longer deleting (Kafka's
    addInitializingTopicsRecords)."""
    in_flight = now_ms - group.initializing_since_ms < retry_interval_ms
    fresh: list[TopicPartition] = []
    for meta in group.subscribed_metadata.values():
        done = group.initialized.get(meta.topic_id, set())
        waiting = group.initializing.get(meta.topic_id, set())
        asked = waiting if in_flight else set()
        added = [i for i in range(meta.partitions) if i not in done and i not in asked]
        if added:
            group.initializing[meta.topic_id] = waiting | set(added)
            group.deleting.discard(meta.topic_id)
            fresh += [(meta.topic_id, index) for index in added]
    if fresh:
        group.initializing_since_ms = now_ms
    return tuple(fresh)


def _topics_with_state(group: ShareGroup) -> set[uuid.UUID]:
    """The topics the group's ShareGroupStatePartitionMetadata lists initialized or
    initializing."""
    return {t for t, done in group.initialized.items() if done} | set(group.initializing)


def _initialized_unassigned(group: ShareGroup) -> bool:
    """Kafka's initializedAssignmentPending: a subscribed topic has initialized partitions
    that the target assignment does not hold exactly."""
    if not group.members or not group.initialized:
        return False
    assigned: dict[uuid.UUID, set[int]] = {}
    for partitions in group.target.values():
        for topic_id, index in partitions:
            assigned.setdefault(topic_id, set()).add(index)
    subscribed = group.subscribed_topic_names()
    for name, meta in group.subscribed_metadata.items():
        initialized = group.initialized.get(meta.topic_id)
        if name in subscribed and initialized and assigned.get(meta.topic_id, set()) != initialized:
            return True
    return False
