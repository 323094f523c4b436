"""Config resources: what DescribeConfigs, AlterConfigs and IncrementalAlterConfigs act on.

Each resource type (TOPIC 2, BROKER 4, ...) is one ``ConfigResourceType`` object in
``RESOURCE_TYPES``. The three handlers look the type up and never special-case one, so a new
type (GROUP 32 for share groups) is added by writing a subclass and calling
``register_config_resource`` from a module imported at startup (a handler module is), without
touching the handlers.

The generic part lives here too: turning incremental operations (SET, DELETE, APPEND,
SUBTRACT) or a legacy full replacement into the resource's new set of explicit values, with
Kafka's checks and messages, then ``validate`` and (unless validate-only) ``apply``.

Kafka's rules kept: a topic's describe lists every topic config with its effective value and the
synonym chain it came from (topic override, dynamic cluster default, static broker property,
default); BROKER "" is the cluster-wide dynamic default and lists only what was set there;
BROKER "<id>" must be the broker receiving the request. Topic problems are INVALID_CONFIG,
broker ones INVALID_REQUEST (Kafka wraps broker ConfigExceptions so), read-only broker configs
are refused with "Cannot update these configs dynamically".

Omission: per-broker dynamic values are stored, persisted and described, but every virtual
broker shares one model, which applies the cluster-wide value.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from itertools import dropwhile
from typing import TYPE_CHECKING, Any

from kemu.cluster.model import topic_name_problem
from kemu.config.broker_catalogue import catalogue
from kemu.config.definitions import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigDef,
    ConfigSource,
    ConfigType,
    InvalidConfig,
    TopicConfig,
    broker_synonyms,
    validate_topic_configs,
    validate_value,
)
from kemu.config.docs import BROKER_DOCS, TOPIC_DOCS
from kemu.protocol.errors import ErrorCode, default_message

if TYPE_CHECKING:
    from kemu.cluster.context import RequestContext

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


class OpType(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One described config, independent of the wire version."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    config_type: ConfigType
    synonyms: tuple[Synonym, ...]
    documentation: str | None


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """One entry of an alter request: name, operation (SET for legacy AlterConfigs), value."""

    name: str
    op: int
    value: str | None


class ConfigResourceError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


class ConfigResourceType(ABC):
    """What one resource type must answer; ``ctx`` gives the runtime and the receiving node."""

    type_id: int

    @abstractmethod
    def describe(self, ctx: RequestContext, name: str) -> list[ConfigEntry]:
        """Every config of the resource (raise ConfigResourceError for a bad/unknown name)."""

    @abstractmethod
    def explicit(self, ctx: RequestContext, name: str) -> dict[str, str]:
        """The values explicitly set on this resource (what alterations start from)."""

    def check_name(self, ctx: RequestContext, name: str) -> None:  # noqa: B027 - optional hook
        """Refuse an alteration by resource name before anything else is looked at."""

    def is_list(self, key: str) -> bool:
        return False

    def default(self, key: str) -> str | None:
        return None

    @abstractmethod
    def validate(self, ctx: RequestContext, name: str, values: dict[str, str]) -> None:
        """Raise ConfigResourceError unless ``values`` may become the resource's explicit set."""

    @abstractmethod
    def apply(self, ctx: RequestContext, name: str, values: dict[str, str]) -> None:
        """Make ``values`` the resource's explicit set: effective at once, persisted."""


RESOURCE_TYPES: dict[int, ConfigResourceType] = {}


def register_config_resource(kind: ConfigResourceType) -> None:
    RESOURCE_TYPES[kind.type_id] = kind


def lookup(type_id: int) -> ConfigResourceType:
    kind = RESOURCE_TYPES.get(type_id)
    if kind is None:
        raise ConfigResourceError(ErrorCode.invalid_request, f"Unknown resource type {type_id}")
    return kind


# --- the operations the handlers call -------------------------------------------------------


def describe(
    ctx: RequestContext,
    type_id: int,
    name: str,
    keys: Iterable[str] | None,
    *,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[ConfigEntry]:
    entries = lookup(type_id).describe(ctx, name)
    wanted = set(keys) if keys else None
    result = []
    for entry in entries:
        if wanted is not None and entry.name not in wanted:
            continue
        result.append(
            ConfigEntry(
                entry.name,
                entry.value,
                entry.source,
                entry.read_only,
                entry.is_sensitive,
                entry.config_type,
                entry.synonyms if include_synonyms else (),
                entry.documentation if include_documentation else None,
            )
        )
    return result


def duplicate_resources(resources: Iterable[tuple[int, str]]) -> set[tuple[int, str]]:
    """Resources named more than once in one request (Kafka refuses each of them)."""
    seen: set[tuple[int, str]] = set()
    duplicates: set[tuple[int, str]] = set()
    for resource in resources:
        if resource in seen:
            duplicates.add(resource)
        seen.add(resource)
    return duplicates


DUPLICATE_RESOURCE_MESSAGE = "Each resource must appear at most once."


def alter(
    ctx: RequestContext,
    type_id: int,
    name: str,
    changes: Sequence[ConfigChange],
    *,
    incremental: bool,
    validate_only: bool,
) -> None:
    """Alter one resource; raises ConfigResourceError with Kafka's code and message."""
    kind = lookup(type_id)
    names = [change.name for change in changes]
    if len(set(names)) != len(names):
        raise ConfigResourceError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    null_updates = [
        c.name for c in changes if c.value is None and (not incremental or c.op != OpType.DELETE)
    ]
    if null_updates:
        raise ConfigResourceError(
            ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(null_updates)
        )
    kind.check_name(ctx, name)
    current = kind.explicit(ctx, name)
    if incremental:
        values = _apply_operations(kind, current, changes)
    else:
        values = {c.name: c.value for c in changes if c.value is not None}
    kind.validate(ctx, name, values)
    if not validate_only:
        kind.apply(ctx, name, values)


AlterOutcome = tuple[int, str, ErrorCode, str | None]  # resource type, name, error, message
AlterResource = tuple[int, str, Sequence[ConfigChange]]  # resource type, name, its changes


def alter_all(
    ctx: RequestContext,
    resources: Sequence[AlterResource],
    *,
    incremental: bool,
    validate_only: bool,
) -> list[AlterOutcome]:
    """Alter each resource independently (one failing does not stop the others)."""
    duplicates = duplicate_resources((type_id, name) for type_id, name, _ in resources)
    outcomes: list[AlterOutcome] = []
    for type_id, name, changes in resources:
        try:
            if (type_id, name) in duplicates:
                raise ConfigResourceError(ErrorCode.invalid_request, DUPLICATE_RESOURCE_MESSAGE)
            alter(ctx, type_id, name, changes, incremental=incremental, validate_only=validate_only)
        except ConfigResourceError as error:
            outcomes.append((type_id, name, error.code, error.message))
        else:
            outcomes.append((type_id, name, ErrorCode.none, None))
    return outcomes


def alter_response(
    ctx: RequestContext,
    resources: Sequence[AlterResource],
    *,
    incremental: bool,
    validate_only: bool,
    denied: Callable[[int, str], ErrorCode | None] | None = None,
) -> Any:
    """The answer to AlterConfigs (every change a SET of the whole explicit set) or
    IncrementalAlterConfigs (each change with its own operation): ``resources`` are the
    request's (type, name, changes), each handler reading its own request.

    ``denied`` is the authorizer's say on a resource (its error code, or None to go on): as
    Kafka's ControllerApis, refused resources (duplicates aside) come first in the answer, with
    the error's default message, and are not altered."""
    refusals: list[AlterOutcome] = []
    if denied is not None:
        duplicates = duplicate_resources((type_id, name) for type_id, name, _ in resources)
        kept = []
        for resource in resources:
            key = (resource[0], resource[1])
            code = None if key in duplicates else denied(*key)
            if code is None:
                kept.append(resource)
            else:
                refusals.append((*key, code, default_message(code)))
        resources = kept
    outcomes = refusals + alter_all(
        ctx, resources, incremental=incremental, validate_only=validate_only
    )
    return ctx.respond(
        responses=tuple(
            ctx.make(
                "AlterConfigsResourceResponse",
                error_code=code,
                error_message=message,
                resource_type=type_id,
                resource_name=name,
            )
            for type_id, name, code, message in outcomes
        )
    )


def _apply_operations(
    kind: ConfigResourceType, current: Mapping[str, str], changes: Sequence[ConfigChange]
) -> dict[str, str]:
    values = dict(current)
    for change in changes:
        try:
            op = OpType(change.op)
        except ValueError:
            raise ConfigResourceError(
                ErrorCode.invalid_request, f"Unknown operations type {change.op}"
            ) from None
        if op is OpType.SET:
            assert change.value is not None
            values[change.name] = change.value
        elif op is OpType.DELETE:
            values.pop(change.name, None)
        else:
            if not kind.is_list(change.name):
                raise ConfigResourceError(
                    ErrorCode.invalid_config,
                    f"Can't {op.name} to key {change.name} because its type is not LIST.",
                )
            existing = values.get(change.name)
            if existing is None:
                existing = kind.default(change.name)
            parts = [p for p in (existing or "").split(",") if p]
            assert change.value is not None
            for part in change.value.split(","):
                if op is OpType.APPEND and part not in parts:
                    parts.append(part)
                elif op is OpType.SUBTRACT and part in parts:
                    parts.remove(part)
            values[change.name] = ",".join(parts)
    return values


# --- topics ---------------------------------------------------------------------------------


def topic_config_entries(broker: BrokerConfig, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Every topic config with its effective value, as DescribeConfigs and CreateTopics v5+
    report them (also for a topic that is only being validated)."""
    resolved = TopicConfig(broker, overrides)
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        definition = TOPIC_CONFIGS[name]
        chain: list[Synonym] = []
        if name in overrides:
            chain.append(Synonym(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        synonym = definition.broker_synonym
        if synonym is not None:
            chain.extend(_broker_chain(broker, synonym, node_values={}))
        entries.append(
            ConfigEntry(
                name=name,
                value=resolved.get(name),
                source=chain[0].source if chain else ConfigSource.DEFAULT_CONFIG,
                read_only=False,
                is_sensitive=False,
                config_type=definition.type,
                synonyms=tuple(chain),
                documentation=_topic_doc(name, definition.doc),
            )
        )
    return entries


def _topic_doc(name: str, own: str) -> str | None:
    """Kafka's documentation of a topic config (its generated catalogue), else kemu's words."""
    from kemu.config.catalogues import topic_catalogue

    kafka = topic_catalogue().get(name)
    return kafka.doc if kafka is not None else own or TOPIC_DOCS.get(name)


def _broker_chain(
    broker: BrokerConfig,
    name: str,
    node_values: Mapping[str, str],
    node_static: Mapping[str, str] | None = None,
) -> list[Synonym]:
    """Where a broker property's value can come from, strongest first, as Kafka lists it.

    Every property that can supply it counts (``log.retention.ms`` also comes from
    ``log.retention.minutes`` and ``log.retention.hours``), by source first: per-broker dynamic,
    cluster-wide dynamic, static, default. Kafka then drops whatever precedes ``name`` itself,
    so a topic's ``retention.ms`` lists no broker synonym while only the
    ``log.retention.hours`` default applies.
    """
    names = broker_synonyms(name)
    static = {**broker.static, **(node_static or {})}
    defaults = {
        synonym: definition.default
        for synonym in names
        if (definition := broker_definition(synonym)) is not None and definition.default is not None
    }
    layers: tuple[tuple[Mapping[str, str], ConfigSource], ...] = (
        (node_values, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (broker.dynamic, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (static, ConfigSource.STATIC_BROKER_CONFIG),
        (defaults, ConfigSource.DEFAULT_CONFIG),
    )
    chain = [
        Synonym(synonym, values[synonym], source)
        for values, source in layers
        for synonym in names
        if synonym in values
    ]
    return list(dropwhile(lambda entry: entry.name != name, chain))


def topic_config_problem(configs: Mapping[str, str | None]) -> str | None:
    """Kafka's INVALID_CONFIG message for a set of topic configs, or None when acceptable."""
    nulls = [name for name, value in configs.items() if value is None]
    if nulls:
        return "Null value not supported for topic configs: " + ",".join(nulls)
    try:
        validate_topic_configs(configs)
    except InvalidConfig as invalid:
        return str(invalid)
    return None


class TopicConfigs(ConfigResourceType):
    type_id = TOPIC

    def describe(self, ctx: RequestContext, name: str) -> list[ConfigEntry]:
        _check_topic_name(name)
        topic = ctx.cluster.topics.get(name)
        if topic is None:
            raise ConfigResourceError(ErrorCode.unknown_topic_or_partition)
        return topic_config_entries(ctx.cluster.config, topic.config.overrides)

    def explicit(self, ctx: RequestContext, name: str) -> dict[str, str]:
        topic = ctx.cluster.topics.get(name)
        return dict(topic.config.overrides) if topic is not None else {}

    def check_name(self, ctx: RequestContext, name: str) -> None:
        if not name:
            raise ConfigResourceError(
                ErrorCode.invalid_request, "Default topic resources are not allowed."
            )
        _check_topic_name(name)

    def is_list(self, key: str) -> bool:
        definition = TOPIC_CONFIGS.get(key)
        return definition is not None and definition.type is ConfigType.LIST

    def default(self, key: str) -> str | None:
        definition = TOPIC_CONFIGS.get(key)
        return definition.default if definition is not None else None

    def validate(self, ctx: RequestContext, name: str, values: dict[str, str]) -> None:
        problem = topic_config_problem(dict(values))
        if problem is not None:
            raise ConfigResourceError(ErrorCode.invalid_config, problem)
        if name not in ctx.cluster.topics:
            raise ConfigResourceError(
                ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
            )

    def apply(self, ctx: RequestContext, name: str, values: dict[str, str]) -> None:
        topic = ctx.cluster.topics[name]
        topic.config.overrides = dict(values)
        ctx.cluster.apply_log_configs(topic)  # segment.bytes / segment.ms take effect
        ctx.cluster.save_metadata()


def _check_topic_name(name: str) -> None:
    problem = topic_name_problem(name)
    if problem is not None:
        raise ConfigResourceError(
            ErrorCode.invalid_topic_exception, f"Topic name is invalid: {problem}"
        )


# --- brokers --------------------------------------------------------------------------------

_NODE_DEFS = {
    "listeners": ConfigDef("listeners", ConfigType.STRING, None, read_only=True),
    "advertised.listeners": ConfigDef(
        "advertised.listeners", ConfigType.STRING, None, read_only=True
    ),
}


class BrokerConfigs(ConfigResourceType):
    type_id = BROKER

    def describe(self, ctx: RequestContext, name: str) -> list[ConfigEntry]:
        broker = ctx.cluster.config
        if not name:
            return [
                self._entry(key, [Synonym(key, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)])
                for key, value in sorted(broker.dynamic.items())
            ]
        node_id = _broker_id(name, "Broker id must be an integer, but it is: ")
        if node_id != ctx.node.node_id:
            raise ConfigResourceError(
                ErrorCode.invalid_request,
                f"Unexpected broker id, expected {ctx.node.node_id} or empty string, "
                f"but received {name}",
            )
        node_values = broker.node_dynamic.get(node_id, {})
        node_static = self._node_static(ctx)
        keys = (
            set(BROKER_CONFIGS)
            | set(catalogue())
            | set(node_static)
            | set(broker.static)
            | set(broker.dynamic)
            | set(node_values)
        )
        return [
            self._entry(key, _broker_chain(broker, key, node_values, node_static))
            for key in sorted(keys)
        ]

    def _node_static(self, ctx: RequestContext) -> dict[str, str]:
        node = ctx.node
        listener = f"PLAINTEXT://{node.host}:{node.port}"
        values = {
            "node.id": str(node.node_id),
            "broker.id": str(node.node_id),
            "listeners": listener,
            "advertised.listeners": listener,
        }
        if ctx.cluster.data_dir is not None:
            values["log.dirs"] = str(ctx.cluster.data_dir)
        return values

    def _entry(self, key: str, chain: list[Synonym]) -> ConfigEntry:
        definition = BROKER_CONFIGS.get(key) or _NODE_DEFS.get(key) or catalogue().get(key)
        # Kafka hides the values of passwords and of configs whose type it does not know (they
        # may be secrets).
        sensitive = definition is None or definition.type is ConfigType.PASSWORD
        return ConfigEntry(
            name=key,
            value=None if sensitive or not chain else chain[0].value,
            source=chain[0].source if chain else ConfigSource.DEFAULT_CONFIG,
            read_only=definition is None or definition.read_only,
            is_sensitive=sensitive,
            config_type=definition.type if definition is not None else ConfigType.UNKNOWN,
            synonyms=tuple(Synonym(s.name, None, s.source) for s in chain)
            if sensitive
            else tuple(chain),
            # Kafka's own text where Kafka has the config, else kemu's
            documentation=(kafka.doc if (kafka := catalogue().get(key)) is not None else "")
            or (definition.doc if definition else "")
            or BROKER_DOCS.get(key),
        )

    def explicit(self, ctx: RequestContext, name: str) -> dict[str, str]:
        broker = ctx.cluster.config
        if not name:
            return dict(broker.dynamic)
        return dict(broker.node_dynamic.get(int(name), {}))

    def check_name(self, ctx: RequestContext, name: str) -> None:
        if not name:
            return
        node_id = _broker_id(name, "Node id must be an integer, but it is: ")
        if node_id != ctx.node.node_id:
            raise ConfigResourceError(
                ErrorCode.invalid_request,
                f"Unexpected broker id, expected {ctx.node.node_id}, but received {name}",
            )

    def is_list(self, key: str) -> bool:
        definition = broker_definition(key)
        return definition is not None and definition.type is ConfigType.LIST

    def default(self, key: str) -> str | None:
        definition = broker_definition(key)
        return definition.default if definition is not None else None

    def validate(self, ctx: RequestContext, name: str, values: dict[str, str]) -> None:
        _check_elr_min_isr(self.explicit(ctx, name), name, values)
        fixed = sorted(k for k in values if (d := broker_definition(k)) is not None and d.read_only)
        if fixed:
            raise ConfigResourceError(
                ErrorCode.invalid_request,
                # Kafka 4.4's (Java) DynamicBrokerConfig prints the set as [a, b].
                f"Cannot update these configs dynamically: [{', '.join(fixed)}]",
            )
        for key, value in values.items():
            definition = broker_definition(key)
            if definition is None:
                continue  # Kafka keeps unknown dynamic properties (plugins may read them)
            try:
                validate_value(definition, value)
            except InvalidConfig as invalid:
                raise ConfigResourceError(ErrorCode.invalid_request, str(invalid)) from None

    def apply(self, ctx: RequestContext, name: str, values: dict[str, str]) -> None:
        broker = ctx.cluster.config
        if not name:
            broker.dynamic.clear()
            broker.dynamic.update(values)
        else:
            broker.node_dynamic[int(name)] = dict(values)
        for topic in ctx.cluster.topics.values():
            ctx.cluster.apply_log_configs(topic)  # log.segment.bytes / log.roll.ms defaults
        ctx.cluster.save_metadata()


def _check_elr_min_isr(current: Mapping[str, str], name: str, values: Mapping[str, str]) -> None:
    """kemu finalizes eligible.leader.replicas.version 1 as Kafka 4.4 does, whose controller
    then keeps ``min.insync.replicas`` cluster-wide only
    (``ConfigurationControlManager.isDisallowedBrokerMinIsrTransition``): a broker's own value
    cannot change, the cluster-level one cannot be removed."""
    key = "min.insync.replicas"
    if name and current.get(key) != values.get(key):
        raise ConfigResourceError(
            ErrorCode.invalid_config,
            "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
        )
    if not name and key in current and key not in values:
        raise ConfigResourceError(
            ErrorCode.invalid_config,
            "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
        )


def broker_definition(key: str) -> ConfigDef | None:
    """kemu's own definition of a broker config, else Kafka's from the catalogue."""
    return BROKER_CONFIGS.get(key) or catalogue().get(key)


def _broker_id(name: str, complaint: str) -> int:
    try:
        return int(name)
    except ValueError:
        raise ConfigResourceError(ErrorCode.invalid_request, complaint + name) from None


register_config_resource(TopicConfigs())
register_config_resource(BrokerConfigs())
