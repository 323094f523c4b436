"""ReadShareGroupStateSummary (key 87), v0-v1.

Sent by the group coordinator to describe share group offsets and lag: per partition the state
epoch, leader epoch, start offset and (v1, KIP-1226) delivery complete count. A share partition
never initialized answers start offset -1 and delivery complete count -1 without error; the
leader epoch is not checked. INVALID_REQUEST for a negative partition; UNKNOWN_TOPIC_OR_PARTITION
for a topic or partition the cluster does not have; NOT_COORDINATOR when this broker does not
lead the key's ``__share_group_state`` partition (see ``_share_state``).

CLUSTER_ACTION on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED), as Kafka checks.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, cluster_check, refused
from kemu.broker.handlers import handler
from kemu.broker.handlers._share_state import partition_error, share_state_response
from kemu.cluster.context import RequestContext
from kemu.coordinator.share.persister import SharePartitionKey
from kemu.coordinator.share.service import share_persister
from kemu.protocol.errors import ErrorCode

API_KEY = 87


@handler(API_KEY, 0, 1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    denied = refused(ctx, request, cluster_check(AclOperation.CLUSTER_ACTION))
    if denied is not None:
        return denied
    service = share_persister(ctx.runtime)

    def answer(key: SharePartitionKey, data: Any) -> Any:
        result = service.read_summary_sync(key)
        if result.error is not ErrorCode.none or result.state is None:
            return partition_error(ctx, key.partition, result.error, result.message)
        state = result.state
        return ctx.make(
            "PartitionResult",
            partition=key.partition,
            error_code=ErrorCode.none,
            error_message=None,
            state_epoch=state.state_epoch,
            leader_epoch=state.leader_epoch,
            start_offset=state.start_offset,
            delivery_complete_count=state.delivery_complete_count,
        )

    return share_state_response(
        ctx,
        request,
        operation="read share group state summary",
        result_class="ReadStateSummaryResult",
        answer=answer,
    )
