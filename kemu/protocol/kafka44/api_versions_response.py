"""ApiVersionsResponse v5: the same fields as v4."""

from dataclasses import dataclass
from typing import ClassVar

from kio.schema.api_versions.v4 import response as v4
from kio.schema.api_versions.v4.response import (
    ApiVersion,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from kio.static.primitive import i16

__all__ = ["ApiVersion", "ApiVersionsResponse", "FinalizedFeatureKey", "SupportedFeatureKey"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsResponse(v4.ApiVersionsResponse):
    __version__: ClassVar[i16] = i16(5)
