"""The control plane's HTTP API (aiohttp), on its own port beside the Kafka listeners.

JSON in and out; every error is ``{"error": message}`` with a 4xx status (5xx only for a bug).
The routes and their bodies are described in ``/openapi.json`` (``kemu/control/openapi.py``) and
``docs/control.md``. Handlers run on the broker's event loop and never wait on a Kafka client.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

from kemu.cluster.clock import VirtualClock
from kemu.cluster.context import Runtime
from kemu.control.dashboard import snapshot
from kemu.control.metrics import CONTENT_TYPE, metrics_registry, render
from kemu.control.openapi import openapi
from kemu.control.page import PAGE
from kemu.control.table import TABLE, Verb
from kemu.control.verbs import Control, ControlError, bad_request

log = structlog.get_logger("kemu.control")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
CONTROL = web.AppKey("control", Control)
MAX_BODY_BYTES = 1 << 20


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, default=str))


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ControlError as error:
        log.info("control_refused", path=request.path, status=error.status, reason=error.message)
        return _json({"error": error.message}, error.status)
    except web.HTTPNotFound:
        return _json({"error": f"unknown verb: {request.method} {request.path}"}, 404)
    except web.HTTPMethodNotAllowed as error:
        allowed = ", ".join(sorted(error.allowed_methods))
        return _json(
            {"error": f"{request.method} is not allowed on {request.path} (allowed: {allowed})"},
            405,
        )
    except web.HTTPException as error:
        return _json({"error": error.reason}, error.status)
    except Exception:
        log.exception("control_failed", path=request.path)
        return _json({"error": "internal error (see kemu's log)"}, 500)


async def _body(request: web.Request) -> Any:
    if not request.can_read_body:
        return {}
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise bad_request(f"the body is not JSON: {error}") from None


async def _object(request: web.Request) -> dict[str, Any]:
    body = await _body(request)
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    return body


def _control(request: web.Request) -> Control:
    return request.app[CONTROL]


def build_app(runtime: Runtime) -> web.Application:
    app = web.Application(middlewares=[_errors], client_max_size=MAX_BODY_BYTES)
    app[CONTROL] = Control(runtime)
    registry = metrics_registry(runtime)

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=render(registry), headers={"Content-Type": CONTENT_TYPE})

    async def dashboard(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def root(request: web.Request) -> web.Response:
        # relative, so the page is found behind a proxy that mounts the API under a path
        return web.Response(status=302, headers={"Location": "dashboard"})

    async def state(request: web.Request) -> web.Response:
        return _json(snapshot(runtime, _control(request)))

    async def get_openapi(request: web.Request) -> web.Response:
        return _json(openapi())

    app.add_routes(
        [
            web.get("/openapi.json", get_openapi),
            web.get("/metrics", metrics),
            web.get("/", root),
            web.get("/dashboard", dashboard),
            web.get("/state", state),
        ]
    )
    app.add_routes(
        [
            # web.get also answers HEAD
            web.get(verb.path, _route(verb))
            if verb.method == "GET"
            else web.route(verb.method, verb.path, _route(verb))
            for verb in TABLE
            if verb.control
        ]
    )
    return app


def _route(verb: Verb) -> Handler:
    """The route of a table row: its ``Control`` method called with the path's parameters, then
    the JSON body when the verb takes one (a JSON object, or any JSON for a ``oneOf``)."""
    assert verb.control is not None
    method_name, params, status = verb.control, verb.params, 201 if verb.created else 200
    schema = verb.body_schema()
    read_body = None if schema is None else _object if schema.get("type") == "object" else _body

    async def route(request: web.Request) -> web.Response:
        args: list[Any] = [request.match_info[name] for name in params]
        if read_body is not None:
            args.append(await read_body(request))
        answer = getattr(_control(request), method_name)(*args)
        if inspect.isawaitable(answer):
            answer = await answer
        return _json(answer, status)

    route.__name__ = method_name
    return route


class ControlServer:
    """The control API listening on ``host:port`` (port 0: any free port)."""

    def __init__(self, runtime: Runtime, host: str = "127.0.0.1", port: int = 0) -> None:
        self.runtime = runtime
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        app = build_app(self.runtime)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        try:
            await site.start()
        except OSError as error:
            await runner.cleanup()
            from kemu.broker.server import ListenError

            reason = os.strerror(error.errno) if error.errno else str(error)
            raise ListenError(
                f"Control API failed to bind to {self.host}:{self.port}: {reason}."
            ) from None
        self._runner = runner
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        if isinstance(self.runtime.clock, VirtualClock):
            _virtual_retention(self.runtime)
        return self.url

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def _virtual_retention(runtime: Runtime) -> None:
    """With a virtual clock, retention also runs every ``log.retention.check.interval.ms`` of
    virtual time, so an ``advance`` past ``retention.ms`` deletes the segments at once."""
    from kemu.broker.housekeeping import apply_retention

    interval = max(1, runtime.cluster.config.get_int("log.retention.check.interval.ms"))

    def check() -> None:
        try:
            apply_retention(runtime)
        except Exception:
            log.exception("retention_failed")
        runtime.clock.call_later(interval, check)

    runtime.clock.call_later(interval, check)
