"""One config resolution path (kemu/config/): every config name kemu's code reads resolves through
``BrokerConfig.get`` / ``TopicConfig.get`` or is a group config, and no default is written down
twice (kemu's definitions take Kafka's defaults from the generated catalogues; Kafka's internal
configs have one table; no module keeps a table of broker defaults of its own)."""

from __future__ import annotations

import ast

from kemu.cluster.listeners import is_security_config
from kemu.config.broker_catalogue import KEMU_DIFFERENCES, catalogue
from kemu.config.catalogues import group_catalogue, topic_catalogue
from kemu.config.definitions import (
    BROKER_CONFIGS,
    BROKER_SYNONYMS,
    KAFKA,
    KEMU_BROKER_ROWS,
    KEMU_TOPIC_ROWS,
    TOPIC_CONFIGS,
    BrokerConfig,
    TopicConfig,
    broker_definition,
)
from kemu.config.internal import INTERNAL_BROKER_CONFIGS
from kemu.coordinator.group.config import GROUP_CONFIGS, KEMU_GROUP_ROWS
from tests import REPO_ROOT

KEMU = REPO_ROOT / "kemu"
READERS = {"get", "get_int", "get_bool", "supplied"}


def _constants(tree: ast.Module) -> dict[str, str]:
    """A module's top-level ``NAME = "string"`` assignments."""
    found: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                found[target.id] = node.value.value
    return found


def config_reads() -> dict[str, list[str]]:
    """Every literal name (or module constant) passed to ``<...config>.get*(...)``, with where."""
    reads: dict[str, list[str]] = {}
    for path in sorted(KEMU.rglob("*.py")):
        tree = ast.parse(path.read_text())
        constants = _constants(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in READERS or not node.args:
                continue
            receiver = ast.unparse(node.func.value)
            if not (receiver.endswith("config") or receiver in ("broker", "self.broker")):
                continue
            argument = node.args[0]
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                name = argument.value
            elif isinstance(argument, ast.Name) and argument.id in constants:
                name = constants[argument.id]
            else:
                continue  # a name computed at run time
            where = f"{path.relative_to(KEMU.parent)}:{node.lineno}"
            reads.setdefault(name, []).append(where)
    return reads


def test_the_walk_finds_the_reads_it_should() -> None:
    reads = config_reads()
    assert len(reads) > 50
    for name in ("offset.metadata.max.bytes", "retention.ms", "listeners", "kemu.log.flush"):
        assert name in reads, name


def test_every_config_name_the_code_reads_resolves() -> None:
    broker, topic = BrokerConfig(), TopicConfig(BrokerConfig())
    unresolved = {
        name: where
        for name, where in config_reads().items()
        if broker_definition(name) is None
        and name not in BROKER_SYNONYMS
        and name not in TOPIC_CONFIGS
        and name not in GROUP_CONFIGS
        # the listeners' and authorizer's settings: what they do depends on whether one is given
        and not is_security_config(name)
    }
    assert unresolved == {}
    # and a definition is not a value: a read of a config Kafka gives a default gets it
    for name in config_reads():
        definition = broker_definition(name)
        if definition is not None and definition.default is not None:
            assert broker.get(name) == definition.default or name in BROKER_SYNONYMS, name
        if name in TOPIC_CONFIGS and TOPIC_CONFIGS[name].broker_synonym is None:
            assert topic.get(name) == TOPIC_CONFIGS[name].default, name


def test_resolution_order_dynamic_static_kemu_kafka_internal() -> None:
    config = BrokerConfig({"group.share.max.partition.max.record.locks": "3500"})
    assert config.get("group.share.max.partition.max.record.locks") == "3500"
    config.dynamic["group.share.max.partition.max.record.locks"] = "3600"
    assert config.get("group.share.max.partition.max.record.locks") == "3600"
    fresh = BrokerConfig()
    assert fresh.get("node.id") == "1"  # kemu's definition, where it knowingly differs
    assert fresh.get("group.share.max.partition.max.record.locks") == "4000"  # Kafka's catalogue
    assert fresh.get("group.streams.max.warmup.replicas") == "20"  # Kafka's internal config
    assert fresh.get("no.such.config") is None
    assert fresh.supplied("listeners") is None  # given or not: the catalogue has a default
    assert fresh.get("listeners") == catalogue()["listeners"].default


def test_kemus_broker_definitions_take_kafkas_defaults() -> None:
    kafka = catalogue()
    restated = [
        name
        for name, row in KEMU_BROKER_ROWS.items()
        if name in kafka and row.default != KAFKA and KEMU_DIFFERENCES.get(name) != "default"
    ]
    assert restated == []
    assert all(row.default != KAFKA for row in BROKER_CONFIGS.values())
    assert BROKER_CONFIGS["num.partitions"].default == kafka["num.partitions"].default


def test_kemus_topic_definitions_take_kafkas_defaults() -> None:
    kafka = topic_catalogue()
    assert [n for n, row in KEMU_TOPIC_ROWS.items() if n in kafka and row.default != KAFKA] == []
    assert all(
        TOPIC_CONFIGS[n].default == kafka[n].default for n in kafka.keys() & TOPIC_CONFIGS.keys()
    )


def test_kemus_group_definitions_take_kafkas_defaults() -> None:
    kafka = group_catalogue()
    restated = [
        name
        for name, row in KEMU_GROUP_ROWS.items()
        if (name in kafka or row.broker_synonym is not None) and row.default != KAFKA
    ]
    assert restated == []
    assert all(row.default != KAFKA for row in GROUP_CONFIGS.values())


def test_kafkas_internal_configs_are_one_table_of_their_own() -> None:
    internal = set(INTERNAL_BROKER_CONFIGS)
    assert internal & set(catalogue()) == set()
    assert internal & set(KEMU_BROKER_ROWS) == set()
    assert all(
        row.doc.startswith("Internal in Kafka 4.4.0") for row in INTERNAL_BROKER_CONFIGS.values()
    )


def test_no_module_keeps_broker_defaults_of_its_own() -> None:
    """A module-level table mapping broker config names to values, outside kemu/config/, is a
    second definition of their defaults (as the group coordinator's BROKER_FALLBACKS and the share
    coordinator's DEFAULTS once were). kemu/testing/kafka.py is exempt: its tables configure the
    real Kafka 4.4.0 that parity tests compare with, not kemu."""
    found = []
    for path in sorted(KEMU.rglob("*.py")):
        if path.parent == KEMU / "config" or path == KEMU / "testing" / "kafka.py":
            continue
        for statement in ast.parse(path.read_text()).body:
            value = statement.value if isinstance(statement, ast.Assign | ast.AnnAssign) else None
            if not isinstance(value, ast.Dict):
                continue
            names = [
                key.value
                for key, default in zip(value.keys, value.values, strict=True)
                if isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                and isinstance(default, ast.Constant)
                and broker_definition(key.value) is not None
            ]
            if names:
                found.append((str(path.relative_to(KEMU.parent)), statement.lineno, names))
    assert found == []
