"""How a KIP-848 consumer group member moves towards its target assignment, one heartbeat at a
time: Kafka 4.4's ``CurrentAssignmentBuilder``. Sans-IO: the time is an argument.

* A member at the target's epoch and stable is done; one that must give partitions up is first
  only told to (it keeps its epoch, UNREVOKED_PARTITIONS) until a heartbeat shows it no longer
  owns them; then it moves to the target's epoch with the target partitions nobody else still
  owns (UNRELEASED_PARTITIONS until those are released too). So no partition is ever owned by
  two members at once.
* A member's target leaves out the topics it no longer subscribes to (by name, or through a
  resolved regex; a topic that no longer exists is not subscribed to): the target may be older
  than the subscription when the assignment interval holds the next one back.
* A heartbeat that changes the member's subscription (its topic names, or its regex) takes the
  topics it dropped away at once, even when the member is at the target's epoch or still
  revoking (``updateCurrentAssignment``): their partitions are pending revocation if the member
  owns them, gone otherwise; the member keeps its epoch.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

from kemu.coordinator.group.assignor import TopicPartition

if TYPE_CHECKING:
    from kemu.coordinator.group.consumer.group import ConsumerGroup, ConsumerMember

STABLE, UNREVOKED, UNRELEASED = "STABLE", "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"

Partitions = frozenset[TopicPartition]


def reconcile(
    group: ConsumerGroup,
    member: ConsumerMember,
    owned: Partitions | None,
    now_ms: int,
    *,
    subscription_changed: bool,
) -> ConsumerMember:
    """The member after a heartbeat owning ``owned`` (None: not sent, taken as still owning
    everything): Kafka's ``CurrentAssignmentBuilder.build``."""
    if member.state == STABLE and member.member_epoch == group.assignment_epoch:
        if subscription_changed:
            return _drop_unsubscribed(group, member, owned, now_ms)
        return member
    if member.state == UNREVOKED and _owns_any(owned, member.pending_revocation):
        if subscription_changed:
            return _drop_unsubscribed(group, member, owned, now_ms)
        return member  # still holds what it must give up
    return _next(group, member, owned, now_ms)


def subscribed_topic_ids(group: ConsumerGroup, member: ConsumerMember) -> frozenset[uuid.UUID]:
    """The ids of the existing topics ``member`` subscribes to (by name or a resolved regex)."""
    names = group.member_topics(member)
    return frozenset(
        meta.topic_id for name, meta in group.subscribed_metadata.items() if name in names
    )


def _owns_any(owned: Partitions | None, partitions: Partitions) -> bool:
    return owned is None or bool(owned & partitions)


def _drop_unsubscribed(
    group: ConsumerGroup, member: ConsumerMember, owned: Partitions | None, now_ms: int
) -> ConsumerMember:
    """Kafka's ``updateCurrentAssignment``: the partitions of the topics the member no longer
    subscribes to leave its assignment; pending revocation while it owns them (at its epoch),
    else simply gone."""
    subscribed = subscribed_topic_ids(group, member)
    dropped = frozenset(p for p in member.assigned if p[0] not in subscribed)
    # Kafka: with no subscription and nothing pending, the member is rewritten even when it
    # holds nothing (its previous epoch becomes its epoch).
    if not dropped and (subscribed or member.pending_revocation):
        return member
    assigned = member.assigned - dropped
    pending = member.pending_revocation | dropped
    if pending and _owns_any(owned, pending):
        return replace(
            member,
            state=UNREVOKED,
            previous_member_epoch=member.member_epoch,
            assigned=assigned,
            pending_revocation=pending,
            assignment_epochs=member.epochs_of(assigned | pending),
            revocation_deadline_ms=now_ms + member.rebalance_timeout_ms,
        )
    # The member no longer owns them: they are simply gone.
    return replace(
        member,
        previous_member_epoch=member.member_epoch,
        assigned=assigned,
        assignment_epochs=member.epochs_of(assigned | member.pending_revocation),
        revocation_deadline_ms=None,
    )


def _next(
    group: ConsumerGroup, member: ConsumerMember, owned: Partitions | None, now_ms: int
) -> ConsumerMember:
    """Kafka's ``computeNextAssignment``: a member that must give partitions up keeps its epoch
    until it has (also one that just gave some up, when the target moved again); otherwise it
    moves to the target's epoch."""
    subscribed = subscribed_topic_ids(group, member)
    target = frozenset(
        p for p in group.target.get(member.member_id, frozenset()) if p[0] in subscribed
    )
    keep = member.assigned & target
    revoke = member.assigned - keep
    wanted = target - keep
    free = frozenset(p for p in wanted if group.owner_of(p) in (None, member.member_id))
    unreleased = wanted != free
    if revoke and _owns_any(owned, revoke):
        return replace(
            member,
            state=UNREVOKED,
            previous_member_epoch=member.member_epoch,
            assigned=keep,
            pending_revocation=revoke,
            assignment_epochs=member.epochs_of(member.assigned),
            revocation_deadline_ms=now_ms + member.rebalance_timeout_ms,
        )
    return replace(
        member,
        state=UNRELEASED if unreleased else STABLE,
        previous_member_epoch=member.member_epoch,
        member_epoch=group.assignment_epoch,
        assigned=keep | free,
        pending_revocation=frozenset(),
        # Kept partitions keep their assignment epoch, new ones get the target's (Kafka's
        # computeNextAssignment).
        assignment_epochs=member.epochs_of(keep) | dict.fromkeys(free, group.assignment_epoch),
        revocation_deadline_ms=None,
    )
