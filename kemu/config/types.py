"""The vocabulary of configs: Kafka's config types and sources, a definition, validation.

Every other module of ``kemu.config`` (and every layer above) builds on these; this one reads no
table, so the generated catalogues can be loaded without the definitions that refer to them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ConfigType(IntEnum):
    """Kafka's DescribeConfigs ConfigType numbering."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigs ConfigSource numbering on the wire (DescribeConfigsResponse's
    ConfigSource ids; the admin client's ConfigEntry.ConfigSource enum orders them otherwise)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str | None
    doc: str = ""
    broker_synonym: str | None = None
    valid: tuple[str, ...] | None = None  # allowed values for enumerated strings
    minimum: int | None = None
    read_only: bool = False
    maximum: int | None = None  # Kafka's Range.between upper bound (ints and doubles)
    valid_text: tuple[str, ...] | None = None  # the values Kafka's message lists, if not valid's


class InvalidConfig(ValueError):
    """A config name or value Kafka would refuse (INVALID_CONFIG)."""


def validate_value(definition: ConfigDef, value: str) -> None:
    """Raise InvalidConfig when ``value`` is not acceptable for ``definition``."""
    kind = definition.type
    if kind in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        try:
            number = int(value)
        except ValueError:
            raise InvalidConfig(
                f"Invalid value {value} for configuration {definition.name}: Not a number of type "
                f"{kind.name}"
            ) from None
        _check_range(definition, number, str(number))
    elif kind is ConfigType.DOUBLE:
        try:
            ratio = float(value)
        except ValueError:
            raise InvalidConfig(
                f"Invalid value {value} for configuration {definition.name}: Not a number of type "
                "DOUBLE"
            ) from None
        _check_range(definition, ratio, repr(ratio))  # Java prints the parsed double: -1.0
    elif definition.name in THROTTLED_REPLICAS:
        _check_throttled_replicas(definition.name, value)
    elif kind is ConfigType.BOOLEAN and value.lower() not in ("true", "false"):
        raise InvalidConfig(
            f"Invalid value {value} for configuration {definition.name}: Expected value to "
            "be either true or false"
        )
    if definition.valid is not None and value not in definition.valid:
        raise InvalidConfig(
            f"Invalid value {value} for configuration {definition.name}: String must be one of: "
            + ", ".join(definition.valid_text or definition.valid)
        )


THROTTLED_REPLICAS = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)


def _check_range(definition: ConfigDef, number: float, shown: str) -> None:
    """Kafka's ConfigDef.Range messages."""
    if definition.minimum is not None and number < definition.minimum:
        raise InvalidConfig(
            f"Invalid value {shown} for configuration {definition.name}: Value must be at "
            f"least {definition.minimum}"
        )
    if definition.maximum is not None and number > definition.maximum:
        raise InvalidConfig(
            f"Invalid value {shown} for configuration {definition.name}: Value must be no more "
            f"than {definition.maximum}"
        )


def _check_throttled_replicas(name: str, value: str) -> None:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker`` pairs."""
    entries = [entry.strip() for entry in value.split(",")] if value.strip() else []
    if value.strip() == "*" or all(
        not entry or (entry.count(":") == 1 and all(p.isdigit() for p in entry.split(":")))
        for entry in entries
    ):
        return
    raise InvalidConfig(
        f"Invalid value [{', '.join(entries)}] for configuration {name}: {name} must be the "
        "literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )
