"""The control plane's part of the command line: ``kemu serve --control-port/--clock`` and
``kemu ctl``."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from kemu.control.client import VERBS, ctl_main

CONTROL_ENV = "KEMU_CONTROL"
DEFAULT_CONTROL_URL = "http://127.0.0.1:9192"


def tcp_port(text: str) -> int:
    """An argparse type: 0-65535 (an out-of-range port would wrap: 70000 listened on 4464)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (0-65535)")
    return port


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--control-port",
        type=tcp_port,
        default=None,
        help="serve the HTTP control API on this port (0: any free port); printed in the ready "
        "line as control=URL",
    )
    serve.add_argument(
        "--control-host",
        default="127.0.0.1",
        help="address of the control API (loopback by default: it can break the cluster)",
    )
    serve.add_argument(
        "--clock",
        choices=("real", "virtual"),
        default="real",
        help="virtual: time stands still until `kemu ctl advance` (implies a control port)",
    )


def add_ctl_parser(commands: Any) -> None:
    verbs = ", ".join(VERBS)
    ctl = commands.add_parser(
        "ctl",
        help="call a verb of a running kemu's control API",
        description=f"verbs: {verbs}. Path arguments come first, then key=value body fields "
        "(values are JSON when they parse as JSON), or --json BODY. See docs/control.md.",
    )
    ctl.add_argument(
        "--control",
        default=None,
        metavar="URL",
        help=f"the control API (default: ${CONTROL_ENV}, else {DEFAULT_CONTROL_URL}, where "
        "`make serve` and `kemu serve --control-port 9192` serve it)",
    )
    ctl.add_argument("--json", dest="body_json", default=None, help="the JSON body")
    ctl.add_argument("verb")
    ctl.add_argument("words", nargs="*", help="path arguments, then key=value fields")


def run_ctl(args: argparse.Namespace) -> int:
    url, source = control_url(args.control, os.environ)
    return ctl_main(url, args.verb, args.words, args.body_json, source=source)


def control_url(flag: str | None, environ: Mapping[str, str]) -> tuple[str, str]:
    """The control API's URL and where it came from: --control, then $KEMU_CONTROL, then the
    usual local port."""
    if flag:
        return flag, "--control"
    if environ.get(CONTROL_ENV):
        return environ[CONTROL_ENV], f"from ${CONTROL_ENV}"
    return DEFAULT_CONTROL_URL, "the default URL"


def use_virtual_clock(server: Any, args: argparse.Namespace) -> None:
    """Before ``server.start()``: --clock virtual replaces the runtime's clock."""
    if args.clock != "virtual":
        return
    from kemu.cluster.clock import VirtualClock

    runtime = server.runtime
    runtime.clock = VirtualClock(runtime.clock_ms())
    runtime.clock_ms = runtime.clock.now_ms


async def start_control(server: Any, args: argparse.Namespace) -> Any:
    """After ``server.start()``: the control API, or None when not asked for."""
    port = args.control_port
    if port is None and args.clock == "virtual":
        port = 0
    if port is None:
        return None
    from kemu.control.http import ControlServer

    control = ControlServer(server.runtime, args.control_host, port)
    await control.start()
    return control
