"""What a log reader decoded from a record batch, kept under the batch's exact bytes.

A coordinator that loads its state log (``__share_group_state``, ``__transaction_state``) reads
each batch from disk and decodes its records; decoding is a pure function of the bytes, so the
same bytes always decode to the same (immutable) records. A ``BatchMemo`` keeps those results for
the next reader of the same bytes: in one process that loads the same log again and again (the
deterministic simulation restarts kemu hundreds of times over one data directory, and its oracles
replay the share-state log once more), the reading of the files and the replay of every record
stay, only their decoding is skipped. Off (capacity 0) unless turned on: a real broker loads its
logs once and would only hold the memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Generic, TypeVar

Decoded = TypeVar("Decoded")


class BatchMemo(Generic[Decoded]):
    """Decoded batches by their bytes, at most ``capacity`` of them (the oldest go first)."""

    def __init__(self, capacity: int = 0) -> None:
        self.capacity = capacity
        self._entries: dict[bytes, Decoded] = {}
        self.hits = 0

    def get(self, batch: bytes) -> Decoded | None:
        if not self.capacity:
            return None
        found = self._entries.get(batch)
        if found is not None:
            self.hits += 1
        return found

    def put(self, batch: bytes, decoded: Decoded) -> None:
        if not self.capacity:
            return
        entries = self._entries
        entries[batch] = decoded
        if len(entries) > self.capacity:
            del entries[next(iter(entries))]

    def clear(self) -> None:
        self._entries.clear()
        self.hits = 0

    @contextlib.contextmanager
    def enabled(self, capacity: int) -> Iterator[None]:
        """On with ``capacity`` entries for the block; off and empty again after it."""
        saved = self.capacity
        self.capacity = capacity
        try:
            yield
        finally:
            self.capacity = saved
            self.clear()
