"""The OpenAPI 3.1 description of the control API, served at ``/openapi.json``: one operation
per row of the verb table (``table.py``), and the dashboard page."""

from __future__ import annotations

from typing import Any

from kemu.control.table import TABLE, Verb

_ERROR = {
    "description": "refused; nothing changed",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"error": {"type": "string"}},
                "required": ["error"],
            }
        }
    },
}


def _operation(verb: Verb) -> dict[str, Any]:
    if verb.content != "application/json":  # a page or Prometheus text: no JSON, no errors
        return {
            "summary": verb.summary,
            "responses": {"200": {"description": "done", "content": {verb.content: {}}}},
        }
    operation: dict[str, Any] = {
        "summary": verb.summary,
        "responses": {
            "201" if verb.created else "200": {
                "description": "done",
                "content": {"application/json": {"schema": {}}},
            },
            "400": _ERROR,
            "404": _ERROR,
            "409": _ERROR,
        },
    }
    if verb.params:
        operation["parameters"] = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in verb.params
        ]
    body = verb.body_schema()
    if body is not None:
        operation["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": body}},
        }
    return operation


_DASHBOARD = Verb(
    "dashboard", "GET", "/dashboard", "the live dashboard (HTML)", content="text/html"
)
_ROOT = {
    "get": {
        "summary": "leads to the dashboard",
        "responses": {"302": {"description": "Location: dashboard"}},
    }
}


def openapi() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {"/": _ROOT}
    for verb in (*TABLE, _DASHBOARD):
        paths.setdefault(verb.path, {})[verb.method.lower()] = _operation(verb)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "kemu control API",
            "version": "1",
            "description": "Fault injection, share-group and transaction verbs and a virtual "
            "clock for a running kemu (docs/control.md).",
        },
        "paths": paths,
    }
