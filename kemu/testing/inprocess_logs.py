"""Where an in-process kemu's log goes: the log of ``kemu serve``, for a kemu in a thread.

structlog's configuration is the process's, shared by every kemu running in it and by the test
itself, so while at least one in-process kemu runs, events are routed by the thread that emits
them: an event from a kemu's loop thread is rendered as ``kemu serve`` renders it (``info`` and
up; key=value lines, or JSON lines as with ``--json-logs``) into that kemu's log file, or to
stderr when it has none; an event from any other thread (the test's own) is printed as
structlog's defaults print it. The last kemu to stop puts the previous configuration back, so
tests that capture logs (``structlog.testing.capture_logs``) see structlog as they left it.
"""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, WrappedLogger

SERVE_LEVEL = logging.INFO  # kemu serve's --log-level default


class _Sink:
    """One kemu's log: a renderer and an open file (or stderr)."""

    def __init__(self, path: Path | None, json_logs: bool) -> None:
        self.renderer: Any = (
            structlog.processors.JSONRenderer()
            if json_logs
            else structlog.dev.ConsoleRenderer(colors=False)
        )
        self._file: TextIO | None = path.open("a") if path is not None else None
        self.lock = threading.Lock()

    def write(self, line: str) -> None:
        out = self._file if self._file is not None else sys.stderr
        with self.lock:
            out.write(line + "\n")
            out.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


_sinks: dict[int, _Sink] = {}  # loop thread's ident -> its kemu's log
_saved: dict[str, Any] | None = None
_lock = threading.Lock()
_default_renderer = structlog.dev.ConsoleRenderer(colors=False)


def _render(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> str:
    sink = _sinks.get(threading.get_ident())
    if sink is None:
        rendered: str = _default_renderer(logger, method_name, event_dict)
        return rendered
    level = logging.getLevelName(str(event_dict.get("level", "info")).upper())
    if isinstance(level, int) and level < SERVE_LEVEL:
        raise structlog.DropEvent
    rendered = sink.renderer(logger, method_name, event_dict)
    return rendered


class _RoutedLogger:
    """structlog's final logger: a kemu thread's line to its sink, anything else to stdout."""

    def msg(self, message: str) -> None:
        sink = _sinks.get(threading.get_ident())
        if sink is None:
            print(message, file=sys.stdout, flush=True)
        else:
            sink.write(message)

    debug = info = warning = warn = error = critical = exception = fatal = log = msg


def _routed_logger(*args: Any) -> _RoutedLogger:
    return _RoutedLogger()


def route(thread_ident: int, path: Path | None, json_logs: bool) -> None:
    """Send the events of ``thread_ident`` to ``path`` (stderr when None) from now on."""
    global _saved
    with _lock:
        if not _sinks:
            _saved = structlog.get_config()
            structlog.configure(
                processors=[
                    structlog.contextvars.merge_contextvars,
                    structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso"),
                    structlog.processors.format_exc_info,
                    _render,
                ],
                logger_factory=_routed_logger,
                cache_logger_on_first_use=False,
            )
        _sinks[thread_ident] = _Sink(path, json_logs)


def unroute(thread_ident: int) -> None:
    """Close ``thread_ident``'s log; the last one puts structlog's configuration back."""
    global _saved
    with _lock:
        sink = _sinks.pop(thread_ident, None)
        if sink is not None:
            sink.close()
        if not _sinks and _saved is not None:
            structlog.configure(**_saved)
            _saved = None
