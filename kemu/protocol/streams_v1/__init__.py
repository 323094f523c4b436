"""StreamsGroupHeartbeat and StreamsGroupDescribe v1 (Kafka 4.4, KIP-1331), which kio 0.6.5 does
not have: hand-written kio-style classes in the shape kio generates, so kio's reader and writer
(and kemu's ``wire.build``) handle them unchanged. Nested structs that did not change are v0's.

Heartbeat v1: the request is v0's; the response moves ``TaskOffsetIntervalMs`` before an int64
``AcceptableRecoveryLag`` and adds ``TopologyDescriptionRequired`` after the warm-up tasks.
Describe v1: the request adds ``IncludeTopologyDescription``; each described group adds a nullable
``TopologyDescription``, ``TopologyDescriptionStatus`` (int8) and ``AssignorName``.
"""

from __future__ import annotations

from typing import Any

from kemu.protocol.streams_v1 import (
    describe_request,
    describe_response,
    heartbeat_request,
    heartbeat_response,
)

STREAMS_GROUP_HEARTBEAT_KEY = 88
STREAMS_GROUP_DESCRIBE_KEY = 89

SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (STREAMS_GROUP_HEARTBEAT_KEY, 1): (
        heartbeat_request.StreamsGroupHeartbeatRequest,
        heartbeat_response.StreamsGroupHeartbeatResponse,
    ),
    (STREAMS_GROUP_DESCRIBE_KEY, 1): (
        describe_request.StreamsGroupDescribeRequest,
        describe_response.StreamsGroupDescribeResponse,
    ),
}
