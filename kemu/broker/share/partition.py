"""The share-partition leader's state for one (group, topic-partition), sans IO.

``SharePartitionCore`` keeps the in-flight window [SPSO, SPEO) and applies the operations of
KIP-932 and KIP-1289 to it: acquire records from log batches, acknowledge them, expire
acquisition locks, release a departed member's records, stage acknowledgements in a producer
transaction and apply its commit or abort. Time comes in as ``now_ms``; nothing here sleeps,
reads the log or writes the persister. Every operation returns ``Effects`` (``window.py``).

The core is one class built in layers, each a module read on its own:
* ``window.py`` (``RecordWindow``): the spans, state transitions and their counts, the effects
  of an operation, the start offset, queries and invariants;
* ``acquisition.py`` (``Acquisition``): acquiring records, throttled delivery, read_committed;
* ``acknowledgement.py`` (``Acknowledgement``): acknowledgements, lock expiry, member release;
* ``staging.py`` (``TransactionalStaging``): KIP-1289 staging and transaction markers;
* here: loading a core from persisted state.

A failed persister write is not rolled back here: the caller drops this core and reloads the
durable state.
"""

from __future__ import annotations

from kemu.broker.share.acknowledgement import AckBatch, AckResult
from kemu.broker.share.acquisition import MAX_BYTES, AcquiredRange, AcquireMode, AcquireResult
from kemu.broker.share.staging import TransactionalStaging
from kemu.broker.share.window import (
    CAUSE_DELIVERY_LIMIT,
    CAUSE_REJECTED,
    DeadLetter,
    Effects,
    SharePartitionConfig,
)
from kemu.coordinator.share.persister import PersistedState

__all__ = [
    "CAUSE_DELIVERY_LIMIT",
    "CAUSE_REJECTED",
    "MAX_BYTES",
    "AckBatch",
    "AckResult",
    "AcquireMode",
    "AcquireResult",
    "AcquiredRange",
    "DeadLetter",
    "Effects",
    "SharePartitionConfig",
    "SharePartitionCore",
]


class SharePartitionCore(TransactionalStaging):
    """The in-flight records of one share partition and every operation on them."""

    @classmethod
    def from_persisted(
        cls,
        state: PersistedState,
        config: SharePartitionConfig,
        *,
        reset_offset: int,
        log_start_offset: int = 0,
    ) -> tuple[SharePartitionCore, Effects]:
        """Load durable state; an uninitialised start offset (-1) becomes ``reset_offset``
        (``share.auto.offset.reset`` resolved by the caller) and is written back."""
        uninitialised = state.start_offset < 0
        start = reset_offset if uninitialised else state.start_offset
        core = cls(
            config,
            start_offset=start,
            state_epoch=state.state_epoch,
            leader_epoch=state.leader_epoch,
        )
        core._begin()
        core._load(state.batches)
        core._note_log_start(log_start_offset)
        return core, core._finish(start_changed=uninitialised)
