"""Fault rules the control plane installs and the connections apply (``docs/control.md``).

A rule names an API key and, optionally, what a request must touch (topic, partition, group,
transactional id, client id, broker); the next ``count`` matching requests (or a ``fraction`` of
them, until the rule's deadline) get its fault:

- ``error``: the error answer of that API with ``error_code`` everywhere
  (``kemu/protocol/error_responses.py``), the handler not run;
- ``latency``: the answer ``latency_ms`` late (any rule may also carry ``latency_ms``);
- ``drop_before``: the connection closes, the request not applied;
- ``drop_after``: the request is applied, then the connection closes without its answer;
- ``torn``: the request is applied and half of its answer's frame is sent, then the connection
  closes.

Rules are indexed by API key, so a request costs one dict lookup when no rule names its key.
Broker down/up and leader moves are done by the server (``KemuServer``), not by rules.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import uuid
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import structlog

from kemu.cluster import seeded
from kemu.cluster.context import Runtime
from kemu.cluster.services import Service
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.wire import DecodedRequest

log = structlog.get_logger("kemu.faults")

SERVICE = "faults"
KINDS = ("error", "latency", "drop_before", "drop_after", "torn")
MAX_LATENCY_MS = 600_000


class RuleError(ValueError):
    """A rule that cannot be installed (unknown API key, error code, kind, ...)."""


@dataclass
class FaultRule:
    id: int
    kind: str
    api_key: int
    error_code: int = 0
    latency_ms: int = 0
    count: int | None = 1  # remaining; None: until the deadline (or cleared)
    fraction: float = 1.0
    deadline_ms: int | None = None  # clock time after which the rule is gone
    topic: str | None = None
    partition: int | None = None
    group: str | None = None
    transactional_id: str | None = None
    client_id: str | None = None
    broker: int | None = None
    fired: int = 0

    def describe(self) -> dict[str, Any]:
        described = dataclasses.asdict(self)
        described["api"] = wire.api_name(self.api_key)
        if self.kind == "error":
            described["error_name"] = ErrorCode(self.error_code).name.upper()
        return described


@dataclass
class FaultTable:
    """The installed rules of one process, and which connections each node has."""

    runtime: Runtime
    by_key: dict[int, list[FaultRule]] = field(default_factory=dict)
    connections: dict[int, weakref.WeakSet[Any]] = field(default_factory=dict)
    down: set[int] = field(default_factory=set)
    injected: dict[str, int] = field(default_factory=dict)  # kind -> faults injected so far
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    random: random.Random = field(default_factory=seeded.derived_random)
    # per api key, the rules by the client id they name (None: any client), rebuilt when the
    # rules change, so that rules for other clients cost a request nothing
    _by_client: dict[int, dict[str | None, list[FaultRule]]] = field(default_factory=dict)

    def add(self, spec: dict[str, Any]) -> FaultRule:
        rule = _parse(spec, next(self._ids), self.runtime)
        self.by_key.setdefault(rule.api_key, []).append(rule)
        self._by_client.pop(rule.api_key, None)
        log.info("fault_rule_added", **rule.describe())
        return rule

    def add_all(self, specs: list[Any]) -> list[FaultRule]:
        """Install every rule or, when one is refused, none."""
        ids = itertools.count(0)
        parsed = [_parse(spec, next(ids), self.runtime) for spec in specs]
        for rule in parsed:
            rule.id = next(self._ids)
            self.by_key.setdefault(rule.api_key, []).append(rule)
            self._by_client.pop(rule.api_key, None)
            log.info("fault_rule_added", **rule.describe())
        return parsed

    def rules(self) -> list[FaultRule]:
        self._expire()
        return sorted((r for rules in self.by_key.values() for r in rules), key=lambda r: r.id)

    def remove(self, rule_id: int) -> bool:
        for key, rules in list(self.by_key.items()):
            for rule in rules:
                if rule.id == rule_id:
                    rules.remove(rule)
                    self._by_client.pop(key, None)
                    if not rules:
                        del self.by_key[key]
                    return True
        return False

    def clear(self) -> int:
        removed = sum(len(rules) for rules in self.by_key.values())
        self.by_key.clear()
        self._by_client.clear()
        return removed

    def _expire(self) -> None:
        now = self.runtime.clock_ms()
        for key, rules in list(self.by_key.items()):
            rules[:] = [r for r in rules if r.deadline_ms is None or r.deadline_ms > now]
            self._by_client.pop(key, None)
            if not rules:
                del self.by_key[key]

    def _candidates(self, rules: list[FaultRule], client_id: str | None) -> list[FaultRule]:
        """The rules of one API key that may apply to ``client_id``, in the order they were
        added."""
        api_key = rules[0].api_key
        index = self._by_client.get(api_key)
        if index is None:
            index = {}
            for rule in rules:
                index.setdefault(rule.client_id, []).append(rule)
            self._by_client[api_key] = index
        anyone = index.get(None, [])
        named = index.get(client_id, []) if client_id is not None else []
        if not named:
            return list(anyone)
        if not anyone:
            return list(named)
        return sorted((*anyone, *named), key=lambda rule: rule.id)

    def match(
        self, rules: list[FaultRule], node_id: int, request: DecodedRequest
    ) -> FaultRule | None:
        """The first live rule of ``rules`` (one API key's) this request triggers, used up by
        one; None when none does."""
        if not rules:
            return None
        now = self.runtime.clock_ms()
        touched: Touched | None = None
        for rule in self._candidates(rules, request.header.client_id):
            if rule.deadline_ms is not None and rule.deadline_ms <= now:
                self._drop(rule)
                continue
            if rule.broker is not None and rule.broker != node_id:
                continue
            if rule.client_id is not None and rule.client_id != request.header.client_id:
                continue
            if _needs_body(rule):
                if touched is None:
                    touched = touches(request.body, self.runtime)
                if not touched.matches(rule):
                    continue
            if rule.fraction < 1.0 and self.random.random() >= rule.fraction:
                continue
            rule.fired += 1
            self.injected[rule.kind] = self.injected.get(rule.kind, 0) + 1
            if rule.count is not None:
                rule.count -= 1
                if rule.count <= 0:
                    self._drop(rule)
            log.info(
                "fault_injected",
                rule=rule.id,
                kind=rule.kind,
                api=wire.api_name(rule.api_key),
                broker=node_id,
                client_id=request.header.client_id,
                correlation_id=request.header.correlation_id,
            )
            return rule
        return None

    def _drop(self, rule: FaultRule) -> None:
        rules = self.by_key.get(rule.api_key)
        self._by_client.pop(rule.api_key, None)
        if rules is not None and rule in rules:
            rules.remove(rule)
            if not rules:
                del self.by_key[rule.api_key]

    # --- connections per node (broker down) --------------------------------------------------

    def opened(self, node_id: int, connection: Any) -> None:
        self.connections.setdefault(node_id, weakref.WeakSet()).add(connection)

    def of_node(self, node_id: int) -> list[Any]:
        return list(self.connections.get(node_id, ()))


FAULT_TABLE = Service(SERVICE, FaultTable)


def fault_table(runtime: Runtime) -> FaultTable:
    return runtime.services.get(FAULT_TABLE)


def _needs_body(rule: FaultRule) -> bool:
    return (
        rule.topic is not None
        or rule.partition is not None
        or rule.group is not None
        or rule.transactional_id is not None
    )


# --- what a request touches --------------------------------------------------------------------

_TOPIC_FIELDS = ("name", "topic", "topic_name")
_PARTITION_FIELDS = ("partition_index", "partition", "index")
_PARTITION_LISTS = ("partition_indexes", "partitions")
_GROUP_FIELDS = ("group_id", "group_ids", "groups")
_TXN_FIELDS = ("transactional_id", "transactional_ids", "v3_and_below_transactional_id")


@dataclass
class Touched:
    topics: set[str] = field(default_factory=set)
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    transactional_ids: set[str] = field(default_factory=set)

    def matches(self, rule: FaultRule) -> bool:
        if rule.topic is not None:
            if rule.partition is not None:
                if (rule.topic, rule.partition) not in self.partitions:
                    return False
            elif rule.topic not in self.topics:
                return False
        elif rule.partition is not None and all(p != rule.partition for _, p in self.partitions):
            return False
        if rule.group is not None and rule.group not in self.groups:
            return False
        return rule.transactional_id is None or rule.transactional_id in self.transactional_ids


def touches(body: Any, runtime: Runtime) -> Touched:
    """The topics, partitions, groups and transactional ids a request names (walking its kio
    fields; topic ids resolve to names)."""
    touched = Touched()
    _walk(body, None, touched, runtime, 0)
    return touched


def _walk(node: Any, topic: str | None, touched: Touched, runtime: Runtime, depth: int) -> None:
    if depth > 6 or not dataclasses.is_dataclass(node):
        return
    names = {f.name for f in dataclasses.fields(node)}
    own = _topic_of(node, names, runtime)
    if own is not None:
        topic = own
        touched.topics.add(own)
    for name in _GROUP_FIELDS:
        if name in names:
            _collect_strings(getattr(node, name), touched.groups)
    for name in _TXN_FIELDS:
        if name in names:
            _collect_strings(getattr(node, name), touched.transactional_ids)
    if topic is not None:
        for name in _PARTITION_FIELDS:
            value = getattr(node, name, None) if name in names else None
            if isinstance(value, int) and not isinstance(value, bool):
                touched.partitions.add((topic, value))
        for name in _PARTITION_LISTS:
            value = getattr(node, name, None) if name in names else None
            if isinstance(value, tuple):
                for item in value:
                    if isinstance(item, int) and not isinstance(item, bool):
                        touched.partitions.add((topic, item))
    for name in names:
        value = getattr(node, name)
        if isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    _walk(item, topic, touched, runtime, depth + 1)
        elif dataclasses.is_dataclass(value):
            _walk(value, topic, touched, runtime, depth + 1)


def _topic_of(node: Any, names: set[str], runtime: Runtime) -> str | None:
    for name in _TOPIC_FIELDS:
        if name in names:
            value = getattr(node, name)
            if isinstance(value, str) and value:
                return value
    if "topic_id" in names:
        value = getattr(node, "topic_id")  # noqa: B009
        if isinstance(value, uuid.UUID):
            found = runtime.cluster.topics_by_id.get(value)
            if found is not None:
                return str(found.name)
    return None


def _collect_strings(value: Any, into: set[str]) -> None:
    if isinstance(value, str):
        into.add(value)
    elif isinstance(value, tuple):
        into.update(item for item in value if isinstance(item, str))


# --- parsing a rule -----------------------------------------------------------------------------


def _parse(spec: dict[str, Any], rule_id: int, runtime: Runtime) -> FaultRule:
    if not isinstance(spec, dict):
        raise RuleError("a rule is a JSON object")
    known = {f.name for f in dataclasses.fields(FaultRule)} - {"id", "fired", "deadline_ms"}
    known |= {"api", "error", "ttl_ms"}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise RuleError(f"unknown rule fields: {', '.join(unknown)}")
    kind = spec.get("kind", _default_kind(spec))
    if kind not in KINDS:
        raise RuleError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    api_key = _api_key(spec)
    error_code = 0
    if kind == "error":
        error_code = _error_code(spec)
    latency_ms = _int(spec, "latency_ms", 0, 0, MAX_LATENCY_MS)
    if kind == "latency" and latency_ms <= 0:
        raise RuleError("a latency rule needs latency_ms > 0")
    count: int | None
    if "count" in spec and spec["count"] is None:
        count = None
    else:
        count = _int(spec, "count", 1, 1, 1 << 31)
    fraction = spec.get("fraction", 1.0)
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction <= 1:
        raise RuleError("fraction must be a number in (0, 1]")
    deadline_ms = None
    if spec.get("ttl_ms") is not None:
        deadline_ms = runtime.clock_ms() + _int(spec, "ttl_ms", 0, 1, 1 << 40)
    if count is None and deadline_ms is None and fraction >= 1.0:
        pass  # every matching request until cleared: allowed, e.g. a broken API
    topic = _str(spec, "topic")
    if topic is not None and topic not in runtime.cluster.topics:
        raise RuleError(f"unknown topic {topic!r}")
    partition = None
    if spec.get("partition") is not None:
        partition = _int(spec, "partition", 0, 0, 1 << 31)
        if topic is not None and partition >= len(runtime.cluster.topics[topic].partitions):
            raise RuleError(f"topic {topic!r} has no partition {partition}")
    broker = None
    if spec.get("broker") is not None:
        broker = _int(spec, "broker", 0, 0, 1 << 31)
        if broker not in runtime.cluster.nodes:
            raise RuleError(f"no broker {broker} (brokers: {sorted(runtime.cluster.nodes)})")
    return FaultRule(
        id=rule_id,
        kind=kind,
        api_key=api_key,
        error_code=error_code,
        latency_ms=latency_ms,
        count=count,
        fraction=float(fraction),
        deadline_ms=deadline_ms,
        topic=topic,
        partition=partition,
        group=_str(spec, "group"),
        transactional_id=_str(spec, "transactional_id"),
        client_id=_str(spec, "client_id"),
        broker=broker,
    )


def api_key_by_name(name: str) -> int | None:
    wanted = name.replace("_", "").replace("-", "").lower()
    for key in range(0, 128):
        if wire.known_versions(key) is None:
            continue
        if wire.api_name(key).replace("_", "").lower() == wanted:
            return key
    return None


def _api_key(spec: dict[str, Any]) -> int:
    value = spec.get("api_key", spec.get("api"))
    if isinstance(value, str):
        found = api_key_by_name(value)
        if found is None:
            raise RuleError(f"unknown API {value!r}")
        return found
    if isinstance(value, int) and not isinstance(value, bool):
        if wire.known_versions(value) is None:
            raise RuleError(f"unknown API key {value}")
        return value
    raise RuleError("a rule needs api_key (a number) or api (a name such as 'produce')")


def _default_kind(spec: dict[str, Any]) -> str:
    """Without ``kind``: a rule that names a delay and no error is a latency rule (``api=produce
    latency_ms=500`` means a slow answer, not a question about which error to answer with)."""
    names_error = "error" in spec or "error_code" in spec
    return "latency" if spec.get("latency_ms") and not names_error else "error"


def _error_code(spec: dict[str, Any]) -> int:
    value = spec.get("error_code", spec.get("error"))
    if isinstance(value, str):
        try:
            code = ErrorCode[value.lower()]
        except KeyError:
            raise RuleError(f"unknown error {value!r}") from None
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            code = ErrorCode(value)
        except ValueError:
            raise RuleError(f"unknown error code {value}") from None
    else:
        raise RuleError(
            "an error rule needs error (a name, e.g. NOT_LEADER_OR_FOLLOWER) or error_code "
            "(a number); for a delay alone give latency_ms=N (kind=latency)"
        )
    if code is ErrorCode.none:
        raise RuleError("error code 0 (NONE) is not an error")
    return int(code)


def _int(spec: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = spec.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RuleError(f"{name} must be an integer in [{low}, {high}]")
    return value


def _str(spec: dict[str, Any], name: str) -> str | None:
    value = spec.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise RuleError(f"{name} must be a non-empty string")
    return value
