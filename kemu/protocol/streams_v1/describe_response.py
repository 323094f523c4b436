"""StreamsGroupDescribeResponse v1 (Kafka 4.4): each group adds a topology description (KIP-1331),
its status and the assignor's name."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.streams_group_describe.v0.response import (
    Assignment,
    Endpoint,
    KeyValue,
    Member,
    Subtopology,
    TaskIds,
    TaskOffset,
    TopicInfo,
    Topology,
)
from kio.schema.types import GroupId
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta

__all__ = [
    "Assignment",
    "DescribedGroup",
    "Endpoint",
    "KeyValue",
    "Member",
    "StreamsGroupDescribeResponse",
    "Subtopology",
    "TaskIds",
    "TaskOffset",
    "TopicInfo",
    "Topology",
    "TopologyDescription",
    "TopologyDescriptionGlobalStore",
    "TopologyDescriptionNode",
    "TopologyDescriptionSubtopology",
]

_KEY = i16(89)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionNode:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: str = field(metadata={"kafka_type": "string"})
    node_type: i8 = field(metadata={"kafka_type": "int8"})
    source_topics: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    sink_topic: str | None = field(metadata={"kafka_type": "string"}, default=None)
    stores: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    successors: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionSubtopology:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    nodes: tuple[TopologyDescriptionNode, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionGlobalStore:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    source: TopologyDescriptionNode
    processor: TopologyDescriptionNode


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescription:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    subtopologies: tuple[TopologyDescriptionSubtopology, ...]
    global_stores: tuple[TopologyDescriptionGlobalStore, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedGroup:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    group_state: str = field(metadata={"kafka_type": "string"})
    group_epoch: i32 = field(metadata={"kafka_type": "int32"})
    assignment_epoch: i32 = field(metadata={"kafka_type": "int32"})
    topology: Topology | None = field(default=None)
    members: tuple[Member, ...]
    authorized_operations: i32 = field(
        metadata={"kafka_type": "int32"}, default=i32(-2147483648)
    )
    topology_description: TopologyDescription | None = field(default=None)
    topology_description_status: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    assignor_name: str | None = field(metadata={"kafka_type": "string"}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupDescribeResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    groups: tuple[DescribedGroup, ...]
