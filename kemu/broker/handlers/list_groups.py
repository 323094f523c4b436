"""ListGroups (key 16), v0-v5.

Every registered group of every type (classic, consumer, share, ...): id and protocol type,
state from v4, type from v5. StatesFilter (v4+) and TypesFilter (v5+) match case-insensitively;
an empty filter matches everything. Share groups list with protocol type and type "share" and
state Empty or Stable.

As in Kafka, a broker lists the groups it coordinates: those whose ``__consumer_offsets``
partition it leads (see FindCoordinator). Admin clients ask every broker and so see each group
once. As KafkaApis does, a caller without DESCRIBE on the cluster sees only the groups it may
DESCRIBE (no denial logged).
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import CLUSTER_NAME, AclOperation, ResourceType, authorize
from kemu.broker.handlers import handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.group.placement import GROUP, coordinator_partition
from kemu.coordinator.group.service import group_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.views.list_groups import ListGroupsRequestView

API_KEY = 16


@handler(API_KEY, 0, 5)
def handle(ctx: RequestContext, request: ListGroupsRequestView) -> Any:
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    every = authorize(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log=False)
    listed = []
    for group in group_coordinator(ctx.runtime).registry:
        if coordinator_partition(ctx.cluster, GROUP, group.group_id).leader_id != ctx.node.node_id:
            continue
        if states and group.state_name.lower() not in states:
            continue
        if types and group.group_type.lower() not in types:
            continue
        if not every and not authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id, log=False
        ):
            continue
        listed.append(
            ctx.make(
                "ListedGroup",
                group_id=group.group_id,
                protocol_type=group.protocol_type,
                group_state=group.state_name,
                group_type=group.group_type,
            )
        )
    return ctx.respond(error_code=ErrorCode.none, groups=tuple(listed))
