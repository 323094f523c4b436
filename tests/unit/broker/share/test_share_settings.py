"""share.auto.offset.reset resolution and the settings a share partition reads."""

from __future__ import annotations

import uuid

from kemu.broker.share.settings import ShareSettings, broker_defaults, resolve_start_offset
from kemu.cluster.partition import Partition
from kemu.config.definitions import BrokerConfig
from kemu.protocol.records import build_batch, split_batches
from kemu.storage.log import MemoryLog


def partition_with(timestamps: list[int], log_start: int = 0) -> Partition:
    partition = Partition("t", uuid.uuid4(), 0, 1, [1], MemoryLog())
    for timestamp in timestamps:
        raw = build_batch([(None, b"x"), (None, b"y")], timestamp_ms=timestamp)
        partition.append(split_batches(raw), now_ms=timestamp)
    partition.log.advance_start(log_start)
    return partition


def settings(reset: str, duration_ms: int = 0) -> ShareSettings:
    base = broker_defaults(BrokerConfig())
    return ShareSettings(base.partition, reset, duration_ms)


def test_earliest_latest_and_by_duration() -> None:
    partition = partition_with([1_000, 2_000, 3_000], log_start=2)
    assert resolve_start_offset(settings("earliest"), partition, 10_000) == 2
    assert resolve_start_offset(settings("latest"), partition, 10_000) == 6
    # now - 8.5 s = 1.5 s: the first batch with a timestamp at or after it starts at 2
    assert resolve_start_offset(settings("by_duration", 8_500), partition, 10_000) == 2
    assert resolve_start_offset(settings("by_duration", 7_500), partition, 10_000) == 4
    # nothing that recent: the log end
    assert resolve_start_offset(settings("by_duration", 1), partition, 10_000) == 6


def test_broker_defaults() -> None:
    config = BrokerConfig({"group.share.record.lock.duration.ms": "15000"})
    defaults = broker_defaults(config)
    assert defaults.partition.record_lock_duration_ms == 15_000
    assert defaults.partition.delivery_count_limit == 5
    assert defaults.partition.max_in_flight_records == 2_000
    assert defaults.auto_offset_reset == "latest" and not defaults.read_committed
