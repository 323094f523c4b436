"""ReadShareGroupStateSummary (key 87), v0-v1.

Sent by the group coordinator to describe share group offsets and lag: per partition the state
epoch, leader epoch, start offset and (v1, KIP-1226) delivery complete count. A share partition
never initialized answers start offset -1 and delivery complete count -1 without error; the
leader epoch is not checked. INVALID_REQUEST for a negative partition; UNKNOWN_TOPIC_OR_PARTITION
for a topic or partition the cluster does not have; NOT_COORDINATOR when this broker does not
lead the key's ``__share_group_state`` partition (see ``_share_state``).
CLUSTER_ACTION on the cluster is needed (see ``_share_state``).
"""

from __future__ import annotations

from kemu.broker.handlers._share_state import share_state_handler

API_KEY = 87

handle = share_state_handler(
    __name__,
    API_KEY,
    0,
    1,
    operation="read share group state summary",
    result_class="ReadStateSummaryResult",
    call=lambda service, key, data: service.read_summary_sync(key),
    state_fields=lambda ctx, state: {
        "state_epoch": state.state_epoch,
        "leader_epoch": state.leader_epoch,
        "start_offset": state.start_offset,
        "delivery_complete_count": state.delivery_complete_count,
    },
)
