"""DeleteGroupsResponse v3: each result adds a nullable ``ErrorMessage`` after its error code."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.delete_groups.v2 import response as v2
from kio.static.primitive import i16

__all__ = ["DeletableGroupResult", "DeleteGroupsResponse"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletableGroupResult(v2.DeletableGroupResult):
    __version__: ClassVar[i16] = i16(3)
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The error message, or null if there was no error."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsResponse(v2.DeleteGroupsResponse):
    __version__: ClassVar[i16] = i16(3)
    results: tuple[DeletableGroupResult, ...]
    """The deletion results."""
