"""Fast server start: load kio and structlog without their optional extras.

When ``hypothesis`` is importable (any environment with kemu's test extras), kio registers a
hypothesis strategy for each of its primitive types as they are defined. That import costs
~80 ms and ~10 MB, and in a directory without a ``.hypothesis`` folder over a second, which
would make ``kemu serve`` start slower than Kafka. A server never generates test data, so the
CLI loads kio with hypothesis hidden for the duration of that one import; hypothesis itself
stays importable afterwards.

Likewise structlog loads ``rich`` for pretty tracebacks when it is importable (the dev tools
bring it): ~0.1 s of a 0.5 s start on the 2-core machine. kemu's log configuration formats
exceptions itself (``format_exc_info``), so the console entry point (``kemu.entry``) imports
structlog with rich hidden before anything else does.
"""

from __future__ import annotations

import importlib
import sys

_ABSENT = object()


def import_kio_without_test_strategies() -> None:
    """Import kio's primitive types with hypothesis hidden; a no-op once kio is loaded."""
    _import_hiding("kio.static.primitive", "kio.static._phantom", "hypothesis")


def import_structlog_without_rich() -> None:
    """Import structlog with rich hidden; a no-op once structlog is loaded."""
    _import_hiding("structlog", "structlog", "rich")


def _import_hiding(module: str, loaded_marker: str, hidden: str) -> None:
    if loaded_marker in sys.modules:
        return
    previous = sys.modules.get(hidden, _ABSENT)
    sys.modules[hidden] = None  # type: ignore[assignment]  # makes its import fail
    try:
        importlib.import_module(module)
    finally:
        if previous is _ABSENT:
            del sys.modules[hidden]
        else:
            sys.modules[hidden] = previous  # type: ignore[assignment]
