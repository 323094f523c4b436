"""Every broker config Kafka 4.4 describes, as its own ConfigDef defines them.

``kafka_broker_catalogue.json`` beside this module is generated from Kafka's jars
(``python -m conformance.broker_catalogue``: name, type, default as Kafka describes it, whether
it can be changed dynamically, documentation), never written by hand. kemu acts on the configs
of ``BROKER_CONFIGS`` (``kemu/config/definitions.py``), whose definitions win; the others are known
so that DescribeConfigs lists all 350 with Kafka's defaults, types and documentation, a
dynamic one can be set (type-checked, stored, described, but without effect in kemu) and a
read-only one is refused as Kafka refuses it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from kemu.config.types import ConfigDef, ConfigType

CATALOGUE_FILE = Path(__file__).with_name("kafka_broker_catalogue.json")

# Where kemu's own definitions (which win) knowingly differ from Kafka 4.4's ConfigDef, in
# default, type or whether it can change at runtime; tests check there are no others.
KEMU_DIFFERENCES = {
    # defaults of a node's identity: kemu fills them in per virtual broker
    "node.id": "default",
    "broker.id": "default",
    "process.roles": "default",
    # 1024, not 50: one event loop accepts between requests (kemu/broker/server.py)
    "socket.listen.backlog.size": "default",
    # kemu lets these change at runtime; Kafka reads them at start-up only
    "num.partitions": "dynamic in kemu",
    "share.coordinator.snapshot.update.records.per.snapshot": "dynamic in kemu",
    "group.share.record.lock.duration.ms": "dynamic in kemu",
    "group.share.delivery.count.limit": "dynamic in kemu",
    "group.share.partition.max.record.locks": "dynamic in kemu",
    # Kafka can change these at runtime; kemu reads them at start-up
    "errors.deadletterqueue.auto.create.topics.enable": "read-only in kemu",
    "errors.deadletterqueue.topic.name.prefix": "read-only in kemu",
    # types: kemu takes one data dir; kemu checks a SHORT range
    "log.dirs": "STRING in kemu",
    "group.share.max.size": "SHORT in kemu",
}


@cache
def catalogue() -> dict[str, ConfigDef]:
    """Kafka's broker configs by name (read once)."""
    document = json.loads(CATALOGUE_FILE.read_text())
    return {
        row["name"]: ConfigDef(
            row["name"],
            ConfigType[row["type"]],
            row["default"],
            doc=row["doc"],
            read_only=not row["dynamic"],
        )
        for row in document["configs"]
    }


def kafka_version() -> str:
    version: str = json.loads(CATALOGUE_FILE.read_text())["kafka_version"]
    return version
