"""Reading ``__transaction_state`` back: the (transactional id, value) records of its partitions,
in log order, for the coordinator to replay at start-up and when a partition is loaded again."""

from __future__ import annotations

from collections.abc import Iterator

import structlog

from kemu.cluster.model import Topic
from kemu.coordinator.transaction.records import (
    RecordDecodeError,
    TransactionLogValue,
    decode_key,
    decode_value,
)
from kemu.protocol.record_reader import iter_records
from kemu.protocol.records import CorruptBatch
from kemu.storage.batch_memo import BatchMemo

log = structlog.get_logger("kemu.transaction")

StateRecord = tuple[str, TransactionLogValue | None]  # None: a tombstone
# Decoded batches of __transaction_state by their bytes: off unless a process that loads the log
# again and again turns it on (the simulation; see kemu.storage.batch_memo).
DecodedBatch = tuple[tuple[StateRecord, ...], str | None]
DECODED_BATCHES: BatchMemo[DecodedBatch] = BatchMemo()


def replay_state_log(
    topic: Topic | None, indexes: list[int] | None = None
) -> Iterator[StateRecord]:
    """The records of ``topic``'s partitions (those of ``indexes``; None: all), each batch up
    to its first record that does not decode (logged and skipped)."""
    if topic is None:
        return
    keys: dict[bytes, str] = {}  # a few transactional ids written many times: decoded once
    for partition in topic.partitions:
        if indexes is not None and partition.index not in indexes:
            continue
        for header, batch in partition.log.batches(
            partition.log_start_offset, partition.high_watermark
        ):
            if header.is_control:
                continue
            decoded = DECODED_BATCHES.get(batch)
            if decoded is None:
                decoded = _decode_batch(batch, keys)
                DECODED_BATCHES.put(batch, decoded)
            records, failure = decoded
            yield from records
            if failure is not None:
                log.warning(
                    "transaction_state_batch_skipped",
                    partition=partition.index,
                    offset=header.base_offset,
                    reason=failure,
                )


def _decode_batch(batch: bytes, keys: dict[bytes, str]) -> DecodedBatch:
    """The (transactional id, value) of each keyed record of a data batch, up to the first that
    does not decode, and why that one did not (None when all did)."""
    records: list[StateRecord] = []
    try:
        for record in iter_records(batch):
            if record.key is None:
                continue
            transactional_id = keys.get(record.key)
            if transactional_id is None:
                transactional_id = keys[record.key] = decode_key(record.key)
            records.append((transactional_id, decode_value(record.value)))
    except (CorruptBatch, RecordDecodeError) as error:
        return tuple(records), str(error)
    return tuple(records), None
