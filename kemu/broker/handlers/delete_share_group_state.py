"""DeleteShareGroupState (key 86), v0.

Sent when share group offsets or a share group are deleted: per partition, a tombstone (the
ShareSnapshot key with a null value) is appended when state exists, and the answer is success
either way. INVALID_REQUEST for a negative partition; UNKNOWN_TOPIC_OR_PARTITION for a topic or
partition the cluster does not have; NOT_COORDINATOR when this broker does not lead the key's
``__share_group_state`` partition (see ``_share_state``).

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

API_KEY = 86


@handler(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    denied = refused(ctx, request, cluster_check(AclOperation.CLUSTER_ACTION))
    if denied is not None:
        return denied
    service = share_persister(ctx.runtime)

    def answer(key: SharePartitionKey, data: Any) -> Any:
        result = service.delete_sync(key)
        return ctx.make(
            "PartitionResult",
            partition=key.partition,
            error_code=result.error,
            error_message=result.message,
        )

    return share_state_response(
        ctx,
        request,
        operation="delete share group state",
        result_class="DeleteStateResult",
        answer=answer,
    )
