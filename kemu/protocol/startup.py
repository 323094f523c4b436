"""Fast server start: load kio without its property-testing hooks.

When ``hypothesis`` is importable (any environment with kemu's test extras), kio registers a
hypothesis strategy for each of its primitive types as they are defined. That import costs
~80 ms and ~10 MB, and in a directory without a ``.hypothesis`` folder over a second, which
would make ``kemu serve`` start slower than Kafka. A server never generates test data, so the
CLI loads kio with hypothesis hidden for the duration of that one import; hypothesis itself
stays importable afterwards.
"""

from __future__ import annotations

import importlib
import sys

_ABSENT = object()


def import_kio_without_test_strategies() -> None:
    """Import kio's primitive types with hypothesis hidden; a no-op once kio is loaded."""
    if "kio.static._phantom" in sys.modules:
        return
    previous = sys.modules.get("hypothesis", _ABSENT)
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # makes its import fail
    try:
        importlib.import_module("kio.static.primitive")
    finally:
        if previous is _ABSENT:
            del sys.modules["hypothesis"]
        else:
            sys.modules["hypothesis"] = previous  # type: ignore[assignment]
