"""The files of a segment log (see ``kemu.storage.segments``): names, the in-memory sparse
index, one segment's totals, and the small write/sync helpers every part of the log uses."""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

from kemu.protocol.records import LOG_OVERHEAD, BatchHeader

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
START_CHECKPOINT = "log-start-offset"
CLEANER_CHECKPOINT = "cleaner-offset"
CLEANED_SUFFIX = ".log.cleaned"
SWAP_SUFFIX = ".swap"
CLEANER_WRITE_CHUNK = 1 << 20
CLEANER_STEP_BYTES = 256 << 10  # read between two yields of a cleaning
CHECKPOINT_VERSION = 0
INDEX_ENTRY = struct.Struct(">ii")
MAX_RELATIVE_OFFSET = 2**31 - 1

DEFAULT_SEGMENT_BYTES = 1 << 30
DEFAULT_SEGMENT_MS = 7 * 24 * 3600 * 1000
DEFAULT_INDEX_INTERVAL_BYTES = 4096
OPEN_READERS = 4  # descriptors kept open per log for reading rolled segments
BATCHES_READ_CHUNK = 1 << 20
BATCHES_FIRST_READ = 64 << 10
BATCH_STARTS_KEPT = 32  # per log: the batches most recently appended or read up to
SCAN_SLACK = 4096  # read past a sparse entry's interval: the batch that crossed it
# what a scan reads of a batch header: base offset, batch length, last offset delta, max timestamp
PEEK = struct.Struct(">qi11xi8xq")

datasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    return f"{base_offset:020d}{suffix}"


def swap_range(name: str) -> tuple[int, int] | None:
    """(base, end) of a ``<base>.<end>.swap`` file name."""
    parts = name.split(".")
    if (
        len(parts) == 3
        and "." + parts[2] == SWAP_SUFFIX
        and all(len(part) == 20 and part.isdigit() for part in parts[:2])
    ):
        return int(parts[0]), int(parts[1])
    return None


def segment_base(name: str) -> int | None:
    stem, dot, suffix = name.partition(".")
    if dot and "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


class SparseIndex:
    """Where a scan of one segment starts: the first batch, then one batch each time more than
    ``index.interval.bytes`` went by (Kafka's offset and time indexes, in memory).

    Reads bisect it for the last entry at or before an offset and walk the batch headers from
    there, so memory grows with the bytes on disk divided by the interval (24 bytes per 4 KiB by
    default), not with the number of batches.
    """

    __slots__ = ("base_offsets", "max_timestamps_before", "positions")

    def __init__(self) -> None:
        self.base_offsets: array[int] = array("q")  # of the batch at the entry
        self.positions: array[int] = array("q")
        # the max timestamp of every batch before the entry, in file order: non-decreasing
        self.max_timestamps_before: array[int] = array("q")

    def __len__(self) -> int:
        return len(self.positions)

    def add(self, base_offset: int, position: int, max_timestamp_before: int) -> None:
        self.base_offsets.append(base_offset)
        self.positions.append(position)
        self.max_timestamps_before.append(max_timestamp_before)

    def entry_for_offset(self, offset: int) -> int:
        """The last entry whose batch begins at or before ``offset`` (0 when none does)."""
        return max(bisect.bisect_right(self.base_offsets, offset) - 1, 0)

    def entry_for_timestamp(self, timestamp_ms: int) -> int:
        """The last entry before which every batch is older than ``timestamp_ms``."""
        return max(bisect.bisect_left(self.max_timestamps_before, timestamp_ms) - 1, 0)

    def drop_from(self, position: int) -> None:
        """Forget the entries at or past ``position`` (the file was cut there)."""
        keep = bisect.bisect_left(self.positions, position)
        del self.base_offsets[keep:]
        del self.positions[keep:]
        del self.max_timestamps_before[keep:]


class Segment:
    """One ``.log`` file: its sparse index and totals. Batches below the log start offset are
    still counted in ``size``, ``next_offset`` and ``max_timestamp``; reads skip them.
    """

    __slots__ = (
        "base_offset",
        "created_ms",
        "first_timestamp",
        "last_modified_ms",
        "max_timestamp",
        "max_timestamp_offset",
        "next_offset",
        "path",
        "pending_index",
        "since_index_entry",
        "size",
        "sparse",
    )

    def __init__(self, directory: Path, base_offset: int) -> None:
        self.base_offset = base_offset
        self.path = directory / segment_file_name(base_offset)
        self.sparse = SparseIndex()
        self.size = 0
        self.next_offset = base_offset
        self.first_timestamp = -1  # max timestamp of the first batch: Kafka's roll clock
        self.max_timestamp = -1
        self.max_timestamp_offset = -1  # the last offset of the first batch holding it
        self.last_modified_ms = -1  # retention falls back on this without batch timestamps
        self.created_ms = -1  # and rolling on this
        self.since_index_entry = 0
        self.pending_index = bytearray()  # sparse index entries not yet in the .index file

    @property
    def index_path(self) -> Path:
        return self.path.with_suffix(INDEX_SUFFIX)

    def note_batch(self, header: BatchHeader, position: int, interval_bytes: int) -> None:
        """Record a batch written at ``position``, buffering the sparse index entry it earns."""
        size = header.batch_length + LOG_OVERHEAD  # header.size, once
        if not self.sparse.positions:
            self.sparse.add(header.base_offset, position, self.max_timestamp)
        elif self.since_index_entry > interval_bytes:
            self.pending_index += INDEX_ENTRY.pack(header.last_offset - self.base_offset, position)
            self.sparse.add(header.base_offset, position, self.max_timestamp)
            self.since_index_entry = 0
        self.since_index_entry += size
        if self.size == 0:
            self.first_timestamp = header.max_timestamp
        self.size = position + size
        self.next_offset = header.base_offset + header.last_offset_delta + 1
        if header.max_timestamp > self.max_timestamp or self.max_timestamp_offset < 0:
            self.max_timestamp = max(header.max_timestamp, self.max_timestamp)
            self.max_timestamp_offset = self.next_offset - 1

    def write_pending_index(self) -> None:
        if self.pending_index:
            append_index_entries(self.index_path, self.pending_index)
            self.pending_index.clear()

    def retention_timestamp(self) -> int:
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms


def no_crash(point: str) -> None:
    del point


def write_fully(descriptor: int, data: bytes, position: int) -> None:
    view = memoryview(data)
    written = 0
    try:
        while written < len(view):
            written += os.pwrite(descriptor, view[written:], position + written)
    except OSError:
        if written:
            os.ftruncate(descriptor, position)  # leave no torn batch behind
        raise


def append_index_entries(path: Path, entries: bytearray) -> None:
    # Opened per write (at most once a flush interval) so that an idle partition holds a single
    # descriptor: brokers with thousands of partitions stay under ulimit -n.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    data = bytes(entries)
    try:
        while data:
            data = data[os.write(descriptor, data) :]
    finally:
        os.close(descriptor)


def index_entries_before(path: Path, cut: int) -> bytes:
    data = path.read_bytes()
    kept = bytearray()
    for start in range(0, len(data) - len(data) % INDEX_ENTRY.size, INDEX_ENTRY.size):
        if INDEX_ENTRY.unpack_from(data, start)[1] < cut:
            kept.extend(data[start : start + INDEX_ENTRY.size])
    return bytes(kept)
