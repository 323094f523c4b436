"""What the recovery scan of one segment finds, and its summary file (``<base>.scan``).

Opening a log used to scan every batch of every segment: validating each one, rebuilding the
segment's in-memory state (sizes, timestamps, the sparse index) and feeding every batch with a
producer id to the producer and transaction trackers. ``scan_segment`` is that scan, for one
segment; ``ScannedSegment`` is what it finds.

A rolled segment does not change (compaction replaces it by another file), so once its bytes are
synced what a scan finds in it is written beside it, in ``<base>.scan``, and a later open of the
log reads that instead of the segment (``kemu.storage.segments``: every rolled segment, and the
active one too after a clean shutdown). The file holds the segment's state, the few batches with
a producer id that leave the producer trackers as all of them do (``essential_producer_batches``:
a handful per producer, however long the segment), and the segment's transactional batches as
``NotedBatch`` entries, read back in one call. It is checked against the segment before it is
used (its CRC, the segment's size, and the last batch's header read back from the segment);
anything that does not match is scanned instead.

Layout (little-endian): ``KSCN``, version (int16), CRC32 of the rest (uint32), the fixed fields
of ``SUMMARY_FIXED``, the last batch's 61-byte header, the sparse index's three int64 arrays, the
``.index`` file's bytes, per kept producer batch its 61-byte header and marker (int16), then per
transactional batch its ``NotedBatch`` (four int64).
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
import zlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from kemu.protocol.records import (
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    read_header,
)
from kemu.storage.recovery import (
    DATA_BATCH,
    NOT_TRANSACTIONAL,
    RECENT_BATCHES_PER_PRODUCER,
    NotedBatch,
    ScanOutcome,
    scan_batches,
    transaction_marker,
)
from kemu.storage.segment_files import Segment, segment_file_name

SUMMARY_SUFFIX = ".scan"
SUMMARY_MAGIC = b"KSCN"
SUMMARY_VERSION = 2
_PREFIX = struct.Struct("<4shI")  # magic, version, CRC32 of what follows
# base offset, size, next offset, first timestamp, max timestamp, max timestamp offset, bytes
# since the last index entry, last batch position (-1: empty), sparse entries, .index bytes,
# kept producer batches, transactional batches
SUMMARY_FIXED = struct.Struct("<qqqqqqqqIIII")
_MARKER = struct.Struct("<h")
_PRODUCER_ENTRY = BATCH_HEADER_SIZE + _MARKER.size
_NOTED = struct.Struct("<qqqq")  # a NotedBatch


@dataclass(slots=True)
class ScannedSegment:
    """A segment as a scan of its file left it, and what the trackers get from it."""

    segment: Segment
    # (header, marker) of the batches with a producer id, in file order: every one of them
    # (scanned), or those the summary keeps (``essential_producer_batches``); marker: DATA_BATCH,
    # the control type, UNKNOWN_MARKER (transactional) or NOT_TRANSACTIONAL
    producer_batches: list[tuple[BatchHeader, int]] = field(default_factory=list)
    # every transactional batch, in file order (``ProducerTracker.note``'s entries)
    transactions: list[NotedBatch] = field(default_factory=list)
    last_batch_position: int = -1
    file_size: int = 0  # the segment file's size when it was scanned
    outcome: ScanOutcome | None = None  # None: read from a summary, not scanned


def summary_name(base_offset: int) -> str:
    return segment_file_name(base_offset, SUMMARY_SUFFIX)


def summary_base(name: str) -> int | None:
    stem, dot, suffix = name.partition(".")
    if dot and "." + suffix == SUMMARY_SUFFIX and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


def scan_segment(directory: Path, base: int, interval_bytes: int, *, gaps: bool) -> ScannedSegment:
    """Scan ``<base>.log`` (``kemu.storage.recovery.scan_batches``); the file is not changed:
    ``outcome.valid_bytes`` says where a caller cuts it."""
    segment = Segment(directory, base)
    stat = segment.path.stat()
    segment.last_modified_ms = segment.created_ms = stat.st_mtime_ns // 1_000_000
    scanned = ScannedSegment(segment, file_size=stat.st_size)
    producer_batches = scanned.producer_batches
    transactions = scanned.transactions
    view: list[memoryview] = []  # the segment's bytes, while they are being scanned
    positions = [-1]  # the last batch's
    note_batch = segment.note_batch

    def on_batch(header: BatchHeader, position: int) -> None:
        note_batch(header, position, interval_bytes)
        positions[0] = position
        producer_id = header.producer_id
        if producer_id >= 0:
            attributes = header.attributes
            if not attributes & TRANSACTIONAL_FLAG:
                producer_batches.append((header, NOT_TRANSACTIONAL))
                return
            marker = DATA_BATCH
            if attributes & CONTROL_FLAG:
                marker = transaction_marker(header, view[0][position : position + header.size])
            base_offset = header.base_offset
            transactions.append(
                (base_offset, base_offset + header.last_offset_delta, producer_id, marker)
            )
            producer_batches.append((header, marker))

    if stat.st_size:
        with (
            open(segment.path, "rb") as handle,
            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
            memoryview(mapped) as mapped_view,
        ):
            view.append(mapped_view)
            try:
                scanned.outcome = scan_batches(mapped_view, base, on_batch, gaps=gaps)
            finally:
                view.clear()
    else:
        scanned.outcome = scan_batches(b"", base, on_batch)
    scanned.last_batch_position = positions[0]
    return scanned


def essential_producer_batches(batches: list[tuple[BatchHeader, int]]) -> list[int]:
    """Which of a segment's producer batches (their numbers, in order) leave
    ``ProducerTracker.observe`` and ``track_producer`` in the state all of them leave, whatever
    state they start from, and with producers first seen in the same order; the summary keeps
    only those, a handful per producer (the transaction list is kept whole, apart).

    Per producer, kept: its first batch, its first batch ``observe`` reads (one with a sequence,
    or a transaction marker) and its first such transactional one (the producer stays marked
    transactional); of the batches ``observe`` reads, the last one (its epoch and timestamp), the
    last ``RECENT_BATCHES_PER_PRODUCER`` with a sequence of the final run of one epoch, and the
    one before that run (its epoch differs: the run starts afresh); for ``track_producer``, its
    last non-control batch and, of the control batches after it, the first, the first of
    another epoch than that one (the data batch is forgotten from there) and the last. Keeping
    more of a producer's batches than these changes nothing either."""
    keep: set[int] = set()
    seen: set[int] = set()  # producers whose first batch went by
    observed: set[int] = set()  # ... whose first batch ``observe`` reads went by
    transactional: set[int] = set()  # ... whose first such transactional one went by
    # ``track_producer``: [last non-control batch, first control after it, first control of
    # another epoch than that one, last control] (-1: none)
    tracked: dict[int, list[int]] = {}
    # ``observe``: the current run's epoch, the batch before the run, its last batches with a
    # sequence, the last batch read
    runs: dict[int, tuple[int, int, list[int]]] = {}
    last_observed: dict[int, int] = {}
    for number, (header, _) in enumerate(batches):
        producer_id = header.producer_id
        if producer_id not in seen:
            seen.add(producer_id)
            keep.add(number)
        found = tracked.get(producer_id)
        if not header.is_control:
            tracked[producer_id] = [number, -1, -1, -1]
        elif found is None:
            tracked[producer_id] = [-1, number, -1, number]
        else:
            if found[1] < 0:
                found[1] = number
            elif found[2] < 0 and header.producer_epoch != batches[found[1]][0].producer_epoch:
                found[2] = number
            found[3] = number
        marker = header.is_control and header.is_transactional
        if not marker and header.base_sequence < 0:
            continue  # ``observe`` skips it
        if producer_id not in observed:
            observed.add(producer_id)
            keep.add(number)
        if header.is_transactional and producer_id not in transactional:
            transactional.add(producer_id)
            keep.add(number)
        run = runs.get(producer_id)
        if run is None or run[0] != header.producer_epoch:
            run = (header.producer_epoch, last_observed.get(producer_id, -1), [])
            runs[producer_id] = run
        if not marker:
            recent = run[2]
            recent.append(number)
            if len(recent) > RECENT_BATCHES_PER_PRODUCER:
                del recent[0]
        last_observed[producer_id] = number
    for found in tracked.values():
        keep.update(found)
    for _, before, recent in runs.values():
        keep.add(before)
        keep.update(recent)
    keep.update(last_observed.values())
    keep.discard(-1)
    return sorted(keep)


def _int64s(values: array[int]) -> bytes:
    if sys.byteorder == "little":
        return values.tobytes()
    swapped = array("q", values)
    swapped.byteswap()
    return swapped.tobytes()


def _read_int64s(data: bytes | memoryview, start: int, count: int) -> array[int]:
    values = array("q")
    values.frombytes(data[start : start + 8 * count])
    if sys.byteorder != "little":
        values.byteswap()
    return values


def _producer_entry(header: BatchHeader, marker: int) -> bytes:
    """A kept producer batch as the summary holds it: its 61 header bytes (packing the fields
    read from them gives them back), then its marker."""
    return BATCH_HEADER.pack(*header) + _MARKER.pack(marker)


def encode_summary(scanned: ScannedSegment, last_header: bytes) -> bytes:
    """The summary file's bytes; ``last_header``: the segment's last batch's header (b"" if
    it is empty), as the file holds it."""
    segment = scanned.segment
    sparse = segment.sparse
    index = bytes(segment.pending_index)
    kept = essential_producer_batches(scanned.producer_batches)
    parts: list[bytes | bytearray] = [
        SUMMARY_FIXED.pack(
            segment.base_offset,
            segment.size,
            segment.next_offset,
            segment.first_timestamp,
            segment.max_timestamp,
            segment.max_timestamp_offset,
            segment.since_index_entry,
            scanned.last_batch_position,
            len(sparse),
            len(index),
            len(kept),
            len(scanned.transactions),
        ),
        last_header.ljust(BATCH_HEADER_SIZE, b"\0"),
        _int64s(sparse.base_offsets),
        _int64s(sparse.positions),
        _int64s(sparse.max_timestamps_before),
        index,
        *(_producer_entry(*scanned.producer_batches[n]) for n in kept),
        *(_NOTED.pack(*noted) for noted in scanned.transactions),
    ]
    body = b"".join(parts)
    return _PREFIX.pack(SUMMARY_MAGIC, SUMMARY_VERSION, zlib.crc32(body)) + body


def decode_summary(directory: Path, data: bytes) -> ScannedSegment | None:
    """The segment a summary describes (its file not checked here); None when the summary is
    not whole and valid."""
    if len(data) < _PREFIX.size + SUMMARY_FIXED.size + BATCH_HEADER_SIZE:
        return None
    magic, version, crc = _PREFIX.unpack_from(data)
    view = memoryview(data)[_PREFIX.size :]
    if magic != SUMMARY_MAGIC or version != SUMMARY_VERSION or zlib.crc32(view) != crc:
        return None
    (
        base,
        size,
        next_offset,
        first_timestamp,
        max_timestamp,
        max_timestamp_offset,
        since_index_entry,
        last_position,
        entries,
        index_bytes,
        producer_count,
        transaction_count,
    ) = SUMMARY_FIXED.unpack_from(view)
    at = SUMMARY_FIXED.size + BATCH_HEADER_SIZE
    producers_at = at + 24 * entries + index_bytes
    transactions_at = producers_at + _PRODUCER_ENTRY * producer_count
    if len(view) != transactions_at + _NOTED.size * transaction_count:
        return None
    segment = Segment(directory, base)
    segment.size = size
    segment.next_offset = next_offset
    segment.first_timestamp = first_timestamp
    segment.max_timestamp = max_timestamp
    segment.max_timestamp_offset = max_timestamp_offset
    segment.since_index_entry = since_index_entry
    sparse = segment.sparse
    sparse.base_offsets = _read_int64s(view, at, entries)
    sparse.positions = _read_int64s(view, at + 8 * entries, entries)
    sparse.max_timestamps_before = _read_int64s(view, at + 16 * entries, entries)
    at += 24 * entries
    segment.pending_index = bytearray(view[at : at + index_bytes])
    at += index_bytes
    scanned = ScannedSegment(segment, last_batch_position=last_position)
    producer_batches = scanned.producer_batches
    for at in range(producers_at, transactions_at, _PRODUCER_ENTRY):
        producer_batches.append(
            (read_header(view, at), _MARKER.unpack_from(view, at + BATCH_HEADER_SIZE)[0])
        )
    scanned.transactions = list(_NOTED.iter_unpack(view[transactions_at:]))
    return scanned


def last_header_of(summary: bytes) -> bytes:
    """The last batch's header as the summary recorded it (zeros: none)."""
    start = _PREFIX.size + SUMMARY_FIXED.size
    return summary[start : start + BATCH_HEADER_SIZE]


def load_summary(directory: Path, base: int) -> ScannedSegment | None:
    """``<base>.scan`` when it describes ``<base>.log`` as it is now; else None (the segment is
    scanned instead)."""
    try:
        data = (directory / summary_name(base)).read_bytes()
    except OSError:
        return None
    scanned = decode_summary(directory, data)
    if scanned is None or scanned.segment.base_offset != base:
        return None
    segment = scanned.segment
    try:
        descriptor = os.open(segment.path, os.O_RDONLY)
    except OSError:
        return None
    try:
        stat = os.fstat(descriptor)
        if stat.st_size != segment.size:
            return None
        if scanned.last_batch_position >= 0:
            found = os.pread(descriptor, BATCH_HEADER_SIZE, scanned.last_batch_position)
            if found != last_header_of(data):
                return None
        elif segment.size:
            return None
    finally:
        os.close(descriptor)
    segment.last_modified_ms = segment.created_ms = stat.st_mtime_ns // 1_000_000
    return scanned


def write_summary(scanned: ScannedSegment) -> None:
    """Write ``scanned``'s summary beside its segment and fsync it (the caller syncs the
    directory). The segment must be synced first: a summary never describes bytes a power loss
    could take."""
    segment = scanned.segment
    last_header = b""
    if scanned.last_batch_position >= 0:
        with open(segment.path, "rb") as handle:
            last_header = os.pread(handle.fileno(), BATCH_HEADER_SIZE, scanned.last_batch_position)
    data = encode_summary(scanned, last_header)
    path = segment.path.with_name(summary_name(segment.base_offset))
    try:
        if path.read_bytes() == data:
            return
    except OSError:
        pass
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.write(descriptor, view[written:])
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
