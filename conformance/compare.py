"""Turn recorded exchanges into comparable JSON, pair them across two runs, and diff them.

- :func:`to_json` makes a kio message plain JSON (records become a summary of their batch
  headers, error codes their names, UUIDs strings, durations milliseconds).
- :func:`normalise` removes what legitimately differs between two brokers: addresses, cluster
  ids, topic ids (replaced by the topic's name where the run named it), member, producer and
  fetch-session ids, timestamps, throttle times; every array is sorted (no Kafka client relies
  on the order of the arrays these APIs answer).
- :func:`pair` matches exchanges of the two runs: within a scenario, by API key, version and
  normalised request, in order of occurrence. What has no partner (a client polled once more on
  one broker) is counted as unpaired, never compared.
- :func:`served_by_both` drops from ApiVersions answers the APIs only one broker offers on
  purpose (below); every API both offer is compared, versions and features included.
- :func:`differences` compares two normalised responses field by field; an error message kemu
  sends where Kafka sends none is not a difference.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import json
import re
import struct
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance.proxy import Exchange
from kemu.protocol import wire

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61 bytes of a v2 record batch header
ZERO_UUID = str(uuid.UUID(int=0))

# Field name -> placeholder for a value that is not -1 / 0 / empty (those keep their meaning).
OPAQUE = {
    "host": "<host>",
    "port": "<port>",
    "cluster_id": "<cluster-id>",
    "member_id": "<member-id>",
    "leader": "<member-id>",  # JoinGroup's leader member id (a string)
    "producer_id": "<producer-id>",
    "session_id": "<session-id>",
    "throttle_time_ms": "<throttle>",
    "client_host": "<client-host>",
    "rack": "<rack>",
    "incarnation_id": "<incarnation>",
    "token": "<token>",
    "expiry_timestamp_ms": "<timestamp>",
    "issue_timestamp_ms": "<timestamp>",
    "transaction_start_time": "<timestamp>",
    "finalized_features_epoch": "<features-epoch>",
    "client_instance_id": "<client-instance-id>",
    "log_dir": "<log-dir>",
    "total_bytes": "<bytes>",
    "usable_bytes": "<bytes>",
    "replica_directory_id": "<directory-id>",
}
# ApiVersions: APIs only one broker offers, legitimately. kemu does not serve, on purpose,
# AlterReplicaLogDirs (34: one log dir), the delegation-token APIs (38-41), UpdateFeatures (57:
# its features follow what it serves), UnregisterBroker (64) and Add/RemoveRaftVoter (80, 81: no
# Raft quorum), StreamsGroupTopologyDescriptionUpdate (93: no description plugin) and
# UnregisterController (94). It offers client telemetry (71, 72), which Kafka offers only when a
# metrics reporter that takes client telemetry is configured.
KAFKA_ONLY_APIS = frozenset({34, 38, 39, 40, 41, 57, 64, 80, 81, 93, 94})
KEMU_ONLY_APIS = frozenset({71, 72})
API_VERSIONS = 18
TIME_SUFFIXES = ("timestamp", "timestamp_ms", "_time_ms", "time_ms")
KEEP_TIMES = {
    "session_timeout_ms",
    "rebalance_timeout_ms",
    "transaction_timeout_ms",
    "max_wait_ms",
    "heartbeat_interval_ms",
}


def to_json(value: Any, kafka_type: str = "") -> Any:
    """A kio message (or part of one) as plain JSON."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_json(getattr(value, f.name), f.metadata.get("kafka_type", ""))
            for f in dataclasses.fields(value)
        }
    if isinstance(value, tuple | list):
        return [to_json(item, kafka_type) for item in value]
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bool | str | float) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        if kafka_type == "records":
            return {"batches": summarise_records(data)}
        return "b64:" + base64.b64encode(data).decode()
    return repr(value)


def summarise_records(data: bytes) -> list[dict[str, Any]]:
    """The batch headers in ``data`` without CRCs, timestamps and producer ids."""
    batches = []
    position = 0
    while position + BATCH_HEADER.size <= len(data):
        (
            base_offset, length, leader_epoch, magic, _crc, attributes, last_delta,
            _first_ts, _max_ts, producer_id, producer_epoch, base_sequence, count,
        ) = BATCH_HEADER.unpack_from(data, position)  # fmt: skip
        batches.append(
            {
                "base_offset": base_offset,
                "partition_leader_epoch": leader_epoch,
                "magic": magic,
                "attributes": attributes & 0x7F,  # codec, timestamp type, txn, control
                "last_offset_delta": last_delta,
                "producer": "none" if producer_id < 0 else "<producer-id>",
                "producer_epoch": producer_epoch,
                "base_sequence": base_sequence,
                "records": count,
            }
        )
        position += 12 + length
    if position < len(data):
        batches.append({"partial_bytes": True})
    return batches


# --- normalisation ----------------------------------------------------------------------------


def topic_names(values: Iterable[Any]) -> dict[str, str]:
    """topic id -> name, from every JSON object in ``values`` that carries both."""
    found: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            topic_id = node.get("topic_id")
            name = node.get("name", node.get("topic_name", node.get("topic")))
            if isinstance(topic_id, str) and isinstance(name, str) and topic_id != ZERO_UUID:
                found.setdefault(topic_id, name)
            for item in node.values():
                walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for value in values:
        walk(value)
    return found


def _placeholder(name: str, value: Any) -> Any:
    if value in (None, 0, "", ZERO_UUID) or (isinstance(value, int) and value < 0):
        return value  # absent, or a sentinel (-1 unknown, ListOffsets' -2 earliest, -3 ...)
    if name in OPAQUE:
        return OPAQUE[name]
    if name not in KEEP_TIMES and name.endswith(TIME_SUFFIXES) and isinstance(value, int):
        return "<timestamp>"
    return value


IDENTITY = (
    "name", "topic", "topic_name", "topic_id", "partition_index", "partition", "index",
    "group_id", "member_id", "node_id", "broker_id", "transactional_id", "resource_type",
    "resource_name", "api_key", "key", "first_offset",
)  # fmt: skip


def _order(item: Any) -> tuple[str, str]:
    """Sort key of an array item: what names it first (so that items that differ in content
    still meet their counterpart), then everything."""
    whole = json.dumps(item, sort_keys=True)
    if isinstance(item, dict):
        return json.dumps([item.get(name) for name in IDENTITY]), whole
    return "", whole


def normalise(value: Any, topics: dict[str, str], name: str = "") -> Any:
    if isinstance(value, dict):
        return {key: normalise(item, topics, key) for key, item in value.items()}
    if isinstance(value, list):
        items = [normalise(item, topics, name) for item in value]
        if name == "batches":
            return items
        return sorted(items, key=_order)
    if name in ("topic_id", "topic_uuid") and isinstance(value, str) and value != ZERO_UUID:
        return f"<id of {topics[value]}>" if value in topics else "<unknown topic id>"
    if name in ("leader", "member_id") and isinstance(value, int):
        return value
    return _placeholder(name, value)


# --- pairing and comparing -------------------------------------------------------------------


@dataclass
class Side:
    """One run's exchanges as normalised JSON."""

    exchanges: list[Exchange]
    requests: list[Any] = field(default_factory=list)
    responses: list[Any] = field(default_factory=list)

    @classmethod
    def of(cls, exchanges: list[Exchange]) -> Side:
        raw_requests = [to_json(e.request) for e in exchanges]
        raw_responses = [to_json(e.response) for e in exchanges]
        topics = topic_names([*raw_requests, *raw_responses])
        return cls(
            exchanges,
            [normalise(r, topics) for r in raw_requests],
            [normalise(r, topics) for r in raw_responses],
        )


@dataclass
class Pair:
    scenario: str
    api_key: int
    api_version: int
    occurrence: int
    kafka: int  # index into the kafka side
    kemu: int


def _signature(side: Side, index: int) -> tuple[str, int, int, str]:
    exchange = side.exchanges[index]
    request = json.dumps(side.requests[index], sort_keys=True)
    return exchange.scenario, exchange.api_key, exchange.api_version, request


def pair(kafka: Side, kemu: Side) -> tuple[list[Pair], Counter[int], Counter[int]]:
    """Pairs, and per API key the exchanges of each side left without a partner."""
    waiting: dict[tuple[str, int, int, str], list[int]] = defaultdict(list)
    for index in range(len(kemu.exchanges)):
        if kemu.exchanges[index].error is None:
            waiting[_signature(kemu, index)].append(index)
    pairs: list[Pair] = []
    occurrences: Counter[tuple[str, int, int, str]] = Counter()
    unpaired_kafka: Counter[int] = Counter()
    for index in range(len(kafka.exchanges)):
        exchange = kafka.exchanges[index]
        signature = _signature(kafka, index)
        if exchange.error is None and waiting[signature]:
            partner = waiting[signature].pop(0)
            scenario, key, version = exchange.scenario, exchange.api_key, exchange.api_version
            pairs.append(Pair(scenario, key, version, occurrences[signature], index, partner))
            occurrences[signature] += 1
        else:
            unpaired_kafka[exchange.api_key] += 1
    unpaired_kemu: Counter[int] = Counter()
    for signature, left in waiting.items():
        unpaired_kemu[signature[1]] += len(left)
    for exchange in kemu.exchanges:
        if exchange.error is not None:
            unpaired_kemu[exchange.api_key] += 1
    return pairs, unpaired_kafka, unpaired_kemu


def served_by_both(api_key: int, kafka: Any, kemu: Any) -> tuple[Any, Any]:
    """The two responses without the APIs only one broker offers on purpose (ApiVersions only:
    ``KAFKA_ONLY_APIS``, ``KEMU_ONLY_APIS``); any other response as it is."""
    if api_key != API_VERSIONS or not isinstance(kafka, dict) or not isinstance(kemu, dict):
        return kafka, kemu

    def without(response: dict[str, Any], dropped: frozenset[int]) -> dict[str, Any]:
        keys = response.get("api_keys")
        if not isinstance(keys, list):
            return response
        kept = [k for k in keys if not (isinstance(k, dict) and k.get("api_key") in dropped)]
        return {**response, "api_keys": kept}

    return without(kafka, KAFKA_ONLY_APIS), without(kemu, KEMU_ONLY_APIS)


def differences(kafka: Any, kemu: Any, path: str = "") -> list[str]:
    """Paths where two normalised values differ (an error message Kafka leaves null is not
    compared)."""
    if isinstance(kafka, dict) and isinstance(kemu, dict):
        found = []
        for key in sorted(set(kafka) | set(kemu)):
            if key == "error_message" and kafka.get(key) in (None, ""):
                continue
            found += differences(kafka.get(key), kemu.get(key), f"{path}.{key}")
        return found
    if isinstance(kafka, list) and isinstance(kemu, list):
        if len(kafka) != len(kemu):
            return [f"{path}: {len(kafka)} items vs {len(kemu)}"]
        found = []
        for index, (a, b) in enumerate(zip(kafka, kemu, strict=True)):
            found += differences(a, b, f"{path}[{index}]")
        return found
    if kafka != kemu:
        return [f"{path}: {json.dumps(kafka)[:80]} vs {json.dumps(kemu)[:80]}"]
    return []


# Errors Kafka answers while a coordinator loads, a new topic's leader is not yet known, or a
# transaction is still completing: the client retries and the retry pairs with nothing.
TIMING_ERRORS = frozenset(
    {
        "coordinator_not_available",
        "not_coordinator",
        "coordinator_load_in_progress",
        "concurrent_transactions",
        "leader_not_available",
        "not_leader_or_follower",
        "unknown_topic_or_partition",
        "unknown_topic_id",
        "rebalance_in_progress",
    }
)


@dataclass(frozen=True)
class Known:
    """A difference kept on purpose (documented in docs/conformance.md)."""

    api: str  # wire.api_name, or "*"
    path: str  # a regular expression matched against the difference's path
    reason: str
    request: str = ""  # a text the normalised request's JSON must contain, if given
    name: str = ""  # the "name" of the object holding the differing field, if given
    scenario: str = ""  # a prefix of the scenario's name, if given


PATH_STEP = re.compile(r"\.(\w+)|\[(\d+)\]")


def holder(value: Any, path: str) -> Any:
    """The object that holds the last field of ``path`` (``.a[0].b`` -> ``value["a"][0]``)."""
    steps = PATH_STEP.findall(path)
    for key, index in steps[:-1]:
        try:
            value = value[key] if key else value[int(index)]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def is_timing(kafka: Any, kemu: Any) -> bool:
    """Kafka answered a retriable error where kemu answered none."""
    if isinstance(kafka, dict) and isinstance(kemu, dict):
        for key, value in kafka.items():
            if key.endswith("error_code") and value in TIMING_ERRORS and kemu.get(key) == "none":
                return True
            if is_timing(value, kemu.get(key)):
                return True
        return False
    if isinstance(kafka, list) and isinstance(kemu, list):
        return any(is_timing(a, b) for a, b in zip(kafka, kemu, strict=False))
    return False


def known_reason(
    api: str,
    found: list[str],
    known: tuple[Known, ...],
    request: str = "",
    response: Any = None,
    scenario: str = "",
) -> str | None:
    """The reasons, when every difference in ``found`` (paths into ``response``, Kafka's) is a
    known one."""
    reasons = []
    for difference in found:
        path = difference.split(":", 1)[0]

        def named(rule: Known, path: str = path) -> bool:
            if not rule.name:
                return True
            held = holder(response, path)
            return isinstance(held, dict) and held.get("name") == rule.name

        match = next(
            (
                k
                for k in known
                if k.api in ("*", api)
                and re.search(k.path, path)
                and k.request in request
                and scenario.startswith(k.scenario)
                and named(k)
            ),
            None,
        )
        if match is None:
            return None
        reasons.append(match.reason)
    return "; ".join(sorted(set(reasons)))


@dataclass
class Row:
    api_key: int
    compared: int = 0
    identical: int = 0
    timing: int = 0
    known: int = 0
    differing: int = 0
    unpaired_kafka: int = 0
    unpaired_kemu: int = 0


@dataclass
class Result:
    rows: dict[int, Row]
    diffs: list[dict[str, Any]]

    @property
    def compared(self) -> int:
        return sum(row.compared for row in self.rows.values())

    @property
    def identical(self) -> int:
        return sum(row.identical for row in self.rows.values())


def compare(
    kafka_exchanges: list[Exchange], kemu_exchanges: list[Exchange], known: tuple[Known, ...] = ()
) -> Result:
    kafka, kemu = Side.of(kafka_exchanges), Side.of(kemu_exchanges)
    pairs, unpaired_kafka, unpaired_kemu = pair(kafka, kemu)
    rows: dict[int, Row] = {}
    diffs: list[dict[str, Any]] = []
    for p in pairs:
        row = rows.setdefault(p.api_key, Row(p.api_key))
        row.compared += 1
        kafka_response, kemu_response = served_by_both(
            p.api_key, kafka.responses[p.kafka], kemu.responses[p.kemu]
        )
        found = differences(kafka_response, kemu_response)
        if not found:
            row.identical += 1
            continue
        api = wire.api_name(p.api_key)
        if is_timing(kafka_response, kemu_response):
            row.timing += 1
            category = "timing"
        elif (
            reason := known_reason(
                api,
                found,
                known,
                json.dumps(kafka.requests[p.kafka], sort_keys=True),
                kafka_response,
                p.scenario,
            )
        ) is not None:
            row.known += 1
            category = "known: " + reason
        else:
            row.differing += 1
            category = "differing"
        diffs.append(
            {
                "category": category,
                "scenario": p.scenario,
                "api": api,
                "api_key": p.api_key,
                "api_version": p.api_version,
                "occurrence": p.occurrence,
                "differences": found,
                "request": kafka.requests[p.kafka],
                "kafka": kafka_response,
                "kemu": kemu_response,
            }
        )
    for key, count in unpaired_kafka.items():
        rows.setdefault(key, Row(key)).unpaired_kafka += count
    for key, count in unpaired_kemu.items():
        rows.setdefault(key, Row(key)).unpaired_kemu += count
    return Result(rows, diffs)


def table(result: Result) -> str:
    """The per-API table (Markdown, so docs/conformance.md can show it as printed)."""
    lines = [
        "| key | api | compared | identical | Kafka retried | known | differing "
        "| unpaired Kafka/kemu |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key in sorted(result.rows):
        row = result.rows[key]
        lines.append(
            f"| {key} | {wire.api_name(key)} | {row.compared} | {row.identical} | {row.timing} "
            f"| {row.known} | {row.differing} | {row.unpaired_kafka}/{row.unpaired_kemu} |"
        )
    rows = result.rows.values()
    compared, identical = result.compared, result.identical
    timing = sum(row.timing for row in rows)
    known = sum(row.known for row in rows)
    keys = sum(1 for row in rows if row.compared)

    def share(count: int) -> str:
        return f"{100.0 * count / compared:.1f} %" if compared else "-"

    lines.append("")
    lines.append(
        f"{compared} pairs over {keys} API keys: {identical} identical ({share(identical)}); "
        f"with Kafka's retried errors and the known differences "
        f"{identical + timing + known} ({share(identical + timing + known)}); "
        f"{compared - identical - timing - known} differing"
    )
    return "\n".join(lines)
