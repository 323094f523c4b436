"""WriteShareGroupState (key 85), v0-v1.

Sent by a share-partition leader for every durable change: the start offset, the delivery
complete count (v1, KIP-1226; -1 from v0) and the changed state batches. The share coordinator
appends a ShareUpdate (or, every ``share.coordinator.snapshot.update.records.per.snapshot``
updates, a ShareSnapshot of the merged state) and answers once it is in the log. The start offset
only moves forward. INVALID_REQUEST for a share partition never initialized, a negative
partition, leader or state epoch; FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH for older epochs than
recorded; UNKNOWN_TOPIC_OR_PARTITION for a topic or partition the cluster does not have;
NOT_COORDINATOR when this broker does not lead the key's ``__share_group_state`` partition (see
``_share_state``).

CLUSTER_ACTION on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED), as Kafka checks.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, cluster_check, refused
from kemu.broker.handlers import handler
from kemu.broker.handlers._share_state import share_state_response
from kemu.cluster.context import RequestContext
from kemu.coordinator.share.persister import PersistedBatch, SharePartitionKey
from kemu.coordinator.share.service import share_persister

API_KEY = 85


@handler(API_KEY, 0, 1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    denied = refused(ctx, request, cluster_check(AclOperation.CLUSTER_ACTION))
    if denied is not None:
        return denied
    service = share_persister(ctx.runtime)

    def answer(key: SharePartitionKey, data: Any) -> Any:
        result = service.write_sync(
            key,
            state_epoch=data.state_epoch,
            leader_epoch=data.leader_epoch,
            start_offset=data.start_offset,
            delivery_complete_count=getattr(data, "delivery_complete_count", -1),
            batches=tuple(
                PersistedBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in data.state_batches
            ),
        )
        return ctx.make(
            "PartitionResult",
            partition=key.partition,
            error_code=result.error,
            error_message=result.message,
        )

    return share_state_response(
        ctx,
        request,
        operation="write share group state",
        result_class="WriteStateResult",
        answer=answer,
    )
