"""The OpenAPI 3.1 description of the control API, served at ``/openapi.json``."""

from __future__ import annotations

from typing import Any

from kemu.broker.faults import KINDS

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


def _op(
    summary: str,
    *,
    params: tuple[str, ...] = (),
    body: dict[str, Any] | None = None,
    created: bool = False,
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": {
            "201" if created else "200": {
                "description": "done",
                "content": {"application/json": {"schema": {}}},
            },
            "400": _ERROR,
            "404": _ERROR,
            "409": _ERROR,
        },
    }
    if params:
        operation["parameters"] = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in params
        ]
    if body is not None:
        operation["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": body}},
        }
    return operation


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": properties}


_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}
_STR = {"type": "string"}
_RULE = _object(
    kind={"enum": list(KINDS), "default": "error"},
    api={"type": "string", "description": "API name, e.g. produce, fetch, share_fetch"},
    api_key=_INT,
    error={"type": "string", "description": "error name, e.g. NOT_LEADER_OR_FOLLOWER"},
    error_code=_INT,
    latency_ms=_INT,
    count={"type": ["integer", "null"], "default": 1, "description": "null: until cleared"},
    fraction={"type": "number", "default": 1.0},
    ttl_ms={"type": "integer", "description": "the rule goes after this much clock time"},
    topic=_STR,
    partition=_INT,
    group=_STR,
    transactional_id=_STR,
    client_id=_STR,
    broker=_INT,
)
_SHARE = ("group", "topic", "partition")
_RANGE = _object(first_offset=_INT, last_offset=_INT)


def openapi() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "kemu control API",
            "version": "1",
            "description": "Fault injection, share-group and transaction verbs and a virtual "
            "clock for a running kemu (docs/control.md).",
        },
        "paths": {
            "/health": {"get": _op("process, brokers and clock")},
            "/brokers": {"get": _op("the virtual brokers, down or up, with connection counts")},
            "/brokers/{node}/down": {
                "post": _op(
                    "refuse connections on a broker and close its open ones", params=("node",)
                )
            },
            "/brokers/{node}/up": {"post": _op("accept connections again", params=("node",))},
            "/brokers/{node}/stop": {
                "post": _op(
                    "stop a broker: its port refuses, its connections close, its leaderships "
                    "and coordinators move (new leader epochs; RF 1 partitions go offline)",
                    params=("node",),
                )
            },
            "/brokers/{node}/start": {
                "post": _op(
                    "start a stopped broker as a follower; elect_preferred gives it back the "
                    "partitions it prefers",
                    params=("node",),
                    body=_object(elect_preferred=_BOOL),
                )
            },
            "/partitions/{topic}/{partition}/leader": {
                "post": _op(
                    "move a partition's leader (new leader epoch)",
                    params=("topic", "partition"),
                    body=_object(broker=_INT),
                )
            },
            "/faults": {
                "get": _op("the installed fault rules"),
                "post": _op(
                    "install a rule, or a list of rules (all or none)",
                    body={"oneOf": [_RULE, {"type": "array", "items": _RULE}]},
                    created=True,
                ),
                "delete": _op("remove every rule"),
            },
            "/faults/{rule}": {"delete": _op("remove one rule", params=("rule",))},
            "/share-groups": {"get": _op("share groups and their members")},
            "/share-groups/{group}/members/{member}": {
                "delete": _op("kick a member from a share group", params=("group", "member"))
            },
            "/share-groups/{group}/{topic}/{partition}": {
                "get": _op("the record states of a share partition", params=_SHARE)
            },
            "/share-groups/{group}/{topic}/{partition}/expire-locks": {
                "post": _op(
                    "expire the acquisition locks of one member (or all) now",
                    params=_SHARE,
                    body=_object(member_id=_STR),
                )
            },
            "/share-groups/{group}/{topic}/{partition}/release": {
                "post": _op("make records AVAILABLE", params=_SHARE, body=_RANGE)
            },
            "/share-groups/{group}/{topic}/{partition}/archive": {
                "post": _op("make records ARCHIVED", params=_SHARE, body=_RANGE)
            },
            "/transactions": {"get": _op("open transactions and what they staged")},
            "/transactions/{tid}/abort": {
                "post": _op("abort as on a transaction timeout (producer fenced)", params=("tid",))
            },
            "/transactions/{tid}/commit": {
                "post": _op("commit as an EndTxn commit would", params=("tid",))
            },
            "/clock": {"get": _op("the clock: real or virtual, now")},
            "/clock/advance": {
                "post": _op(
                    "move a virtual clock forward, firing every timer due",
                    body=_object(
                        ms=_INT, duration={"type": "string", "description": "e.g. 60s, 15m"}
                    ),
                )
            },
            "/openapi.json": {"get": _op("this description")},
            "/": {
                "get": {
                    "summary": "leads to the dashboard",
                    "responses": {"302": {"description": "Location: dashboard"}},
                }
            },
            "/dashboard": {
                "get": {
                    "summary": "the live dashboard (HTML)",
                    "responses": {"200": {"description": "page", "content": {"text/html": {}}}},
                }
            },
            "/state": {"get": _op("what the dashboard shows, as JSON")},
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics (text format)",
                    "responses": {"200": {"description": "metrics", "content": {"text/plain": {}}}},
                }
            },
        },
    }
