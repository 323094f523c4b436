"""A streams group member's epochs: static membership and fencing (Kafka's
``getOrMaybeCreateStaticStreamsGroupMember`` and ``throwIfStreamsGroupMemberEpochIsInvalid``), the
member metadata whose change bumps the group epoch, and the streams ``CurrentAssignmentBuilder``
that moves a member one heartbeat at a time towards its target (revoke first, then the new epoch
with the tasks no other member still owns).
"""

from __future__ import annotations

from dataclasses import replace

from kemu.coordinator.group.modern_group import (
    check_member_epoch,
    check_static_heartbeat,
    static_holder,
    unreleased_instance_id,
)
from kemu.coordinator.group.streams.assignor import EMPTY, Tasks, TaskTuple
from kemu.coordinator.group.streams.model import (
    STABLE,
    STATIC_LEAVE_EPOCH,
    UNRELEASED,
    UNREVOKED,
    StreamsGroup,
    StreamsHeartbeat,
    StreamsMember,
)


def member_metadata(member: StreamsMember) -> tuple[object, ...]:
    return (
        member.rack_id,
        member.process_id,
        member.user_endpoint,
        member.client_tags,
        member.topology_epoch,
        member.instance_id,
    )


def with_heartbeat(
    member: StreamsMember, request: StreamsHeartbeat, session_deadline_ms: int
) -> StreamsMember:
    """The member with what a heartbeat says about it (a null field keeps the value) and a new
    session deadline."""
    return replace(
        member,
        rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            request.rebalance_timeout_ms
            if request.rebalance_timeout_ms > 0
            else member.rebalance_timeout_ms
        ),
        topology_epoch=(
            request.topology.epoch if request.topology is not None else member.topology_epoch
        ),
        process_id=request.process_id if request.process_id is not None else member.process_id,
        user_endpoint=(
            request.user_endpoint if request.user_endpoint is not None else member.user_endpoint
        ),
        client_tags=(
            request.client_tags if request.client_tags is not None else member.client_tags
        ),
        client_id=request.client_id,
        client_host=request.client_host,
        session_deadline_ms=session_deadline_ms,
    )


def instance_id_held(group: StreamsGroup, instance_id: str | None) -> bool:
    """Whether a member of ``group`` holds ``instance_id`` (at -2 too): Kafka's
    ``StreamsGroup.hasStaticMember``, which spares a join naming it the group-size check (the
    instance id's own checks answer it: UNRELEASED_INSTANCE_ID, or a replacement)."""
    return (
        instance_id is not None and static_holder(group.members.values(), instance_id) is not None
    )


def check_static_member(
    group: StreamsGroup, request: StreamsHeartbeat, joining: bool
) -> StreamsMember | None:
    """Kafka's static membership checks; returns the member a rejoining static member
    replaces (it left with epoch -2 under another member id). A join may take the instance id
    only from a holder that left with -2: an active holder makes it UNRELEASED_INSTANCE_ID,
    even a join under the holder's own member id (Kafka's throwIfInstanceIdIsUnreleased looks
    at the holder's epoch alone)."""
    instance_id = request.instance_id
    assert instance_id is not None
    holder = static_holder(group.members.values(), instance_id)
    if not joining:
        check_static_heartbeat(holder, request.member_id, instance_id)
        return None
    if holder is None:
        return None
    if holder.member_epoch != STATIC_LEAVE_EPOCH:
        raise unreleased_instance_id(request.member_id, instance_id, holder.member_id)
    # back under its own member id, the member at -2 is taken back as it is (``_member_for``)
    return None if holder.member_id == request.member_id else holder


def check_epoch(member: StreamsMember, request: StreamsHeartbeat) -> None:
    owned = request.owned
    subset = owned is None or (
        owned.active <= member.assigned.active
        and owned.standby <= member.assigned.standby
        and owned.warmup <= member.assigned.warmup
    )
    check_member_epoch("streams", member, request.member_epoch, subset)


def reconcile(
    group: StreamsGroup, member: StreamsMember, owned: TaskTuple | None, now_ms: int
) -> StreamsMember:
    """Kafka's streams ``CurrentAssignmentBuilder``: one step towards the target."""
    target_epoch = group.assignment_epoch
    target = group.target.get(member.member_id, EMPTY)
    if member.state == STABLE and member.member_epoch == target_epoch:
        return member
    if member.state == UNREVOKED:
        still_owned = owned is None or bool(owned.all() & member.pending_revocation.all())
        if still_owned:
            return member
        member = replace(member, pending_revocation=EMPTY, revocation_deadline_ms=None)
    keep = TaskTuple(
        member.assigned.active & target.active,
        member.assigned.standby & target.standby,
        member.assigned.warmup & target.warmup,
    )
    revoke = TaskTuple(
        member.assigned.active - target.active,
        member.assigned.standby - target.standby,
        member.assigned.warmup - target.warmup,
    )
    if not revoke.is_empty() and owned is not None and not (owned.all() & revoke.all()):
        revoke = EMPTY  # the member already let them go
    if not revoke.is_empty():
        return replace(
            member,
            state=UNREVOKED,
            assigned=keep,
            pending_revocation=revoke,
            active_epochs=member.active_epochs_of(member.assigned.active),
            revocation_deadline_ms=now_ms + member.rebalance_timeout_ms,
        )
    others_active: set[tuple[str, int]] = set()
    for other in group.members.values():
        if other.member_id != member.member_id:
            others_active |= other.assigned.active | other.pending_revocation.active
    free: Tasks = frozenset(t for t in target.active if t not in others_active)
    same_process_active = {
        t
        for other in group.members.values()
        if other.member_id != member.member_id and other.process_id == member.process_id
        for t in other.assigned.active | other.pending_revocation.active
    }
    standby = frozenset(t for t in target.standby if t not in same_process_active)
    warmup = frozenset(t for t in target.warmup if t not in same_process_active)
    unreleased = free != target.active or standby != target.standby or warmup != target.warmup
    epoch = target_epoch
    return replace(
        member,
        member_epoch=epoch,
        previous_member_epoch=(
            member.member_epoch if member.member_epoch != epoch else member.previous_member_epoch
        ),
        state=UNRELEASED if unreleased else STABLE,
        assigned=TaskTuple(free, standby, warmup),
        pending_revocation=EMPTY,
        # KIP-1251: kept active tasks keep their assignment epoch, new ones get the target's.
        active_epochs=member.active_epochs_of(free & member.assigned.active)
        | dict.fromkeys(free - member.assigned.active, epoch),
        revocation_deadline_ms=None,
    )
