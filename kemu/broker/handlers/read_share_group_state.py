"""ReadShareGroupState (key 84), v0.

Sent by a share-partition leader when it loads a share partition: the state epoch, start offset
and state batches the share coordinator holds. A leader epoch newer than the recorded one is
recorded (a ShareUpdate or ShareSnapshot is appended before answering) so that the previous
leader's writes are fenced from then on. INVALID_REQUEST for a share partition never initialized,
a negative partition or leader epoch; FENCED_LEADER_EPOCH for an older leader epoch;
UNKNOWN_TOPIC_OR_PARTITION for a topic or partition the cluster does not have; NOT_COORDINATOR
when this broker does not lead the key's ``__share_group_state`` partition (see ``_share_state``).

CLUSTER_ACTION on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED), as Kafka checks.
Omissions: KIP-1289 staged fields of a batch are kept in ``__share_group_state`` but have no
place in this response.
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

API_KEY = 84


@handler(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    denied = refused(ctx, request, cluster_check(AclOperation.CLUSTER_ACTION))
    if denied is not None:
        return denied
    service = share_persister(ctx.runtime)

    def answer(key: SharePartitionKey, data: Any) -> Any:
        result = service.read_sync(key, data.leader_epoch)
        if result.error is not ErrorCode.none or result.state is None:
            return partition_error(ctx, key.partition, result.error, result.message)
        state = result.state
        return ctx.make(
            "PartitionResult",
            partition=key.partition,
            error_code=ErrorCode.none,
            error_message=None,
            state_epoch=state.state_epoch,
            start_offset=state.start_offset,
            state_batches=tuple(
                ctx.make(
                    "StateBatch",
                    first_offset=batch.first_offset,
                    last_offset=batch.last_offset,
                    delivery_state=batch.delivery_state,
                    delivery_count=batch.delivery_count,
                )
                for batch in state.batches
            ),
        )

    return share_state_response(
        ctx,
        request,
        operation="read share group state",
        result_class="ReadStateResult",
        answer=answer,
    )
