"""DeleteGroupsRequest v3: the same fields as v2."""

from dataclasses import dataclass
from typing import ClassVar

from kio.schema.delete_groups.v2 import request as v2
from kio.static.primitive import i16

__all__ = ["DeleteGroupsRequest"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsRequest(v2.DeleteGroupsRequest):
    __version__: ClassVar[i16] = i16(3)
