"""A KIP-848 consumer group's static members (``group.instance.id``) leaving for a while and
coming back under a new member id: Kafka 4.4.0's ``consumerGroupLeave``,
``consumerGroupStaticMemberGroupLeave`` and ``getOrMaybeSubscribeStaticConsumerGroupMember``
(``ConsumerGroup``). Sans-IO.

* A heartbeat leaving with an instance id must come from its holder (else UNKNOWN_MEMBER_ID for
  an instance id the group does not know, FENCED_INSTANCE_ID for another member id). With epoch
  -1 the member is removed like any other; with -2 (a rolling restart's close) it stays: its
  epoch becomes -2, it keeps its assignment and its target, drops what it still had to revoke,
  and holds every partition from assignment epoch 0 (``resetAssignedPartitionsEpochsToZero``).
  Only its current assignment changes (the one record Kafka writes); the group epoch does not
  move, nobody is rebalanced, and its session keeps running from its last heartbeat: if nobody
  comes back in time it is removed as any member whose session ran out.
* A join (epoch 0) naming an instance id whose holder left with -2 replaces the holder, whatever
  member id it brings: the holder is gone (its records deleted), and the joining member starts
  as a copy of it under its own id at epoch 0 (previous epoch 0) with its assignment and its
  target, so that with the same subscription it is back at the group's epoch with the same
  partitions and no new group epoch. A join naming an instance id an active member holds gets
  UNRELEASED_INSTANCE_ID; a heartbeat naming one held by another member id FENCED_INSTANCE_ID.
  Kafka's group-size check spares a heartbeat naming a held instance id, so a full group takes
  the replacement and gives those two errors rather than GROUP_MAX_SIZE_REACHED.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kemu.coordinator.group.modern_group import (
    check_static_heartbeat,
    static_holder,
    unreleased_instance_id,
)

if TYPE_CHECKING:
    from kemu.coordinator.group.consumer.group import ConsumerGroup, ConsumerMember

STATIC_LEAVE_EPOCH = -2


def instance_id_held(group: ConsumerGroup, instance_id: str | None) -> bool:
    """Whether a member of ``group`` holds ``instance_id`` (at -2 too): Kafka's
    ``ConsumerGroup.hasStaticMember``, which spares a heartbeat naming it the group-size
    check."""
    return (
        instance_id is not None and static_holder(group.members.values(), instance_id) is not None
    )


def leaving_static_member(group: ConsumerGroup, member_id: str, instance_id: str) -> ConsumerMember:
    """The member a leave heartbeat naming ``instance_id`` is about: its holder, who must be
    ``member_id``."""
    holder = static_holder(group.members.values(), instance_id)
    check_static_heartbeat(holder, member_id, instance_id)
    assert holder is not None
    return holder


def left_for_now(member: ConsumerMember) -> ConsumerMember:
    """``member`` after a temporary leave (epoch -2): its assignment kept, from epoch 0, without
    what it still had to revoke. Its revocation deadline goes: Kafka's rebalance timer, armed
    for the member's epoch, no longer finds it at that epoch."""
    return replace(
        member,
        member_epoch=STATIC_LEAVE_EPOCH,
        pending_revocation=frozenset(),
        assignment_epochs=dict.fromkeys(member.assigned, 0),
        revocation_deadline_ms=None,
    )


def static_member_to_replace(
    group: ConsumerGroup, member_id: str, instance_id: str, joining: bool
) -> ConsumerMember | None:
    """Kafka's checks of a heartbeat naming ``instance_id``; the member a join replaces (its
    holder, which left with epoch -2), if any. A heartbeat must come from the holder; a join
    may take the instance id only from a holder that left for now (even under the same member
    id)."""
    holder = static_holder(group.members.values(), instance_id)
    if not joining:
        check_static_heartbeat(holder, member_id, instance_id)
        return None
    if holder is None:
        return None
    if holder.member_epoch != STATIC_LEAVE_EPOCH:
        raise unreleased_instance_id(member_id, instance_id, holder.member_id)
    return holder


def replace_static_member(group: ConsumerGroup, old: ConsumerMember, member_id: str) -> None:
    """``member_id`` takes ``old``'s place in ``group``: a copy of it at epoch 0 (previous epoch
    0) with its assignment, state and target; ``old`` is gone. Nothing else changes (no group
    epoch), so the heartbeat goes on as a rejoin of that copy."""
    target = group.target.pop(old.member_id, None)
    del group.members[old.member_id]
    group.members[member_id] = replace(
        old, member_id=member_id, member_epoch=0, previous_member_epoch=0
    )
    if target is not None:
        group.target[member_id] = target
