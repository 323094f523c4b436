"""StreamsGroupHeartbeatResponse v1 (Kafka 4.4)."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.streams_group_heartbeat.v0.response import (
    Endpoint,
    EndpointToPartitions,
    Status,
    TaskIds,
    TopicPartition,
)
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

__all__ = [
    "Endpoint",
    "EndpointToPartitions",
    "Status",
    "StreamsGroupHeartbeatResponse",
    "TaskIds",
    "TopicPartition",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupHeartbeatResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    heartbeat_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    task_offset_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    acceptable_recovery_lag: i64 = field(metadata={"kafka_type": "int64"})
    status: tuple[Status, ...] | None
    active_tasks: tuple[TaskIds, ...] | None
    standby_tasks: tuple[TaskIds, ...] | None
    warmup_tasks: tuple[TaskIds, ...] | None
    topology_description_required: bool = field(metadata={"kafka_type": "bool"}, default=False)
    endpoint_information_epoch: i32 = field(metadata={"kafka_type": "int32"})
    partitions_by_user_endpoint: tuple[EndpointToPartitions, ...] | None
