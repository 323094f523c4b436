"""Process-level start and memory tuning: kio loads without hypothesis and structlog without
rich in the server process, both stay importable, and glibc's allocator tuning applies (or is
skipped) quietly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kemu.broker.allocator import keep_freed_memory

pytestmark = pytest.mark.process

PROBE = """
import sys
from kemu.protocol.startup import import_kio_without_test_strategies
import_kio_without_test_strategies()
assert "hypothesis" not in sys.modules, "kio pulled hypothesis in"
import kemu.protocol.wire
assert "hypothesis" not in sys.modules
import hypothesis.strategies
print("ok")
"""


def test_kio_loads_without_hypothesis_which_stays_importable() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


ENTRY_PROBE = """
import sys
from kemu.protocol.startup import import_structlog_without_rich
import_structlog_without_rich()
import kemu.cli
assert "rich" not in sys.modules, "structlog pulled rich in"
import rich
print("ok")
"""


def test_the_console_entry_loads_structlog_without_rich_which_stays_importable() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ENTRY_PROBE], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_allocator_tuning_is_safe_to_call_twice() -> None:
    first = keep_freed_memory()
    assert keep_freed_memory() == first
