"""Written by hand from ``kemu/protocol/kip1289/AddShareAcknowledgementsToTxnResponse.json`` in
the shape kio generates, so kio's reader and writer (and kemu's ``wire.build``) handle it
unchanged."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32Timedelta

_KEY = i16(96)


@dataclass(frozen=True, slots=True, kw_only=True)
class AddShareAcknowledgementsToTxnResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
