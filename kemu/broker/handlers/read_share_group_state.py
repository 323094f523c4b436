"""ReadShareGroupState (key 84), v0.

Sent by a share-partition leader when it loads a share partition: the state epoch, start offset
and state batches the share coordinator holds. A leader epoch newer than the recorded one is
recorded (a ShareUpdate or ShareSnapshot is appended before answering) so that the previous
leader's writes are fenced from then on. INVALID_REQUEST for a share partition never initialized,
a negative partition or leader epoch; FENCED_LEADER_EPOCH for an older leader epoch;
UNKNOWN_TOPIC_OR_PARTITION for a topic or partition the cluster does not have; NOT_COORDINATOR
when this broker does not lead the key's ``__share_group_state`` partition (see ``_share_state``).
CLUSTER_ACTION on the cluster is needed (see ``_share_state``).

Omissions: KIP-1289 staged fields of a batch are kept in ``__share_group_state`` but have no
place in this response.
"""

from __future__ import annotations

from typing import Any

from kemu.broker.handlers._share_state import share_state_handler
from kemu.cluster.context import RequestContext
from kemu.coordinator.share.persister import PersistedState, SharePartitionKey
from kemu.coordinator.share.service import ShareCoordinatorService
from kemu.coordinator.share.shard import ShardResult
from kemu.protocol.views.read_share_group_state import PartitionDataView

API_KEY = 84


def _state(ctx: RequestContext, state: PersistedState) -> dict[str, Any]:
    batches = tuple(
        ctx.make(
            "StateBatch",
            first_offset=batch.first_offset,
            last_offset=batch.last_offset,
            delivery_state=batch.delivery_state,
            delivery_count=batch.delivery_count,
        )
        for batch in state.batches
    )
    return {
        "state_epoch": state.state_epoch,
        "start_offset": state.start_offset,
        "state_batches": batches,
    }


def _read(
    service: ShareCoordinatorService, key: SharePartitionKey, data: PartitionDataView
) -> ShardResult:
    return service.read_sync(key, data.leader_epoch)


handle = share_state_handler(
    __name__,
    API_KEY,
    0,
    0,
    operation="read share group state",
    result_class="ReadStateResult",
    call=_read,
    state_fields=_state,
)
