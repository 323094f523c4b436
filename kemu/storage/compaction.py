"""Log compaction's decisions, as Kafka's log cleaner makes them: sans-IO.

Everything here is a pure function of segment summaries, batches and ``now``; the segment
files are read and swapped by ``SegmentLog.clean`` (``kemu.storage.segments``).

What is cleanable (Kafka's ``LogCleanerManager.cleanableOffsets``): whole segments from the
first dirty offset (the cleaner's checkpoint) up to, not including, the first uncleanable
segment: the active segment, the segment holding the last stable offset (kemu stops at the
segment, Kafka at the offset), or the first segment whose largest timestamp is younger than
``min.compaction.lag.ms``. A log is cleaned when the dirty share of its bytes exceeds
``min.cleanable.dirty.ratio``, or when a dirty segment's first batch is older than
``max.compaction.lag.ms``. The dirty section indexed in one cleaning ends at the segment where
the offset map is full (``max_map_keys``); the next cleaning carries on from there.

What is kept (Kafka's ``Cleaner.cleanInto`` over ``MemoryRecords.filterTo``): an offset map of
the latest offset of every key in the dirty section, built from non-control, non-aborted
batches; every record of the cleaned segments whose offset is at least its key's latest is
kept, others go. A keyless record goes. A tombstone (null value) is kept until
``delete.retention.ms`` after the cleaning that first reached it: that cleaning writes the
batch with Kafka's delete horizon (attribute bit 6, the horizon in the base timestamp), a
cleaning after the horizon drops it.

Transactions (Kafka's ``CleanedTransactionMetadata``): an aborted transaction's batches go; its
ABORT marker stays while any of its batches did, a COMMIT marker while any batch of its
transaction is still there; a marker that may go first gets a delete horizon, and goes at a
cleaning past it. The last data batch of every producer still alive (or its last marker when its
epoch was bumped since) is kept, emptied of its records if need be, so that sequence numbers
and epochs survive a restart; so is the last batch of a cleaning round, so that the log keeps
its offsets. Batches keep their base and last offsets, producer id, epoch and base sequence;
records keep their offsets, so the log has gaps, which readers step over.
"""

from __future__ import annotations

import gzip
import heapq
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

import cramjam

from kemu.protocol import records
from kemu.protocol.record_reader import decompress, read_varint
from kemu.protocol.records import (
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CRC_START,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_LOG_APPEND,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    CorruptBatch,
)

DELETE_HORIZON_FLAG = 0x40  # Kafka's DefaultRecordBatch.DELETE_HORIZON_FLAG_MASK (KIP-534)
CONTROL_FLAG = 0x20
_CONTROL_KEY = struct.Struct(">hh")
MAX_RELATIVE_OFFSET = 2**31 - 1


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """A topic's cleaner settings, under Kafka's names."""

    delete_retention_ms: int = 86_400_000  # delete.retention.ms
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = 2**63 - 1  # max.compaction.lag.ms
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    producer_expiration_ms: int = 86_400_000  # producer.id.expiration.ms
    segment_bytes: int = 1 << 30  # segment.bytes: cleaned segments are grouped up to it
    # keys one cleaning may index (Kafka: log.cleaner.dedupe.buffer.size over 24 bytes a key,
    # times log.cleaner.io.buffer.load.factor); a longer dirty section is cleaned in rounds
    max_map_keys: int = 5_033_164


@dataclass(frozen=True, slots=True)
class SegmentSummary:
    base_offset: int
    next_offset: int
    size: int
    first_batch_timestamp: int  # -1 when unknown
    max_timestamp: int  # -1 when unknown


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    first_dirty: int  # segment number where the dirty section starts
    first_uncleanable: int  # segment number of the first segment not cleaned
    dirty_ratio: float
    must_clean: bool  # max.compaction.lag.ms is overdue


def plan_cleaning(
    segments: Sequence[SegmentSummary],
    *,
    first_dirty_offset: int,
    last_stable_offset: int,
    now_ms: int,
    policy: CompactionPolicy,
) -> CleaningPlan | None:
    """Which segments a cleaning would rewrite, or None when the log is not due (or has nothing
    cleanable). The last segment is the active one and is never cleaned."""
    if len(segments) < 2:
        return None
    uncleanable = len(segments) - 1  # the active segment
    for number, segment in enumerate(segments[:-1]):
        if segment.next_offset > last_stable_offset:
            uncleanable = min(uncleanable, number)  # holds offsets at or past the LSO
            break
    dirty = next(
        (n for n, s in enumerate(segments) if s.next_offset > first_dirty_offset), uncleanable
    )
    dirty = min(dirty, uncleanable)
    if policy.min_compaction_lag_ms > 0:
        for number in range(dirty, uncleanable):
            if segments[number].max_timestamp > now_ms - policy.min_compaction_lag_ms:
                uncleanable = number
                break
    clean_bytes = sum(s.size for s in segments[:dirty])
    dirty_bytes = sum(s.size for s in segments[dirty:uncleanable])
    if dirty_bytes <= 0:
        return None
    ratio = dirty_bytes / (clean_bytes + dirty_bytes)
    must_clean = False
    if policy.max_compaction_lag_ms < now_ms:  # else nothing can be that old
        clean_until = now_ms - policy.max_compaction_lag_ms
        firsts = [
            s.first_batch_timestamp for s in segments[dirty:-1] if s.first_batch_timestamp > 0
        ]
        must_clean = bool(firsts) and min(firsts) < clean_until
    if not (must_clean or ratio > policy.min_cleanable_dirty_ratio):
        return None
    return CleaningPlan(dirty, uncleanable, ratio, must_clean)


def group_segments(
    segments: Sequence[SegmentSummary], count: int, max_bytes: int
) -> list[list[int]]:
    """Segment numbers 0..count-1 in runs that each become one cleaned segment: consecutive,
    together at most ``max_bytes`` (one segment alone may exceed it) and spanning fewer than
    2**31 offsets (Kafka's ``groupSegmentsBySize``)."""
    groups: list[list[int]] = []
    number = 0
    while number < count:
        group = [number]
        size = segments[number].size
        number += 1
        while (
            number < count
            and size + segments[number].size <= max_bytes
            and (
                segments[number].size == 0
                or segments[number].next_offset - 1 - segments[group[0]].base_offset
                <= MAX_RELATIVE_OFFSET
            )
        ):
            group.append(number)
            size += segments[number].size
            number += 1
        groups.append(group)
    return groups


# --- raw records -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RawRecord:
    offset: int
    timestamp: int
    key: bytes | None
    has_value: bool
    attributes: int
    timestamp_delta: int
    rest: bytes  # offset delta onwards (offset delta, key, value, headers), as written


def _varint(value: int) -> bytes:
    return records.uvarint((value << 1) ^ (value >> 63))


def raw_records(header: BatchHeader, batch: bytes | memoryview) -> list[RawRecord]:
    """The records of a v2 batch, each kept as bytes from its offset delta on."""
    if header.size > len(batch):
        raise CorruptBatch(f"batch of {header.size} bytes cut short at {len(batch)}")
    body = memoryview(batch)[BATCH_HEADER_SIZE : header.size]
    data = memoryview(decompress(header.compression, body)) if header.compression else body
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_LOG_APPEND)
    found: list[RawRecord] = []
    position = 0
    for _ in range(header.record_count):
        length, start = read_varint(data, position)
        end = start + length
        if length < 1 or end > len(data):
            raise CorruptBatch(f"record of {length} bytes runs past the end of the batch")
        attributes = data[start]
        timestamp_delta, cursor = read_varint(data, start + 1)
        rest_start = cursor
        offset_delta, cursor = read_varint(data, cursor)
        key_length, cursor = read_varint(data, cursor)
        key = None
        if key_length >= 0:
            key = bytes(data[cursor : cursor + key_length])
            cursor += key_length
        value_length, cursor = read_varint(data, cursor)
        if cursor > end:
            raise CorruptBatch("record fields run past the record")
        found.append(
            RawRecord(
                offset=header.base_offset + offset_delta,
                timestamp=header.max_timestamp
                if log_append_time
                else header.base_timestamp + timestamp_delta,
                key=key,
                has_value=value_length >= 0,
                attributes=attributes,
                timestamp_delta=timestamp_delta,
                rest=bytes(data[rest_start:end]),
            )
        )
        position = end
    return found


XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed as Kafka's Java client writes each codec (snappy in xerial framing,
    lz4 frames with independent blocks)."""
    if codec == 1:
        return gzip.compress(data)
    if codec == 2:
        chunks = [XERIAL_HEADER]
        for start in range(0, len(data), XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + XERIAL_BLOCK]))
            chunks.append(struct.pack(">i", len(block)) + block)
        return b"".join(chunks)
    if codec == 3:
        # Kafka's writer: 64 KiB independent blocks, no content size or checksum. Kafka's reader
        # (the Java consumer's) refuses a frame of dependent blocks, which cramjam writes.
        import lz4.frame  # type: ignore[import-untyped]

        return bytes(
            lz4.frame.compress(
                data,
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=False,
                store_size=False,
            )
        )
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
    raise CorruptBatch(f"unknown compression codec {codec}")


def write_batch(
    header: BatchHeader,
    kept: Sequence[RawRecord],
    *,
    delete_horizon_ms: int | None,
) -> bytes:
    """``header``'s batch holding only ``kept``: same base and last offset, leader epoch,
    producer id, epoch, base sequence, flags and codec. With ``delete_horizon_ms`` the base
    timestamp is the horizon (flag set) and each record's timestamp delta is taken from it."""
    attributes = header.attributes & ~DELETE_HORIZON_FLAG
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_LOG_APPEND)
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
        attributes |= DELETE_HORIZON_FLAG
    else:
        base_timestamp = header.base_timestamp
    body = bytearray()
    max_timestamp = -1
    for record in kept:
        if log_append_time:  # readers take the max timestamp: the deltas stay as written
            delta = record.timestamp_delta
        else:
            delta = record.timestamp - base_timestamp
            max_timestamp = max(max_timestamp, record.timestamp)
        inner = bytes([record.attributes]) + _varint(delta) + record.rest
        body += _varint(len(inner)) + inner
    if log_append_time or not kept:
        max_timestamp = header.max_timestamp
    payload = compress(header.compression, bytes(body)) if header.compression else bytes(body)
    return _assemble(
        header,
        attributes=attributes,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        record_count=len(kept),
        payload=payload,
    )


def empty_batch(header: BatchHeader) -> bytes:
    """The header alone, no records (Kafka's RETAIN_EMPTY): uncompressed, both timestamps the
    batch's max timestamp, no delete horizon."""
    attributes = header.attributes & (TIMESTAMP_TYPE_LOG_APPEND | TRANSACTIONAL_FLAG | CONTROL_FLAG)
    return _assemble(
        header,
        attributes=attributes,
        base_timestamp=header.max_timestamp,
        max_timestamp=header.max_timestamp,
        record_count=0,
        payload=b"",
    )


def _assemble(
    header: BatchHeader,
    *,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    record_count: int,
    payload: bytes,
) -> bytes:
    length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload)
    buffer = bytearray(
        BATCH_HEADER.pack(
            header.base_offset,
            length,
            header.partition_leader_epoch,
            MAGIC_V2,
            0,
            attributes,
            header.last_offset_delta,
            base_timestamp,
            max_timestamp,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            record_count,
        )
    )
    buffer += payload
    struct.pack_into(">I", buffer, 17, records.crc32c_of(memoryview(buffer)[CRC_START:]))
    return bytes(buffer)


def delete_horizon(header: BatchHeader) -> int | None:
    return header.base_timestamp if header.attributes & DELETE_HORIZON_FLAG else None


# --- the offset map --------------------------------------------------------------------------


class AbortedIndex:
    """Aborted transactions as (producer id, first offset, last offset = the ABORT marker)."""

    def __init__(self, aborted: Iterable[tuple[int, int, int]]) -> None:
        self.by_first = sorted(aborted, key=lambda entry: entry[1])
        self._by_producer: dict[int, list[tuple[int, int]]] = {}
        for producer_id, first, last in self.by_first:
            self._by_producer.setdefault(producer_id, []).append((first, last))

    def is_aborted(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        return any(
            first <= header.base_offset <= last
            for first, last in self._by_producer.get(header.producer_id, ())
        )


@dataclass(slots=True)
class OffsetMap:
    """Latest offset of every key in the dirty section (Kafka hashes keys; kemu keeps them)."""

    latest: dict[bytes, int] = field(default_factory=dict)
    latest_offset: int = -1

    def add_batch(self, header: BatchHeader, batch: bytes, aborted: AbortedIndex) -> None:
        if not header.is_control and not aborted.is_aborted(header):
            for record in raw_records(header, batch):
                if record.key is not None:
                    self.latest[record.key] = record.offset
        self.latest_offset = max(self.latest_offset, header.last_offset)


# --- transactions while cleaning -------------------------------------------------------------


@dataclass(slots=True)
class _AbortedTxn:
    producer_id: int
    first: int
    last: int
    seen_batch: bool = False


class TransactionTracker:
    """Kafka's CleanedTransactionMetadata: which batches and markers may go, as the cleaner
    walks the log in offset order."""

    def __init__(self, aborted: AbortedIndex) -> None:
        self._pending = [(first, last, pid) for pid, first, last in aborted.by_first]
        heapq.heapify(self._pending)
        self._ongoing_aborted: dict[int, _AbortedTxn] = {}
        self._ongoing_committed: set[int] = set()
        self.removable_abort_markers: list[int] = []  # ABORT markers allowed to go

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            first, last, producer_id = heapq.heappop(self._pending)
            self._ongoing_aborted.setdefault(producer_id, _AbortedTxn(producer_id, first, last))

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch; True when it belongs to an aborted transaction (it may go)."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        found = self._ongoing_aborted.get(header.producer_id)
        if found is not None:
            found.seen_batch = True
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, marker: int | None) -> bool:
        """A control batch; True when no batch of its transaction is left (it may go once its
        delete horizon has passed)."""
        self._consume_up_to(header.last_offset)
        if marker is None:
            return header.record_count == 0  # an emptied marker: already cleaned
        if marker == CONTROL_ABORT:
            found = self._ongoing_aborted.pop(header.producer_id, None)
            return not (found is not None and found.seen_batch)
        if marker == CONTROL_COMMIT:
            if header.producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(header.producer_id)
                return False
            return True
        return False


def marker_type(control_records: Sequence[RawRecord]) -> int | None:
    """ABORT (0) or COMMIT (1) from a control batch's record; None when it has none."""
    for record in control_records:
        if record.key is not None and len(record.key) >= _CONTROL_KEY.size:
            return int(_CONTROL_KEY.unpack_from(record.key)[1])
    return None


# --- producers -------------------------------------------------------------------------------


@dataclass(slots=True)
class ProducerLast:
    """What the cleaner must keep of one producer: its last data batch (by last offset), or,
    when its epoch moved on since by a marker, its markers of the current epoch."""

    epoch: int
    last_data_offset: int  # -1: none in the current epoch
    timestamp: int  # max timestamp of its last batch (for producer.id.expiration.ms)

    @classmethod
    def observe(cls, found: ProducerLast | None, header: BatchHeader) -> ProducerLast:
        # the flag and offsets read from the fields, not through BatchHeader's properties: a
        # start-up runs this for every producer batch of the segments it scans
        if header.attributes & CONTROL_FLAG:
            if found is not None and found.epoch == header.producer_epoch:
                return cls(found.epoch, found.last_data_offset, header.max_timestamp)
            return cls(header.producer_epoch, -1, header.max_timestamp)
        return cls(
            header.producer_epoch,
            header.base_offset + header.last_offset_delta,
            header.max_timestamp,
        )


def track_producer(producers: dict[int, ProducerLast], header: BatchHeader) -> None:
    track_producers(producers, (header,))


def track_producers(producers: dict[int, ProducerLast], headers: Iterable[BatchHeader]) -> None:
    """``track_producer`` for each of ``headers``, in order."""
    observe = ProducerLast.observe
    for header in headers:
        producer_id = header.producer_id
        if producer_id >= 0:
            producers[producer_id] = observe(producers.get(producer_id), header)


# --- the batch filter ------------------------------------------------------------------------


class Retention(Enum):
    DELETE = 0  # the batch goes
    DELETE_EMPTY = 1  # the batch goes if no record is kept
    RETAIN_EMPTY = 2  # the batch stays, emptied if no record is kept


@dataclass(slots=True)
class CleanStats:
    batches_read: int = 0
    records_read: int = 0
    records_kept: int = 0
    bytes_read: int = 0
    bytes_written: int = 0


class BatchFilter:
    """One cleaning round's decisions over the batches of the cleaned segments, in order."""

    def __init__(
        self,
        *,
        offset_map: OffsetMap,
        aborted: AbortedIndex,
        producers: dict[int, ProducerLast],
        round_end: int,
        now_ms: int,
        policy: CompactionPolicy,
    ) -> None:
        self.map = offset_map
        self.transactions = TransactionTracker(aborted)
        self.producers = producers
        self.round_end = round_end
        self.now_ms = now_ms
        self.policy = policy
        self.stats = CleanStats()
        self.removed_abort_markers: list[int] = []

    def _last_of_producer(self, header: BatchHeader) -> bool:
        found = self.producers.get(header.producer_id)
        if found is None:
            return False
        if self.now_ms - found.timestamp >= self.policy.producer_expiration_ms >= 0:
            return False  # expired: Kafka forgets the producer, and its batches may go
        if found.last_data_offset >= 0:
            return header.last_offset == found.last_data_offset
        return header.is_control and header.producer_epoch == found.epoch

    def _keep_record(self, header: BatchHeader, record: RawRecord) -> bool:
        if record.offset > self.map.latest_offset:
            return True
        if record.key is None:
            return False  # Kafka counts it as invalid and drops it
        if record.offset < self.map.latest.get(record.key, -1):
            return False
        if record.has_value:
            return True
        horizon = delete_horizon(header)
        return horizon is None or self.now_ms < horizon

    def filter(self, header: BatchHeader, batch: bytes) -> bytes | None:
        """The batch as it is to be written back: unchanged, rewritten, emptied, or None."""
        self.stats.batches_read += 1
        self.stats.bytes_read += header.size
        if header.is_control:
            kept_control = raw_records(header, batch)
            marker = marker_type(kept_control)
            can_discard = self.transactions.on_marker(header, marker)
            horizon = delete_horizon(header)
            discard_records = can_discard and horizon is not None and horizon <= self.now_ms
        else:
            can_discard = self.transactions.on_batch(header)
            discard_records = can_discard
            marker = None
        if header.producer_id >= 0 and self._last_of_producer(header):
            retention = Retention.RETAIN_EMPTY
        elif header.next_offset == self.round_end:
            retention = Retention.RETAIN_EMPTY  # keeps the log's last offset
        elif discard_records:
            retention = Retention.DELETE
        else:
            retention = Retention.DELETE_EMPTY
        marker_for_empty_txn = can_discard and header.is_control
        if retention is Retention.DELETE:
            self._note_removed_marker(header, marker)
            self.stats.records_read += header.record_count
            return None
        everything = kept_control if header.is_control else raw_records(header, batch)
        self.stats.records_read += len(everything)
        if discard_records:
            kept: list[RawRecord] = []
        elif header.is_control:
            kept = everything
        else:
            kept = [record for record in everything if self._keep_record(header, record)]
        self.stats.records_kept += len(kept)
        if not kept:
            if retention is Retention.DELETE_EMPTY:
                self._note_removed_marker(header, marker)
                return None
            if header.record_count == 0:
                return batch  # already empty
            self._note_removed_marker(header, marker)
            out = empty_batch(header)
            self.stats.bytes_written += len(out)
            return out
        tombstones = any(not record.has_value for record in kept)
        set_horizon = (tombstones or marker_for_empty_txn) and delete_horizon(header) is None
        if len(kept) == len(everything) and not set_horizon:
            self.stats.bytes_written += header.size
            return batch
        out = write_batch(
            header,
            kept,
            delete_horizon_ms=self.now_ms + self.policy.delete_retention_ms
            if set_horizon
            else delete_horizon(header),
        )
        self.stats.bytes_written += len(out)
        return out

    def _note_removed_marker(self, header: BatchHeader, marker: int | None) -> None:
        if header.is_control and marker == CONTROL_ABORT:
            self.removed_abort_markers.append(header.base_offset)


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What one cleaning of a log did."""

    segments_before: int
    segments_after: int
    bytes_before: int  # of the segments rewritten
    bytes_after: int
    dirty_ratio: float
    first_uncleanable_offset: int  # the cleaner checkpoint: where the next dirty section starts
    removed_abort_markers: tuple[int, ...]  # offsets of ABORT markers no longer in the log
    stats: CleanStats
    completed: bool = True  # False: aborted part way (the log changed), some runs swapped in
