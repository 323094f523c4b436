"""KIP-848 consumer groups: a heartbeat that drops topics from the member's subscription takes
their partitions away with its answer, at the member's epoch, even while the assignment
interval holds the next target back; as Kafka 4.4.0's ``CurrentAssignmentBuilder`` when told
the subscription changed (``updateCurrentAssignment``), and its ``computeNextAssignment``,
which leaves unsubscribed topics out of the member's target. Beside a real Kafka:
``tests/integration/groups/test_group_topic_changes_kafka.py``."""

from __future__ import annotations

import pytest

from kemu.coordinator.group.consumer.group import (
    STABLE,
    UNREVOKED,
    ConsumerSettings,
)
from tests.unit.coordinator.group.consumer.test_consumer_group import (
    REBALANCE_MS,
    SESSION_MS,
    T2,
    Harness,
    parts,
)

INTERVAL_MS = 1_000
START_MS = 1_700_000_000_000  # not 0: a target stamped 0 counts as never computed
ALL_T, ALL_U = parts(0, 1, 2, 3, 4, 5), parts(0, 1, topic=T2)


@pytest.fixture
def harness() -> Harness:
    """Topics t (six partitions) and u (two); a group computing at most one target a second."""
    made = Harness()
    settings = ConsumerSettings(SESSION_MS, 5_000, 3, assignment_interval_ms=INTERVAL_MS)
    made.coordinator.settings = lambda group_id: settings
    made.now = START_MS
    return made


def stable_with_both(harness: Harness) -> int:
    """Member a owning all of t and u, stable: its epoch."""
    joined = harness.join("a", topics=("t", "u"))
    assert joined.assignment == ALL_T | ALL_U
    harness.beat("a", joined.member_epoch, ALL_T | ALL_U)
    assert harness.group.members["a"].state == STABLE
    return joined.member_epoch


def test_a_dropped_topic_is_revoked_with_the_heartbeat_within_the_interval(
    harness: Harness,
) -> None:
    epoch = stable_with_both(harness)
    harness.now += 10
    dropped = harness.beat(
        "a", epoch, ALL_T | ALL_U, subscribed_topic_names=("t",), rebalance_timeout_ms=REBALANCE_MS
    )
    assert (dropped.member_epoch, dropped.assignment) == (epoch, ALL_T)
    member = harness.group.members["a"]
    assert (member.state, member.pending_revocation) == (UNREVOKED, ALL_U)
    assert member.revocation_deadline_ms == harness.now + REBALANCE_MS
    # the epoch moved, the target did not (the interval)
    assert (harness.group.group_epoch, harness.group.assignment_epoch) == (epoch + 1, epoch)
    assert harness.group.state_name == "Assigning"

    done = harness.beat("a", epoch, ALL_T)
    assert (done.member_epoch, done.assignment) == (epoch, None)
    member = harness.group.members["a"]
    assert (member.state, member.assigned, member.pending_revocation) == (
        STABLE,
        ALL_T,
        frozenset(),
    )
    assert member.revocation_deadline_ms is None
    assert harness.group.state_name == "Assigning"

    # the first heartbeat after the interval computes the target: the member takes its epoch
    harness.now += INTERVAL_MS
    later = harness.beat("a", epoch, ALL_T)
    assert (later.member_epoch, later.assignment) == (epoch + 1, None)
    assert harness.group.target == {"a": ALL_T}
    assert harness.group.state_name == "Stable"


def test_a_dropped_topic_the_member_no_longer_owns_is_simply_gone(harness: Harness) -> None:
    epoch = stable_with_both(harness)
    dropped = harness.beat(
        "a", epoch, ALL_T, subscribed_topic_names=("t",), rebalance_timeout_ms=REBALANCE_MS
    )
    assert (dropped.member_epoch, dropped.assignment) == (epoch, ALL_T)
    member = harness.group.members["a"]
    assert (member.state, member.pending_revocation) == (STABLE, frozenset())
    assert member.previous_member_epoch == epoch
    assert set(member.assignment_epochs) == ALL_T


def test_a_member_revoking_that_drops_a_topic_revokes_it_too_and_never_gets_it_back(
    harness: Harness,
) -> None:
    epoch = stable_with_both(harness)
    harness.now += INTERVAL_MS
    harness.join("b", topics=("t",))  # the new target gives b some of a's t partitions
    assert harness.group.target["a"] & ALL_U == ALL_U  # a alone subscribes to u
    told = harness.beat("a", epoch)
    member = harness.group.members["a"]
    assert member.state == UNREVOKED and told.assignment == member.assigned
    revoking = member.pending_revocation
    kept_u = member.assigned & ALL_U
    assert revoking and kept_u == ALL_U

    # still owning everything, a drops u: its kept u partitions join those pending
    dropped = harness.beat(
        "a", epoch, ALL_T | ALL_U, subscribed_topic_names=("t",), rebalance_timeout_ms=REBALANCE_MS
    )
    member = harness.group.members["a"]
    assert dropped.member_epoch == epoch
    assert dropped.assignment == member.assigned == told.assignment - ALL_U
    assert member.pending_revocation == revoking | kept_u

    # done revoking (inside the interval: the target is still the one with u in it)
    done = harness.beat("a", epoch, member.assigned)
    member = harness.group.members["a"]
    assert done.member_epoch == harness.group.assignment_epoch
    assert member.state == STABLE and not member.assigned & ALL_U
    assert harness.group.target["a"] & ALL_U == ALL_U  # u is still in a's target


def test_switching_to_a_regex_not_resolved_yet_drops_the_old_topics(harness: Harness) -> None:
    """Kafka counts a changed regex as a changed subscription; an unresolved regex matches
    nothing yet."""
    joined = harness.join("a", topics=(), subscribed_topic_regex="t")
    assert harness.coordinator.resolve_regexes("g", harness.lookup, harness.now)
    harness.now += INTERVAL_MS
    assigned = harness.beat("a", joined.member_epoch)
    assert assigned.assignment == ALL_T
    epoch = assigned.member_epoch
    harness.beat("a", epoch, ALL_T)

    switched = harness.beat("a", epoch, ALL_T, subscribed_topic_regex="u")
    assert (switched.member_epoch, switched.assignment) == (epoch, frozenset())
    assert harness.group.members["a"].pending_revocation == ALL_T


def test_an_unchanged_subscription_keeps_the_targets_partitions_within_the_interval(
    harness: Harness,
) -> None:
    """Only the heartbeat that changes the subscription strips: a plain heartbeat of a member
    at the target's epoch leaves it as it is."""
    epoch = stable_with_both(harness)
    again = harness.beat(
        "a",
        epoch,
        ALL_T | ALL_U,
        subscribed_topic_names=("t", "u"),
        rebalance_timeout_ms=REBALANCE_MS,
    )
    assert (again.member_epoch, again.assignment) == (epoch, ALL_T | ALL_U)
    assert harness.group.members["a"].state == STABLE
