"""InitializeShareGroupState (key 83), v0.

Sent by the group coordinator before it assigns a share partition: per partition, a ShareSnapshot
with the given state epoch and start offset (-1 = not yet known) replaces any earlier state.
FENCED_STATE_EPOCH when the state epoch is older than the recorded one, INVALID_REQUEST for a
negative partition or state epoch, UNKNOWN_TOPIC_OR_PARTITION for a topic or partition the cluster
does not have, NOT_COORDINATOR when this broker does not lead the key's ``__share_group_state``
partition (see ``_share_state``). The answer is given once the record is in the log.

CLUSTER_ACTION on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED), as Kafka checks.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, cluster_check, refused
from kemu.broker.handlers import handler
from kemu.broker.handlers._share_state import share_state_response
from kemu.cluster.context import RequestContext
from kemu.coordinator.share.persister import SharePartitionKey
from kemu.coordinator.share.service import share_persister

API_KEY = 83


@handler(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    denied = refused(ctx, request, cluster_check(AclOperation.CLUSTER_ACTION))
    if denied is not None:
        return denied
    service = share_persister(ctx.runtime)

    def answer(key: SharePartitionKey, data: Any) -> Any:
        result = service.initialize_sync(key, data.state_epoch, data.start_offset)
        return ctx.make(
            "PartitionResult",
            partition=key.partition,
            error_code=result.error,
            error_message=result.message,
        )

    return share_state_response(
        ctx,
        request,
        operation="initialize share group state",
        result_class="InitializeStateResult",
        answer=answer,
        partitions_required=False,
    )
