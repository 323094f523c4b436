"""DeleteShareGroupState (key 86), v0.

Sent when share group offsets or a share group are deleted: per partition, a tombstone (the
ShareSnapshot key with a null value) is appended when state exists, and the answer is success
either way. INVALID_REQUEST for a negative partition; UNKNOWN_TOPIC_OR_PARTITION for a topic or
partition the cluster does not have; NOT_COORDINATOR when this broker does not lead the key's
``__share_group_state`` partition (see ``_share_state``).
CLUSTER_ACTION on the cluster is needed (see ``_share_state``).
"""

from __future__ import annotations

from kemu.broker.handlers._share_state import share_state_handler

API_KEY = 86

handle = share_state_handler(
    __name__,
    API_KEY,
    0,
    0,
    operation="delete share group state",
    result_class="DeleteStateResult",
    call=lambda service, key, data: service.delete_sync(key),
)
