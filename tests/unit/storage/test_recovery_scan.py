"""``scan_batches`` checks each batch inline, in one expression; ``_check_batch`` says what is
wrong with the first one that fails. The scan must stop exactly where walking the batches with
``_check_batch`` alone stops, with the same reason, whatever the damage."""

from __future__ import annotations

import random

import pytest

from kemu.protocol.records import BatchHeader, build_batch, with_offset
from kemu.storage.recovery import ScanOutcome, _check_batch, scan_batches


def _reference(data: bytes, expected_offset: int, *, gaps: bool) -> tuple[ScanOutcome, list[int]]:
    view = memoryview(data)
    position, offset, problem, seen = 0, expected_offset, None, []
    while position < len(view):
        checked = _check_batch(view, position, offset, gaps)
        if isinstance(checked, str):
            problem = checked
            break
        seen.append(position)
        position += checked.size
        offset = checked.next_offset
    return ScanOutcome(position, offset, problem), seen


@pytest.mark.parametrize("seed", range(300))
def test_the_scan_stops_where_checking_each_batch_stops(seed: int) -> None:
    rng = random.Random(seed)
    gaps = rng.random() < 0.5
    parts, offset = [], 100
    for _ in range(rng.randint(0, 6)):
        count = rng.randint(1, 3)
        batch = build_batch([(b"k", b"v" * rng.randint(0, 30))] * count, timestamp_ms=5)
        parts.append(with_offset(batch, offset, 0))
        offset += count + (rng.randint(1, 3) if rng.random() < 0.3 else 0)  # a gap
    data = bytearray(b"".join(parts))
    damage = rng.choice(("none", "flip", "cut", "zeros", "length"))
    if data and damage == "flip":
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif damage == "cut":
        del data[rng.randint(0, len(data)) :]
    elif damage == "zeros":
        data += bytes(rng.randint(1, 80))
    elif data and damage == "length":  # a batch length field says anything
        at = rng.randrange(0, len(data) - 12 + 1) if len(data) >= 12 else 0
        data[at + 8 : at + 12] = rng.randbytes(4)
    seen: list[int] = []

    def on_batch(header: BatchHeader, position: int) -> None:
        seen.append(position)

    outcome = scan_batches(bytes(data), 100, on_batch, gaps=gaps)
    assert (outcome, seen) == _reference(bytes(data), 100, gaps=gaps)
