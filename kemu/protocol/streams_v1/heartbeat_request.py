"""StreamsGroupHeartbeatRequest v1: the same fields as v0."""

from dataclasses import dataclass
from typing import ClassVar

from kio.schema.streams_group_heartbeat.v0 import request as v0
from kio.schema.streams_group_heartbeat.v0.request import (
    CopartitionGroup,
    Endpoint,
    KeyValue,
    Subtopology,
    TaskIds,
    TaskOffset,
    TopicInfo,
    Topology,
)
from kio.static.primitive import i16

__all__ = [
    "CopartitionGroup",
    "Endpoint",
    "KeyValue",
    "StreamsGroupHeartbeatRequest",
    "Subtopology",
    "TaskIds",
    "TaskOffset",
    "TopicInfo",
    "Topology",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupHeartbeatRequest(v0.StreamsGroupHeartbeatRequest):
    __version__: ClassVar[i16] = i16(1)
