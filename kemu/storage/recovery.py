"""What a segment file still holds after a crash: its longest prefix of whole, valid batches.

A process killed mid-write leaves a torn batch at the tail of the active segment; a disk can
hand back garbage or zeroes. Recovery walks the batches from the start of the file and stops
at the first one that is short, has a bad length or magic, fails its CRC32C, or does not carry
on from the offset the previous batch ended at (in a rolled segment, which compaction may have
rewritten with gaps, at or after it). Everything before that point is kept; the caller cuts
the rest. Pure functions over a buffer: the file handling is in ``segments``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kemu.protocol import records
from kemu.protocol.record_reader import control_type
from kemu.protocol.records import (
    BATCH_HEADER_SIZE,
    CONTROL_FLAG,
    CRC_START,
    LOG_OVERHEAD,
    MAGIC_V2,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    CorruptBatch,
    read_header,
)
from kemu.storage.log import RecoveredProducer

RECENT_BATCHES_PER_PRODUCER = 5  # what Kafka (and Partition) dedupe against


@dataclass(frozen=True, slots=True)
class ScanOutcome:
    valid_bytes: int  # length of the valid prefix
    next_offset: int  # the offset after the last valid batch
    problem: str | None  # why the scan stopped before the end of the buffer, if it did


def scan_batches(
    data: bytes | memoryview,
    expected_offset: int,
    on_batch: Callable[[BatchHeader, int], None],
    *,
    gaps: bool = False,
) -> ScanOutcome:
    """Walk v2 batches from position 0, calling ``on_batch(header, position)`` for good ones.

    The first batch must start at ``expected_offset``, each later one where the previous ended;
    with ``gaps`` (a rolled segment: the log cleaner removes whole batches) at or after it.
    """
    view = memoryview(data)
    end = len(view)
    position = 0
    offset = expected_offset
    problem = None
    # the checks of ``_check_batch`` inline, in one expression (this runs for every batch of a
    # segment scanned at start-up); ``_check_batch`` says what is wrong with a batch that fails
    while position < end:
        if end - position >= BATCH_HEADER_SIZE:
            header = read_header(view, position)
            base_offset, batch_length, _, magic, crc, _, last_offset_delta = header[:7]
            size = batch_length + LOG_OVERHEAD
            if (
                batch_length >= BATCH_HEADER_SIZE - LOG_OVERHEAD
                and position + size <= end
                and magic == MAGIC_V2
                and (base_offset == offset or (gaps and base_offset > offset))
                and last_offset_delta >= 0
                and records.crc32c_of(view[position + CRC_START : position + size]) == crc
            ):
                on_batch(header, position)
                position += size
                offset = base_offset + last_offset_delta + 1
                continue
        checked = _check_batch(view, position, offset, gaps)
        assert isinstance(checked, str)
        problem = checked
        break
    return ScanOutcome(position, offset, problem)


def _check_batch(
    view: memoryview, position: int, expected_offset: int, gaps: bool
) -> BatchHeader | str:
    """The batch's header when it is whole and valid, else what is wrong with it."""
    left = len(view) - position
    if left < BATCH_HEADER_SIZE:
        return f"torn batch header ({left} bytes)"
    header = read_header(view, position)
    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        return f"invalid batch length {header.batch_length}"
    size = header.batch_length + LOG_OVERHEAD
    if size > left:
        return f"torn batch ({left} of {size} bytes)"
    if header.magic != MAGIC_V2:
        return f"unsupported magic {header.magic}"
    if header.base_offset < expected_offset or (not gaps and header.base_offset > expected_offset):
        return f"batch at offset {header.base_offset} where {expected_offset} was expected"
    if header.last_offset_delta < 0:
        return f"negative last offset delta {header.last_offset_delta}"
    if records.crc32c_of(view[position + CRC_START : position + size]) != header.crc:
        return "CRC mismatch"
    return header


DATA_BATCH = -1  # a transactional batch of records, in ``ProducerTracker.transactions``
UNKNOWN_MARKER = -2  # a transactional control batch without a readable marker
NOT_TRANSACTIONAL = -3  # what ``transaction_marker`` gives a batch that is not transactional
# (base offset, last offset, producer id, DATA_BATCH or the marker type) of a transactional batch
NotedBatch = tuple[int, int, int, int]


def transaction_marker(header: BatchHeader, batch: bytes | memoryview) -> int:
    """What a ``NotedBatch`` says of a batch with a producer id: ``NOT_TRANSACTIONAL``,
    ``DATA_BATCH``, or a control batch's marker type (``batch``: its bytes, read only for a
    control batch; ``UNKNOWN_MARKER`` when unreadable)."""
    if not header.is_transactional:
        return NOT_TRANSACTIONAL
    if not header.is_control:
        return DATA_BATCH
    try:
        marker = control_type(batch, header)
    except CorruptBatch:
        marker = None
    return UNKNOWN_MARKER if marker is None else marker


class ProducerTracker:
    """Rebuilds idempotent-producer state from batch headers seen in offset order.

    Mirrors what ``Partition`` remembers on append: per producer id, the current epoch and
    the sequence ranges of its last few batches, so that a producer retrying a batch that was
    written just before a crash gets its original offset instead of a duplicate.

    It also notes every transactional batch as it goes by (``NotedBatch``: base and last
    offset, producer id, ``DATA_BATCH`` or the control batch's marker type), so that
    ``Partition`` rebuilds open and aborted transactions from this list instead of reading
    the log a second time.
    """

    def __init__(self) -> None:
        self.producers: dict[int, RecoveredProducer] = {}
        self.transactions: list[NotedBatch] = []

    def observe_transactional(self, header: BatchHeader, batch: bytes | memoryview) -> None:
        """Note a transactional batch (``batch``: its bytes, read only for a control batch)."""
        self.note(header, transaction_marker(header, batch))

    def note(self, header: BatchHeader, marker: int) -> None:
        """Note a batch with a producer id, given ``transaction_marker``'s answer for it."""
        if marker != NOT_TRANSACTIONAL:
            self.transactions.append(
                (header.base_offset, header.last_offset, header.producer_id, marker)
            )

    def observe(self, header: BatchHeader) -> None:
        """A batch with a producer id: a data batch with a sequence, or a transaction marker
        (its epoch becomes the producer's, a bumped one forgetting the batches, as on append)."""
        self.observe_all((header,))

    def observe_all(self, headers: Iterable[BatchHeader]) -> None:
        """``observe`` each of ``headers``, in order."""
        producers = self.producers
        for header in headers:
            # the fields, not BatchHeader's properties: this runs for every producer batch of
            # the segments a start-up scans
            attributes = header.attributes
            transactional = attributes & TRANSACTIONAL_FLAG
            marker = transactional and attributes & CONTROL_FLAG
            sequence = header.base_sequence
            producer_id = header.producer_id
            if producer_id < 0 or (sequence < 0 and not marker):
                continue
            epoch = header.producer_epoch
            entry = producers.get(producer_id)
            if entry is None or entry.epoch != epoch:
                entry = RecoveredProducer(epoch, [], entry is not None and entry.transactional)
                producers[producer_id] = entry
            if transactional:
                entry.transactional = True
            entry.last_timestamp = header.max_timestamp
            if marker:
                continue
            recent = entry.recent
            recent.append((sequence, sequence + header.last_offset_delta, header.base_offset))
            if len(recent) > RECENT_BATCHES_PER_PRODUCER:
                del recent[0]
