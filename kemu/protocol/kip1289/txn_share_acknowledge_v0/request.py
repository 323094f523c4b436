"""Written by hand from ``kemu/protocol/kip1289/TxnShareAcknowledgeRequest.json`` in the shape
kio generates, so kio's reader and writer (and kemu's ``wire.build``) handle it unchanged."""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import GroupId, ProducerId, TransactionalId
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

_KEY = i16(95)


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgeBatch:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _KEY
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    first_offset: i64 = field(metadata={"kafka_type": "int64"})
    last_offset: i64 = field(metadata={"kafka_type": "int64"})
    acknowledge_types: tuple[i8, ...] = field(metadata={"kafka_type": "int8"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgePartition:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _KEY
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    acknowledgement_batches: tuple[TxnShareAcknowledgeBatch, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgeTopic:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _KEY
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[TxnShareAcknowledgePartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgeRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _KEY
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    transactional_id: TransactionalId | None = field(metadata={"kafka_type": "string"})
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    producer_id: ProducerId = field(metadata={"kafka_type": "int64"})
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    topics: tuple[TxnShareAcknowledgeTopic, ...]
