"""KIP-848 consumer groups (ConsumerGroupHeartbeat): epochs, a server-side target assignment and
the revocation handshake. Sans-IO.

Theory of operation, as in Kafka's ``GroupMetadataManager`` consumer path and its
``CurrentAssignmentBuilder``:

* A member joins with epoch 0 (v1: with the UUID it picked as member id), its subscription, its
  rebalance timeout and its owned partitions; leaves with -1 (-2: a static member's temporary
  leave); otherwise it echoes its epoch (or the one before, if the answer carrying the new one was
  lost and it owns no more than its assignment: else FENCED_MEMBER_EPOCH). A static member's
  instance id (``group.instance.id``) belongs to one member: another joining with it gets
  UNRELEASED_INSTANCE_ID while the holder is active, a heartbeat for it from another member id
  FENCED_INSTANCE_ID, and one for an instance id the group does not know UNKNOWN_MEMBER_ID. A
  static member leaving with -2 stays, with its assignment, until its session runs out or a
  join with its instance id replaces it, without a rebalance (``consumer.static``).
* A new group starts at epoch 1 (group and assignment), as Kafka 4.4's groups do, so its first
  member gets epoch 2. The group epoch goes up when membership, a subscription, the
  subscribed topics or the group's preferred server assignor (the one most members name,
  ``consumer.preferred_assignor``) change; the next heartbeat then recomputes the target
  assignment with that assignor (``consumer.assignor``) and stamps it with it, unless the
  last one is younger than ``consumer.assignment.interval.ms`` (Kafka's
  ``canComputeNextTargetAssignment``): then members reconcile towards the last target (a new
  member gets its epoch and nothing) and the first heartbeat after the interval computes it;
  Kafka has no timer for it either. A new group's first target is never delayed. When the
  last member leaves, the empty target takes the new epoch at once and the assignment time is
  reset.
* A member moves towards its target one heartbeat at a time: partitions it must give up are
  first only taken away (it keeps its epoch, state UNREVOKED_PARTITIONS) until a heartbeat shows
  it no longer owns them; then it gets the new epoch and the target partitions that nobody else
  still owns (UNRELEASED_PARTITIONS until those are released too). So no partition is ever owned
  by two members at once (``consumer.reconciliation``). A heartbeat that drops a topic from the
  member's subscription takes its partitions away with its answer, even while the assignment
  interval holds the next target back.
* Regex subscriptions are resolved asynchronously, as in Kafka's ``maybeUpdateRegularExpressions``:
  a heartbeat bringing a regex the group has not resolved does not bump the group epoch (its
  explicit topics are assigned at once) but queues a resolution (``pending_regexes``) that the
  owner runs after answering (``resolve_regexes``); the resolution bumps the epoch if what the
  regexes match changed, and the regex's topics come with a later heartbeat. Resolutions are
  redone, at most every 10 s, when topics were created since, and every 10 minutes. What each
  regex matched is written (``consumer.regexes``), and dropped with its last subscriber.
* A member that does not heartbeat for ``group.consumer.session.timeout.ms``, or does not revoke
  within its rebalance timeout, is removed.
* Each partition a member holds keeps the epoch it was assigned at (KIP-1251), against which
  offset commits at an older member epoch are checked (``consumer.offset_commit``).

The coordinator writes groups to ``__consumer_offsets`` as Kafka does (``consumer.persistence``),
so members keep their ids, epochs and assignments across a restart. A heartbeat (epoch > 0) or a
leave naming a group the coordinator does not hold gets GROUP_ID_NOT_FOUND, as on Kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from kemu.cluster import seeded
from kemu.coordinator.group.assignor import TopicPartition
from kemu.coordinator.group.classic.group import ClassicGroup
from kemu.coordinator.group.consumer import assignor as consumer_assignor
from kemu.coordinator.group.consumer.preferred_assignor import preferred, preferred_with
from kemu.coordinator.group.consumer.reconciliation import STABLE as STABLE
from kemu.coordinator.group.consumer.reconciliation import UNRELEASED as UNRELEASED
from kemu.coordinator.group.consumer.reconciliation import UNREVOKED as UNREVOKED
from kemu.coordinator.group.consumer.reconciliation import reconcile
from kemu.coordinator.group.consumer.regexes import ResolvedRegex, last_resolved_ms, resolve
from kemu.coordinator.group.consumer.static import STATIC_LEAVE_EPOCH as STATIC_LEAVE_EPOCH
from kemu.coordinator.group.consumer.static import (
    instance_id_held,
    leaving_static_member,
    left_for_now,
    replace_static_member,
    static_member_to_replace,
)
from kemu.coordinator.group.consumer.topic_regex import InvalidTopicRegex
from kemu.coordinator.group.consumer.topic_regex import check as check_topic_regex
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.modern_group import (
    TopicLookup,
    TopicMeta,
    can_compute_target,
    check_member_epoch,
    check_offset_fetch,
    group_state,
    late_member_ids,
    member_deadlines,
    subscribed_hash,
    unknown_member,
)
from kemu.coordinator.group.registry import GroupRegistry
from kemu.protocol.errors import ErrorCode

GROUP_TYPE = "consumer"
PROTOCOL_TYPE = "consumer"
JOIN_EPOCH, LEAVE_EPOCH = 0, -1
NO_CHANGE, REGEX_UPDATED, REGEX_UPDATED_AND_RESOLVED = "NO_CHANGE", "UPDATED", "RESOLVED"

Partitions = frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1
    # Kafka's default is 1000; 0 here (a target with every new group epoch) keeps the unit
    # tests' steps short, and is what ``kemu serve`` sets (docs/conformance.md).
    assignment_interval_ms: int = 0
    # Kafka's GroupMetadataManager.REGEX_BATCH_REFRESH_MIN_INTERVAL_MS (no regex resolution
    # sooner after the last; kemu.group.consumer.regex.refresh.min.interval.ms, 0 under
    # --timing fast) and group.consumer.regex.refresh.interval.ms (one due however little
    # changed)
    regex_refresh_min_interval_ms: int = 10_000
    regex_refresh_interval_ms: int = 600_000


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None  # None: not sent (a heartbeat that is not a full request)
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    generate_member_id: bool = False  # v0: the coordinator picks the id on a join


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: Partitions = frozenset()
    pending_revocation: Partitions = frozenset()
    # KIP-1251: the epoch each held partition (assigned or pending revocation) was assigned at.
    assignment_epochs: dict[TopicPartition, int] = field(default_factory=dict)
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None

    def assignment_epoch(self, partition: TopicPartition) -> int | None:
        """The epoch the member was assigned ``partition`` at, None if it does not hold it;
        without a recorded one, its epoch (not below 0), as Kafka reads a record without them."""
        if partition not in self.assigned and partition not in self.pending_revocation:
            return None
        return self.assignment_epochs.get(partition, max(self.member_epoch, 0))

    def epochs_of(self, partitions: Partitions) -> dict[TopicPartition, int]:
        return {p: epoch for p in partitions if (epoch := self.assignment_epoch(p)) is not None}


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    # As Kafka 4.4's ModernGroup and TargetAssignmentMetadata.INITIAL: a new group starts at
    # epoch 1, so its first member's join takes it to 2.
    group_epoch: int = 1
    assignment_epoch: int = 1
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    subscribed_metadata: dict[str, TopicMeta] = field(default_factory=dict)
    # Kafka's MetadataHash (KIP-1101) of the subscribed topics when the epoch last moved for
    # them: a heartbeat finding another one bumps the epoch (also for a change while down).
    metadata_hash: int = 0
    # regex -> the topic names it matched when last resolved, and when (Kafka's resolved
    # regular expressions, written as records); the topics they were last resolved against
    # (memory only: none after a load, so the next refresh sees every topic as new).
    resolved_regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    regex_resolved_topics: frozenset[str] = frozenset()
    # Whether the subscribed topics' metadata was looked at since the group was created or
    # loaded (memory only: Kafka's metadata refresh deadline, passed for a fresh group).
    metadata_refreshed: bool = False
    # When the last target was computed (0: never, or the group emptied), for the interval.
    assignment_timestamp_ms: int = 0

    group_type = GROUP_TYPE
    protocol_type = PROTOCOL_TYPE

    @property
    def state_name(self) -> str:
        return group_state(self.group_epoch, self.assignment_epoch, self.members.values())

    @property
    def assignor_name(self) -> str:
        """The group's preferred server assignor (Kafka's describe answers it)."""
        return preferred(m.server_assignor for m in self.members.values())

    def is_empty(self) -> bool:
        return not self.members

    def owner_of(self, partition: TopicPartition) -> str | None:
        for member in self.members.values():
            if partition in member.assigned or partition in member.pending_revocation:
                return member.member_id
        return None

    def subscribed_topic_names(self) -> set[str]:
        """Topics the members subscribe to by name or through a resolved regex."""
        names: set[str] = set()
        for member in self.members.values():
            names |= self.member_topics(member)
        return names

    def member_topics(self, member: ConsumerMember) -> frozenset[str]:
        regex = member.subscribed_topic_regex
        if not regex:
            return member.subscribed_topic_names
        resolved = self.resolved_regexes.get(regex)
        return member.subscribed_topic_names | (resolved.topics if resolved else frozenset())

    def subscribed_regexes(self) -> dict[str, int]:
        """Each regex the members subscribe with, and how many members do."""
        counts: dict[str, int] = {}
        for member in self.members.values():
            if member.subscribed_topic_regex:
                regex = member.subscribed_topic_regex
                counts[regex] = counts.get(regex, 0) + 1
        return counts

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscribed_metadata


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Partitions | None  # None: not in the response


SettingsProvider = Callable[[str], ConsumerSettings]
TopicNames = Callable[[], list[str]]


class ConsumerGroupCoordinator:
    def __init__(
        self,
        registry: GroupRegistry,
        settings: SettingsProvider,
        topic_names: TopicNames,
        new_member_id: Callable[[], str] = lambda: str(seeded.new_uuid()),
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.topic_names = topic_names
        self.new_member_id = new_member_id
        # Regex resolutions due, per group (Kafka's "<group>-regex" task on its executor): the
        # owner runs ``resolve_regexes`` for each, after the heartbeat that asked for it.
        self.pending_regexes: dict[str, frozenset[str]] = {}

    def group(self, group_id: str) -> ConsumerGroup | None:
        found = self.registry.get(group_id)
        return found if isinstance(found, ConsumerGroup) else None

    def groups(self) -> list[ConsumerGroup]:
        return [g for g in self.registry if isinstance(g, ConsumerGroup)]

    # --- ConsumerGroupHeartbeat ----------------------------------------------------------------

    def heartbeat(
        self, request: ConsumerHeartbeat, topics: TopicLookup, now_ms: int
    ) -> ConsumerHeartbeatResult:
        _validate(request)
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request, topics)
        joining = request.member_epoch == JOIN_EPOCH
        group = self._group_for(request.group_id, create=joining)
        settings = self.settings(request.group_id)
        member_id = request.member_id
        if joining and request.generate_member_id and not member_id:
            member_id = self.new_member_id()
        # Kafka's throwIfConsumerGroupIsFull, on every heartbeat but a leave (a join or not): a
        # member id the group does not know finds a full group, unless its instance id is held
        # (the instance id's checks answer then: a replacement, UNRELEASED or FENCED_INSTANCE_ID).
        if (
            member_id not in group.members
            and not instance_id_held(group, request.instance_id)
            and len(group.members) >= settings.max_size
        ):
            raise GroupError(
                ErrorCode.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of "
                f"{settings.max_size} members.",
            )
        if request.instance_id is not None:
            left = static_member_to_replace(group, member_id, request.instance_id, joining)
            if left is not None:
                replace_static_member(group, left, member_id)
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise unknown_member(member_id, group.group_id)
            member = ConsumerMember(member_id)
        elif not joining:
            _check_epoch(member, request)

        assignor = (
            request.server_assignor
            if request.server_assignor is not None
            else member.server_assignor
        )
        updated = replace(
            member,
            instance_id=request.instance_id or member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=(
                request.rebalance_timeout_ms
                if request.rebalance_timeout_ms > 0
                else member.rebalance_timeout_ms
            ),
            subscribed_topic_names=(
                frozenset(request.subscribed_topic_names)
                if request.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (request.subscribed_topic_regex or None)
                if request.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            server_assignor=assignor,
            session_deadline_ms=now_ms + settings.session_timeout_ms,
        )
        if joining and member.member_epoch != JOIN_EPOCH:
            updated = replace(
                updated,
                member_epoch=0,
                assigned=frozenset(),
                pending_revocation=frozenset(),
                assignment_epochs={},
            )
        regex_status = self._update_regexes(group, member, updated, settings, now_ms)
        # As Kafka: the epoch goes up when subscribed topic names change, a regex changes to one
        # already resolved, or the group's preferred server assignor is another with this
        # heartbeat (``consumer.preferred_assignor``), which then computes the target. A new
        # regex does not bump it: its resolution does, later (``resolve_regexes``).
        names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        named = [m.server_assignor for m in group.members.values()]
        target_assignor = preferred_with(named, member.server_assignor, updated.server_assignor)
        bump = (
            names_changed
            or regex_status == REGEX_UPDATED_AND_RESOLVED
            or target_assignor != preferred(named)
        )
        group.members[member_id] = updated
        if self.registry.get(group.group_id) is not group:
            self.registry.put(group)
        # As Kafka, the metadata hash is recomputed only with a bump or when a subscribed topic
        # changed (``_metadata_expired``): a switch to a regex not resolved yet drops the old
        # one's topics without a bump; the new one's resolution bumps the epoch.
        if (bump or self._metadata_expired(group, topics)) and (
            self._update_metadata(group, topics) or bump
        ):
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch and can_compute_target(
            group.assignment_timestamp_ms, settings.assignment_interval_ms, now_ms
        ):
            self._update_target(group, target_assignor, now_ms)
        # As Kafka's hasSubscriptionChanged: a topic the member dropped leaves its assignment
        # with this heartbeat, whether or not a new target could be computed.
        reconciled = reconcile(
            group,
            updated,
            request.owned,
            now_ms,
            subscription_changed=names_changed or regex_status != NO_CHANGE,
        )
        group.members[member_id] = reconciled
        full = (
            request.rebalance_timeout_ms != -1
            and (
                request.subscribed_topic_names is not None
                or request.subscribed_topic_regex is not None
            )
            and request.owned is not None
        )
        send = joining or full or reconciled.assigned != member.assigned
        return ConsumerHeartbeatResult(
            member_id,
            reconciled.member_epoch,
            settings.heartbeat_interval_ms,
            reconciled.assigned if send else None,
        )

    def _leave(self, request: ConsumerHeartbeat, topics: TopicLookup) -> ConsumerHeartbeatResult:
        """Kafka's ``consumerGroupLeave``: a static member must be its instance id's holder;
        with epoch -2 it only leaves for now (``consumer.static``); else it is removed."""
        group = self._group_for(request.group_id, create=False, kind="Group")
        member_id = request.member_id
        if request.instance_id is not None:
            member_id = leaving_static_member(group, member_id, request.instance_id).member_id
            if request.member_epoch == STATIC_LEAVE_EPOCH:
                group.members[member_id] = left_for_now(group.members[member_id])
                return ConsumerHeartbeatResult(member_id, STATIC_LEAVE_EPOCH, 0, None)
        elif member_id not in group.members:
            raise unknown_member(member_id, group.group_id)
        self.remove_member(group, member_id, topics)
        return ConsumerHeartbeatResult(request.member_id, request.member_epoch, 0, None)

    def remove_member(self, group: ConsumerGroup, member_id: str, topics: TopicLookup) -> None:
        regex = group.members.pop(member_id).subscribed_topic_regex
        if regex and regex not in group.subscribed_regexes():
            group.resolved_regexes.pop(regex, None)  # its last subscriber left
        group.target.pop(member_id, None)
        self._update_metadata(group, topics)
        group.group_epoch += 1
        # As Kafka's fencing of members: the epoch goes up and the remaining members get their
        # new target on their next heartbeat (within the assignment interval); when the last
        # one left, the (empty) target assignment is stamped with the new epoch and no time, so
        # the next first member is assigned at once.
        if not group.members:
            group.assignment_epoch = group.group_epoch
            group.assignment_timestamp_ms = 0

    # --- sessions and revocation deadlines -------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        return min(
            (d for g in self.groups() for d in member_deadlines(g.members.values())), default=None
        )

    def expire(self, now_ms: int, topics: TopicLookup) -> list[tuple[str, str]]:
        """Remove members whose session ran out or who did not revoke in time."""
        return [
            (group.group_id, member_id)
            for group in self.groups()
            for member_id in self.expire_group(group, now_ms, topics)
        ]

    def expire_group(self, group: ConsumerGroup, now_ms: int, topics: TopicLookup) -> list[str]:
        """One group's timers: remove its late members (their ids)."""
        late = late_member_ids(group.members.values(), now_ms)
        for member_id in late:
            self.remove_member(group, member_id, topics)
        return late

    # --- offsets ---------------------------------------------------------------------------------

    @staticmethod
    def validate_offset_fetch(
        group: ConsumerGroup, member_id: str | None, member_epoch: int
    ) -> ErrorCode | None:
        return check_offset_fetch(group.members, member_id, member_epoch)

    # --- internals -------------------------------------------------------------------------------

    def _group_for(
        self, group_id: str, *, create: bool, kind: str = "Consumer group"
    ) -> ConsumerGroup:
        found = self.registry.get(group_id)
        if isinstance(found, ConsumerGroup):
            return found
        if isinstance(found, ClassicGroup) and found.is_empty() and create:
            return ConsumerGroup(group_id)  # an empty classic group is taken over, as in Kafka
        if found is None and create:
            return ConsumerGroup(group_id)
        if found is None:
            # Not a join, and the coordinator holds no such group (never created, or deleted):
            # GROUP_ID_NOT_FOUND, as Kafka 4.4.0's lookups; its heartbeat's
            # getOrMaybeCreateConsumerGroup names a consumer group, its leave's group() not.
            raise GroupError(ErrorCode.group_id_not_found, f"{kind} {group_id} not found.")
        raise GroupError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")

    # --- regular expressions (Kafka's asynchronous resolution) ---------------------------------

    def _update_regexes(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        updated: ConsumerMember,
        settings: ConsumerSettings,
        now_ms: int,
    ) -> str:
        """Kafka's ``maybeUpdateRegularExpressions``: whether the member changed its regex
        (and to one the group has resolved already), and whether to resolve the group's regexes
        again, which is then queued in ``pending_regexes``."""
        old, new = member.subscribed_topic_regex, updated.subscribed_topic_regex
        counts = group.subscribed_regexes()
        resolved_count = len(group.resolved_regexes)
        # As Kafka, whose group drops the old regex only when the heartbeat's records are
        # replayed: its resolution still counts as the last one.
        last = last_resolved_ms(group.resolved_regexes.values())
        status = NO_CHANGE
        required = False
        if old != new:
            status = REGEX_UPDATED
            if new and counts.get(new, 0) == 0:
                _check_regex(new)  # as Kafka, only a regex no member subscribes with yet
            if old and counts.get(old, 0) == 1:
                group.resolved_regexes.pop(old, None)  # the member was its last subscriber
            if new:
                if counts.get(new, 0) == 0:
                    required = True
                elif new in group.resolved_regexes:
                    status = REGEX_UPDATED_AND_RESOLVED
            elif old:
                status = REGEX_UPDATED_AND_RESOLVED
        if not required and not counts:
            return status
        if group.group_id in self.pending_regexes:
            return status  # a resolution is already due
        hold_ms = settings.regex_refresh_min_interval_ms  # 0: none, on a frozen clock too
        if last is not None and hold_ms and now_ms <= last + hold_ms:
            return status
        future = dict(counts)
        if old:
            future[old] = future.get(old, 0) - 1
        if new:
            future[new] = future.get(new, 0) + 1
        regexes = frozenset(regex for regex, count in future.items() if count > 0)
        required = (
            required
            or len(regexes) != resolved_count
            or not set(self.topic_names()) <= group.regex_resolved_topics
            or last is None
            or now_ms > last + settings.regex_refresh_interval_ms
        )
        if required and regexes:
            self.pending_regexes[group.group_id] = regexes
        return status

    def resolve_regexes(self, group_id: str, topics: TopicLookup, now_ms: int) -> bool:
        """Run the group's due regex resolution (Kafka's ``handleRegularExpressionsResult``):
        store what each regex matches; if that changed, or the subscribed topics' metadata did,
        bump the group epoch so the next heartbeat computes a new target assignment. Returns
        whether the epoch went up."""
        regexes = self.pending_regexes.pop(group_id, None)
        group = self.group(group_id)
        if regexes is None or group is None:
            return False
        bump = self._resolve(group, regexes, now_ms)
        if self._update_metadata(group, topics) or bump:
            group.group_epoch += 1
            return True
        return False

    def _resolve(self, group: ConsumerGroup, regexes: frozenset[str], now_ms: int) -> bool:
        """Store what each regex still subscribed to matches now (each is written again, as
        Kafka writes every resolution); whether what one matches changed."""
        names = self.topic_names()
        subscribed = group.subscribed_regexes()
        changed = False
        for regex, resolved in resolve(regexes, names, now_ms).items():
            if regex not in subscribed:
                continue  # no member subscribes with it any more
            before = group.resolved_regexes.get(regex)
            if (before.topics if before else frozenset()) != resolved.topics:
                changed = True
            group.resolved_regexes[regex] = resolved
        group.regex_resolved_topics = frozenset(names)
        return changed

    def _metadata_expired(self, group: ConsumerGroup, topics: TopicLookup) -> bool:
        """Kafka's ``hasMetadataExpired``: whether the group's subscribed topics were never
        looked at (a group new or loaded), or one of them changed since they last were (Kafka's
        metadata update asks each group subscribed to a changed topic for a refresh). Else the
        topics the group no longer subscribes to are forgotten, its hash kept."""
        if not group.metadata_refreshed:
            return True
        now = self.subscribed_metadata(group, topics)
        names = group.subscribed_topic_names()
        if now != {name: m for name, m in group.subscribed_metadata.items() if name in names}:
            return True
        group.subscribed_metadata = now
        return False

    def _update_metadata(self, group: ConsumerGroup, topics: TopicLookup) -> bool:
        """The subscribed topics as they are now, and whether their metadata hash changed."""
        group.subscribed_metadata = self.subscribed_metadata(group, topics)
        group.metadata_refreshed = True
        new_hash = subscribed_hash(group.subscribed_metadata)
        changed = new_hash != group.metadata_hash
        group.metadata_hash = new_hash
        return changed

    def subscribed_metadata(
        self, group: ConsumerGroup, topics: TopicLookup
    ) -> dict[str, TopicMeta]:
        names = group.subscribed_topic_names()
        metadata: dict[str, TopicMeta] = {}
        for name in sorted(names):
            meta = topics(name)
            if meta is not None:
                metadata[name] = meta
        return metadata

    def _update_target(self, group: ConsumerGroup, assignor: str, now_ms: int) -> None:
        metadata = group.subscribed_metadata
        subscriptions = {}
        for member in group.members.values():
            member_names = group.member_topics(member)
            wanted = {meta.topic_id for name, meta in metadata.items() if name in member_names}
            subscriptions[member.member_id] = frozenset(wanted)
        counts = {meta.topic_id: meta.partitions for meta in metadata.values()}
        group.target = consumer_assignor.assign(assignor, subscriptions, counts, group.target)
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp_ms = now_ms


def _validate(request: ConsumerHeartbeat) -> None:
    """Kafka 4.4.0's ``GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid``,
    in its order: the member id first (v0 lets the coordinator pick it on a join, so there only a
    heartbeat, epoch above 0, or a leave, -1, needs one), then the group id."""
    epoch = request.member_epoch
    member_id_needed = not request.generate_member_id or epoch > 0 or epoch == LEAVE_EPOCH
    if member_id_needed and not request.member_id.strip():
        raise GroupError(ErrorCode.invalid_request, "MemberId can't be empty.")
    if not request.group_id.strip():
        raise GroupError(ErrorCode.invalid_request, "GroupId can't be empty.")
    if request.instance_id is not None and not request.instance_id.strip():
        raise GroupError(ErrorCode.invalid_request, "InstanceId can't be empty.")
    if request.rack_id is not None and not request.rack_id.strip():
        raise GroupError(ErrorCode.invalid_request, "RackId can't be empty.")
    if request.member_epoch == JOIN_EPOCH:
        if request.rebalance_timeout_ms == -1:
            raise GroupError(
                ErrorCode.invalid_request, "RebalanceTimeoutMs must be provided in first request."
            )
        if request.owned is None:
            raise GroupError(
                ErrorCode.invalid_request, "TopicPartitions must be empty when (re-)joining."
            )
        if request.owned:
            raise GroupError(
                ErrorCode.invalid_request, "TopicPartitions must be empty when (re-)joining."
            )
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise GroupError(
                ErrorCode.invalid_request,
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                "(re-)joining.",
            )
    elif request.member_epoch == STATIC_LEAVE_EPOCH:
        if request.instance_id is None:  # only a static member leaves with -2
            raise GroupError(ErrorCode.invalid_request, "InstanceId can't be null.")
    elif request.member_epoch < STATIC_LEAVE_EPOCH:
        raise GroupError(ErrorCode.invalid_request, "MemberEpoch is invalid.")
    # as any request's, a leave's or one naming a group the coordinator does not hold too
    assignor = request.server_assignor
    if assignor is not None and assignor not in consumer_assignor.ASSIGNORS:
        raise GroupError(
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {assignor} is not supported. Supported assignors: "
            f"{', '.join(consumer_assignor.ASSIGNORS)}.",
        )


def _check_regex(regex: str) -> None:
    """Kafka's ``throwIfRegularExpressionIsInvalid``: the regex compiles as RE2J reads it."""
    try:
        check_topic_regex(regex)
    except InvalidTopicRegex as error:
        raise GroupError(
            ErrorCode.invalid_regular_expression,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: "
            f"{error.description}.",
        ) from None


def _check_epoch(member: ConsumerMember, request: ConsumerHeartbeat) -> None:
    # The answer with the new epoch may have been lost: the previous epoch is accepted if the
    # member owns no more than its assignment.
    owned_ok = request.owned is None or request.owned <= member.assigned
    check_member_epoch("consumer", member, request.member_epoch, owned_ok)
