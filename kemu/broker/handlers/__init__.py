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
    from kemu.cluster.context import RequestContext, Runtime
    from kemu.config.definitions import BrokerConfig

# A handler returns the response body, or a coroutine of it when it must wait (a long poll, a
# coordinator); one that can answer at once is cheaper as a plain function.
HandlerFunction = Callable[["RequestContext", Any], Awaitable[Any] | Any]


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    api_key: int
    min_version: int
    max_version: int
    function: HandlerFunction
    module: str


REGISTRY: dict[int, HandlerSpec] = {}

# API keys served (and advertised) only when a boolean broker config turns them on: drafts of
# KIPs that no released Kafka has.
ENABLED_BY: dict[int, str] = {95: "kemu.kip1289.enable", 96: "kemu.kip1289.enable"}

# Draft APIs whose key on the wire is a broker config (their key moved between drafts, spec Q1):
# the key they are registered under here (their default) -> the config naming the wire key.
WIRE_KEY_CONFIGS: dict[int, str] = {
    95: "kemu.kip1289.txn.share.ack.api.key",
    96: "kemu.kip1289.add.api.key",
}
MAX_API_KEY = 32767  # an int16 on the wire


def is_enabled(runtime: Runtime, api_key: int) -> bool:
    name = ENABLED_BY.get(api_key)
    return name is None or runtime.cluster.config.get_bool(name)


def wire_keys(config: BrokerConfig) -> dict[int, int]:
    """Registered api key -> the key it is served at, for the APIs of ``WIRE_KEY_CONFIGS``."""
    return {api_key: config.get_int(name) for api_key, name in WIRE_KEY_CONFIGS.items()}


def moved_keys(config: BrokerConfig) -> dict[int, int | None]:
    """Wire key -> the registered api key served there, only where the two differ: a configured
    key maps to its API, a default key no API took over to None (not served)."""
    keys = wire_keys(config)
    moved: dict[int, int | None] = {
        wire: api_key for api_key, wire in keys.items() if wire != api_key
    }
    for api_key in keys:
        if api_key not in keys.values():
            moved[api_key] = None
    return moved


def check_wire_keys(config: BrokerConfig) -> None:
    """Refuse, at start-up, configured wire keys that are out of range, equal, or a key kemu
    serves a Kafka API at (the draft APIs' own default keys excepted)."""
    from kemu.broker.handlers._index import HANDLERS
    from kemu.config.definitions import InvalidConfig

    taken: dict[int, str] = {}
    for name in WIRE_KEY_CONFIGS.values():
        wire = config.get_int(name)
        if wire > MAX_API_KEY:
            raise InvalidConfig(
                f"Invalid value {wire} for configuration {name}: Value must be no more than "
                f"{MAX_API_KEY}"
            )
        if wire in HANDLERS and wire not in WIRE_KEY_CONFIGS:
            served = HANDLERS[wire][0].rpartition(".")[2]
            raise InvalidConfig(
                f"Invalid value {wire} for configuration {name}: api key {wire} is {served}, "
                "which kemu serves"
            )
        if wire in taken:
            raise InvalidConfig(
                f"Invalid value {wire} for configuration {name}: {taken[wire]} has the same api key"
            )
        taken[wire] = name


def handler(
    api_key: int, min_version: int, max_version: int
) -> Callable[[HandlerFunction], HandlerFunction]:
    def register(function: HandlerFunction) -> HandlerFunction:
        known = REGISTRY.get(api_key)
        if known is not None and known.function is not function and not _is_placeholder(known):
            raise RuntimeError(f"api key {api_key} registered twice")
        REGISTRY[api_key] = HandlerSpec(
            api_key, min_version, max_version, function, function.__module__
        )
        return function

    return register


def load_handlers() -> dict[int, HandlerSpec]:
    """Import every handler module in this package (idempotent)."""
    for name in handler_module_names():
        importlib.import_module(name)
    return REGISTRY


def handler_module_names() -> list[str]:
    return [
        f"{__name__}.{module.name}"
        for module in pkgutil.iter_modules(__path__)
        if not module.name.startswith("_")
    ]


# --- fast start: serve from the index, import each module on first use --------------------------

# Loaded before the ready line: what every client asks first (~10 ms), so that its first answers
# pay no import while the server warms the other handler modules. Not Produce: its module
# imports the transaction and share coordinators' modules (~20 ms), a fresh start none.
FIRST_REQUEST_MODULES = (
    f"{__name__}.metadata",
    f"{__name__}.fetch",
    f"{__name__}.list_offsets",
    f"{__name__}.describe_cluster",
)


def register_placeholders() -> None:
    """Fill the registry from ``_index`` without importing any handler module.

    Importing every handler (and the coordinators behind them) is most of kemu's start time. A
    placeholder advertises the same versions; the server imports the modules in the background
    right after it starts listening, and a request that arrives before that is done imports its
    own module first. Each module imports what its answers depend on (the config handlers the
    modules that register the GROUP and CLIENT_METRICS config resources), so an answer is the
    same whichever other handler modules are loaded yet. ApiVersions, which only reads this
    registry, is loaded for real, as are the ``FIRST_REQUEST_MODULES``.
    ``tests/unit/broker/handlers/test_handler_index.py`` keeps the index exact.
    """
    from kemu.broker.handlers import api_versions  # noqa: F401 - registers itself
    from kemu.broker.handlers._index import HANDLERS

    for name in FIRST_REQUEST_MODULES:
        importlib.import_module(name)

    for api_key, (module, min_version, max_version) in HANDLERS.items():
        if api_key not in REGISTRY:
            REGISTRY[api_key] = HandlerSpec(
                api_key, min_version, max_version, _placeholder(api_key, module), module
            )


def _placeholder(api_key: int, module: str) -> HandlerFunction:
    def load_then_handle(ctx: RequestContext, request: object) -> Any:
        importlib.import_module(module)
        real = REGISTRY[api_key]
        if _is_placeholder(real):
            raise RuntimeError(f"{module} did not register api key {api_key}")
        return real.function(ctx, request)

    load_then_handle.kemu_placeholder = True  # type: ignore[attr-defined]
    return load_then_handle


def _is_placeholder(spec: HandlerSpec) -> bool:
    return bool(getattr(spec.function, "kemu_placeholder", False))
