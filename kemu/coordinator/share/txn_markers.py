"""KIP-1289 on the share coordinator: a transaction marker resolves the records it staged.

A transaction that staged share acknowledgements has the ``__share_group_state`` partitions of
those share partitions among its own, so its COMMIT or ABORT marker lands in the state log
beside the TX_PENDING records it resolves (the draft PR's later design, spec §5.4: the share
coordinator completes TX_PENDING, the leader learns the outcome). The marker in the log is the
outcome: whoever replays the log — the coordinator live, at start-up, or ``kemu
decode-share-state`` — resolves the same records the same way, so no crash between the marker
and any later write can leave them pending.

A marker of producer P with epoch E resolves every TX_PENDING batch staged by P with an epoch
up to E (transaction version 2 bumps the epoch at EndTxn, so its markers carry the staged epoch
plus one; a fence or timeout bumps it further; version 1 keeps it): commit gives the batch's
``staged_commit_state`` (ACKNOWLEDGED for ACCEPT, ARCHIVED for REJECT unless it said
otherwise), abort its ``staged_abort_state`` (AVAILABLE, or ARCHIVED when the abort used the
record's last delivery). The delivery count is kept. Then the start offset moves past the
complete prefix and the delivery-complete count (Kafka's DeliveryCompleteCount, for lag) is
counted again from the batches.

Pure functions; the shard applies them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kemu.coordinator.share.persister import PersistedBatch

AVAILABLE = 0
ACKNOWLEDGED = 2
ARCHIVING = 3
ARCHIVED = 4
TX_PENDING = 5
ACCEPT = 1
COMPLETE_STATES = frozenset({ACKNOWLEDGED, ARCHIVED})

NOT_STAGED = -1


@dataclass(frozen=True, slots=True)
class Resolution:
    """A share partition's state after a marker, and the batches the marker changed."""

    start_offset: int
    delivery_complete_count: int
    batches: tuple[PersistedBatch, ...]
    resolved: tuple[PersistedBatch, ...]


def staged_by(batch: PersistedBatch, producer_id: int, producer_epoch: int) -> bool:
    """Whether a marker of this producer id and epoch ends the transaction that staged it."""
    return (
        batch.delivery_state == TX_PENDING
        and batch.staged_producer_id == producer_id
        and batch.staged_producer_epoch <= producer_epoch
    )


def outcome_state(batch: PersistedBatch, commit: bool) -> int:
    """The delivery state a staged batch takes when its transaction commits or aborts."""
    if commit:
        if batch.staged_commit_state != NOT_STAGED:
            return batch.staged_commit_state
        return ACKNOWLEDGED if batch.staged_ack_type == ACCEPT else ARCHIVED
    if batch.staged_abort_state != NOT_STAGED:
        return batch.staged_abort_state
    return AVAILABLE


def resolve(
    start_offset: int,
    batches: tuple[PersistedBatch, ...],
    producer_id: int,
    producer_epoch: int,
    commit: bool,
) -> Resolution | None:
    """Apply one marker to a share partition's persisted state; None if it staged nothing here."""
    if not any(staged_by(b, producer_id, producer_epoch) for b in batches):
        return None
    changed: list[PersistedBatch] = []
    resolved: list[PersistedBatch] = []
    for batch in batches:
        if staged_by(batch, producer_id, producer_epoch):
            batch = unstaged(batch, outcome_state(batch, commit))
            resolved.append(batch)
        changed.append(batch)
    start, kept = settle(start_offset, changed)
    return Resolution(start, complete_count(kept), kept, tuple(resolved))


def unstaged(batch: PersistedBatch, state: int) -> PersistedBatch:
    return batch._replace(
        delivery_state=state,
        staged_producer_id=NOT_STAGED,
        staged_producer_epoch=NOT_STAGED,
        staged_ack_type=NOT_STAGED,
        staged_commit_state=NOT_STAGED,
        staged_abort_state=NOT_STAGED,
    )


def settle(
    start_offset: int, batches: Iterable[PersistedBatch]
) -> tuple[int, tuple[PersistedBatch, ...]]:
    """Move the start offset past the complete batches at its front (offsets no batch covers
    were never delivered, so they stop it) and drop what falls below it."""
    ordered = sorted(batches, key=lambda b: b.first_offset)
    start = start_offset
    for batch in ordered:
        if batch.last_offset < start:
            continue
        if batch.first_offset > start or batch.delivery_state not in COMPLETE_STATES:
            break
        start = batch.last_offset + 1
    kept = tuple(
        b if b.first_offset >= start else b.with_range(start, b.last_offset)
        for b in ordered
        if b.last_offset >= start
    )
    return start, kept


def complete_count(batches: Iterable[PersistedBatch]) -> int:
    """Offsets in complete states (Kafka's DeliveryCompleteCount)."""
    return sum(
        b.last_offset - b.first_offset + 1 for b in batches if b.delivery_state in COMPLETE_STATES
    )
