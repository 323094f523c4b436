"""InitializeShareGroupState (key 83), v0.

Sent by the group coordinator before it assigns a share partition: per partition, a ShareSnapshot
with the given state epoch and start offset (-1 = not yet known) replaces any earlier state.
FENCED_STATE_EPOCH when the state epoch is older than the recorded one, INVALID_REQUEST for a
negative partition or state epoch, UNKNOWN_TOPIC_OR_PARTITION for a topic or partition the cluster
does not have, NOT_COORDINATOR when this broker does not lead the key's ``__share_group_state``
partition (see ``_share_state``). The answer is given once the record is in the log.
CLUSTER_ACTION on the cluster is needed (see ``_share_state``).
"""

from __future__ import annotations

from kemu.broker.handlers._share_state import share_state_handler
from kemu.coordinator.share.persister import SharePartitionKey
from kemu.coordinator.share.service import ShareCoordinatorService
from kemu.coordinator.share.shard import ShardResult
from kemu.protocol.views.initialize_share_group_state import PartitionDataView

API_KEY = 83


def _initialize(
    service: ShareCoordinatorService, key: SharePartitionKey, data: PartitionDataView
) -> ShardResult:
    return service.initialize_sync(key, data.state_epoch, data.start_offset)


handle = share_state_handler(
    __name__,
    API_KEY,
    0,
    0,
    operation="initialize share group state",
    result_class="InitializeStateResult",
    call=_initialize,
    partitions_required=False,
)
