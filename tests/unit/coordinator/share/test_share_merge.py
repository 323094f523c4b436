"""``merge_batches`` overlays updates on a share partition's persisted batches. A batch is cut by
the updates a bisection finds when they do not overlap one another (``_outside``), else by each
update in turn (``_subtract``): both leave the same pieces, and the merge is what overlaying the
updates offset by offset gives."""

from __future__ import annotations

import random
from bisect import bisect_left
from itertools import pairwise

import pytest

from kemu.coordinator.share.persister import (
    PersistedBatch,
    _outside,
    _subtract,
    merge_batches,
)


def _ranges(rng: random.Random, *, disjoint: bool, end: int = 60) -> list[PersistedBatch]:
    found: list[PersistedBatch] = []
    at = rng.randint(0, 5)
    while at < end and len(found) < 8:
        first = at if disjoint else rng.randint(0, end)
        last = first + rng.randint(0, 6)
        state = rng.choice((0, 2, 4))
        staged = rng.choice((-1, -1, 7))
        found.append(PersistedBatch(first, last, state, rng.randint(0, 2), staged))
        at = last + 1 + rng.choice((0, 0, 1, 4))
    rng.shuffle(found)
    return found


def _by_offset(batches: list[PersistedBatch]) -> dict[int, tuple[int, ...]]:
    return {
        offset: tuple(batch[2:])
        for batch in batches
        for offset in range(batch.first_offset, batch.last_offset + 1)
    }


@pytest.mark.parametrize("seed", range(300))
def test_cutting_by_bisection_leaves_the_pieces_each_update_in_turn_leaves(seed: int) -> None:
    rng = random.Random(seed)
    updates = _ranges(rng, disjoint=True)
    ordered = sorted(updates)
    first = rng.randint(0, 60)
    batch = PersistedBatch(first, first + rng.randint(0, 30), 2, 1)
    at = bisect_left([update.last_offset for update in ordered], batch.first_offset)
    assert sorted(_outside(batch, ordered, at)) == sorted(_subtract(batch, tuple(updates)))


@pytest.mark.parametrize("seed", range(300))
def test_a_merge_overlays_the_updates_offset_by_offset(seed: int) -> None:
    rng = random.Random(seed)
    existing = tuple(sorted(_ranges(rng, disjoint=True)))
    updates = tuple(_ranges(rng, disjoint=rng.random() < 0.7))
    if any(a.last_offset >= b.first_offset for a, b in pairwise(sorted(updates))):
        updates = updates[:1]  # overlapping updates are merged one at a time (``combine``)
    start = rng.choice((-1, 0, rng.randint(0, 40)))
    merged = merge_batches(existing, updates, start)
    expected = _by_offset(list(existing)) | _by_offset(list(updates))
    assert _by_offset(list(merged)) == {k: v for k, v in expected.items() if k >= start}
    # sorted, disjoint, and no two neighbours that could be one batch
    for a, b in pairwise(merged):
        assert a.last_offset < b.first_offset
        assert not (a.last_offset + 1 == b.first_offset and a[2:] == b[2:])
