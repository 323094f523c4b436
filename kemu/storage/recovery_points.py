"""The data directory's recovery points and clean-shutdown marker, in Kafka's files.

- ``recovery-point-offset-checkpoint``: per partition, the offset below which its log is synced
  (``SegmentLog.recovery_point``), in Kafka's offset-checkpoint format: the version (0), the
  number of entries, then one ``topic partition offset`` line each. Written whole to a
  temporary file, fsynced and renamed over the old one (then the directory is synced), after a
  round of flushes and at a clean shutdown, only when an offset moved.
- ``.kafka_cleanshutdown``: written (and synced) last at a clean shutdown, once every log is
  flushed and closed and the recovery points are checkpointed; taken (read and deleted) at the
  next start before any log is opened. Its content is Kafka's (``{"version":0,"broker_epoch":
  -1}``); kemu only looks for the file.

A log opened after a clean shutdown reads every segment from its summary; after a crash, only
the segments that end at or below its recovery point (``kemu.storage.segments``). An unreadable
checkpoint is logged and taken as empty: every log is then scanned, as before it existed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import structlog

from kemu.storage.durable import fsync_directory

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CHECKPOINT_FORMAT_VERSION = 0

log = structlog.get_logger("kemu.storage")

PartitionKey = tuple[str, int]  # topic, partition


def parse_offset_checkpoint(text: str) -> dict[PartitionKey, int]:
    """Kafka's offset checkpoint format; raises ValueError when ``text`` is not one."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or lines[0].strip() != str(CHECKPOINT_FORMAT_VERSION):
        raise ValueError("not a version 0 offset checkpoint")
    count = int(lines[1])
    if count != len(lines) - 2:
        raise ValueError(f"{count} entries announced, {len(lines) - 2} found")
    offsets: dict[PartitionKey, int] = {}
    for line in lines[2:]:
        fields = line.split(" ")
        if len(fields) != 3 or not fields[0]:
            raise ValueError(f"malformed entry {line!r}")
        partition, offset = int(fields[1]), int(fields[2])
        if partition < 0 or offset < 0:
            raise ValueError(f"negative partition or offset in {line!r}")
        offsets[(fields[0], partition)] = offset
    return offsets


def format_offset_checkpoint(offsets: dict[PartitionKey, int]) -> str:
    lines = [str(CHECKPOINT_FORMAT_VERSION), str(len(offsets))]
    lines.extend(f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items())
    return "\n".join(lines) + "\n"


def read_offset_checkpoint(path: Path) -> dict[PartitionKey, int]:
    """The checkpoint at ``path``; {} when it is missing or unreadable (logged)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as problem:
        log.warning("offset_checkpoint_unreadable", path=str(path), reason=str(problem))
        return {}
    try:
        return parse_offset_checkpoint(text)
    except ValueError as problem:
        log.warning("offset_checkpoint_unreadable", path=str(path), reason=str(problem))
        return {}


def write_offset_checkpoint(path: Path, offsets: dict[PartitionKey, int]) -> None:
    """Replace the checkpoint at ``path`` atomically and durably."""
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = memoryview(format_offset_checkpoint(offsets).encode())
        written = 0
        while written < len(data):
            written += os.write(descriptor, data[written:])
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(temporary, path)
    fsync_directory(path.parent)


class RecoveryPoints:
    """One data directory's recovery points: read at start, checkpointed while running."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / RECOVERY_POINT_CHECKPOINT
        (data_dir / (RECOVERY_POINT_CHECKPOINT + ".tmp")).unlink(missing_ok=True)
        marker = data_dir / CLEAN_SHUTDOWN_FILE
        self.clean_shutdown = marker.exists()
        self.loaded = read_offset_checkpoint(self.path)
        self._written = dict(self.loaded)
        if self.clean_shutdown:
            # from here on a crash is an unclean shutdown again
            marker.unlink()
            fsync_directory(data_dir)
        log.info(
            "log_recovery_start",
            clean_shutdown=self.clean_shutdown,
            recovery_points=len(self.loaded),
        )

    def for_partition(self, topic: str, partition: int) -> int | None:
        """The partition's checkpointed recovery point (None: none, its log is scanned)."""
        return self.loaded.get((topic, partition))

    def checkpoint(self, points: Iterable[tuple[str, int, int]]) -> None:
        """Write ``(topic, partition, recovery point)`` of every log, if any moved."""
        offsets = {(topic, partition): offset for topic, partition, offset in points}
        if offsets != self._written:
            write_offset_checkpoint(self.path, offsets)
            self._written = offsets

    def mark_clean_shutdown(self) -> None:
        """Last at a clean shutdown: the next start may trust every segment's summary."""
        path = self.data_dir / CLEAN_SHUTDOWN_FILE
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(descriptor, json.dumps({"version": "0", "broker_epoch": "-1"}).encode())
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        fsync_directory(self.data_dir)
