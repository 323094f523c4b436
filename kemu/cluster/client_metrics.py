"""Client metrics subscriptions (KIP-714): the CLIENT_METRICS config resource (type 16).

A subscription is a named set of three configs, as Kafka's ClientMetricsConfigs defines them:
``metrics`` (metric name prefixes, a list; ``*`` for all), ``interval.ms`` (push interval, 100 to
3600000, default 300000) and ``match`` (a list of ``selector=regex`` over ``client_instance_id``,
``client_id``, ``client_software_name``, ``client_software_version``, ``client_source_address``,
``client_source_port``; empty matches every client). ``kafka-client-metrics.sh`` and
``kafka-configs --entity-type client-metrics`` set them through (Incremental)AlterConfigs; a
subscription whose configs are all deleted is gone. Validation and messages are Kafka's.

Describe lists the three configs: the ones set with source DYNAMIC_CLIENT_METRICS_CONFIG, the
others with their defaults. With ``--data-dir`` the subscriptions are kept in
``<data-dir>/kemu-client-metrics.json``. ``matching`` gives GetTelemetrySubscriptions the
subscriptions that apply to a client; pushed metrics are kept by ``TelemetryStore``.
Importing this module registers the resource type.
"""

from __future__ import annotations

import json
import os
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kemu.cluster.config_resources import (
    CLIENT_METRICS,
    ConfigEntry,
    ConfigResourceError,
    ConfigResourceType,
    Synonym,
    register_config_resource,
)
from kemu.cluster.services import Service
from kemu.config.definitions import ConfigSource, ConfigType
from kemu.protocol.errors import ErrorCode
from kemu.storage.data_files import read_data_file
from kemu.storage.durable import fsync_directory

if TYPE_CHECKING:
    from kemu.cluster.context import RequestContext, Runtime

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
DEFAULTS = {INTERVAL_MS: "300000", MATCH: "", METRICS: ""}
TYPES = {INTERVAL_MS: ConfigType.INT, MATCH: ConfigType.LIST, METRICS: ConfigType.LIST}
DOCS = {
    METRICS: "Telemetry metric name prefix list",
    INTERVAL_MS: "Metrics push interval in milliseconds",
    MATCH: "Client match criteria",
}
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
SELECTORS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)
FILE_NAME = "kemu-client-metrics.json"
REMEDY = "restore it from a backup, or remove it to start without client-metrics subscriptions"
KEPT_PUSHES = 1000  # the newest pushed payloads TelemetryStore keeps


def parse_match(value: str) -> dict[str, re.Pattern[str]]:
    """``selector=regex`` entries; raises ValueError with Kafka's message."""
    patterns: dict[str, re.Pattern[str]] = {}
    for entry in (e.strip() for e in value.split(",") if e.strip()):
        selector, equals, regex = entry.partition("=")
        selector, regex = selector.strip(), regex.strip()
        if not equals or selector not in SELECTORS or not regex:
            raise ValueError(f"Illegal client matching pattern: {entry}")
        try:
            patterns[selector] = re.compile(regex)
        except re.error:
            raise ValueError(f"Illegal client matching pattern: {entry}") from None
    return patterns


def validate(name: str, values: dict[str, str]) -> None:
    if not name:
        raise ConfigResourceError(ErrorCode.invalid_request, "Subscription name can't be empty")
    unknown = sorted(set(values) - set(DEFAULTS))
    if unknown:
        raise ConfigResourceError(
            ErrorCode.invalid_request,
            f"Unknown client metrics configuration: {', '.join(unknown)}",
        )
    if INTERVAL_MS in values:
        text = values[INTERVAL_MS]
        try:
            interval = int(text.strip())
        except ValueError:
            raise ConfigResourceError(
                ErrorCode.invalid_config,
                f"Invalid value {text} for configuration {INTERVAL_MS}: Not a number of type INT",
            ) from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise ConfigResourceError(
                ErrorCode.invalid_config,
                f"Invalid value {interval} for {INTERVAL_MS}, interval must be between 100 and "
                "3600000 (1 hour)",
            )
    if MATCH in values:
        try:
            parse_match(values[MATCH])
        except ValueError as bad:
            raise ConfigResourceError(ErrorCode.invalid_config, str(bad)) from None


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: dict[str, re.Pattern[str]]

    def matches(self, client: dict[str, str]) -> bool:
        return all(
            pattern.fullmatch(client.get(selector, "")) is not None
            for selector, pattern in self.match.items()
        )


class ClientMetricsStore:
    def __init__(self, data_dir: Path | None = None) -> None:
        self.path = data_dir / FILE_NAME if data_dir is not None else None
        self.subscriptions: dict[str, dict[str, str]] = {}
        if self.path is not None:
            self.subscriptions = read_data_file(self.path, REMEDY, _decode_subscriptions) or {}

    def set(self, name: str, values: dict[str, str]) -> None:
        if values:
            self.subscriptions[name] = dict(values)
        else:
            self.subscriptions.pop(name, None)
        if self.path is not None:
            temporary = self.path.with_suffix(".tmp")
            with open(temporary, "w") as handle:
                handle.write(json.dumps(self.subscriptions, indent=1, sort_keys=True))
                handle.flush()
                os.fsync(handle.fileno())
            temporary.replace(self.path)
            # the rename itself is durable only once the directory is synced (a power loss)
            fsync_directory(self.path.parent)

    def subscription(self, name: str) -> Subscription:
        values = {**DEFAULTS, **self.subscriptions[name]}
        return Subscription(
            name,
            tuple(m.strip() for m in values[METRICS].split(",") if m.strip()),
            int(values[INTERVAL_MS]),
            parse_match(values[MATCH]),
        )

    def matching(self, client: dict[str, str]) -> list[Subscription]:
        """The subscriptions whose ``match`` selects this client, by name."""
        found = (self.subscription(name) for name in sorted(self.subscriptions))
        return [s for s in found if s.matches(client)]


def _decode_subscriptions(saved: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    return {name: dict(values) for name, values in saved.items()}


@dataclass
class TelemetryStore:
    """Pushed client metrics as received (OTLP bytes, not decoded), newest last."""

    pushes: deque[tuple[str, int, int, bytes]] = field(
        default_factory=lambda: deque(maxlen=KEPT_PUSHES)
    )  # (client instance id, subscription id, compression type, payload)

    def push(self, instance: str, subscription_id: int, compression: int, payload: bytes) -> None:
        self.pushes.append((instance, subscription_id, compression, payload))


CLIENT_METRICS_STORE = Service("client_metrics", lambda rt: ClientMetricsStore(rt.cluster.data_dir))
TELEMETRY = Service("telemetry", lambda _: TelemetryStore())


def client_metrics_store(runtime: Runtime) -> ClientMetricsStore:
    return runtime.services.get(CLIENT_METRICS_STORE)


def telemetry_store(runtime: Runtime) -> TelemetryStore:
    return runtime.services.get(TELEMETRY)


class ClientMetricsConfigs(ConfigResourceType):
    type_id = CLIENT_METRICS

    def describe(self, ctx: RequestContext, name: str) -> list[ConfigEntry]:
        if not name:
            raise ConfigResourceError(ErrorCode.invalid_request, "Subscription name can't be empty")
        explicit = client_metrics_store(ctx.runtime).subscriptions.get(name, {})
        entries = []
        for key in sorted(DEFAULTS):
            if key in explicit:
                value, source = explicit[key], ConfigSource.DYNAMIC_CLIENT_METRICS_CONFIG
                synonyms: tuple[Synonym, ...] = (Synonym(key, value, source),)
            else:
                value, source, synonyms = DEFAULTS[key], ConfigSource.DEFAULT_CONFIG, ()
            entries.append(
                ConfigEntry(
                    name=key,
                    value=value,
                    source=source,
                    read_only=False,
                    is_sensitive=False,
                    config_type=TYPES[key],
                    synonyms=synonyms,
                    documentation=DOCS[key],
                )
            )
        return entries

    def explicit(self, ctx: RequestContext, name: str) -> dict[str, str]:
        return dict(client_metrics_store(ctx.runtime).subscriptions.get(name, {}))

    def check_name(self, ctx: RequestContext, name: str) -> None:
        if not name:
            raise ConfigResourceError(ErrorCode.invalid_request, "Subscription name can't be empty")

    def is_list(self, key: str) -> bool:
        return key in (METRICS, MATCH)

    def default(self, key: str) -> str | None:
        return DEFAULTS.get(key)

    def validate(self, ctx: RequestContext, name: str, values: dict[str, str]) -> None:
        validate(name, values)

    def apply(self, ctx: RequestContext, name: str, values: dict[str, str]) -> None:
        client_metrics_store(ctx.runtime).set(name, values)


register_config_resource(ClientMetricsConfigs())
