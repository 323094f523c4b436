"""The ``__consumer_offsets`` log: where the group coordinator writes its records and reads them
back at start.

A group's records go to partition ``abs(hashCode(groupId)) % offsets.topic.num.partitions`` of
``__consumer_offsets`` (``placement``), created on first use as Kafka creates it, one v2 batch per
operation, encoded as Kafka encodes them (``records``). An append returns once the batch is in
the partition's log, so what was answered survives a SIGKILL the way produced records do. At
start every partition is read from its log start; undecodable records are skipped (Kafka's
loader skips record types it does not know, too).
"""

from __future__ import annotations

from collections.abc import Iterator

import structlog

from kemu.cluster.model import Cluster
from kemu.coordinator.group.placement import GROUP, INTERNAL_TOPICS, coordinator_partition
from kemu.coordinator.group.records import (
    RecordDecodeError,
    RecordKey,
    RecordValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kemu.protocol.errors import ErrorCode
from kemu.protocol.record_reader import iter_records
from kemu.protocol.records import CorruptBatch, build_batch, read_header

log = structlog.get_logger("kemu.group")

TOPIC = INTERNAL_TOPICS[GROUP].name
Record = tuple[RecordKey, RecordValue | None]


class OffsetsLog:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def append(self, group_id: str, records: list[Record], now_ms: int) -> ErrorCode:
        """Write ``records`` as one batch to the group's partition (NOT_COORDINATOR on a
        storage error, as Kafka maps it)."""
        if not records:
            return ErrorCode.none
        partition = coordinator_partition(self.cluster, GROUP, group_id)
        batch = build_batch(
            [(encode_key(key), encode_value(value)) for key, value in records], timestamp_ms=now_ms
        )
        try:
            appended = partition.append([(read_header(batch), batch)], now_ms=now_ms)
        except OSError as error:
            log.error("consumer_offsets_append_failed", group=group_id, error=str(error))
            return ErrorCode.not_coordinator
        if appended.error is not ErrorCode.none:
            return ErrorCode.not_coordinator
        return ErrorCode.none

    def replay(self) -> Iterator[Record]:
        """Every record of an existing ``__consumer_offsets``, partition by partition.

        A group commits the same few keys over and over, so each distinct key's bytes are
        decoded once (keys are frozen values, shared safely)."""
        topic = self.cluster.topics.get(TOPIC)
        if topic is None:
            return
        keys: dict[bytes, RecordKey] = {}
        for partition in topic.partitions:
            for header, batch in partition.log.batches(
                partition.log_start_offset, partition.high_watermark
            ):
                if header.is_control:
                    continue
                try:
                    records = list(iter_records(batch))
                except CorruptBatch as error:
                    log.warning(
                        "consumer_offsets_batch_skipped",
                        partition=partition.index,
                        offset=header.base_offset,
                        reason=str(error),
                    )
                    continue
                for record in records:
                    if record.key is None:
                        continue
                    try:
                        key = keys.get(record.key)
                        if key is None:
                            key = keys[record.key] = decode_key(record.key)
                        decoded = decode_value(key, record.value)
                    except RecordDecodeError as error:
                        log.warning(
                            "consumer_offsets_record_skipped",
                            partition=partition.index,
                            offset=record.offset,
                            reason=str(error),
                        )
                        continue
                    yield key, decoded
