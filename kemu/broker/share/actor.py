"""The asyncio side of one share partition: a thin actor around ``SharePartitionCore``.

The actor serialises every operation on its core (one at a time, in arrival order), loads the
durable state through the share persister on first use, writes every durable change before the
operation's caller gets its answer, runs the acquisition-lock timer, and wakes waiting
ShareFetch requests when records become acquirable again (releases, lock expiry, aborts).

A write the persister refuses leaves the in-memory core ahead of the durable state, so the
actor drops the core and reloads it on next use; the caller gets the (mapped) error. One
exception (KIP-1289, spec §7): a stage whose write the share coordinator could not take for
a passing reason (not available, loading, a storage error) is taken back instead, so the
member keeps its acquired records and can retry the stage. A fenced or otherwise refused
stage write drops the core as any other.

``retire`` drops the core at once, outside the mailbox, so an operation suspended in a
persister call may find it gone when it resumes: it installs nothing, hands out nothing and
answers NOT_LEADER_OR_FOLLOWER (the client asks the new actor); work with no one to answer
(markers, releases, lock expiries) stops quietly. An acknowledgement or stage whose own write
landed answers as written: it is durable, and the next load finds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from kemu.broker.share.dead_letter import write_dead_letters
from kemu.broker.share.partition import (
    AckBatch,
    AcquiredRange,
    AcquireMode,
    DeadLetter,
    Effects,
    SharePartitionCore,
)
from kemu.broker.share.settings import ShareSettings, resolve_start_offset
from kemu.cluster.clock import TimerHandle
from kemu.cluster.crash_points import crash_point
from kemu.cluster.partition import Partition, WakeList
from kemu.coordinator.share.persister import (
    UNINITIALIZED_START_OFFSET,
    SharePartitionKey,
    SharePersister,
)
from kemu.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kemu.cluster.context import Runtime

log = structlog.get_logger("kemu.share")

Waiter = Callable[[], None]

# Persister errors as a share-partition leader reports them to clients (Kafka's
# SharePartition.fetchPersisterError).
_PERSISTER_ERRORS = {
    ErrorCode.fenced_leader_epoch: ErrorCode.not_leader_or_follower,
    ErrorCode.fenced_state_epoch: ErrorCode.not_leader_or_follower,
    ErrorCode.not_coordinator: ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress: ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_not_available: ErrorCode.coordinator_not_available,
    ErrorCode.group_id_not_found: ErrorCode.group_id_not_found,
    ErrorCode.unknown_topic_or_partition: ErrorCode.unknown_topic_or_partition,
}


# Refusals that leave the durable state as it was and say nothing against this leader's view
# of it (the share coordinator is moving, loading, or could not append): an operation that can
# be taken back in memory is, rather than dropping every acquisition with the core.
_PASSING_REFUSALS = frozenset(
    {
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
    }
)


def persister_error(code: ErrorCode) -> ErrorCode:
    return _PERSISTER_ERRORS.get(code, ErrorCode.unknown_server_error)


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    error: ErrorCode = ErrorCode.none
    acquired: tuple[AcquiredRange, ...] = ()
    records: bytes = b""
    count: int = 0


class SharePartitionActor:
    def __init__(
        self,
        key: SharePartitionKey,
        runtime: Runtime,
        persister: Callable[[], SharePersister],
    ) -> None:
        self.key = key
        self.runtime = runtime
        self._persister = persister
        self.core: SharePartitionCore | None = None
        self._mailbox = asyncio.Lock()
        self._timer: TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.waiters = WakeList()
        self.retired = False
        self._lock_expiries = self._limit_archives = 0  # of cores dropped since (metrics)
        # what the last _load saw: the source partition and group settings dead letters need
        self._source: Partition | None = None
        self._settings: ShareSettings | None = None

    # --- operations ---------------------------------------------------------------------------

    async def acquire(
        self,
        partition: Partition,
        member: str,
        settings: ShareSettings,
        *,
        max_records: int,
        batch_size: int,
        mode: AcquireMode,
        max_bytes: int,
        min_one: bool,
    ) -> FetchOutcome:
        async with self._mailbox:
            outcome = await self._acquire(
                partition, member, settings, max_records, batch_size, mode, max_bytes, min_one
            )
            if outcome.error is ErrorCode.not_leader_or_follower:
                # fenced: the durable state moved on (an admin rewrote it); reload and retry once
                outcome = await self._acquire(
                    partition, member, settings, max_records, batch_size, mode, max_bytes, min_one
                )
            return outcome

    async def _acquire(
        self,
        partition: Partition,
        member: str,
        settings: ShareSettings,
        max_records: int,
        batch_size: int,
        mode: AcquireMode,
        max_bytes: int,
        min_one: bool,
    ) -> FetchOutcome:
        code = await self._load(partition, settings)
        if code is not ErrorCode.none:
            return FetchOutcome(code)
        core = self.core
        if core is None:
            return FetchOutcome(ErrorCode.not_leader_or_follower)  # retired while loading
        code = await self._commit(core.advance_log_start(partition.log_start_offset))
        if code is not ErrorCode.none:
            return FetchOutcome(code)
        if self.core is not core:
            return FetchOutcome(ErrorCode.not_leader_or_follower)  # retired while writing
        upper = _upper(partition, settings)
        offset = core.next_fetch_offset()
        if offset >= upper or not core.can_acquire():
            return FetchOutcome()
        result = core.acquire(
            member,
            partition.log.batches(offset, upper),
            max_records=max_records,
            batch_size=batch_size,
            mode=mode,
            now_ms=self.runtime.clock_ms(),
            max_bytes=max_bytes,
            min_one=min_one,
            read_committed=settings.read_committed,
            aborted=_aborted_ranges(partition, offset, upper) if settings.read_committed else (),
        )
        code = await self._commit(result.effects)
        if code is not ErrorCode.none:
            return FetchOutcome(code)  # the acquisition went with the dropped core
        if self.core is not core:
            # retired while writing: no one holds these locks any more, hand nothing out
            return FetchOutcome(ErrorCode.not_leader_or_follower)
        return FetchOutcome(
            acquired=result.acquired, records=b"".join(result.records), count=result.count
        )

    async def acknowledge(
        self,
        partition: Partition,
        member: str,
        batches: Sequence[AckBatch],
        settings: ShareSettings,
    ) -> tuple[ErrorCode, str | None]:
        code, message, _ = await self.acknowledge_deferring(
            partition, member, batches, settings, defer_release=False
        )
        return code, message

    async def acknowledge_deferring(
        self,
        partition: Partition,
        member: str,
        batches: Sequence[AckBatch],
        settings: ShareSettings,
        *,
        defer_release: bool = True,
    ) -> tuple[ErrorCode, str | None, tuple[AckBatch, ...]]:
        """Acknowledge; with ``defer_release`` the RELEASE runs are only checked and come back
        for ``release_deferred`` (see ``SharePartitionCore.acknowledge``)."""
        async with self._mailbox:
            code = await self._load(partition, settings)
            if code is not ErrorCode.none:
                return code, None, ()
            core = self.core
            if core is None:
                return ErrorCode.not_leader_or_follower, None, ()  # retired while loading
            result = core.acknowledge(
                member, batches, self.runtime.clock_ms(), defer_release=defer_release
            )
            code = await self._commit(result.effects)
            if code is not ErrorCode.none:
                return code, None, ()
            return result.error, result.message, result.deferred

    async def release_deferred(self, member: str, batches: Sequence[AckBatch]) -> ErrorCode:
        async with self._mailbox:
            if self.core is None:
                return ErrorCode.none  # reloaded from the durable state: the locks went with it
            return await self._commit(self.core.release_deferred(member, batches))

    async def stage(
        self,
        partition: Partition,
        member: str,
        producer_id: int,
        producer_epoch: int,
        batches: Sequence[AckBatch],
        settings: ShareSettings,
    ) -> tuple[ErrorCode, str | None]:
        """KIP-1289: stage acknowledgements in a producer transaction, durably."""
        async with self._mailbox:
            code = await self._load(partition, settings)
            if code is not ErrorCode.none:
                return code, None
            core = self.core
            if core is None:
                return ErrorCode.not_leader_or_follower, None  # retired while loading
            result = core.stage(
                member, producer_id, producer_epoch, batches, self.runtime.clock_ms()
            )
            code = await self._commit(
                result.effects,
                undo=lambda: core.revert_stage(producer_id, producer_epoch, result.staged),
            )
            if code is not ErrorCode.none:
                return code, None
            crash_point("share.staged")
            return result.error, result.message

    async def apply_marker(self, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        """KIP-1289: a transaction ended; resolve what it staged here (if loaded)."""
        async with self._mailbox:
            if self.core is None:
                return ErrorCode.none  # the durable state is resolved by the share coordinator
            effects = self.core.apply_marker(
                producer_id, producer_epoch, commit, self.runtime.clock_ms()
            )
            return await self._commit(effects)

    async def resume(self, partition: Partition, settings: ShareSettings) -> ErrorCode:
        """Load now if not loaded: ARCHIVING records found in the durable state are written to
        the dead-letter queue and archived (KIP-1191), without waiting for a consumer."""
        async with self._mailbox:
            return await self._load(partition, settings)

    async def release_member(self, member: str) -> ErrorCode:
        async with self._mailbox:
            if self.core is None:
                return ErrorCode.none
            return await self._commit(self.core.release_member(member, self.runtime.clock_ms()))

    def estimate_bytes(self, partition: Partition, settings: ShareSettings, limit: int) -> int:
        """Bytes a fetch could acquire now, up to ``limit`` (``limit`` when not loaded yet)."""
        core = self.core
        if core is None:
            return limit
        upper = _upper(partition, settings)
        offset = core.next_fetch_offset()
        if offset >= upper or not core.can_acquire():
            return 0
        return len(partition.log.read(offset, limit, upper=upper))

    def counters(self) -> tuple[int, int]:
        """(records released by lock expiry, records archived at the delivery limit) since
        this actor started, across reloads of its core (for metrics)."""
        core = self.core
        if core is None:
            return self._lock_expiries, self._limit_archives
        return (
            self._lock_expiries + core.lock_expiries,
            self._limit_archives + core.delivery_limit_archives,
        )

    def close(self) -> None:
        """Forget the in-memory state (it is reloaded on next use)."""
        self._cancel_timer()
        self._lock_expiries, self._limit_archives = self.counters()
        self.core = None
        self._wake()

    async def reload(self) -> None:
        """The source partition's leader moved: forget the in-memory state once the operations
        queued before this one are done; the next use loads it from ``__share_group_state``, as
        Kafka's new share-partition leader does (acquisitions, never persisted, are gone;
        TX_PENDING staging is kept)."""
        async with self._mailbox:
            self.close()

    def retire(self) -> None:
        """The manager replaced this actor (its durable state was rewritten by an admin, or the
        topic is gone): drop the cached state, stop the timer and wake the waiters, who will
        find the new actor. Work still queued here (a transaction's marker, an acknowledgement,
        a lock expiry) finds nothing loaded: it never acts on the old copy nor writes it over
        the new state (a delete leaves no state epoch to fence it), and it loads nothing, as
        a second leader of the share partition would."""
        self.retired = True
        self.close()

    async def stop(self) -> None:
        """The broker stops: the lock timer never fires again and the lock expiries it already
        started are cancelled and awaited, so none is left pending when the event loop closes.
        Nothing is lost: acquisitions are not persisted, the next start reloads the state."""
        self.retired = True  # an operation still running must not re-arm the timer
        self._cancel_timer()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # --- machinery ----------------------------------------------------------------------------

    async def _load(self, partition: Partition, settings: ShareSettings) -> ErrorCode:
        self._source, self._settings = partition, settings
        if self.retired:
            return ErrorCode.not_leader_or_follower  # as a fenced write: ask the new actor
        if self.core is not None:
            self.core.config = settings.partition
            self.core.leader_epoch = partition.leader_epoch
            return ErrorCode.none
        persister = self._persister()
        result = await persister.read_state(self.key, partition.leader_epoch)
        if result.error is ErrorCode.invalid_request:
            # Nothing initialised this share partition yet (no heartbeat reached the group
            # coordinator first): start it as Kafka's group coordinator would.
            code = await persister.initialize(self.key, 0, UNINITIALIZED_START_OFFSET)
            if code is ErrorCode.none:
                result = await persister.read_state(self.key, partition.leader_epoch)
        if self.retired:
            return ErrorCode.not_leader_or_follower  # retired while reading: install nothing
        if result.error is not ErrorCode.none or result.state is None:
            log.warning("share_state_read_failed", key=str(self.key), error=result.error.name)
            return persister_error(result.error)
        now = self.runtime.clock_ms()
        core, effects = SharePartitionCore.from_persisted(
            result.state,
            settings.partition,
            reset_offset=resolve_start_offset(settings, partition, now),
            log_start_offset=partition.log_start_offset,
        )
        core.leader_epoch = partition.leader_epoch
        self.core = core
        return await self._commit(effects)

    async def _commit(
        self, effects: Effects, *, undo: Callable[[], None] | None = None
    ) -> ErrorCode:
        """Write what must be durable, then let waiters and the lock timer know.

        A refused write drops the core (reloaded on next use), unless the refusal is a passing
        one and the operation gave ``undo``, which puts the core back where the durable state
        is (the write carried nothing else: every earlier write was done or dropped the core).

        The core may be dropped (``retire``) while the write is awaited: what it wrote stands,
        the dropped copy does nothing more (no dead letters, no timer), and the answer is
        ``none``; an operation that goes on using the core checks ``self.core is core``.
        """
        core = self.core
        if core is None:
            return ErrorCode.none  # dropped before anything was written: nothing to do
        if effects.durable:
            code = await self._persister().write_state(
                self.key,
                state_epoch=core.state_epoch,
                leader_epoch=core.leader_epoch,
                start_offset=effects.start_offset,
                delivery_complete_count=effects.delivery_complete_count,
                batches=effects.batches,
            )
            if code is not ErrorCode.none:
                log.warning("share_state_write_failed", key=str(self.key), error=code.name)
                if undo is not None and code in _PASSING_REFUSALS:
                    undo()
                    self._rearm()  # the locks it gave back
                else:
                    self.close()  # the durable state is the truth: reload it on next use
                return persister_error(code)
            if self.core is not core:
                return ErrorCode.none  # retired while writing: the new actor takes over
        if effects.dead_letters:
            code = await self._dead_letter(core, effects.dead_letters)
            if code is not ErrorCode.none:
                return code
        if effects.available or effects.start_moved:
            self._wake()  # records to hand out, or room under the in-flight limit
        self._rearm()
        return ErrorCode.none

    async def _dead_letter(
        self, core: SharePartitionCore, letters: tuple[DeadLetter, ...]
    ) -> ErrorCode:
        """KIP-1191: the ARCHIVING state of ``letters`` is durable; write them to the group's
        DLQ topic (``dead_letter.py``), then make them ARCHIVED, durably. A write Kafka would
        refuse is logged and archived all the same, as Kafka does."""
        source, settings = self._source, self._settings
        if source is None or settings is None:
            return ErrorCode.none  # never loaded: nothing can be ARCHIVING
        crash_point("share.archiving")
        write_dead_letters(
            self.runtime.cluster,
            self.key.group_id,
            source,
            settings,
            letters,
            self.runtime.clock_ms(),
        )
        crash_point("share.dead_lettered")
        done = [(letter.first_offset, letter.last_offset) for letter in letters]
        return await self._commit(core.complete_dead_letters(done))

    def _wake(self) -> None:
        for waiter in list(self.waiters):
            waiter()

    def _rearm(self) -> None:
        self._cancel_timer()
        if self.retired:
            return
        core = self.core
        deadline = core.next_deadline() if core is not None else None
        if deadline is None:
            return
        self._timer = self.runtime.clock.call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        task = asyncio.get_running_loop().create_task(self._expire())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _expire(self) -> None:
        async with self._mailbox:
            if self.core is None:
                return
            try:
                await self._commit(self.core.expire_locks(self.runtime.clock_ms()))
            except Exception:
                log.exception("share_lock_expiry_failed", key=str(self.key))


def _upper(partition: Partition, settings: ShareSettings) -> int:
    return partition.last_stable_offset if settings.read_committed else partition.high_watermark


def _aborted_ranges(partition: Partition, start: int, end: int) -> Sequence[tuple[int, int, int]]:
    """(producer id, first, last) of aborted transactions in [start, end)."""
    return partition.aborted_ranges(start, end)
