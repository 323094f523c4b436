"""Kafka 4.4.0's internal broker configs that kemu reads: the last step of a config's resolution.

Kafka defines these with ``ConfigDef.defineInternal``: a broker reads them from its properties,
but DescribeConfigs does not list them, so they are neither in the generated broker catalogue
(``kafka_broker_catalogue.json``) nor in kemu's own definitions (``definitions.py``). Each row
says so in its documentation. ``kemu serve`` knows their names and refuses a bad value at
start-up with Kafka's message; ``BrokerConfig.get`` falls back to the defaults here.
"""

from __future__ import annotations

from kemu.config.types import ConfigDef, ConfigType


def _internal(
    name: str, kind: ConfigType, default: str, where: str, doc: str, minimum: int | None = None
) -> ConfigDef:
    return ConfigDef(
        name,
        kind,
        default,
        doc=f"Internal in Kafka 4.4.0 ({where}): {doc}",
        read_only=True,
        minimum=minimum,
    )


INTERNAL_BROKER_CONFIGS: dict[str, ConfigDef] = {
    definition.name: definition
    for definition in (
        _internal(
            "share.coordinator.cold.partition.snapshot.interval.ms",
            ConfigType.INT,
            "300000",
            "ShareCoordinatorConfig",
            "The duration in milliseconds that the share coordinator will wait between force "
            "snapshotting share partitions which are not being updated.",
            minimum=1,
        ),
        _internal(
            "share.coordinator.state.topic.prune.interval.ms",
            ConfigType.INT,
            "300000",
            "ShareCoordinatorConfig",
            "The duration in milliseconds that the share coordinator will wait between pruning "
            "eligible records in share-group state topic.",
            minimum=1,
        ),
        _internal(
            "group.consumer.regex.refresh.interval.ms",
            ConfigType.INT,
            "600000",
            "GroupCoordinatorConfig",
            "The interval at which the group coordinator will refresh the topics matching the "
            "group subscribed regexes. This is only applicable to consumer groups using the "
            "consumer group protocol.",
            minimum=10000,
        ),
        _internal(
            "group.share.initialize.retry.interval.ms",
            ConfigType.INT,
            "30000",
            "GroupCoordinatorConfig",
            "Time elapsed before retrying initialize share group state request. If below "
            "offsets.commit.timeout.ms, then value of offsets.commit.timeout.ms is used.",
            minimum=1,
        ),
        _internal(
            "group.streams.acceptable.recovery.lag",
            ConfigType.LONG,
            "10000",
            "GroupCoordinatorConfig",
            "The maximum acceptable lag (number of offsets to catch up) for a client to be "
            "considered caught-up enough to receive an active task assignment.",
        ),
        _internal(
            "group.streams.task.offset.interval.ms",
            ConfigType.INT,
            "60000",
            "GroupCoordinatorConfig",
            "The interval in which the warmup task changelog offsets on a client are updated on "
            "the broker. The offsets are sent with the next heartbeat after this time has passed.",
        ),
        _internal(
            "group.streams.min.task.offset.interval.ms",
            ConfigType.INT,
            "15000",
            "GroupCoordinatorConfig",
            "The minimum allowed value for the group-level configuration of "
            "streams.task.offset.interval.ms",
        ),
        _internal(
            "group.streams.num.warmup.replicas",
            ConfigType.INT,
            "2",
            "GroupCoordinatorConfig",
            "The maximum number of warmup task replicas.",
        ),
        _internal(
            "group.streams.max.warmup.replicas",
            ConfigType.INT,
            "20",
            "GroupCoordinatorConfig",
            "The maximum allowed value for the group-level configuration of "
            "streams.num.warmup.replicas",
        ),
    )
}
