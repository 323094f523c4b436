"""DeleteGroups (key 42), v0-v3.

Deletes each named group of any type: an empty id gets INVALID_GROUP_ID, an unknown one
GROUP_ID_NOT_FOUND, a group with members NON_EMPTY_GROUP. Deleting a share group first writes
its ShareGroupStatePartitionMetadata with every topic it has share state of moved to
DeletingTopics (when the log holds that record), then deletes their share state through the
share persister; if that fails the group stays, its topics deleting, and gets the persister's
error (the next DeleteGroups deletes them again). Then the group's and its committed offsets'
tombstones are written to ``__consumer_offsets`` (``GroupCoordinatorService.delete_group``): if
that fails the group stays and gets Kafka's error for the failed append.

Every broker accepts the request (one group coordinator per process; see FindCoordinator).
A group the caller may not DELETE gets GROUP_AUTHORIZATION_FAILED, as KafkaApis answers.

v3 adds a per-group ``ErrorMessage``. Kafka 4.4 fills it only when deleting a streams group's
internal topics fails (``GroupCoordinatorService.filterStreamsTopologyErrors``), which kemu
does not do on deletion; every result carries null, as Kafka's do otherwise.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.share.group import ShareGroup
from kemu.coordinator.share.persister import SharePartitionKey
from kemu.coordinator.share.service import share_persister
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.delete_groups import DeleteGroupsRequestView

API_KEY = 42


@handler(API_KEY, 0, 3)
async def handle(ctx: RequestContext, request: DeleteGroupsRequestView) -> Any:
    results = []
    for group_id in request.groups_names:
        code = await _delete(ctx, group_id)
        results.append(ctx.make("DeletableGroupResult", group_id=group_id, error_code=code))
    return ctx.respond(results=tuple(results))


async def _delete(ctx: RequestContext, group_id: str) -> ErrorCode:
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed
    if not group_id:
        return ErrorCode.invalid_group_id
    registry = group_coordinator(ctx.runtime).registry
    group = registry.get(group_id)
    if group is None:
        return ErrorCode.group_id_not_found
    if not group.is_empty():
        return ErrorCode.non_empty_group
    if isinstance(group, ShareGroup):
        code = await _delete_share_state(ctx, group_id)
        if code != ErrorCode.none:
            return code
    if registry.get(group_id) is not group:
        return ErrorCode.none  # deleted by a concurrent request meanwhile
    if not group.is_empty():
        return ErrorCode.non_empty_group  # a member joined while the state was deleted
    coordinator = group_coordinator(ctx.runtime)
    code = coordinator.delete_group(group_id)
    if code != ErrorCode.none:
        return code  # the tombstones were not written: the group stays
    if isinstance(group, ShareGroup):
        coordinator.forget_share_state(group_id)
    return ErrorCode.none


async def _delete_share_state(ctx: RequestContext, group_id: str) -> ErrorCode:
    """The share group's topics moved to deleting (written), then their share state deleted
    through the persister, as Kafka's sharePartitionDeleteRequests and deleteShareGroup do: the
    first error (the group stays, its topics deleting; the next DeleteGroups retries them)."""
    coordinator = group_coordinator(ctx.runtime)
    try:
        candidates = coordinator.share_group_deleting(group_id)
    except GroupError as error:
        return error.code
    if any(not partitions for partitions in candidates.values()):
        # Kafka 4.4.0 answers this when a topic AlterShareGroupOffsets left initializing with no
        # partition is deleting (its share coordinator refuses a topic without partitions); the
        # next DeleteGroups asks for every partition of the deleting topics and succeeds.
        return ErrorCode.unknown_server_error
    persister = share_persister(ctx.runtime)
    for topic_id, partitions in candidates.items():
        for partition in partitions:
            code = await persister.delete_state(SharePartitionKey(group_id, topic_id, partition))
            if code not in (ErrorCode.none, ErrorCode.unknown_topic_or_partition):
                return ErrorCode(code)
    return ErrorCode.none
