"""Timestamp lookups that resolve to a record, as Kafka 3.8+ answers ListOffsets.

The log's batch index narrows the search to one batch (its max timestamp is all the index
keeps); only that batch is decoded, decompressing it when needed, to find the record itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from kemu.protocol.record_reader import record_timestamps
from kemu.storage.log import PartitionLog

NO_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class RecordMatch:
    offset: int
    timestamp: int
    leader_epoch: int  # of the batch holding the record; -1 when it has none


def first_record_at_or_after(log: PartitionLog, timestamp_ms: int) -> RecordMatch | None:
    """The first record at or past the log start whose timestamp is >= ``timestamp_ms``.

    Raises CorruptBatch when the batch to look into cannot be decoded.
    """
    candidate = log.offset_for_timestamp(timestamp_ms)
    if candidate is None:
        return None
    # The first candidate batch answers unless the log start cuts off its matching records;
    # then the search goes on, as Kafka's does, through later batches that can match.
    for header, batch in log.batches(candidate.offset, log.log_end_offset):
        if header.max_timestamp < timestamp_ms:
            continue
        for offset, timestamp in record_timestamps(batch):
            if timestamp >= timestamp_ms and offset >= log.log_start_offset:
                return RecordMatch(offset, timestamp, _epoch(header.partition_leader_epoch))
    return None


def record_with_max_timestamp(log: PartitionLog) -> RecordMatch | None:
    """The first record carrying the log's largest timestamp (in the first batch that has it).

    Raises CorruptBatch when that batch cannot be decoded.
    """
    found = log.max_timestamp()
    if found is None:
        return None
    for header, batch in log.batches(found.offset, found.offset + 1):
        epoch = _epoch(header.partition_leader_epoch)
        for offset, timestamp in record_timestamps(batch):
            if timestamp == header.max_timestamp:
                return RecordMatch(offset, timestamp, epoch)
        # Kafka recomputes a batch's max timestamp on append and kemu does not; when no record
        # carries the header's value, the batch's last offset is the best answer left.
        return RecordMatch(found.offset, found.timestamp, epoch)
    return None


def _epoch(leader_epoch: int) -> int:
    return leader_epoch if leader_epoch >= 0 else NO_LEADER_EPOCH
