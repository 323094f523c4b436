"""ApiVersionsRequest v5 (KIP-1242): v4's fields, then ``ClusterId`` and ``NodeId``."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.api_versions.v4 import request as v4
from kio.static.primitive import i16, i32

__all__ = ["ApiVersionsRequest"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsRequest(v4.ApiVersionsRequest):
    __version__: ClassVar[i16] = i16(5)
    cluster_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The cluster ID the client intends to connect to. Provide both ClusterId and NodeId,
    if known."""
    node_id: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """The node ID the client intends to connect to. Provide both ClusterId and NodeId, if
    known."""
