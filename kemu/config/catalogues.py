"""Kafka 4.4's group and topic configs, as its own ConfigDefs define them.

``kafka_group_catalogue.json`` and ``kafka_topic_catalogue.json`` beside this module are
generated from Kafka's jars (``python -m conformance.config_catalogues``: GroupConfig.CONFIG_DEF
and LogConfig's ConfigDef, internal ones left out), never written by hand, as the broker one
(``broker_catalogue.py``) is. The group configs kemu defines (``kemu/coordinator/group/config.py``)
take their names, types, defaults, floors, broker synonyms and documentation from here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kemu.config.types import ConfigType

GROUP_FILE = Path(__file__).with_name("kafka_group_catalogue.json")
TOPIC_FILE = Path(__file__).with_name("kafka_topic_catalogue.json")
_AT_LEAST = re.compile(r"\[(-?\d+),\.\.\.\]")  # Kafka's Range.atLeast(n) prints "[n,...]"
_BETWEEN = re.compile(r"\[(-?\d+),\.\.\.,(-?\d+)\]")  # Range.between(a, b) prints "[a,...,b]"


@dataclass(frozen=True, slots=True)
class KafkaConfig:
    name: str
    type: ConfigType
    default: str | None  # as Kafka describes it; None when it has none
    validator: str | None  # as Kafka prints it, e.g. "[1,...]"
    broker_synonym: str | None  # the broker config that supplies the default
    doc: str

    @property
    def minimum(self) -> int | None:
        """The floor of a numeric range validator."""
        if self.validator is None:
            return None
        match = _AT_LEAST.fullmatch(self.validator) or _BETWEEN.fullmatch(self.validator)
        return int(match.group(1)) if match else None

    @property
    def maximum(self) -> int | None:
        match = _BETWEEN.fullmatch(self.validator or "")
        return int(match.group(2)) if match else None


def _load(path: Path) -> dict[str, KafkaConfig]:
    document = json.loads(path.read_text())
    return {
        row["name"]: KafkaConfig(
            row["name"],
            ConfigType[row["type"]],
            row["default"],
            row["validator"],
            row["broker_synonym"],
            row["doc"],
        )
        for row in document["configs"]
    }


@cache
def group_catalogue() -> dict[str, KafkaConfig]:
    """Kafka's group configs (the GROUP config resource) by name."""
    return _load(GROUP_FILE)


@cache
def topic_catalogue() -> dict[str, KafkaConfig]:
    """Kafka's topic configs by name."""
    return _load(TOPIC_FILE)
