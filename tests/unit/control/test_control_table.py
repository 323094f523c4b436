"""The control verb table is the one list: each row is an HTTP route, an /openapi.json
operation, a ``kemu ctl`` verb and a ``ControlClient`` method."""

from __future__ import annotations

import pytest

from kemu.control import client as client_module
from kemu.control import http, openapi, table
from kemu.control.client import VERBS, ControlClient
from kemu.control.table import TABLE, Verb, obj
from kemu.control.verbs import Control
from kemu.testing.harness import HandlerHarness


def _routes() -> set[tuple[str, str]]:
    app = http.build_app(HandlerHarness(brokers=1).runtime)
    return {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None and route.method != "HEAD"
    }


def test_every_row_is_a_route_an_operation_a_verb_and_a_method() -> None:
    routes = _routes()
    paths = openapi.openapi()["paths"]
    client = ControlClient("http://127.0.0.1:1")
    for verb in TABLE:
        assert (verb.method, verb.path) in routes, verb
        assert verb.method.lower() in paths[verb.path], verb
        assert VERBS[verb.name] is verb
        assert callable(getattr(client, verb.method_name)), verb
        if verb.control is not None:
            assert callable(getattr(Control, verb.control)), verb


def test_one_row_adds_a_verb(monkeypatch: pytest.MonkeyPatch) -> None:
    row = Verb(
        "resign",
        "POST",
        "/brokers/{node}/resign",
        "give up",
        body=obj(to=table.INT),
        control="health",
    )
    monkeypatch.setattr(table, "TABLE", (*TABLE, row))
    monkeypatch.setattr(http, "TABLE", (*TABLE, row))
    monkeypatch.setattr(openapi, "TABLE", (*TABLE, row))
    monkeypatch.setitem(VERBS, "resign", row)
    monkeypatch.setitem(client_module._BY_METHOD, "resign", row)
    assert ("POST", "/brokers/{node}/resign") in _routes()
    operation = openapi.openapi()["paths"]["/brokers/{node}/resign"]["post"]
    assert operation["parameters"][0]["name"] == "node"
    calls: list[tuple[str, str, object]] = []
    client = ControlClient("http://127.0.0.1:1")
    monkeypatch.setattr(client, "request", lambda *args: calls.append(args))
    client.resign(2, to=3)
    assert calls == [("POST", "/brokers/2/resign", {"to": 3})]


def test_an_unknown_method_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        ControlClient("http://127.0.0.1:1").no_such_verb()
