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
CLUSTER_ACTION on the cluster is needed (see ``_share_state``).
"""

from __future__ import annotations

from kemu.broker.handlers._share_state import share_state_handler
from kemu.coordinator.share.persister import PersistedBatch, SharePartitionKey
from kemu.coordinator.share.service import ShareCoordinatorService
from kemu.coordinator.share.shard import ShardResult
from kemu.protocol.views.write_share_group_state import PartitionDataView

API_KEY = 85


def _write(
    service: ShareCoordinatorService, key: SharePartitionKey, data: PartitionDataView
) -> ShardResult:
    return service.write_sync(
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


handle = share_state_handler(
    __name__,
    API_KEY,
    0,
    1,
    operation="write share group state",
    result_class="WriteStateResult",
    call=_write,
)
