"""Group configs: the GROUP config resource (type 32), as Kafka's ``GroupConfig`` defines it.

A group config overrides a broker ``group.*`` default for one group. Values are checked when set:
the name must be known, the value must parse and respect the config's own floor, and - per
KIP-1240 - lie within the broker's ``group.share.min.*``/``group.share.max.*`` (or
``group.consumer.*``) bounds; a session timeout must stay above the heartbeat interval. If the
broker bounds change later, the effective value is clamped to them rather than rejected.

``group_config(runtime, group_id)`` gives a share partition the effective share settings of its
group. Overrides persist next to the topic catalogue when kemu runs with a data directory.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kemu.cluster.services import Service
from kemu.config.definitions import (
    KAFKA,
    BrokerConfig,
    ConfigSource,
    ConfigType,
    InvalidConfig,
    broker_definition,
)
from kemu.storage.data_files import read_data_file
from kemu.storage.durable import fsync_directory

if TYPE_CHECKING:
    from kemu.cluster.context import Runtime

SERVICE = "group_configs"
STORE_FILE = "kemu-group-configs.json"
STORE_REMEDY = (
    "restore it from a backup, or remove it to start with every group on the broker's defaults"
)

INT, LONG, STRING, BOOLEAN = ConfigType.INT, ConfigType.LONG, ConfigType.STRING, ConfigType.BOOLEAN


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    type: ConfigType
    default: str
    doc: str
    broker_synonym: str | None = None  # the broker config that supplies the default
    minimum: int | None = None  # the config's own floor (Kafka's atLeast)
    bounds: tuple[str, str] | None = None  # broker configs holding the allowed min and max
    check: Callable[[str, str], None] | None = None  # extra validation of a string value
    # validation against the broker's config (Kafka's GroupConfig.validateValues)
    broker_check: Callable[[str, str, BrokerConfig], None] | None = None
    # the value when not overridden, from the broker synonym's (e.g. the first of a list)
    from_broker: Callable[[str], str] | None = None
    # broker configs holding a lone floor or ceiling (Kafka's validateIntMin / validateIntMax)
    at_least: str | None = None
    at_most: str | None = None
    # Kafka's defineInternal: settable, not described
    internal: bool = False


# --- share.auto.offset.reset ------------------------------------------------------------------

_ISO_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_iso_duration_ms(text: str) -> int:
    """Java's ``Duration.parse`` (PnDTnHnMn.nS), in milliseconds; ValueError if malformed."""
    match = _ISO_DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    sign, days, time_part, hours, minutes, seconds, fraction = match.groups()
    if days is None and time_part is None:
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    if time_part is not None and hours is None and minutes is None and seconds is None:
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    whole_seconds = int(seconds or 0)
    nanos = int((fraction or "").ljust(9, "0") or 0)
    if whole_seconds < 0 or (seconds or "").startswith("-"):
        nanos = -nanos
    total_ms = (
        int(days or 0) * 86_400_000
        + int(hours or 0) * 3_600_000
        + int(minutes or 0) * 60_000
        + whole_seconds * 1000
        + nanos // 1_000_000
    )
    return -total_ms if sign == "-" else total_ms


@dataclass(frozen=True, slots=True)
class AutoOffsetReset:
    """Where a share partition without state starts: earliest, latest or now minus a duration."""

    strategy: str  # "earliest" | "latest" | "by_duration"
    duration_ms: int | None = None

    def timestamp_ms(self, now_ms: int) -> int:
        """The ListOffsets timestamp to look up: -2 earliest, -1 latest, else now - duration."""
        if self.strategy == "earliest":
            return -2
        if self.strategy == "latest":
            return -1
        return now_ms - (self.duration_ms or 0)


def parse_auto_offset_reset(value: str) -> AutoOffsetReset:
    text = value.strip().lower()
    if text in ("earliest", "latest"):
        return AutoOffsetReset(text)
    prefix = "by_duration:"
    if text.startswith(prefix):
        duration_ms = parse_iso_duration_ms(text[len(prefix) :])
        if duration_ms < 0:
            raise ValueError("Negative duration is not supported.")
        return AutoOffsetReset("by_duration", duration_ms)
    raise ValueError(f"Unsupported strategy for ShareGroup: {value}")


def _check_auto_offset_reset(name: str, value: str) -> None:
    try:
        parse_auto_offset_reset(value)
    except ValueError:
        raise InvalidConfig(
            f"Invalid value {value} for configuration {name}: Invalid value `{value}` for "
            f"configuration {name}. The value must be either 'earliest', 'latest' or of the "
            "format 'by_duration:<PnDTnHnMn.nS.>'."
        ) from None


ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


def _check_isolation_level(name: str, value: str) -> None:
    if value not in ISOLATION_LEVELS:
        raise InvalidConfig(
            f"Invalid value {value} for configuration {name}: String must be one of: "
            + ", ".join(ISOLATION_LEVELS)
        )


def _check_dlq_topic(name: str, value: str) -> None:
    if value.startswith("__"):
        raise InvalidConfig(f"{name}: DLQ topic name must not start with '__'")


def _defs(*defs: GroupConfigDef) -> dict[str, GroupConfigDef]:
    return {d.name: d for d in defs}


KEMU_GROUP_ROWS = _defs(
    GroupConfigDef(
        "consumer.session.timeout.ms",
        INT,
        KAFKA,
        "The timeout to detect client failures when using the consumer group protocol.",
        broker_synonym="group.consumer.session.timeout.ms",
        minimum=1,
        bounds=("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    ),
    GroupConfigDef(
        "consumer.heartbeat.interval.ms",
        INT,
        KAFKA,
        "The heartbeat interval given to the members of a consumer group.",
        broker_synonym="group.consumer.heartbeat.interval.ms",
        minimum=1,
        bounds=(
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        ),
    ),
    GroupConfigDef(
        "streams.session.timeout.ms",
        INT,
        KAFKA,
        "The timeout to detect client failures when using the streams group protocol.",
        broker_synonym="group.streams.session.timeout.ms",
        minimum=1,
        bounds=("group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    ),
    GroupConfigDef(
        "streams.heartbeat.interval.ms",
        INT,
        KAFKA,
        "The heartbeat interval given to the members of a streams group.",
        broker_synonym="group.streams.heartbeat.interval.ms",
        minimum=1,
        bounds=(
            "group.streams.min.heartbeat.interval.ms",
            "group.streams.max.heartbeat.interval.ms",
        ),
    ),
    GroupConfigDef(
        "streams.num.standby.replicas",
        INT,
        KAFKA,
        "The number of standby replicas for each task.",
        broker_synonym="group.streams.num.standby.replicas",
        minimum=0,
        at_most="group.streams.max.standby.replicas",
    ),
    # Internal in Kafka 4.4.0's GroupConfig: an AlterConfigs may set them, DescribeConfigs does
    # not list them; the heartbeat answers them.
    GroupConfigDef(
        "streams.task.offset.interval.ms",
        INT,
        KAFKA,
        "The interval in which the warmup task changelog offsets on a client are updated on the "
        "broker. The offsets are sent with the next heartbeat after this time has passed.",
        broker_synonym="group.streams.task.offset.interval.ms",
        minimum=1,
        at_least="group.streams.min.task.offset.interval.ms",
        internal=True,
    ),
    GroupConfigDef(
        "streams.num.warmup.replicas",
        INT,
        KAFKA,
        "The maximum number of warmup task replicas.",
        broker_synonym="group.streams.num.warmup.replicas",
        minimum=0,
        at_most="group.streams.max.warmup.replicas",
        internal=True,
    ),
    GroupConfigDef(
        "streams.acceptable.recovery.lag",
        LONG,
        KAFKA,
        "The maximum acceptable lag (number of offsets to catch up) for a client to be "
        "considered caught-up enough to receive an active task assignment.",
        broker_synonym="group.streams.acceptable.recovery.lag",
        minimum=0,
        internal=True,
    ),
    GroupConfigDef(
        "share.session.timeout.ms",
        INT,
        KAFKA,
        "The timeout to detect client failures when using the share group protocol.",
        broker_synonym="group.share.session.timeout.ms",
        minimum=1,
        bounds=("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    ),
    GroupConfigDef(
        "share.heartbeat.interval.ms",
        INT,
        KAFKA,
        "The heartbeat interval given to the members of a share group.",
        broker_synonym="group.share.heartbeat.interval.ms",
        minimum=1,
        bounds=("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    ),
    GroupConfigDef(
        "share.record.lock.duration.ms",
        INT,
        KAFKA,
        "The record acquisition lock duration in milliseconds for share groups.",
        broker_synonym="group.share.record.lock.duration.ms",
        minimum=1000,
        bounds=(
            "group.share.min.record.lock.duration.ms",
            "group.share.max.record.lock.duration.ms",
        ),
    ),
    GroupConfigDef(
        "share.delivery.count.limit",
        INT,
        KAFKA,
        "The maximum number of delivery attempts for a record delivered to a share group.",
        broker_synonym="group.share.delivery.count.limit",
        minimum=2,
        bounds=("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    ),
    GroupConfigDef(
        "share.partition.max.record.locks",
        INT,
        KAFKA,
        "Share-group record lock limit per share-partition.",
        broker_synonym="group.share.partition.max.record.locks",
        minimum=100,
        bounds=(
            "group.share.min.partition.max.record.locks",
            "group.share.max.partition.max.record.locks",
        ),
    ),
    GroupConfigDef(
        "share.auto.offset.reset",
        STRING,
        KAFKA,
        "The strategy to initialize the share-partition start offset: earliest, latest or "
        "by_duration:<ISO-8601 duration>.",
        check=_check_auto_offset_reset,
    ),
    GroupConfigDef(
        "share.isolation.level",
        STRING,
        KAFKA,
        "Controls how to read records written transactionally.",
        check=_check_isolation_level,
    ),
    GroupConfigDef(
        "share.renew.acknowledge.enable",
        BOOLEAN,
        KAFKA,
        "Whether the renew acknowledge type is enabled for the share group.",
    ),
    GroupConfigDef(
        "errors.deadletterqueue.topic.name",
        STRING,
        KAFKA,
        "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share "
        "group. If blank (the default), the group does not have a DLQ topic.",
        check=_check_dlq_topic,
    ),
    GroupConfigDef(
        "errors.deadletterqueue.copy.record.enable",
        BOOLEAN,
        KAFKA,
        "When writing onto the dead-letter queue topic, whether to copy the original record onto "
        "the DLQ topic, or just write a record containing the context information headers.",
    ),
)


def _check_rack_tags(name: str, value: str) -> None:
    tags = [tag for tag in re.split(r"\s*,\s*", value.strip())] if value.strip() else []
    if len(set(tags)) != len(tags):
        raise InvalidConfig(f"{name} must not contain duplicate tag keys.")


def _list_items(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _check_streams_assignor(name: str, value: str, broker: BrokerConfig) -> None:
    registered = _list_items(broker.get("group.streams.assignors") or "")
    if value not in registered:
        raise InvalidConfig(
            f"{name} '{value}' is not a registered task assignor. Registered assignors are: "
            f"[{', '.join(registered)}]."
        )


def _first_item(value: str) -> str:
    items = _list_items(value)
    return items[0] if items else ""


# What Kafka's GroupConfig.validateValues checks in code (the ConfigDef holds the rest) for the
# group configs defined from the catalogue below.
_KAFKA_CHECKS: dict[str, dict[str, object]] = {
    "consumer.assignment.interval.ms": {
        "bounds": (
            "group.consumer.min.assignment.interval.ms",
            "group.consumer.max.assignment.interval.ms",
        )
    },
    "share.assignment.interval.ms": {
        "bounds": (
            "group.share.min.assignment.interval.ms",
            "group.share.max.assignment.interval.ms",
        )
    },
    "streams.assignment.interval.ms": {
        "bounds": (
            "group.streams.min.assignment.interval.ms",
            "group.streams.max.assignment.interval.ms",
        )
    },
    "streams.assignor.name": {"broker_check": _check_streams_assignor, "from_broker": _first_item},
    "streams.rack.aware.assignment.tags": {"check": _check_rack_tags},
}


def _internal_default(definition: GroupConfigDef) -> GroupConfigDef:
    """A group config internal in Kafka takes its default from its broker synonym's."""
    if definition.default != KAFKA:
        return definition
    assert definition.broker_synonym is not None, definition.name
    broker = broker_definition(definition.broker_synonym)
    assert broker is not None and broker.default is not None, definition.name
    return replace(definition, default=broker.default)


def _with_kafka_catalogue(defined: dict[str, GroupConfigDef]) -> dict[str, GroupConfigDef]:
    """kemu's definitions with Kafka's documentation, plus the Kafka group configs kemu has no
    definition of, from the catalogue generated from Kafka's GroupConfig
    (``kemu/config/kafka_group_catalogue.json``): type, default, floor and broker synonym."""
    from kemu.config.catalogues import group_catalogue

    kafka = group_catalogue()
    merged = {
        name: replace(definition, doc=kafka[name].doc, default=kafka[name].default or "")
        if name in kafka
        else _internal_default(definition)
        for name, definition in defined.items()
    }
    for name, config in kafka.items():
        if name in merged:
            continue
        merged[name] = GroupConfigDef(
            name,
            config.type,
            config.default or "",
            config.doc,
            broker_synonym=config.broker_synonym,
            minimum=config.minimum,
            **_KAFKA_CHECKS.get(name, {}),  # type: ignore[arg-type]
        )
    return merged


GROUP_CONFIGS = _with_kafka_catalogue(KEMU_GROUP_ROWS)

# Session timeout must exceed heartbeat interval (Kafka's validateSessionExceedsHeartbeat).
SESSION_HEARTBEAT_PAIRS = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"),
)


def _parse(definition: GroupConfigDef, value: str) -> None:
    name = definition.name
    if definition.type in (INT, LONG):
        kind, bits = ("INT", 31) if definition.type is INT else ("LONG", 63)
        try:
            number = int(value.strip())
        except ValueError:
            raise InvalidConfig(
                f"Invalid value {value} for configuration {name}: Not a number of type {kind}"
            ) from None
        if not -(2**bits) <= number < 2**bits:
            raise InvalidConfig(
                f"Invalid value {value} for configuration {name}: Not a number of type {kind}"
            )
        if definition.minimum is not None and number < definition.minimum:
            raise InvalidConfig(
                f"Invalid value {value} for configuration {name}: Value must be at least "
                f"{definition.minimum}"
            )
    elif definition.type is BOOLEAN and value.strip().lower() not in ("true", "false"):
        raise InvalidConfig(
            f"Invalid value {value} for configuration {name}: Expected value to be either "
            "true or false"
        )
    if definition.check is not None:
        definition.check(name, value)


def validate_group_configs(overrides: Mapping[str, str], broker: BrokerConfig) -> None:
    """Raise InvalidConfig unless ``overrides`` (a group's complete new set) is acceptable."""
    for name in overrides:
        if name not in GROUP_CONFIGS:
            raise InvalidConfig(f"Unknown group config name: {name}")
    for name, value in overrides.items():
        _parse(GROUP_CONFIGS[name], value)
        broker_check = GROUP_CONFIGS[name].broker_check
        if broker_check is not None:
            broker_check(name, value, broker)
    for name, value in overrides.items():
        definition = GROUP_CONFIGS[name]
        if definition.at_least is not None:
            floor = broker.get_int(definition.at_least)
            if int(value) < floor:
                raise InvalidConfig(f"{name} must be greater than or equal to {floor}")
        if definition.at_most is not None:
            ceiling = broker.get_int(definition.at_most)
            if int(value) > ceiling:
                raise InvalidConfig(f"{name} must be less than or equal to {ceiling}")
        bounds = definition.bounds
        if bounds is None:
            continue
        low, high = (broker.get_int(bound) for bound in bounds)
        if not low <= int(value) <= high:
            raise InvalidConfig(f"{name} must be in the range {low} to {high} inclusive.")
    for session, heartbeat in SESSION_HEARTBEAT_PAIRS:
        if session not in overrides and heartbeat not in overrides:
            continue
        if _int_value(overrides, broker, session) <= _int_value(overrides, broker, heartbeat):
            raise InvalidConfig(f"{session} must be greater than {heartbeat}")


def _int_value(overrides: Mapping[str, str], broker: BrokerConfig, name: str) -> int:
    if name in overrides:
        return int(overrides[name])
    synonym = GROUP_CONFIGS[name].broker_synonym
    return broker.get_int(synonym) if synonym else int(GROUP_CONFIGS[name].default)


@dataclass(frozen=True, slots=True)
class DescribedGroupConfig:
    name: str
    value: str
    source: ConfigSource
    type: ConfigType
    doc: str
    read_only: bool = False
    sensitive: bool = False

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


class GroupConfigStore:
    """Every group's overrides, resolved against the broker config on each read."""

    def __init__(self, broker: BrokerConfig, path: Path | None = None) -> None:
        self.broker = broker
        self.path = path
        self.overrides: dict[str, dict[str, str]] = {}
        if path is not None:
            self.overrides = read_data_file(path, STORE_REMEDY, _decode_overrides) or {}

    def get_overrides(self, group_id: str) -> dict[str, str]:
        return dict(self.overrides.get(group_id, {}))

    def set_overrides(self, group_id: str, overrides: Mapping[str, str]) -> None:
        """Replace a group's overrides (validate first with ``validate``)."""
        if overrides:
            self.overrides[group_id] = dict(overrides)
        else:
            self.overrides.pop(group_id, None)
        self._save()

    def validate(self, overrides: Mapping[str, str]) -> None:
        validate_group_configs(overrides, self.broker)

    def value(self, group_id: str, name: str) -> str:
        """The effective value: the override clamped to today's broker bounds, or the default."""
        definition = GROUP_CONFIGS[name]
        override = self.overrides.get(group_id, {}).get(name)
        if override is None:
            if definition.broker_synonym is not None:
                value = self.broker.get(definition.broker_synonym) or ""
                return definition.from_broker(value) if definition.from_broker else value
            return definition.default
        if definition.at_least is not None:
            override = str(max(int(override), self.broker.get_int(definition.at_least)))
        if definition.at_most is not None:
            override = str(min(int(override), self.broker.get_int(definition.at_most)))
        if definition.bounds is None:
            return override
        low, high = (self.broker.get_int(bound) for bound in definition.bounds)
        return str(min(max(int(override), low), high))

    def source(self, group_id: str, name: str) -> ConfigSource:
        if name in self.overrides.get(group_id, {}):
            return ConfigSource.DYNAMIC_GROUP_CONFIG
        synonym = GROUP_CONFIGS[name].broker_synonym
        if synonym is not None:
            source = self.broker.source(synonym)
            if source is not ConfigSource.DEFAULT_CONFIG:
                return source
        return ConfigSource.DEFAULT_CONFIG

    def describe(self, group_id: str, names: list[str] | None = None) -> list[DescribedGroupConfig]:
        described = [name for name in GROUP_CONFIGS if not GROUP_CONFIGS[name].internal]
        wanted = sorted(described) if names is None else [n for n in names if n in described]
        return [
            DescribedGroupConfig(
                name,
                self.value(group_id, name),
                self.source(group_id, name),
                GROUP_CONFIGS[name].type,
                GROUP_CONFIGS[name].doc,
            )
            for name in wanted
        ]

    def share_config(self, group_id: str) -> ShareGroupConfig:
        value = self.value
        return ShareGroupConfig(
            auto_offset_reset=parse_auto_offset_reset(value(group_id, "share.auto.offset.reset")),
            isolation_level=value(group_id, "share.isolation.level"),
            record_lock_duration_ms=int(value(group_id, "share.record.lock.duration.ms")),
            delivery_count_limit=int(value(group_id, "share.delivery.count.limit")),
            partition_max_record_locks=int(value(group_id, "share.partition.max.record.locks")),
            session_timeout_ms=int(value(group_id, "share.session.timeout.ms")),
            heartbeat_interval_ms=int(value(group_id, "share.heartbeat.interval.ms")),
            renew_acknowledge_enable=value(group_id, "share.renew.acknowledge.enable") == "true",
            dlq_topic_name=value(group_id, "errors.deadletterqueue.topic.name"),
            dlq_copy_record_enable=(
                value(group_id, "errors.deadletterqueue.copy.record.enable") == "true"
            ),
        )

    def _save(self) -> None:
        if self.path is None:
            return
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.overrides, indent=1, sort_keys=True))
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        temporary.replace(self.path)
        # the rename itself is durable only once the directory is synced (a power loss)
        fsync_directory(self.path.parent)


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    """The effective share settings of one group (group overrides over broker defaults)."""

    auto_offset_reset: AutoOffsetReset
    isolation_level: str
    record_lock_duration_ms: int
    delivery_count_limit: int
    partition_max_record_locks: int
    session_timeout_ms: int
    heartbeat_interval_ms: int
    renew_acknowledge_enable: bool
    dlq_topic_name: str
    dlq_copy_record_enable: bool

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"


def _decode_overrides(loaded: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    return {group: dict(values) for group, values in loaded.items()}


def _config_store(runtime: Runtime) -> GroupConfigStore:
    data_dir = runtime.cluster.data_dir
    return GroupConfigStore(runtime.cluster.config, data_dir / STORE_FILE if data_dir else None)


CONFIG_STORE = Service(SERVICE, _config_store)


def group_config_store(runtime: Runtime) -> GroupConfigStore:
    return runtime.services.get(CONFIG_STORE)


def group_config(runtime: Runtime, group_id: str) -> ShareGroupConfig:
    """The effective share-group settings of ``group_id`` (for the share-partition leader)."""
    return group_config_store(runtime).share_config(group_id)


def check_broker_group_configs(broker: BrokerConfig) -> None:
    """The broker's heartbeat intervals and session timeouts of consumer, share and streams groups
    against their min and max, as Kafka 4.4.0's GroupCoordinatorConfig requires at start-up (in
    its order, with its messages). Raises InvalidConfig."""
    for kind in ("consumer", "share", "streams"):
        prefix = f"group.{kind}."
        for setting in ("heartbeat.interval.ms", "session.timeout.ms"):
            name, low, high = prefix + setting, prefix + "min." + setting, prefix + "max." + setting
            _require(broker, high, ">=", low)
            _require(broker, name, ">=", low)
            _require(broker, name, "<=", high)
        if kind == "streams":
            replicas = prefix + "num.standby.replicas"
            _require(broker, replicas, "<=", prefix + "max.standby.replicas")
        _require(broker, prefix + "heartbeat.interval.ms", "<", prefix + "session.timeout.ms")


def _require(broker: BrokerConfig, name: str, relation: str, other: str) -> None:
    value, bound = broker.get_int(name), broker.get_int(other)
    holds = {">=": value >= bound, "<=": value <= bound, "<": value < bound}[relation]
    if not holds:
        words = {">=": "greater than or equal to", "<=": "less than or equal to", "<": "less than"}
        raise InvalidConfig(f"{name} must be {words[relation]} {other}")
