"""Which member epochs a KIP-848 consumer group takes offset commits at (KIP-1251). Sans-IO.

As Kafka 4.4's ``ConsumerGroup.validateOffsetCommit`` and its assignment-epoch validator: every
partition a member holds (assigned, or pending revocation) carries the epoch it was assigned at
(``ConsumerMember.assignment_epochs``: a partition kept across an epoch change keeps its epoch, a
newly assigned one gets the target's). A commit

* with a negative epoch to a group without members is taken (an admin, an ``assign()``-only
  consumer), as is a transactional one naming no member, no instance and epoch -1;
* from a member the group does not have gets UNKNOWN_MEMBER_ID;
* from a member, with OffsetCommit below v9 (outside a transaction), gets UNSUPPORTED_VERSION;
* at the member's epoch is taken, at a newer one gets STALE_MEMBER_EPOCH;
* at an older epoch is checked partition by partition: the member must hold the partition and
  have been assigned it at that epoch or before. So a ``commitSync()`` the client sent just
  before learning its new epoch (the heartbeat acknowledging a revocation crossed it) still
  commits what the member kept, but not what it gave away.

Kafka fails the whole request at the first partition that does not pass (STALE_MEMBER_EPOCH in
every partition of the answer), so this answers one error for the request too.
"""

from __future__ import annotations

from collections.abc import Iterable

from kemu.coordinator.group.assignor import TopicPartition
from kemu.coordinator.group.consumer.group import ConsumerGroup, ConsumerMember
from kemu.coordinator.group.modern_group import check_offset_commit
from kemu.protocol.errors import ErrorCode


def validate_offset_commit(
    group: ConsumerGroup,
    member_id: str,
    member_epoch: int,
    partitions: Iterable[TopicPartition | None],
    *,
    transactional: bool = False,
    instance_id: str | None = None,
    api_version: int | None = None,
) -> ErrorCode | None:
    """The error for a commit of ``partitions`` (None: a topic without an id, which no member
    holds) by ``member_id`` at ``member_epoch`` with OffsetCommit ``api_version`` (None: not
    checked), None when it is taken."""
    checked = check_offset_commit(
        group.members,
        member_id,
        member_epoch,
        transactional=transactional,
        instance_id=instance_id,
        api_version=api_version,
    )
    if not isinstance(checked, ConsumerMember):
        return checked
    member = checked
    for partition in partitions:
        assigned_at = None if partition is None else member.assignment_epoch(partition)
        if assigned_at is None or member_epoch < assigned_at:
            return ErrorCode.stale_member_epoch
    return None
