"""What ``kemu serve`` imports before its ready line: only what a client's first requests need
(ApiVersions, and the handlers of Metadata, Fetch, ListOffsets and DescribeCluster), and what a
``kemu ctl`` call imports: none of the broker.

The other handler modules, the coordinators, the segment log and kemu's own schemas for newer
versions are imported on first use (or, for the handlers, in the background right after start):
a fresh start that imported them took about twice the CPU (docs/benchmarks.md). The coordinators
that replay a log at start-up are still loaded before the ready line when their topic exists.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kemu.broker.handlers import FIRST_REQUEST_MODULES
from kemu.cluster import model

pytestmark = pytest.mark.process

# Starts kemu as the console script does and prints sys.modules the moment the ready line comes.
PROBE = """
import builtins, json, os, sys
real_print = builtins.print
def print_at_ready(*args, **kwargs):
    if args and str(args[0]).startswith("kemu ready"):
        real_print(json.dumps(sorted(sys.modules)), flush=True)
        os._exit(0)
    real_print(*args, **kwargs)
builtins.print = print_at_ready
from kemu.entry import main
sys.argv = ["kemu", "serve", "--brokers", "1", "--port", "0", *sys.argv[1:]]
main()
"""

LOADED_ON_FIRST_USE = (
    "kemu.coordinator.",
    "kemu.broker.share.",
    "kemu.storage.segment",  # segments, segment_files, segment_reading, segment_cleaning
    "kemu.storage.compaction",
    "kemu.protocol.kafka44",
    "kemu.protocol.streams_v1",
    "kemu.protocol.kip1289.schemas",
    "urllib.request",
)
LOADED_AT_START = (
    "kemu.broker.handlers._index",
    "kemu.broker.handlers.api_versions",
    *FIRST_REQUEST_MODULES,
)


def modules_at_ready(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    return modules


@pytest.mark.parametrize("on_disk", [False, True], ids=["in-memory", "data-dir"])
def test_a_fresh_start_imports_only_what_the_first_api_versions_needs(
    on_disk: bool, tmp_path: Path
) -> None:
    modules = modules_at_ready(*(["--data-dir", str(tmp_path / "data")] if on_disk else []))
    assert "kemu.broker.server" in modules
    # what a client asks first is answered without importing a handler module after the ready line
    assert set(LOADED_AT_START) <= set(modules)
    early = [m for m in modules if m.startswith(LOADED_ON_FIRST_USE)]
    assert early == []
    handlers = [
        m for m in modules if m.startswith("kemu.broker.handlers.") and m not in LOADED_AT_START
    ]
    assert handlers == []


def test_the_start_path_names_the_coordinators_topics_as_they_do() -> None:
    # kemu.broker.server loads a coordinator at start only when its topic exists.
    from kemu.coordinator.share.service import SHARE_STATE_TOPIC
    from kemu.coordinator.transaction.service import TOPIC

    assert model.SHARE_STATE_TOPIC == SHARE_STATE_TOPIC
    assert model.TRANSACTION_STATE_TOPIC == TOPIC


# A placeholder's first request imports only its own module, so each config handler must itself
# load the modules that register the config resource types it serves. Run in a fresh interpreter.
RESOURCE_TYPES_PROBE = """
import importlib, json, sys
from kemu.broker.handlers import load_handlers
load_handlers() if sys.argv[1] == "all" else importlib.import_module(sys.argv[1])
from kemu.cluster.config_resources import RESOURCE_TYPES
print(json.dumps(sorted(RESOURCE_TYPES)))
"""


def resource_types_after_importing(module: str) -> list[int]:
    done = subprocess.run(
        [sys.executable, "-c", RESOURCE_TYPES_PROBE, module],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    types: list[int] = json.loads(done.stdout)
    return types


@pytest.mark.parametrize(
    "module", ["describe_configs", "alter_configs", "incremental_alter_configs"]
)
def test_a_config_handler_alone_serves_every_config_resource_type(module: str) -> None:
    alone = resource_types_after_importing(f"kemu.broker.handlers.{module}")
    assert alone == resource_types_after_importing("all")


# `kemu ctl` as the console script runs it, printing sys.modules as the interpreter exits.
CTL_PROBE = """
import atexit, json, os, sys
def modules_at_exit():
    sys.stdout.write(json.dumps(sorted(sys.modules)) + "\\n")
    sys.stdout.flush()
atexit.register(modules_at_exit)
from kemu.entry import main
sys.argv = ["kemu", "ctl", "--control", sys.argv[1], "health"]
raise SystemExit(main())
"""


def test_a_ctl_call_imports_neither_the_broker_nor_its_libraries() -> None:
    with socket.socket() as unused:  # bound, never listening: the call is refused
        unused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unused.getsockname()[1]}"
        done = subprocess.run(
            [sys.executable, "-c", CTL_PROBE, url], capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 2 and "kemu ctl: cannot reach" in done.stderr, done.stderr
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    assert "kemu.control.client" in modules
    heavy = ("kemu.broker", "kemu.coordinator", "kemu.storage", "kio", "structlog", "asyncio")
    assert [m for m in modules if m.split(".")[0] in heavy or m.startswith(heavy)] == []
