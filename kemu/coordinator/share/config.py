"""The share coordinator's broker configs that Kafka 4.4.0 defines as internal.

``ShareCoordinatorConfig`` defines these with ``defineInternal``: a broker reads them from its
properties, but DescribeConfigs does not list them, so they are not in the broker catalogue
(``kemu/cluster/kafka_broker_catalogue.json``) nor in ``BROKER_CONFIGS``. ``kemu serve`` knows
their names, refuses a bad value at start-up with Kafka's message, and reads them here.
"""

from __future__ import annotations

from kemu.cluster.config import BrokerConfig, ConfigDef, ConfigType, validate_value

COLD_PARTITION_SNAPSHOT_INTERVAL_MS = "share.coordinator.cold.partition.snapshot.interval.ms"

INTERNAL_BROKER_CONFIGS = {
    COLD_PARTITION_SNAPSHOT_INTERVAL_MS: ConfigDef(
        COLD_PARTITION_SNAPSHOT_INTERVAL_MS,
        ConfigType.INT,
        "300000",
        doc=(
            "The duration in milliseconds that the share coordinator will wait between force "
            "snapshotting share partitions which are not being updated."
        ),
        read_only=True,
        minimum=1,
    ),
}


def check_share_coordinator_configs(config: BrokerConfig) -> None:
    """Raise InvalidConfig (Kafka's message) for a bad value of an internal share coordinator
    config supplied in the broker's properties."""
    for name, definition in INTERNAL_BROKER_CONFIGS.items():
        value = config.static.get(name)
        if value is not None:
            validate_value(definition, value)


def cold_partition_snapshot_interval_ms(config: BrokerConfig) -> int:
    """``share.coordinator.cold.partition.snapshot.interval.ms``, Kafka's default when unset."""
    value = config.get(COLD_PARTITION_SNAPSHOT_INTERVAL_MS)
    default = INTERNAL_BROKER_CONFIGS[COLD_PARTITION_SNAPSHOT_INTERVAL_MS].default
    return int(value if value is not None else str(default))
