"""The control verbs, one row each: the list the HTTP routes (``http.py``), ``/openapi.json``
(``openapi.py``), ``kemu ctl`` and ``ControlClient`` (``client.py``) are all derived from.

A row names the verb as ``kemu ctl`` spells it, its HTTP method and path (``{placeholders}`` are
its positional arguments, in order), a one-line summary, the JSON schema of its body (None: it
takes none) and the ``Control`` method (``verbs.py``) that answers it: called with the path's
parameters, then the body when the verb takes one. Adding a verb is one row here and its
``Control`` method; ``ControlClient`` then has it as a method too (``python`` names it).

Standard library only: ``kemu serve`` imports this (through ``client.py``) for its --help.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Schema = dict[str, Any]


@dataclass(frozen=True)
class Verb:
    name: str
    method: str
    path: str
    summary: str
    # The body's JSON schema (a function for one that imports what it names), None: no body.
    body: Schema | Callable[[], Schema] | None = None
    # The ``Control`` method answering it; None: served by ``http.py`` itself (pages, metrics).
    control: str | None = None
    created: bool = False  # 201 rather than 200
    content: str = "application/json"
    python: str | None = None  # the ControlClient method, when not ``name`` with underscores

    @property
    def params(self) -> list[str]:
        return [part[1:-1] for part in self.path.split("/") if part.startswith("{")]

    @property
    def method_name(self) -> str:
        return self.python or self.name.replace("-", "_")

    def body_schema(self) -> Schema | None:
        return self.body() if callable(self.body) else self.body


def obj(**properties: Any) -> Schema:
    """A JSON object schema with exactly these (optional) properties."""
    return {"type": "object", "additionalProperties": False, "properties": properties}


INT: Schema = {"type": "integer"}
BOOL: Schema = {"type": "boolean"}
STR: Schema = {"type": "string"}
RANGE = obj(first_offset=INT, last_offset=INT)
SHARE = "/share-groups/{group}/{topic}/{partition}"


def fault_rules() -> Schema:
    """A fault rule, or a list of them (all or none)."""
    from kemu.broker.faults import KINDS

    rule = obj(
        kind={"enum": list(KINDS), "default": "error"},
        api={"type": "string", "description": "API name, e.g. produce, fetch, share_fetch"},
        api_key=INT,
        error={"type": "string", "description": "error name, e.g. NOT_LEADER_OR_FOLLOWER"},
        error_code=INT,
        latency_ms=INT,
        count={"type": ["integer", "null"], "default": 1, "description": "null: until cleared"},
        fraction={"type": "number", "default": 1.0},
        ttl_ms={"type": "integer", "description": "the rule goes after this much clock time"},
        topic=STR,
        partition=INT,
        group=STR,
        transactional_id=STR,
        client_id=STR,
        broker=INT,
    )
    return {"oneOf": [rule, {"type": "array", "items": rule}]}


# fmt: off
TABLE: tuple[Verb, ...] = (
    Verb("health", "GET", "/health", "process, brokers and clock", control="health"),
    Verb("openapi", "GET", "/openapi.json", "the OpenAPI description"),
    Verb("metrics", "GET", "/metrics", "Prometheus metrics (text)", content="text/plain"),
    Verb("state", "GET", "/state", "what the dashboard shows (/dashboard), as JSON"),
    Verb("brokers", "GET", "/brokers", "the brokers, down or up, with connection counts",
         control="brokers"),
    Verb("broker-down", "POST", "/brokers/{node}/down",
         "refuse connections on a broker and close its open ones", control="broker_down"),
    Verb("broker-up", "POST", "/brokers/{node}/up", "accept connections again",
         control="broker_up"),
    Verb("broker-stop", "POST", "/brokers/{node}/stop",
         "stop a broker: its port refuses, its connections close, its leaderships and "
         "coordinators move (new leader epochs; RF 1 partitions go offline)",
         control="broker_stop"),
    Verb("broker-start", "POST", "/brokers/{node}/start",
         "start a stopped broker as a follower (elect_preferred=true: its leaderships back)",
         body=obj(elect_preferred=BOOL), control="broker_start"),
    Verb("move-leader", "POST", "/partitions/{topic}/{partition}/leader",
         "move a partition's leader (new leader epoch)", body=obj(broker=INT),
         control="move_leader"),
    Verb("faults", "GET", "/faults", "list fault rules", control="list_faults"),
    Verb("add-fault", "POST", "/faults", "install a fault rule, or a list of rules (all or none)",
         body=fault_rules, control="install_faults", created=True),
    Verb("clear-faults", "DELETE", "/faults", "remove every fault rule", control="clear_faults"),
    Verb("delete-fault", "DELETE", "/faults/{rule}", "remove one fault rule",
         control="delete_fault"),
    Verb("share-groups", "GET", "/share-groups", "share groups and their members",
         control="share_groups"),
    Verb("kick", "DELETE", "/share-groups/{group}/members/{member}",
         "remove a member from a share group", control="kick"),
    Verb("share-state", "GET", SHARE, "record states of a share partition",
         control="share_dump"),
    Verb("expire-locks", "POST", SHARE + "/expire-locks",
         "expire acquisition locks now (member_id=... for one member)",
         body=obj(member_id=STR), control="expire_locks"),
    Verb("release", "POST", SHARE + "/release",
         "make records AVAILABLE (first_offset=, last_offset=)", body=RANGE, control="release"),
    Verb("archive", "POST", SHARE + "/archive",
         "make records ARCHIVED (first_offset=, last_offset=)", body=RANGE, control="archive"),
    Verb("transactions", "GET", "/transactions",
         "open transactions, what they staged, the markers left", control="transactions"),
    Verb("abort-txn", "POST", "/transactions/{tid}/abort",
         "abort as on a transaction timeout (producer fenced)", control="abort_transaction",
         python="abort_transaction"),
    Verb("commit-txn", "POST", "/transactions/{tid}/commit", "commit as an EndTxn commit would",
         control="commit_transaction", python="commit_transaction"),
    Verb("clock", "GET", "/clock", "the clock: real or virtual, now", control="clock"),
    Verb("advance", "POST", "/clock/advance",
         "move a virtual clock forward, firing every timer due (duration=15m or ms=N)",
         body=obj(ms=INT, duration={"type": "string", "description": "e.g. 60s, 15m"}),
         control="advance"),
)
# fmt: on

VERBS: dict[str, Verb] = {verb.name: verb for verb in TABLE}
