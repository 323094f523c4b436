"""The share settings a share-partition leader needs from its group, in one place.

``share_settings(runtime, group_id)`` asks the group-config service (group overrides over
broker ``group.share.*`` defaults) and falls back to the broker defaults alone when that
service is not part of this build. ``resolve_start_offset`` turns ``share.auto.offset.reset``
into the first offset of a share partition without state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kemu.broker.share.partition import SharePartitionConfig
from kemu.cluster.partition import Partition
from kemu.config.definitions import BrokerConfig

if TYPE_CHECKING:
    from kemu.cluster.context import Runtime


@dataclass(frozen=True, slots=True)
class ShareSettings:
    partition: SharePartitionConfig
    auto_offset_reset: str = "latest"  # earliest | latest | by_duration
    reset_duration_ms: int = 0  # by_duration only
    read_committed: bool = False
    # KIP-1191: the group's errors.deadletterqueue.topic.name ("" = none) and
    # errors.deadletterqueue.copy.record.enable
    dlq_topic: str = ""
    dlq_copy_record: bool = False


def share_settings(runtime: Runtime, group_id: str) -> ShareSettings:
    try:
        from kemu.coordinator.group.config import group_config
    except ImportError:  # a build without the group coordinator
        return broker_defaults(runtime.cluster.config)
    config = group_config(runtime, group_id)
    return ShareSettings(
        partition=SharePartitionConfig(
            record_lock_duration_ms=config.record_lock_duration_ms,
            delivery_count_limit=config.delivery_count_limit,
            max_in_flight_records=config.partition_max_record_locks,
            abort_respects_delivery_limit=_abort_respects_limit(runtime.cluster.config),
            dlq_enabled=bool(config.dlq_topic_name),
        ),
        auto_offset_reset=config.auto_offset_reset.strategy,
        reset_duration_ms=config.auto_offset_reset.duration_ms or 0,
        read_committed=config.read_committed,
        dlq_topic=config.dlq_topic_name,
        dlq_copy_record=config.dlq_copy_record_enable,
    )


def broker_defaults(config: BrokerConfig) -> ShareSettings:
    return ShareSettings(
        partition=SharePartitionConfig(
            record_lock_duration_ms=config.get_int("group.share.record.lock.duration.ms"),
            delivery_count_limit=config.get_int("group.share.delivery.count.limit"),
            max_in_flight_records=config.get_int("group.share.partition.max.record.locks"),
            abort_respects_delivery_limit=_abort_respects_limit(config),
        )
    )


def _abort_respects_limit(config: BrokerConfig) -> bool:
    return config.get_bool("kemu.kip1289.abort.respects.delivery.limit")


def resolve_start_offset(settings: ShareSettings, partition: Partition, now_ms: int) -> int:
    """Where a share partition without state starts (Kafka's startOffsetDuringInitialization)."""
    if settings.auto_offset_reset == "earliest":
        return partition.log_start_offset
    if settings.auto_offset_reset == "by_duration":
        match = partition.log.offset_for_timestamp(now_ms - settings.reset_duration_ms)
        return match.offset if match is not None else partition.high_watermark
    return partition.high_watermark
