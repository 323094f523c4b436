"""The share-partition leader's state for one (group, topic-partition), sans IO.

``SharePartitionCore`` keeps the in-flight window [SPSO, SPEO) and applies the operations of
KIP-932 and KIP-1289 to it: acquire records from log batches, acknowledge them, expire
acquisition locks, release a departed member's records, stage acknowledgements in a producer
transaction and apply its commit or abort. Time comes in as ``now_ms``; nothing here sleeps,
reads the log or writes the persister. Every operation returns ``Effects`` (``window.py``).

The core is composed, not inherited: the window is the one stateful object, and each kind of
operation is a small object holding a reference to it, a module read on its own:
* ``window.py`` (``RecordWindow``, ``core.window``): the spans, state transitions and their
  counts, the effects of an operation, the start offset, queries and invariants;
* ``acquisition.py`` (``Acquisition``): acquiring records, throttled delivery, read_committed;
* ``acknowledgement.py`` (``Acknowledgement``): acknowledgements, lock expiry, member release;
* ``staging.py`` (``TransactionalStaging``): KIP-1289 staging and transaction markers (it shares
  the acknowledgements' checks);
* here: the four put together, the operations and queries callers use, and loading a core from
  persisted state.

A failed persister write is not rolled back here: the caller drops this core and reloads the
durable state, except for a KIP-1289 stage whose write was refused for a passing reason, which
``revert_stage`` takes back (the records stay the member's, spec §7).
"""

from __future__ import annotations

from kemu.broker.share.acknowledgement import AckBatch, Acknowledgement, AckResult
from kemu.broker.share.acquisition import (
    MAX_BYTES,
    AcquiredRange,
    AcquireMode,
    AcquireResult,
    Acquisition,
)
from kemu.broker.share.staging import StagedRun, StageResult, TransactionalStaging
from kemu.broker.share.window import (
    CAUSE_DELIVERY_LIMIT,
    CAUSE_REJECTED,
    DeadLetter,
    Effects,
    RecordWindow,
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
    "StageResult",
    "StagedRun",
]


class SharePartitionCore:
    """The in-flight records of one share partition and every operation on them."""

    def __init__(
        self,
        config: SharePartitionConfig,
        *,
        start_offset: int,
        state_epoch: int = 0,
        leader_epoch: int = 0,
    ) -> None:
        self.window = RecordWindow(
            config, start_offset=start_offset, state_epoch=state_epoch, leader_epoch=leader_epoch
        )
        self.acquisition = Acquisition(self.window)
        self.acknowledgement = Acknowledgement(self.window)
        self.staging = TransactionalStaging(self.window, self.acknowledgement)
        # the operations
        self.acquire = self.acquisition.acquire
        self.acknowledge = self.acknowledgement.acknowledge
        self.release_deferred = self.acknowledgement.release_deferred
        self.complete_dead_letters = self.acknowledgement.complete_dead_letters
        self.archiving = self.acknowledgement.archiving
        self.expire_locks = self.acknowledgement.expire_locks
        self.release_member = self.acknowledgement.release_member
        self.stage = self.staging.stage
        self.revert_stage = self.staging.revert
        self.apply_marker = self.staging.apply_marker
        self.advance_log_start = self.window.advance_log_start
        # the queries
        self.next_fetch_offset = self.window.next_fetch_offset
        self.can_acquire = self.window.can_acquire
        self.next_deadline = self.window.next_deadline
        self.spans = self.window.spans
        self.persisted_view = self.window.persisted_view
        self.pending_transactions = self.window.pending_transactions
        self.owner_of = self.window.owner_of
        self.state_of = self.window.state_of
        self.check_invariants = self.window.check_invariants

    @property
    def config(self) -> SharePartitionConfig:
        return self.window.config

    @config.setter
    def config(self, config: SharePartitionConfig) -> None:
        self.window.config = config

    @property
    def leader_epoch(self) -> int:
        return self.window.leader_epoch

    @leader_epoch.setter
    def leader_epoch(self, epoch: int) -> None:
        self.window.leader_epoch = epoch

    @property
    def state_epoch(self) -> int:
        return self.window.state_epoch

    @property
    def start(self) -> int:
        return self.window.start

    @property
    def end(self) -> int:
        return self.window.end

    @property
    def lock_expiries(self) -> int:
        return self.window.lock_expiries

    @property
    def delivery_limit_archives(self) -> int:
        return self.window.delivery_limit_archives

    @property
    def delivery_complete_count(self) -> int:
        return self.window.delivery_complete_count

    @property
    def in_flight(self) -> int:
        return self.window.in_flight

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
        (``share.auto.offset.reset`` resolved by the caller) and is written back, and records
        whose last delivery ended with the process are archived (``end_lost_last_deliveries``)."""
        uninitialised = state.start_offset < 0
        start = reset_offset if uninitialised else state.start_offset
        core = cls(
            config,
            start_offset=start,
            state_epoch=state.state_epoch,
            leader_epoch=state.leader_epoch,
        )
        window = core.window
        window._begin()
        window._load(state.batches)
        window._note_log_start(log_start_offset)
        core.acknowledgement.end_lost_last_deliveries()
        return core, window._finish(start_changed=uninitialised)
