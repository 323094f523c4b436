"""Client quotas (``kafka-configs --entity-type users|clients|ips``): stored, validated, described.

What Kafka's controller keeps as ClientQuotaRecords: per entity — a user, a client id, a user and
client id, or an IP, each name possibly the default entity (None) — a map of quota keys to
doubles. Validation follows Kafka's ClientQuotaControlManager and the describe filter its
ClientQuotasImage, with their messages. With ``--data-dir`` the quotas are kept in
``<data-dir>/kemu-client-quotas.json``, rewritten atomically on every change.

Enforcement (rates, precedence, throttle times) is ``kemu/cluster/quota_enforcement.py``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kemu.cluster.services import Service
from kemu.storage.data_files import read_data_file
from kemu.storage.durable import fsync_directory

if TYPE_CHECKING:
    from kemu.cluster.context import Runtime

USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
FILE_NAME = "kemu-client-quotas.json"
REMEDY = "restore it from a backup, or remove it to start without client quotas"

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
# QuotaConfig's keys per kind of entity, with their ConfigDef types' upper bounds (None: DOUBLE).
CLIENT_KEYS: dict[str, int | None] = {
    "producer_byte_rate": LONG_MAX,
    "consumer_byte_rate": LONG_MAX,
    "request_percentage": None,
    "controller_mutation_rate": None,
}
IP_KEYS: dict[str, int | None] = {"connection_creation_rate": INT_MAX}
TYPE_NAMES = {INT_MAX: "an INT", LONG_MAX: "a LONG"}

Entity = tuple[tuple[str, str | None], ...]  # sorted (entity type, name or None for default)


class QuotaError(Exception):
    """INVALID_REQUEST with Kafka's message."""


@dataclass(frozen=True, slots=True)
class QuotaOp:
    key: str
    value: float
    remove: bool


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """The entity named by ``pairs``, checked as Kafka's validateEntity checks it."""
    seen: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaError(f"Unhandled client quota entity type: {entity_type}")
        if entity_type in seen:
            raise QuotaError(f"Invalid client quota entity, duplicate entity entry {entity_type}")
        seen[entity_type] = name
    if not seen:
        raise QuotaError("Invalid empty client quota entity")
    if IP in seen and len(seen) > 1:
        raise QuotaError(
            "Invalid quota entity combination, IP entity shouldnot be combined with User or "
            "ClientId"
        )
    return tuple(sorted(seen.items()))


def check_op(entity: Entity, op: QuotaOp) -> None:
    keys = IP_KEYS if entity[0][0] == IP else CLIENT_KEYS
    if op.key not in keys:
        raise QuotaError(f"Invalid configuration key {op.key}")
    if op.remove:
        return
    if not math.isfinite(op.value):
        raise QuotaError(f"Quota {op.key} must be a finite number")
    if op.value <= 0:
        raise QuotaError(f"Quota {op.key} must be greater than 0")
    bound = keys[op.key]
    if bound is not None and op.value > bound:
        raise QuotaError(f"Proposed value for {op.key} is too large for {TYPE_NAMES[bound]}.")


def entity_text(entity: Entity) -> str:
    """As Kafka's ClientQuotaEntity prints itself."""
    entries = ", ".join(f"{kind}={name}" for kind, name in entity)
    return f"ClientQuotaEntity(entries={{{entries}}})"


@dataclass(frozen=True, slots=True)
class Component:
    entity_type: str
    match_type: int
    match: str | None


class ClientQuotas:
    def __init__(self, data_dir: Path | None = None) -> None:
        self.path = data_dir / FILE_NAME if data_dir is not None else None
        self.quotas: dict[Entity, dict[str, float]] = {}
        self.version = 0  # bumped on every change, so enforcement re-indexes the quotas
        if self.path is not None:
            self.quotas = read_data_file(self.path, REMEDY, _decode_quotas) or {}

    def alter(self, entity: Entity, ops: list[QuotaOp], *, validate_only: bool = False) -> None:
        """Apply ``ops`` to one entity, all or nothing; raises QuotaError."""
        for op in ops:
            check_op(entity, op)
        if len({op.key for op in ops}) != len(ops):
            duplicate = next(o.key for o in ops if sum(p.key == o.key for p in ops) > 1)
            raise QuotaError(
                f"Duplicate quota key {duplicate} not updating quota for this entity "
                f"{entity_text(entity)}"
            )
        if validate_only:
            return
        values = dict(self.quotas.get(entity, {}))
        for op in ops:
            if op.remove:
                values.pop(op.key, None)
            else:
                values[op.key] = op.value
        if values:
            self.quotas[entity] = values
        else:
            self.quotas.pop(entity, None)
        self.version += 1
        self._save()

    def describe(
        self, components: list[Component], strict: bool
    ) -> list[tuple[Entity, dict[str, float]]]:
        """The entities the filter matches, as Kafka's ClientQuotasImage.describe; raises
        QuotaError."""
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for component in components:
            kind = component.entity_type
            if not kind:
                raise QuotaError("Invalid empty entity type.")
            if kind in exact or kind in specified:
                raise QuotaError(f"Entity type {kind} cannot appear more than once in the filter.")
            if kind not in (USER, CLIENT_ID, IP):
                raise QuotaError(f"Unsupported entity type {kind}")
            if component.match_type == MATCH_EXACT:
                if component.match is None:
                    raise QuotaError(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null."
                    )
                exact[kind] = component.match
            elif component.match_type == MATCH_DEFAULT:
                if component.match is not None:
                    raise QuotaError(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                    )
                exact[kind] = None
            elif component.match_type == MATCH_SPECIFIED:
                if component.match is not None:
                    raise QuotaError(
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                    )
                specified.add(kind)
            else:
                raise QuotaError(f"Unknown match type {component.match_type}")
        kinds = set(exact) | specified
        if IP in kinds and kinds & {USER, CLIENT_ID}:
            raise QuotaError(
                "Invalid entity filter component combination. IP filter component should not be "
                "used with user or clientId filter component."
            )
        found = []
        for entity, values in sorted(self.quotas.items(), key=lambda item: repr(item[0])):
            names = dict(entity)
            if strict and len(names) != len(kinds):
                continue
            if any(kind not in names or names[kind] != name for kind, name in exact.items()):
                continue
            if any(names.get(kind) is None for kind in specified):
                continue
            found.append((entity, dict(values)))
        return found

    def _save(self) -> None:
        if self.path is None:
            return
        entries: list[dict[str, Any]] = [
            {"entity": [list(pair) for pair in entity], "quotas": values}
            for entity, values in self.quotas.items()
        ]
        temporary = self.path.with_suffix(".tmp")
        with open(temporary, "w") as handle:
            handle.write(json.dumps(entries, indent=1))
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(self.path)
        # the rename itself is durable only once the directory is synced (a power loss)
        fsync_directory(self.path.parent)


def _decode_quotas(saved: list[dict[str, Any]]) -> dict[Entity, dict[str, float]]:
    return {
        tuple((kind, name) for kind, name in entry["entity"]): {
            key: float(value) for key, value in entry["quotas"].items()
        }
        for entry in saved
    }


CLIENT_QUOTAS = Service("client_quotas", lambda rt: ClientQuotas(rt.cluster.data_dir))


def client_quotas(runtime: Runtime) -> ClientQuotas:
    return runtime.services.get(CLIENT_QUOTAS)
