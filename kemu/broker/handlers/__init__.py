"""One module per API key. Each module registers its handler with ``@handler(key, min, max)``.

ApiVersions is built from this registry, so what kemu advertises is exactly what it serves.
List this folder to audit coverage; each module's docstring gives versions, behaviour and
deliberate omissions.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kemu.broker.context import RequestContext

HandlerFunction = Callable[["RequestContext", Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    api_key: int
    min_version: int
    max_version: int
    function: HandlerFunction
    module: str


REGISTRY: dict[int, HandlerSpec] = {}


def handler(
    api_key: int, min_version: int, max_version: int
) -> Callable[[HandlerFunction], HandlerFunction]:
    def register(function: HandlerFunction) -> HandlerFunction:
        if api_key in REGISTRY and REGISTRY[api_key].function is not function:
            raise RuntimeError(f"api key {api_key} registered twice")
        REGISTRY[api_key] = HandlerSpec(
            api_key, min_version, max_version, function, function.__module__
        )
        return function

    return register


def load_handlers() -> dict[int, HandlerSpec]:
    """Import every handler module in this package (idempotent)."""
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    return REGISTRY
