"""A share member whose subscription or topics change while ``share.assignment.interval.ms``
holds the next target back, as Kafka 4.4.0's ``ShareGroupAssignmentBuilder`` (read in the 4.4.0
jar) reconciles it: told ``hasSubscriptionChanged`` (the member's topics, or the group's
metadata hash, changed), it sets the member's partitions to its part of the held target filtered
by the topics it subscribes to that exist, at the member's epoch. Side by side with a real Kafka:
``tests/integration/share/test_share_topic_changes_kafka.py``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kemu.coordinator.group.modern_group import TopicMeta
from kemu.coordinator.group.registry import GroupRegistry
from kemu.coordinator.group.share import records as share_records
from kemu.coordinator.group.share.group import (
    InitializePartitions,
    MembershipSettings,
    ShareGroup,
    ShareGroupCoordinator,
    ShareHeartbeat,
    ShareHeartbeatResult,
)

KEPT = uuid.UUID(int=7)
DROPPED = uuid.UUID(int=8)
ADDED = uuid.UUID(int=9)
GROUP = "g"
INTERVAL_MS = 15_000
START_MS = 1_700_000_000_000

Partitions = frozenset[tuple[uuid.UUID, int]]


def parts(*topics: uuid.UUID) -> Partitions:
    """Both partitions of each of ``topics``."""
    return frozenset((topic, index) for topic in topics for index in range(2))


@dataclass
class Shares:
    """A share-group coordinator over topics of two partitions each, whose share state is
    initialized at once, and a clock that moves only when told."""

    interval_ms: int = INTERVAL_MS
    now: int = START_MS
    topics: dict[str, TopicMeta] = field(
        default_factory=lambda: {
            "kept": TopicMeta(KEPT, 2),
            "dropped": TopicMeta(DROPPED, 2),
            "added": TopicMeta(ADDED, 2),
        }
    )
    registry: GroupRegistry = field(default_factory=GroupRegistry)

    def __post_init__(self) -> None:
        settings = MembershipSettings(45_000, 500, 100, assignment_interval_ms=self.interval_ms)
        self.coordinator = ShareGroupCoordinator(self.registry, lambda group_id: settings)

    def beat(self, member: str, topics: tuple[str, ...] | None = None) -> ShareHeartbeatResult:
        """One heartbeat of ``member`` at its epoch (0 if it is not in the group)."""
        known = self.group.members.get(member) if self.registry.get(GROUP) else None
        epoch = known.member_epoch if known is not None else 0
        request = ShareHeartbeat(GROUP, member, epoch, subscribed_topic_names=topics)
        result = self.coordinator.heartbeat(request, self.topics.get, self.now)
        for effect in result.effects:
            if isinstance(effect, InitializePartitions):
                self.coordinator.partitions_initialized(effect.group_id, effect.partitions)
        return result

    def stable(self, *members: str, topics: tuple[str, ...] = ("kept", "dropped")) -> int:
        """``members`` joined, subscribed to ``topics``, and assigned once their share state is
        initialized (the interval's wait over): the assignment epoch."""
        for member in members:
            self.beat(member, topics)
        self.now += self.interval_ms
        for _ in range(2):
            for member in members:
                self.beat(member)
        assert self.group.group_epoch == self.group.assignment_epoch
        return self.group.assignment_epoch

    @property
    def group(self) -> ShareGroup:
        found = self.registry.get(GROUP)
        assert isinstance(found, ShareGroup)
        return found

    def epochs(self) -> tuple[int, int]:
        return self.group.group_epoch, self.group.assignment_epoch


def test_dropping_a_topic_within_the_interval_takes_its_partitions_at_once() -> None:
    shares = Shares()
    epoch = shares.stable("m")
    assert shares.group.members["m"].assigned == parts(KEPT, DROPPED)
    shares.now += 1_000
    dropped = shares.beat("m", ("kept",))
    assert (dropped.member_epoch, dropped.assignment) == (epoch, parts(KEPT))
    assert shares.epochs() == (epoch + 1, epoch)  # no target: the interval holds it back
    assert shares.group.target["m"] == parts(KEPT, DROPPED)
    assert dropped.changed
    quiet = shares.beat("m")
    assert (quiet.member_epoch, quiet.assignment) == (epoch, None)


def test_a_plain_heartbeat_dropping_nothing_leaves_the_member_alone() -> None:
    shares = Shares()
    epoch = shares.stable("m")
    shares.now += 1_000
    full = shares.beat("m", ("kept", "dropped"))  # the same subscription: nothing changes
    assert (full.member_epoch, full.assignment) == (epoch, parts(KEPT, DROPPED))
    assert shares.epochs() == (epoch, epoch)
    assert not full.changed


def test_naming_the_topic_again_within_the_interval_gives_the_targets_partitions_back() -> None:
    shares = Shares()
    epoch = shares.stable("m")
    shares.beat("m", ("kept",))
    again = shares.beat("m", ("kept", "dropped"))
    assert (again.member_epoch, again.assignment) == (epoch, parts(KEPT, DROPPED))
    assert shares.epochs() == (epoch + 2, epoch)


def test_the_first_target_after_the_interval_leaves_the_dropped_topic_out() -> None:
    shares = Shares()
    epoch = shares.stable("m")
    shares.beat("m", ("kept",))
    shares.now += INTERVAL_MS
    target = shares.beat("m")
    assert (target.member_epoch, target.assignment) == (epoch + 1, None)  # nothing new to send
    assert shares.group.members["m"].assigned == parts(KEPT)
    assert shares.epochs() == (epoch + 1, epoch + 1)


def test_a_deleted_topic_goes_with_the_heartbeat_that_sees_the_new_metadata() -> None:
    shares = Shares()
    epoch = shares.stable("m")
    del shares.topics["dropped"]
    shares.now += 1_000
    seen = shares.beat("m")
    assert (seen.member_epoch, seen.assignment) == (epoch, parts(KEPT))
    assert shares.epochs() == (epoch + 1, epoch)
    full = shares.beat("m", ("kept", "dropped"))  # still naming it: the live partitions only
    assert (full.member_epoch, full.assignment) == (epoch, parts(KEPT))
    assert shares.epochs() == (epoch + 1, epoch)


def test_a_topic_recreated_under_its_name_does_not_bring_the_old_partitions_back() -> None:
    """The filter goes by the ids the metadata has now, as Kafka's ``TopicIds``."""
    shares = Shares()
    epoch = shares.stable("m")
    shares.topics["dropped"] = TopicMeta(uuid.UUID(int=10), 2)
    shares.now += 1_000
    seen = shares.beat("m")
    assert (seen.member_epoch, seen.assignment) == (epoch, parts(KEPT))


def test_only_the_member_whose_heartbeat_sees_a_deletion_is_filtered() -> None:
    """As in Kafka: the metadata hash changes once, with the first heartbeat after the deletion;
    another member at the assignment epoch is reconciled only by the next target (or a change
    of its own subscription)."""
    shares = Shares()
    epoch = shares.stable("a", "b")
    held_by_b = shares.group.members["b"].assigned
    assert any(topic == DROPPED for topic, _ in held_by_b)
    del shares.topics["dropped"]
    shares.now += 1_000
    shares.beat("a")
    later = shares.beat("b")
    assert (later.member_epoch, later.assignment) == (epoch, None)
    assert shares.group.members["b"].assigned == held_by_b
    shares.now += INTERVAL_MS
    shares.beat("b")
    assert shares.group.members["b"].assigned == held_by_b - parts(DROPPED)


def test_adding_a_topic_within_the_interval_waits_for_the_next_target() -> None:
    shares = Shares()
    epoch = shares.stable("m", topics=("kept",))
    shares.now += 1_000
    added = shares.beat("m", ("kept", "added"))
    assert (added.member_epoch, added.assignment) == (epoch, parts(KEPT))
    assert shares.epochs() == (epoch + 1, epoch)
    assert (shares.beat("m").assignment, shares.epochs()) == (None, (epoch + 1, epoch))
    shares.now += INTERVAL_MS
    target = shares.beat("m")
    assert (target.member_epoch, target.assignment) == (epoch + 1, parts(KEPT, ADDED))


def test_at_no_interval_a_dropped_topic_goes_with_a_new_target() -> None:
    shares = Shares(interval_ms=0)
    epoch = shares.stable("m")
    dropped = shares.beat("m", ("kept",))
    assert (dropped.member_epoch, dropped.assignment) == (epoch + 1, parts(KEPT))
    assert shares.epochs() == (epoch + 1, epoch + 1)


def test_the_filtered_assignment_is_what_the_records_rebuild() -> None:
    shares = Shares()
    shares.stable("m")
    before = share_records.image_of(shares.group, lambda topic_id: "t")
    shares.beat("m", ("kept",))
    after = share_records.image_of(shares.group, lambda topic_id: "t")
    log = share_records.ShareImageBuilder()
    for key, value in share_records.diff(GROUP, None, before) + share_records.diff(
        GROUP, before, after
    ):
        encoded = share_records.encode_value(value) if value is not None else None
        log.apply(key, share_records.decode_value(key, encoded))
    rebuilt = share_records.group_from_image(GROUP, log.images[GROUP], 0)
    assert rebuilt.members["m"].assigned == parts(KEPT)
    assert rebuilt.target["m"] == parts(KEPT, DROPPED)
