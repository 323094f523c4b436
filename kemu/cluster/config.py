"""Configuration under Kafka's own property names, with Kafka 4.x defaults.

Broker properties come from a ``server.properties``-style file and ``--override key=value``;
topic configs fall back to their broker synonym (``retention.ms`` -> ``log.retention.ms``) and
then to Kafka's default. A few broker properties have older synonyms in other units
(``log.retention.ms`` -> ``log.retention.minutes`` -> ``log.retention.hours``): the first one set
wins, and the last one's default applies when none is. Types follow Kafka's ConfigDef so DescribeConfigs can report them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path


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


def _defs(*defs: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in defs}


T, S, I, L, B, D, LI = (
    ConfigType.STRING,
    ConfigType.SHORT,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.BOOLEAN,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)

TOPIC_CONFIGS = _defs(
    ConfigDef(
        "cleanup.policy",
        LI,
        "delete",
        broker_synonym="log.cleanup.policy",
        valid=("delete", "compact", "compact,delete", "delete,compact"),
        valid_text=("compact", "delete"),  # ValidList.in("compact", "delete")
    ),
    ConfigDef(
        "compression.type",
        T,
        "producer",
        broker_synonym="compression.type",
        valid=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    ConfigDef("compression.gzip.level", I, "-1", broker_synonym="compression.gzip.level"),
    ConfigDef(
        "compression.lz4.level",
        I,
        "9",
        broker_synonym="compression.lz4.level",
        minimum=1,
        maximum=17,
    ),
    ConfigDef(
        "compression.zstd.level",
        I,
        "3",
        broker_synonym="compression.zstd.level",
        minimum=-131072,
        maximum=22,
    ),
    ConfigDef(
        "delete.retention.ms",
        L,
        "86400000",
        broker_synonym="log.cleaner.delete.retention.ms",
        minimum=0,
    ),
    ConfigDef(
        "file.delete.delay.ms", L, "60000", broker_synonym="log.segment.delete.delay.ms", minimum=0
    ),
    ConfigDef(
        "flush.messages",
        L,
        "9223372036854775807",
        broker_synonym="log.flush.interval.messages",
        minimum=1,
    ),
    ConfigDef(
        "flush.ms", L, "9223372036854775807", broker_synonym="log.flush.interval.ms", minimum=0
    ),
    ConfigDef(
        "index.interval.bytes", I, "4096", broker_synonym="log.index.interval.bytes", minimum=0
    ),
    ConfigDef(
        "local.retention.bytes", L, "-2", broker_synonym="log.local.retention.bytes", minimum=-2
    ),
    ConfigDef("local.retention.ms", L, "-2", broker_synonym="log.local.retention.ms", minimum=-2),
    ConfigDef(
        "max.compaction.lag.ms",
        L,
        "9223372036854775807",
        broker_synonym="log.cleaner.max.compaction.lag.ms",
        minimum=1,
    ),
    ConfigDef(
        "max.decompressed.message.bytes",
        I,
        "2147483639",
        broker_synonym="max.decompressed.message.bytes",
        minimum=1,
        maximum=2147483639,
    ),
    ConfigDef("max.message.bytes", I, "1048588", broker_synonym="message.max.bytes", minimum=0),
    ConfigDef(
        "message.timestamp.after.max.ms",
        L,
        "3600000",
        broker_synonym="log.message.timestamp.after.max.ms",
        minimum=0,
    ),
    ConfigDef(
        "message.timestamp.before.max.ms",
        L,
        "9223372036854775807",
        broker_synonym="log.message.timestamp.before.max.ms",
        minimum=0,
    ),
    ConfigDef(
        "message.timestamp.type",
        T,
        "CreateTime",
        broker_synonym="log.message.timestamp.type",
        valid=("CreateTime", "LogAppendTime"),
    ),
    ConfigDef(
        "min.cleanable.dirty.ratio",
        D,
        "0.5",
        broker_synonym="log.cleaner.min.cleanable.ratio",
        minimum=0,
        maximum=1,
    ),
    ConfigDef(
        "min.compaction.lag.ms",
        L,
        "0",
        broker_synonym="log.cleaner.min.compaction.lag.ms",
        minimum=0,
    ),
    ConfigDef("min.insync.replicas", I, "1", broker_synonym="min.insync.replicas", minimum=1),
    ConfigDef("preallocate", B, "false", broker_synonym="log.preallocate"),
    ConfigDef("remote.storage.enable", B, "false"),
    ConfigDef("remote.log.copy.disable", B, "false"),
    ConfigDef("remote.log.delete.on.disable", B, "false"),
    ConfigDef(
        "remote.copy.lag.bytes", L, "-1", broker_synonym="log.remote.copy.lag.bytes", minimum=-1
    ),
    ConfigDef("remote.copy.lag.ms", L, "0", broker_synonym="log.remote.copy.lag.ms", minimum=-1),
    ConfigDef("leader.replication.throttled.replicas", LI, ""),
    ConfigDef("follower.replication.throttled.replicas", LI, ""),
    ConfigDef("retention.bytes", L, "-1", broker_synonym="log.retention.bytes"),
    ConfigDef("retention.ms", L, "604800000", broker_synonym="log.retention.ms", minimum=-1),
    ConfigDef(
        "segment.bytes", I, "1073741824", broker_synonym="log.segment.bytes", minimum=1024 * 1024
    ),
    ConfigDef(
        "segment.index.bytes", I, "10485760", broker_synonym="log.index.size.max.bytes", minimum=4
    ),
    ConfigDef("segment.jitter.ms", L, "0", broker_synonym="log.roll.jitter.ms", minimum=0),
    ConfigDef("segment.ms", L, "604800000", broker_synonym="log.roll.ms", minimum=1),
    ConfigDef(
        "unclean.leader.election.enable",
        B,
        "false",
        broker_synonym="unclean.leader.election.enable",
    ),
    ConfigDef(
        "errors.deadletterqueue.group.enable",
        B,
        "false",
        doc="Whether share groups may use this topic as their dead-letter queue (KIP-1191); a "
        "DLQ write to a topic without it is refused.",
    ),
)

BROKER_CONFIGS = _defs(
    ConfigDef("node.id", I, "1", read_only=True),
    ConfigDef("broker.id", I, "1", read_only=True),
    ConfigDef("process.roles", LI, "broker,controller", read_only=True),
    ConfigDef("auto.create.topics.enable", B, "true", read_only=True),
    ConfigDef("num.partitions", I, "1", minimum=1),
    ConfigDef("default.replication.factor", I, "1", read_only=True),
    ConfigDef("offsets.topic.num.partitions", I, "50", read_only=True, minimum=1),
    ConfigDef("offsets.topic.replication.factor", S, "3", read_only=True),
    ConfigDef("offsets.topic.segment.bytes", I, "104857600", read_only=True, minimum=1),
    ConfigDef("transaction.state.log.num.partitions", I, "50", read_only=True, minimum=1),
    ConfigDef("transaction.state.log.replication.factor", S, "3", read_only=True),
    ConfigDef("transaction.state.log.segment.bytes", I, "104857600", read_only=True, minimum=1),
    ConfigDef("share.coordinator.state.topic.num.partitions", I, "50", read_only=True, minimum=1),
    ConfigDef("share.coordinator.state.topic.replication.factor", S, "3", read_only=True),
    ConfigDef("share.coordinator.snapshot.update.records.per.snapshot", I, "500", minimum=0),
    ConfigDef("share.coordinator.state.topic.min.isr", S, "2", read_only=True, minimum=1),
    ConfigDef(
        "share.coordinator.state.topic.segment.bytes", I, "104857600", read_only=True, minimum=1
    ),
    ConfigDef("message.max.bytes", I, "1048588", minimum=0),
    ConfigDef("socket.request.max.bytes", I, "104857600", read_only=True, minimum=1),
    # Kafka's default is 50, drained by an acceptor thread of its own; kemu's one event loop
    # accepts between requests, so a burst of connects needs a longer queue (the kernel caps it
    # at net.core.somaxconn). docs/reliability.md has the figures.
    ConfigDef("socket.listen.backlog.size", I, "1024", read_only=True, minimum=1),
    # Connection limits (kemu/broker/acceptors.py), with SocketServerConfigs' ranges.
    ConfigDef("max.connections", I, "2147483647", minimum=0),
    ConfigDef("max.connection.creation.rate", I, "2147483647", minimum=0),
    ConfigDef("max.connections.per.ip", I, "2147483647", minimum=0),
    ConfigDef("max.connections.per.ip.overrides", T, ""),
    ConfigDef("delete.topic.enable", B, "true", read_only=True),
    ConfigDef("log.retention.ms", L, None),
    ConfigDef("log.retention.minutes", I, None, read_only=True),
    ConfigDef("log.retention.hours", I, "168", read_only=True),
    ConfigDef("log.retention.bytes", L, "-1"),
    ConfigDef("log.retention.check.interval.ms", L, "300000", read_only=True, minimum=1),
    ConfigDef("log.segment.bytes", I, "1073741824", minimum=14),
    ConfigDef("log.roll.ms", L, None),
    ConfigDef("log.roll.hours", I, "168", read_only=True, minimum=1),
    ConfigDef("log.roll.jitter.ms", L, None),
    ConfigDef("log.roll.jitter.hours", I, "0", read_only=True, minimum=0),
    ConfigDef("log.cleanup.policy", LI, "delete"),
    ConfigDef("log.index.interval.bytes", I, "4096"),
    ConfigDef("log.index.size.max.bytes", I, "10485760"),
    ConfigDef("log.flush.interval.messages", L, "9223372036854775807"),
    ConfigDef("log.flush.interval.ms", L, None),
    ConfigDef("log.flush.scheduler.interval.ms", L, "9223372036854775807", read_only=True),
    ConfigDef("log.message.timestamp.type", T, "CreateTime"),
    ConfigDef("log.message.timestamp.after.max.ms", L, "3600000"),
    ConfigDef("log.message.timestamp.before.max.ms", L, "9223372036854775807"),
    ConfigDef("log.cleaner.enable", B, "true", read_only=True),
    ConfigDef("log.cleaner.backoff.ms", L, "15000", minimum=0),
    ConfigDef("log.cleaner.dedupe.buffer.size", L, "134217728", minimum=0),
    ConfigDef("log.cleaner.io.buffer.load.factor", D, "0.9"),
    ConfigDef("log.cleaner.delete.retention.ms", L, "86400000"),
    ConfigDef("log.cleaner.min.cleanable.ratio", D, "0.5"),
    ConfigDef("log.cleaner.min.compaction.lag.ms", L, "0"),
    ConfigDef("log.cleaner.max.compaction.lag.ms", L, "9223372036854775807"),
    ConfigDef("log.segment.delete.delay.ms", L, "60000"),
    ConfigDef("log.preallocate", B, "false"),
    ConfigDef("log.local.retention.bytes", L, "-2"),
    ConfigDef("log.local.retention.ms", L, "-2"),
    ConfigDef("log.dirs", T, None, read_only=True),
    ConfigDef("compression.type", T, "producer"),
    ConfigDef("compression.gzip.level", I, "-1"),
    ConfigDef("compression.lz4.level", I, "9"),
    ConfigDef("compression.zstd.level", I, "3"),
    ConfigDef("min.insync.replicas", I, "1"),
    ConfigDef("unclean.leader.election.enable", B, "false"),
    ConfigDef("group.initial.rebalance.delay.ms", I, "3000", read_only=True),
    ConfigDef("group.min.session.timeout.ms", I, "6000", read_only=True),
    ConfigDef("group.max.session.timeout.ms", I, "1800000", read_only=True),
    ConfigDef("group.share.enable", B, "true", read_only=True),
    ConfigDef("group.share.record.lock.duration.ms", I, "30000", minimum=1000),
    ConfigDef("group.share.min.record.lock.duration.ms", I, "15000", read_only=True, minimum=1000),
    ConfigDef("group.share.max.record.lock.duration.ms", I, "60000", read_only=True, minimum=1000),
    ConfigDef("group.share.delivery.count.limit", I, "5", minimum=2),
    ConfigDef("group.share.min.delivery.count.limit", I, "2", read_only=True),
    ConfigDef("group.share.max.delivery.count.limit", I, "10", read_only=True),
    ConfigDef("group.share.partition.max.record.locks", I, "2000", minimum=100),
    ConfigDef("group.share.max.size", S, "200", read_only=True, minimum=1),
    ConfigDef("group.share.session.timeout.ms", I, "45000", read_only=True),
    ConfigDef("group.share.min.session.timeout.ms", I, "45000", read_only=True),
    ConfigDef("group.share.max.session.timeout.ms", I, "60000", read_only=True),
    ConfigDef("group.share.heartbeat.interval.ms", I, "5000", read_only=True),
    ConfigDef("group.share.min.heartbeat.interval.ms", I, "5000", read_only=True),
    ConfigDef("group.share.max.heartbeat.interval.ms", I, "15000", read_only=True),
    ConfigDef("group.share.max.share.sessions", I, "2000", read_only=True),
    ConfigDef(
        "errors.deadletterqueue.auto.create.topics.enable",
        B,
        "false",
        read_only=True,
        doc="Whether a share group's DLQ topic that does not exist is created on its first "
        "dead-letter write (KIP-1191).",
    ),
    ConfigDef(
        "errors.deadletterqueue.topic.name.prefix",
        T,
        "dlq.",
        read_only=True,
        doc="The prefix every share group's DLQ topic name must have; empty for none (KIP-1191).",
    ),
    ConfigDef("transaction.max.timeout.ms", I, "900000", read_only=True, minimum=1),
    ConfigDef("transactional.id.expiration.ms", I, "604800000", read_only=True),
    ConfigDef("producer.id.expiration.ms", I, "86400000"),
    ConfigDef(
        "kemu.kip1289.enable",
        B,
        "false",
        read_only=True,
        doc="kemu: serve KIP-1289 (TxnShareAcknowledge, AddShareAcknowledgementsToTxn)",
    ),
    ConfigDef(
        "kemu.kip1289.txn.share.ack.api.key",
        S,
        "95",
        read_only=True,
        minimum=0,
        doc="kemu: the api key TxnShareAcknowledge is served at (KIP-1289, read at start-up)",
    ),
    ConfigDef(
        "kemu.kip1289.add.api.key",
        S,
        "96",
        read_only=True,
        minimum=0,
        doc="kemu: the api key AddShareAcknowledgementsToTxn is served at (KIP-1289)",
    ),
    ConfigDef(
        "kemu.kip1289.enlist",
        T,
        "implicit",
        read_only=True,
        valid=("implicit", "explicit"),
        doc="kemu: 'implicit': TxnShareAcknowledge enlists its share-state partitions in the "
        "transaction; 'explicit': only partitions a prior AddShareAcknowledgementsToTxn enlisted",
    ),
    ConfigDef(
        "kemu.kip1289.abort.respects.delivery.limit",
        B,
        "true",
        read_only=True,
        doc="kemu: an aborted transaction archives a staged record whose delivery was its last "
        "(KIP-1289 spec Q6); false makes it AVAILABLE again, as the draft PR does",
    ),
    ConfigDef(
        "kemu.group.share.initialize.before.answer",
        B,
        "false",
        read_only=True,
        doc="kemu: a ShareGroupHeartbeat that subscribes to partitions whose share state is not "
        "initialized waits for the initialization and assigns them in its own answer (true, "
        "--timing fast), instead of on the member's next heartbeat as Kafka does (false)",
    ),
    ConfigDef(
        "kemu.log.flush",
        T,
        "interval",
        valid=("always", "interval"),
        doc="kemu: fsync after every append ('always') or every log.flush.interval.ms",
    ),
    ConfigDef(
        "kemu.produce.validate.records",
        T,
        "lengths",
        valid=("full", "lengths", "none"),
        doc="kemu: how Produce checks the records of a batch on a topic that is not compacted "
        "(compacted topics always get 'full'): 'full' parses every field of every record as "
        "Kafka's LogValidator does, 'lengths' walks the records' lengths only (several times "
        "cheaper), 'none' stores them unread (a payload that cannot be decompressed is "
        "then accepted)",
    ),
)


# Broker properties that stand for one another (Kafka's DynamicBrokerConfig.brokerConfigSynonyms),
# strongest first; the older ones count in other units.
_RETENTION = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
_ROLL = ("log.roll.ms", "log.roll.hours")
_ROLL_JITTER = ("log.roll.jitter.ms", "log.roll.jitter.hours")
_FLUSH = ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    **{name: chain for chain in (_RETENTION, _ROLL, _ROLL_JITTER) for name in chain},
    _FLUSH[0]: _FLUSH,  # the scheduler interval only stands in for the flush interval
}
MILLIS_PER_UNIT = {
    "log.retention.minutes": 60_000,
    "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000,
    "log.roll.jitter.hours": 3_600_000,
}


def unknown_broker_keys(names: Iterable[str], *also_known: Collection[str]) -> list[str]:
    """The names, in order and once each, that no broker config definition knows.

    Known are every ``BROKER_CONFIGS`` entry and synonym, plus the names in ``also_known`` (broker
    properties a higher layer reads with its own defaults, such as the group coordinator's).
    """
    unknown: list[str] = []
    for name in names:
        if name in BROKER_CONFIGS or name in BROKER_SYNONYMS or name in unknown:
            continue
        if any(name in table for table in also_known):
            continue
        unknown.append(name)
    return unknown


def broker_synonyms(name: str) -> tuple[str, ...]:
    """Every broker property that can supply ``name``'s value, strongest first."""
    return BROKER_SYNONYMS.get(name, (name,))


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` subset: key=value or key: value lines, # and ! comments."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        separator = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if separator < 0:
            values[line] = ""
            continue
        values[line[:separator].strip()] = line[separator + 1 :].strip()
    return values


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


class BrokerConfig:
    """Static broker properties plus dynamic (cluster-wide) overrides."""

    def __init__(self, static: Mapping[str, str] | None = None) -> None:
        self.static: dict[str, str] = dict(static or {})
        self.dynamic: dict[str, str] = {}  # cluster-wide dynamic defaults (BROKER resource "")
        # per-broker dynamic configs (BROKER resource "<node id>"): reported by DescribeConfigs
        self.node_dynamic: dict[int, dict[str, str]] = {}

    @classmethod
    def load(
        cls,
        path: Path | None,
        overrides: Iterable[str],
        base: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        """``base`` (e.g. a timing profile's, ``kemu.cluster.timing``), then the file's properties, then overrides;
        a bad value of a known config raises InvalidConfig with Kafka's message."""
        static: dict[str, str] = dict(base or {})
        if path is not None:
            static.update(parse_properties(path.read_text()))
        for override in overrides:
            key, _, value = override.partition("=")
            static[key.strip()] = value.strip()
        from kemu.cluster.broker_catalogue import catalogue  # it is built on this module

        kafka_configs = catalogue()
        for key, value in static.items():
            definition = BROKER_CONFIGS.get(key) or kafka_configs.get(key)
            if definition is not None:
                validate_value(definition, value)
        return cls(static)

    def get(self, name: str) -> str | None:
        chain = BROKER_SYNONYMS.get(name)
        if chain is not None and chain[0] == name:
            return self._resolve(chain)
        if name in self.dynamic:
            return self.dynamic[name]
        if name in self.static:
            return self.static[name]
        definition = BROKER_CONFIGS.get(name)
        return definition.default if definition else None

    def _resolve(self, chain: tuple[str, ...]) -> str:
        """The head of a synonym chain in its own unit, as Kafka's KafkaConfig computes it."""
        for name in chain:
            value = self.dynamic.get(name, self.static.get(name))
            if value is not None:
                break
        else:
            value = BROKER_CONFIGS[name].default
            assert value is not None  # every chain ends in a property with a default
        millis = int(value) * MILLIS_PER_UNIT.get(name, 1)
        if chain is _RETENTION and millis < 0:
            millis = -1  # any negative retention means unlimited
        return str(millis)

    def source(self, name: str) -> ConfigSource:
        if name in self.dynamic:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if name in self.static:
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    def get_int(self, name: str) -> int:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return int(value)

    def get_bool(self, name: str) -> bool:
        return (self.get(name) or "false").lower() == "true"


class TopicConfig:
    """A topic's explicit overrides, resolved against the broker config on every read."""

    def __init__(self, broker: BrokerConfig, overrides: Mapping[str, str] | None = None) -> None:
        self.broker = broker
        self.overrides: dict[str, str] = dict(overrides or {})

    def get(self, name: str) -> str | None:
        if name in self.overrides:
            return self.overrides[name]
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            return None
        if definition.broker_synonym is not None:
            value = self.broker.get(definition.broker_synonym)
            if value is not None:
                return value
        return definition.default

    def source(self, name: str) -> ConfigSource:
        if name in self.overrides:
            return ConfigSource.DYNAMIC_TOPIC_CONFIG
        definition = TOPIC_CONFIGS.get(name)
        if definition is not None and definition.broker_synonym is not None:
            source = self.broker.source(definition.broker_synonym)
            if source is not ConfigSource.DEFAULT_CONFIG:
                return source
        return ConfigSource.DEFAULT_CONFIG

    def get_int(self, name: str) -> int:
        return int(self.get(name) or 0)


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    for name, value in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise InvalidConfig(f"Unknown topic config name: {name}")
        if value is not None:
            validate_value(definition, value)
