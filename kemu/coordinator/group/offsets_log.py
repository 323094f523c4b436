"""The ``__consumer_offsets`` log: where the group coordinator writes its records and reads them
back at start.

A group's records go to partition ``abs(hashCode(groupId)) % offsets.topic.num.partitions`` of
``__consumer_offsets`` (``placement``), created on first use as Kafka creates it, one v2 batch per
operation, encoded as Kafka encodes them (``records``). An append returns once the batch is in
the partition's log, so what was answered survives a SIGKILL the way produced records do. At
start every partition is read from its log start; undecodable records are skipped (Kafka's
loader skips record types it does not know, too).

A TxnOffsetCommit's offsets go in a transactional batch of the producer's id and epoch, and the
transaction's marker follows in the same partition; ``entries`` gives both, in order. The batch
has no sequence (-1): Kafka's coordinator writes sequence 0 and its partition checks none for a
coordinator's append, where kemu's partition would take a second batch at 0 for a retry. So the
producer is not listed by DescribeProducers on that ``__consumer_offsets`` partition, as Kafka
lists it; its open transaction still holds the partition's last stable offset.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

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
from kemu.protocol.record_reader import control_type, iter_records
from kemu.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CorruptBatch,
    build_batch,
    read_header,
)
from kemu.storage.batch_memo import BatchMemo

log = structlog.get_logger("kemu.group")

TOPIC = INTERNAL_TOPICS[GROUP].name
Record = tuple[RecordKey, RecordValue | None]
NO_PRODUCER_ID = -1


@dataclass(frozen=True, slots=True)
class LoggedRecord:
    """A record of ``__consumer_offsets`` as ``entries`` reads it back."""

    partition: int
    offset: int
    producer_id: int  # NO_PRODUCER_ID unless a transaction's batch holds it
    key: RecordKey
    value: RecordValue | None


@dataclass(frozen=True, slots=True)
class LoggedMarker:
    """A transaction's COMMIT or ABORT marker in a ``__consumer_offsets`` partition."""

    partition: int
    producer_id: int
    commit: bool


# What Kafka's group coordinator answers when its records could not be appended, by the
# append's error (CoordinatorRuntime's write failing; GroupCoordinatorService maps it): the
# client looks the coordinator up again, or retries.
APPEND_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}


def answer_for(append_error: ErrorCode) -> ErrorCode:
    """The error a client gets for an operation whose records hit ``append_error``."""
    return APPEND_ERRORS.get(append_error, append_error)


class OffsetsLog:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def append(self, group_id: str, records: list[Record], now_ms: int) -> ErrorCode:
        """Write ``records`` as one batch to the group's partition; on failure the error the
        operation answers (``answer_for``: NOT_COORDINATOR on a storage error, as Kafka)."""
        return self.write(group_id, records, now_ms)[0]

    def write(
        self,
        group_id: str,
        records: list[Record],
        now_ms: int,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
    ) -> tuple[ErrorCode, int]:
        """``append``, also giving the batch's base offset (-1 when nothing was written); with
        a ``producer_id``, as a batch of that producer's transaction."""
        if not records:
            return ErrorCode.none, -1
        partition = coordinator_partition(self.cluster, GROUP, group_id)
        batch = build_batch(
            [(encode_key(key), encode_value(value)) for key, value in records],
            timestamp_ms=now_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=producer_id != NO_PRODUCER_ID,
        )
        try:
            appended = partition.append([(read_header(batch), batch)], now_ms=now_ms)
        except OSError as error:
            log.error("consumer_offsets_append_failed", group=group_id, error=str(error))
            return answer_for(ErrorCode.kafka_storage_error), -1
        if appended.error != ErrorCode.none:
            return answer_for(appended.error), -1
        return ErrorCode.none, appended.base_offset

    def replay(self, partitions: Iterable[int] | None = None) -> Iterator[Record]:
        """The (key, value) of every record ``entries`` gives, transactional or not."""
        for entry in self.entries(partitions):
            if isinstance(entry, LoggedRecord):
                yield entry.key, entry.value

    def entries(
        self, partitions: Iterable[int] | None = None
    ) -> Iterator[LoggedRecord | LoggedMarker]:
        """Every record and transaction marker of an existing ``__consumer_offsets`` (of the
        given partitions; all by default), partition by partition, in log order.

        A group commits the same few keys over and over, so each distinct key's bytes are
        decoded once (keys are frozen values, shared safely)."""
        topic = self.cluster.topics.get(TOPIC)
        if topic is None:
            return
        keys: dict[bytes, RecordKey] = {}
        wanted = None if partitions is None else set(partitions)
        for partition in topic.partitions:
            if wanted is not None and partition.index not in wanted:
                continue
            for header, batch in partition.log.batches(
                partition.log_start_offset, partition.high_watermark
            ):
                if header.is_control:
                    try:
                        marker = control_type(batch)
                    except CorruptBatch:
                        marker = None
                    if marker in (CONTROL_COMMIT, CONTROL_ABORT):
                        yield LoggedMarker(
                            partition.index, header.producer_id, marker == CONTROL_COMMIT
                        )
                    continue
                producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
                entries = DECODED_BATCHES.get(batch)
                if entries is None:
                    try:
                        entries = _decode_batch(batch, keys)
                    except CorruptBatch as error:
                        log.warning(
                            "consumer_offsets_batch_skipped",
                            partition=partition.index,
                            offset=header.base_offset,
                            reason=str(error),
                        )
                        continue
                    DECODED_BATCHES.put(batch, entries)
                for key, decoded, offset, failure in entries:
                    if failure is not None:
                        log.warning(
                            "consumer_offsets_record_skipped",
                            partition=partition.index,
                            offset=offset,
                            reason=failure,
                        )
                        continue
                    assert key is not None
                    yield LoggedRecord(partition.index, offset, producer_id, key, decoded)


# Decoded batches of __consumer_offsets by their bytes: off unless a process that loads the log
# again and again turns it on (the simulation; see kemu.storage.batch_memo).
DecodedRecord = tuple[RecordKey | None, RecordValue | None, int, str | None]
DECODED_BATCHES: BatchMemo[tuple[DecodedRecord, ...]] = BatchMemo()


def _decode_batch(batch: bytes, keys: dict[bytes, RecordKey]) -> tuple[DecodedRecord, ...]:
    """(key, value, offset, None) of each keyed record of a data batch, or (None, None, offset,
    why) for one that does not decode; raises CorruptBatch for a batch that does not parse."""
    decoded: list[DecodedRecord] = []
    for record in list(iter_records(batch)):
        if record.key is None:
            continue
        try:
            key = keys.get(record.key)
            if key is None:
                key = keys[record.key] = decode_key(record.key)
            decoded.append((key, decode_value(key, record.value), record.offset, None))
        except RecordDecodeError as error:
            decoded.append((None, None, record.offset, str(error)))
    return tuple(decoded)
