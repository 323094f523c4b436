"""CPU to open one partition log of ``--megabytes`` in 1 MiB segments, three ways.

.venv/bin/python -m bench.segment_recovery --megabytes 50 --value-bytes 100

The log is written once (one-record batches of ``--value-bytes``, seven idempotent producers,
a flush every 1,000 batches, then closed) and copied fresh for each open: "full scan" opens it
as a start without a recovery-point checkpoint does (every batch of every segment scanned),
"recovery point" with the recovery point its last flush reached (the segments below it read
from their summaries, the active one scanned), "clean shutdown" as a start after a clean
shutdown (every segment from its summary). Best of ``--runs`` CPU times.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from kemu.protocol.records import build_batch, read_header
from kemu.storage.segments import SegmentLog

SEGMENT_BYTES = 1 << 20


def write_log(directory: Path, megabytes: int, value_bytes: int) -> int:
    """Fill the log; returns its recovery point after the last flush."""
    log = SegmentLog(directory, segment_bytes=SEGMENT_BYTES)
    sequences: dict[int, int] = {}
    offset = 0
    value = b"x" * value_bytes
    while log.size_bytes < megabytes << 20:
        producer_id = offset % 7 + 1
        sequence = sequences.get(producer_id, 0)
        sequences[producer_id] = sequence + 1
        batch = build_batch(
            [(b"k%d" % (offset % 97), value)],
            timestamp_ms=1_000 + offset,
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=sequence,
        )
        batch = offset.to_bytes(8, "big") + batch[8:]
        log.append(read_header(batch), batch, now_ms=1_000 + offset)
        offset += 1
        if offset % 1000 == 0:
            log.flush()
    log.flush()
    recovery_point = log.recovery_point
    log.close()
    return recovery_point


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megabytes", type=int, default=50)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kemu-segment-recovery-") as workdir:
        source = Path(workdir) / "source"
        recovery_point = write_log(source, options.megabytes, options.value_bytes)
        ways: list[tuple[str, dict[str, Any]]] = [
            ("full scan", {}),
            ("recovery point", {"recovery_point": recovery_point}),
            ("clean shutdown", {"clean_shutdown": True}),
        ]
        for name, arguments in ways:
            times = []
            for _ in range(options.runs):
                copy = Path(workdir) / "copy"
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(source, copy)
                started = time.process_time()
                log = SegmentLog(copy, segment_bytes=SEGMENT_BYTES, **arguments)
                times.append(time.process_time() - started)
                segments, end = len(log.segment_base_offsets), log.log_end_offset
                log.close()
            print(f"{name}: {min(times) * 1000:.0f} ms CPU, {segments} segments, {end} batches")


if __name__ == "__main__":
    main()
