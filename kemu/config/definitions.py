"""Configuration under Kafka's own property names, with Kafka 4.4 defaults.

Broker properties come from a ``server.properties``-style file and ``--override key=value``;
topic configs fall back to their broker synonym (``retention.ms`` -> ``log.retention.ms``) and
then to Kafka's default. A few broker properties have older synonyms in other units
(``log.retention.ms`` -> ``log.retention.minutes`` -> ``log.retention.hours``): the first one set
wins, and the last one's default applies when none is. Types follow Kafka's ConfigDef so
DescribeConfigs can report them.

One resolution path (``BrokerConfig.get``): a dynamic value, else the static one (file and
overrides), else kemu's definition below, else Kafka's generated catalogue
(``broker_catalogue.py``), else Kafka's internal configs (``internal.py``). A default is written
down once: a definition below that Kafka's catalogue also holds takes its default from there
(``KAFKA``) unless ``KEMU_DIFFERENCES`` lists it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from kemu.config.broker_catalogue import catalogue
from kemu.config.catalogues import topic_catalogue
from kemu.config.internal import INTERNAL_BROKER_CONFIGS
from kemu.config.types import ConfigDef as ConfigDef
from kemu.config.types import ConfigSource as ConfigSource
from kemu.config.types import ConfigType as ConfigType
from kemu.config.types import InvalidConfig as InvalidConfig
from kemu.config.types import validate_value as validate_value

# A definition's default that is Kafka's, read from its generated catalogue when the table is
# built, so that it is not written down a second time here.
KAFKA = "<Kafka's default>"


def _defs(*defs: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in defs}


def _with_kafka_defaults(
    rows: dict[str, ConfigDef], kafka_default: Mapping[str, str | None]
) -> dict[str, ConfigDef]:
    """The rows with every ``KAFKA`` default replaced by the catalogue's."""
    return {
        name: replace(row, default=kafka_default[name]) if row.default == KAFKA else row
        for name, row in rows.items()
    }


T, S, I, L, B, D, LI = (
    ConfigType.STRING,
    ConfigType.SHORT,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.BOOLEAN,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)

KEMU_TOPIC_ROWS = _defs(
    ConfigDef(
        "cleanup.policy",
        LI,
        KAFKA,
        broker_synonym="log.cleanup.policy",
        valid=("delete", "compact", "compact,delete", "delete,compact"),
        valid_text=("compact", "delete"),  # ValidList.in("compact", "delete")
    ),
    ConfigDef(
        "compression.type",
        T,
        KAFKA,
        broker_synonym="compression.type",
        valid=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    ConfigDef("compression.gzip.level", I, KAFKA, broker_synonym="compression.gzip.level"),
    ConfigDef(
        "compression.lz4.level",
        I,
        KAFKA,
        broker_synonym="compression.lz4.level",
        minimum=1,
        maximum=17,
    ),
    ConfigDef(
        "compression.zstd.level",
        I,
        KAFKA,
        broker_synonym="compression.zstd.level",
        minimum=-131072,
        maximum=22,
    ),
    ConfigDef(
        "delete.retention.ms",
        L,
        KAFKA,
        broker_synonym="log.cleaner.delete.retention.ms",
        minimum=0,
    ),
    ConfigDef(
        "file.delete.delay.ms", L, KAFKA, broker_synonym="log.segment.delete.delay.ms", minimum=0
    ),
    ConfigDef(
        "flush.messages",
        L,
        KAFKA,
        broker_synonym="log.flush.interval.messages",
        minimum=1,
    ),
    ConfigDef("flush.ms", L, KAFKA, broker_synonym="log.flush.interval.ms", minimum=0),
    ConfigDef(
        "index.interval.bytes", I, KAFKA, broker_synonym="log.index.interval.bytes", minimum=0
    ),
    ConfigDef(
        "local.retention.bytes", L, KAFKA, broker_synonym="log.local.retention.bytes", minimum=-2
    ),
    ConfigDef("local.retention.ms", L, KAFKA, broker_synonym="log.local.retention.ms", minimum=-2),
    ConfigDef(
        "max.compaction.lag.ms",
        L,
        KAFKA,
        broker_synonym="log.cleaner.max.compaction.lag.ms",
        minimum=1,
    ),
    ConfigDef(
        "max.decompressed.message.bytes",
        I,
        KAFKA,
        broker_synonym="max.decompressed.message.bytes",
        minimum=1,
        maximum=2147483639,
    ),
    ConfigDef("max.message.bytes", I, KAFKA, broker_synonym="message.max.bytes", minimum=0),
    ConfigDef(
        "message.timestamp.after.max.ms",
        L,
        KAFKA,
        broker_synonym="log.message.timestamp.after.max.ms",
        minimum=0,
    ),
    ConfigDef(
        "message.timestamp.before.max.ms",
        L,
        KAFKA,
        broker_synonym="log.message.timestamp.before.max.ms",
        minimum=0,
    ),
    ConfigDef(
        "message.timestamp.type",
        T,
        KAFKA,
        broker_synonym="log.message.timestamp.type",
        valid=("CreateTime", "LogAppendTime"),
    ),
    ConfigDef(
        "min.cleanable.dirty.ratio",
        D,
        KAFKA,
        broker_synonym="log.cleaner.min.cleanable.ratio",
        minimum=0,
        maximum=1,
    ),
    ConfigDef(
        "min.compaction.lag.ms",
        L,
        KAFKA,
        broker_synonym="log.cleaner.min.compaction.lag.ms",
        minimum=0,
    ),
    ConfigDef("min.insync.replicas", I, KAFKA, broker_synonym="min.insync.replicas", minimum=1),
    ConfigDef("preallocate", B, KAFKA, broker_synonym="log.preallocate"),
    ConfigDef("remote.storage.enable", B, KAFKA),
    ConfigDef("remote.log.copy.disable", B, KAFKA),
    ConfigDef("remote.log.delete.on.disable", B, KAFKA),
    ConfigDef(
        "remote.copy.lag.bytes", L, KAFKA, broker_synonym="log.remote.copy.lag.bytes", minimum=-1
    ),
    ConfigDef("remote.copy.lag.ms", L, KAFKA, broker_synonym="log.remote.copy.lag.ms", minimum=-1),
    ConfigDef("leader.replication.throttled.replicas", LI, KAFKA),
    ConfigDef("follower.replication.throttled.replicas", LI, KAFKA),
    ConfigDef("retention.bytes", L, KAFKA, broker_synonym="log.retention.bytes"),
    ConfigDef("retention.ms", L, KAFKA, broker_synonym="log.retention.ms", minimum=-1),
    ConfigDef("segment.bytes", I, KAFKA, broker_synonym="log.segment.bytes", minimum=1024 * 1024),
    ConfigDef(
        "segment.index.bytes", I, KAFKA, broker_synonym="log.index.size.max.bytes", minimum=4
    ),
    ConfigDef("segment.jitter.ms", L, KAFKA, broker_synonym="log.roll.jitter.ms", minimum=0),
    ConfigDef("segment.ms", L, KAFKA, broker_synonym="log.roll.ms", minimum=1),
    ConfigDef(
        "unclean.leader.election.enable",
        B,
        KAFKA,
        broker_synonym="unclean.leader.election.enable",
    ),
    ConfigDef(
        "errors.deadletterqueue.group.enable",
        B,
        KAFKA,
        doc="Whether share groups may use this topic as their dead-letter queue (KIP-1191); a "
        "DLQ write to a topic without it is refused.",
    ),
)

KEMU_BROKER_ROWS = _defs(
    ConfigDef("node.id", I, "1", read_only=True),
    ConfigDef("broker.id", I, "1", read_only=True),
    ConfigDef("process.roles", LI, "broker,controller", read_only=True),
    ConfigDef("auto.create.topics.enable", B, KAFKA, read_only=True),
    ConfigDef("num.partitions", I, KAFKA, minimum=1),
    ConfigDef("default.replication.factor", I, KAFKA, read_only=True),
    ConfigDef("offsets.topic.num.partitions", I, KAFKA, read_only=True, minimum=1),
    ConfigDef("offsets.topic.replication.factor", S, KAFKA, read_only=True),
    ConfigDef("offsets.topic.segment.bytes", I, KAFKA, read_only=True, minimum=1),
    ConfigDef("transaction.state.log.num.partitions", I, KAFKA, read_only=True, minimum=1),
    ConfigDef("transaction.state.log.replication.factor", S, KAFKA, read_only=True),
    ConfigDef("transaction.state.log.segment.bytes", I, KAFKA, read_only=True, minimum=1),
    ConfigDef("share.coordinator.state.topic.num.partitions", I, KAFKA, read_only=True, minimum=1),
    ConfigDef("share.coordinator.state.topic.replication.factor", S, KAFKA, read_only=True),
    ConfigDef("share.coordinator.snapshot.update.records.per.snapshot", I, KAFKA, minimum=0),
    ConfigDef("share.coordinator.state.topic.min.isr", S, KAFKA, read_only=True, minimum=1),
    ConfigDef("share.coordinator.state.topic.segment.bytes", I, KAFKA, read_only=True, minimum=1),
    ConfigDef("message.max.bytes", I, KAFKA, minimum=0),
    ConfigDef("socket.request.max.bytes", I, KAFKA, read_only=True, minimum=1),
    # Kafka's default is 50, drained by an acceptor thread of its own; kemu's one event loop
    # accepts between requests, so a burst of connects needs a longer queue (the kernel caps it
    # at net.core.somaxconn). docs/reliability.md has the figures.
    ConfigDef("socket.listen.backlog.size", I, "1024", read_only=True, minimum=1),
    # Connection limits (kemu/broker/acceptors.py), with SocketServerConfigs' ranges.
    ConfigDef("max.connections", I, KAFKA, minimum=0),
    ConfigDef("max.connection.creation.rate", I, KAFKA, minimum=0),
    ConfigDef("max.connections.per.ip", I, KAFKA, minimum=0),
    ConfigDef("max.connections.per.ip.overrides", T, KAFKA),
    ConfigDef("delete.topic.enable", B, KAFKA, read_only=True),
    ConfigDef("log.retention.ms", L, KAFKA),
    ConfigDef("log.retention.minutes", I, KAFKA, read_only=True),
    ConfigDef("log.retention.hours", I, KAFKA, read_only=True),
    ConfigDef("log.retention.bytes", L, KAFKA),
    ConfigDef("log.retention.check.interval.ms", L, KAFKA, read_only=True, minimum=1),
    ConfigDef("log.segment.bytes", I, KAFKA, minimum=14),
    ConfigDef("log.roll.ms", L, KAFKA),
    ConfigDef("log.roll.hours", I, KAFKA, read_only=True, minimum=1),
    ConfigDef("log.roll.jitter.ms", L, KAFKA),
    ConfigDef("log.roll.jitter.hours", I, KAFKA, read_only=True, minimum=0),
    ConfigDef("log.cleanup.policy", LI, KAFKA),
    ConfigDef("log.index.interval.bytes", I, KAFKA),
    ConfigDef("log.index.size.max.bytes", I, KAFKA),
    ConfigDef("log.flush.interval.messages", L, KAFKA),
    ConfigDef("log.flush.interval.ms", L, KAFKA),
    ConfigDef("log.flush.scheduler.interval.ms", L, KAFKA, read_only=True),
    ConfigDef("log.message.timestamp.type", T, KAFKA),
    ConfigDef("log.message.timestamp.after.max.ms", L, KAFKA),
    ConfigDef("log.message.timestamp.before.max.ms", L, KAFKA),
    ConfigDef("log.cleaner.enable", B, KAFKA, read_only=True),
    ConfigDef("log.cleaner.backoff.ms", L, KAFKA, minimum=0),
    ConfigDef("log.cleaner.dedupe.buffer.size", L, KAFKA, minimum=0),
    ConfigDef("log.cleaner.io.buffer.load.factor", D, KAFKA),
    ConfigDef("log.cleaner.delete.retention.ms", L, KAFKA),
    ConfigDef("log.cleaner.min.cleanable.ratio", D, KAFKA),
    ConfigDef("log.cleaner.min.compaction.lag.ms", L, KAFKA),
    ConfigDef("log.cleaner.max.compaction.lag.ms", L, KAFKA),
    ConfigDef("log.segment.delete.delay.ms", L, KAFKA),
    ConfigDef("log.preallocate", B, KAFKA),
    ConfigDef("log.local.retention.bytes", L, KAFKA),
    ConfigDef("log.local.retention.ms", L, KAFKA),
    ConfigDef("log.dirs", T, KAFKA, read_only=True),
    ConfigDef("compression.type", T, KAFKA),
    ConfigDef("compression.gzip.level", I, KAFKA),
    ConfigDef("compression.lz4.level", I, KAFKA),
    ConfigDef("compression.zstd.level", I, KAFKA),
    ConfigDef("min.insync.replicas", I, KAFKA),
    ConfigDef("unclean.leader.election.enable", B, KAFKA),
    ConfigDef("group.initial.rebalance.delay.ms", I, KAFKA, read_only=True),
    ConfigDef("group.min.session.timeout.ms", I, KAFKA, read_only=True),
    ConfigDef("group.max.session.timeout.ms", I, KAFKA, read_only=True),
    ConfigDef("group.share.enable", B, "true", read_only=True),
    ConfigDef("group.share.record.lock.duration.ms", I, KAFKA, minimum=1000),
    ConfigDef("group.share.min.record.lock.duration.ms", I, KAFKA, read_only=True, minimum=1000),
    ConfigDef("group.share.max.record.lock.duration.ms", I, KAFKA, read_only=True, minimum=1000),
    ConfigDef("group.share.delivery.count.limit", I, KAFKA, minimum=2),
    ConfigDef("group.share.min.delivery.count.limit", I, KAFKA, read_only=True),
    ConfigDef("group.share.max.delivery.count.limit", I, KAFKA, read_only=True),
    ConfigDef("group.share.partition.max.record.locks", I, KAFKA, minimum=100),
    ConfigDef("group.share.max.size", S, KAFKA, read_only=True, minimum=1),
    ConfigDef("group.share.session.timeout.ms", I, KAFKA, read_only=True),
    ConfigDef("group.share.min.session.timeout.ms", I, KAFKA, read_only=True),
    ConfigDef("group.share.max.session.timeout.ms", I, KAFKA, read_only=True),
    ConfigDef("group.share.heartbeat.interval.ms", I, KAFKA, read_only=True),
    ConfigDef("group.share.min.heartbeat.interval.ms", I, KAFKA, read_only=True),
    ConfigDef("group.share.max.heartbeat.interval.ms", I, KAFKA, read_only=True),
    ConfigDef("group.share.max.share.sessions", I, KAFKA, read_only=True),
    ConfigDef(
        "errors.deadletterqueue.auto.create.topics.enable",
        B,
        KAFKA,
        read_only=True,
        doc="Whether a share group's DLQ topic that does not exist is created on its first "
        "dead-letter write (KIP-1191).",
    ),
    ConfigDef(
        "errors.deadletterqueue.topic.name.prefix",
        T,
        KAFKA,
        read_only=True,
        doc="The prefix every share group's DLQ topic name must have; empty for none (KIP-1191).",
    ),
    ConfigDef("transaction.max.timeout.ms", I, KAFKA, read_only=True, minimum=1),
    ConfigDef("transactional.id.expiration.ms", I, KAFKA, read_only=True),
    ConfigDef("producer.id.expiration.ms", I, KAFKA),
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
        "kemu.group.consumer.regex.refresh.min.interval.ms",
        I,
        "10000",
        read_only=True,
        minimum=0,
        doc="kemu: the least time between two resolutions of a KIP-848 group's topic regexes, "
        "so a topic created since the last one is matched no sooner (Kafka's constant "
        "REGEX_BATCH_REFRESH_MIN_INTERVAL_MS, 10 s); 0, as under --timing fast: none",
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
        "kemu.debug.request.log",
        B,
        "false",
        read_only=True,
        doc="kemu: log one line per answered request (API, client, arrival and answer times, "
        "member epochs and assignments of group heartbeats), to see where a client waits",
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

BROKER_CONFIGS = _with_kafka_defaults(
    KEMU_BROKER_ROWS, {name: kafka.default for name, kafka in catalogue().items()}
)
TOPIC_CONFIGS = _with_kafka_defaults(
    KEMU_TOPIC_ROWS, {name: kafka.default for name, kafka in topic_catalogue().items()}
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


def broker_definition(name: str) -> ConfigDef | None:
    """The definition of a broker config: kemu's, else Kafka's catalogue's, else Kafka's internal
    one's; None for a name none of them knows."""
    return BROKER_CONFIGS.get(name) or catalogue().get(name) or INTERNAL_BROKER_CONFIGS.get(name)


def known_broker_configs() -> set[str]:
    """Every broker config name a definition knows: kemu's, Kafka's catalogue's, internal."""
    return {*BROKER_CONFIGS, *catalogue(), *INTERNAL_BROKER_CONFIGS}


def unknown_broker_keys(names: Iterable[str], *also_known: Collection[str]) -> list[str]:
    """The names, in order and once each, that no broker config definition knows.

    Known are kemu's definitions and synonyms, Kafka's catalogue and its internal configs,
    plus the names in ``also_known``.
    """
    unknown: list[str] = []
    for name in names:
        if name in BROKER_SYNONYMS or name in unknown or broker_definition(name) is not None:
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


class TypedValues(ABC):
    """A config's values (``get``) as numbers; KeyError for a name without a value."""

    @abstractmethod
    def get(self, name: str) -> str | None: ...

    def _required(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def get_int(self, name: str) -> int:
        return int(self._required(name))

    def get_float(self, name: str) -> float:
        return float(self._required(name))


class BrokerConfig(TypedValues):
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
        """``base`` (e.g. a timing profile's, ``kemu.config.timing``), then the file's properties, then overrides;
        a bad value of a known config raises InvalidConfig with Kafka's message."""
        static: dict[str, str] = dict(base or {})
        if path is not None:
            static.update(parse_properties(path.read_text()))
        for override in overrides:
            key, _, value = override.partition("=")
            static[key.strip()] = value.strip()
        for key, value in static.items():
            definition = broker_definition(key)
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
        definition = broker_definition(name)
        return definition.default if definition else None

    def supplied(self, name: str) -> str | None:
        """The value given for ``name`` (dynamic, else static), None when none was: for the
        settings whose absence changes what kemu does (``listeners`` and its kin)."""
        return self.dynamic.get(name, self.static.get(name))

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

    def get_bool(self, name: str) -> bool:
        return self._required(name).lower() == "true"


class TopicConfig(TypedValues):
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


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    for name, value in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise InvalidConfig(f"Unknown topic config name: {name}")
        if value is not None:
            validate_value(definition, value)
