"""The contract between share-partition leaders and the share coordinator.

It mirrors Kafka's persister (the Initialize/Read/Write/Delete ShareGroupState and
ReadShareGroupStateSummary RPCs): a share partition loads its durable state with ``read_state``
when it is first used, and writes every durable change with ``write_state`` before it answers a
client. ``InMemorySharePersister`` is the trivial implementation for unit tests; the real one is
backed by the share coordinator and the ``__share_group_state`` log.

Delivery states on the wire and in records: 0 AVAILABLE, 2 ACKNOWLEDGED, 3 ARCHIVING,
4 ARCHIVED, 5 TX_PENDING (KIP-1289). ACQUIRED (1) is never persisted: it is written as AVAILABLE
with its delivery count.
"""

from __future__ import annotations

import uuid
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import pairwise
from operator import itemgetter
from typing import NamedTuple, Protocol

from kemu.protocol.errors import ErrorCode

UNINITIALIZED_START_OFFSET = -1


@dataclass(frozen=True, slots=True, order=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


class PersistedBatch(NamedTuple):
    """One range of a share partition's persisted state. A named tuple, not a frozen dataclass:
    a restart's replay and every state comparison build and compare these by the thousand, and
    a tuple is built and compared in C."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int
    # KIP-1289 staging, -1 when not staged
    staged_producer_id: int = -1
    staged_producer_epoch: int = -1
    staged_ack_type: int = -1
    # the delivery states the transaction's commit and abort give (decided when staged, so the
    # share coordinator resolves a marker exactly as the leader would); -1: from the ack type
    staged_commit_state: int = -1
    staged_abort_state: int = -1

    @property
    def staging(self) -> tuple[int, int, int, int, int]:
        """Everything KIP-1289 staging adds to a batch, for comparisons."""
        return (
            self.staged_producer_id,
            self.staged_producer_epoch,
            self.staged_ack_type,
            self.staged_commit_state,
            self.staged_abort_state,
        )

    def with_range(self, first_offset: int, last_offset: int) -> PersistedBatch:
        # built in one C call: a restart's replay calls this per batch piece
        return _new_batch(PersistedBatch, (first_offset, last_offset, *self[_STATE_FIELDS:]))


_new_batch = tuple.__new__
_STATE_FIELDS = 2  # the fields after first_offset and last_offset


@dataclass(frozen=True, slots=True)
class PersistedState:
    state_epoch: int
    start_offset: int
    leader_epoch: int = 0
    delivery_complete_count: int = -1
    batches: tuple[PersistedBatch, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class ReadResult:
    error: ErrorCode
    state: PersistedState | None = None
    message: str | None = None


class SharePersister(Protocol):
    """The durable store of share-partition states (``__share_group_state``).

    Every call may suspend (the share coordinator's answers today never do); while one is
    suspended the caller's share partition may be retired, and the caller copes with that
    (``SharePartitionActor``). A refusal is answered as an ``ErrorCode`` (NOT_COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS, FENCED_STATE_EPOCH, ...), not raised; a write answered
    ``none`` is durable.
    """

    async def initialize(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> ErrorCode: ...

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ReadResult: ...

    async def write_state(
        self,
        key: SharePartitionKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: tuple[PersistedBatch, ...],
    ) -> ErrorCode: ...

    async def delete_state(self, key: SharePartitionKey) -> ErrorCode: ...

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadResult: ...


class InMemorySharePersister:
    """Keeps the latest merged state per key; for unit tests of share-partition logic."""

    def __init__(self) -> None:
        self.states: dict[SharePartitionKey, PersistedState] = {}
        self.writes: list[tuple[SharePartitionKey, tuple[PersistedBatch, ...]]] = []

    async def initialize(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> ErrorCode:
        self.states[key] = PersistedState(state_epoch, start_offset)
        return ErrorCode.none

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ReadResult:
        state = self.states.get(key)
        if state is None:
            return ReadResult(ErrorCode.none, PersistedState(0, UNINITIALIZED_START_OFFSET))
        return ReadResult(ErrorCode.none, state)

    async def write_state(
        self,
        key: SharePartitionKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: tuple[PersistedBatch, ...],
    ) -> ErrorCode:
        previous = self.states.get(key, PersistedState(state_epoch, start_offset))
        start = (
            max(previous.start_offset, start_offset)
            if start_offset >= 0
            else (previous.start_offset)
        )
        merged = merge_batches(previous.batches, batches, start)
        self.states[key] = PersistedState(
            state_epoch, start, leader_epoch, delivery_complete_count, merged
        )
        self.writes.append((key, batches))
        return ErrorCode.none

    async def delete_state(self, key: SharePartitionKey) -> ErrorCode:
        self.states.pop(key, None)
        return ErrorCode.none

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadResult:
        return await self.read_state(key, leader_epoch)


def merge_batches(
    existing: tuple[PersistedBatch, ...],
    updates: tuple[PersistedBatch, ...],
    start_offset: int,
) -> tuple[PersistedBatch, ...]:
    """Overlay ``updates`` on ``existing`` (later wins per offset), dropping offsets below
    ``start_offset``; adjacent equal batches are coalesced."""
    pieces: list[PersistedBatch] = []
    if updates:
        # a batch wholly outside the updates' span is kept as it is (most of them: this runs
        # for every update replayed at a start-up)
        ordered = sorted(updates, key=_first_offset)
        low = ordered[0].first_offset
        high = max(update.last_offset for update in updates)
        # updates that do not overlap one another (the usual case) are also in last offset
        # order: a batch is cut by the few a bisection finds, not by every update
        lasts = [update.last_offset for update in ordered]
        disjoint = all(a.last_offset < b.first_offset for a, b in pairwise(ordered))
        for batch in existing:
            if batch.last_offset < low or batch.first_offset > high:
                pieces.append(batch)
            elif disjoint:
                pieces.extend(_outside(batch, ordered, bisect_left(lasts, batch.first_offset)))
            else:
                pieces.extend(_subtract(batch, updates))
        pieces.extend(updates)
    else:
        pieces.extend(existing)
    pieces.sort(key=_first_offset)
    result: list[PersistedBatch] = []
    for batch in pieces:
        if batch.last_offset < start_offset:
            continue
        if batch.first_offset < start_offset:
            batch = _with_range(batch, start_offset, batch.last_offset)
        if (
            result
            and _same_state(result[-1], batch)
            and result[-1].last_offset + 1 == (batch.first_offset)
        ):
            result[-1] = _with_range(result[-1], result[-1].first_offset, batch.last_offset)
        else:
            result.append(batch)
    return tuple(result)


def _outside(batch: PersistedBatch, ordered: list[PersistedBatch], at: int) -> list[PersistedBatch]:
    """What ``_subtract`` leaves of ``batch``, for updates that do not overlap one another in
    offset order, ``at`` the first one ending at or after the batch's first offset."""
    remaining = []
    cursor = batch.first_offset  # the first offset no update covered yet
    last = batch.last_offset
    for update in ordered[at:]:
        if update.first_offset > last:
            break
        if update.first_offset > cursor:
            remaining.append(_with_range(batch, cursor, update.first_offset - 1))
        cursor = update.last_offset + 1
        if cursor > last:
            return remaining
    if cursor == batch.first_offset:
        remaining.append(batch)
    else:
        remaining.append(_with_range(batch, cursor, last))
    return remaining


def _subtract(batch: PersistedBatch, updates: tuple[PersistedBatch, ...]) -> list[PersistedBatch]:
    remaining = [batch]
    for update in updates:
        next_remaining = []
        for piece in remaining:
            if update.last_offset < piece.first_offset or update.first_offset > piece.last_offset:
                next_remaining.append(piece)
                continue
            if piece.first_offset < update.first_offset:
                next_remaining.append(
                    _with_range(piece, piece.first_offset, update.first_offset - 1)
                )
            if piece.last_offset > update.last_offset:
                next_remaining.append(_with_range(piece, update.last_offset + 1, piece.last_offset))
        remaining = next_remaining
    return remaining


_with_range = PersistedBatch.with_range
_first_offset = itemgetter(0)  # PersistedBatch.first_offset


def _same_state(a: PersistedBatch, b: PersistedBatch) -> bool:
    """Everything but the offsets is equal: delivery state and count, and the staging."""
    return a[_STATE_FIELDS:] == b[_STATE_FIELDS:]
