"""The group coordinator service's timer (``GroupCoordinatorService`` mixes it in): one clock
timer at the earliest deadline of any group, firing each due group's timers as one write.

As Kafka's coordinator runtime runs a timer: the group's timers change it, its changed records
are appended, and only then does anything of it take effect (answers to parked classic joins,
released share records). When the append fails the group is put back as it was and its timers
fire again ``RETRY_BACKOFF_MS`` later (Kafka's ``CoordinatorTimer`` reschedules a failed
timer operation with a 500 ms backoff); the other groups' timers are not held up.
Offsets past their retention are expired on the same timer, every
``offsets.retention.check.interval.ms`` (the first check that long after the service starts, as
Kafka schedules it when it loads a coordinator partition), and an empty group left with no
offsets is deleted (``cleanup``: any type but share groups), its tombstones after its offsets'
in one write, as DeleteGroups writes them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import structlog

from kemu.cluster.clock import TimerHandle
from kemu.cluster.context import Runtime
from kemu.coordinator.group.classic.group import (
    ClassicGroup,
    ClassicGroupCoordinator,
    Effect,
    PersistGroup,
)
from kemu.coordinator.group.cleanup import expires, groups_to_delete, spare_open_offsets
from kemu.coordinator.group.consumer.group import ConsumerGroup, ConsumerGroupCoordinator
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.modern_group import TopicMeta, member_deadlines
from kemu.coordinator.group.offset_manager import OffsetManager, Record, group_record
from kemu.coordinator.group.offsets import OffsetStore
from kemu.coordinator.group.registry import Group, GroupRegistry
from kemu.coordinator.group.share import group as share_group
from kemu.coordinator.group.share.group import ShareGroup, ShareGroupCoordinator
from kemu.coordinator.group.snapshots import classic_snapshot
from kemu.coordinator.group.streams.model import StreamsGroup
from kemu.coordinator.group.streams.service import StreamsGroups
from kemu.protocol.errors import ErrorCode

log = structlog.get_logger("kemu.group")

RETRY_BACKOFF_MS = 500  # Kafka's CoordinatorTimer retry backoff for a failed timer write


def group_deadline_ms(group: Group) -> int | None:
    """The earliest timer of a group of any type (sessions, revocations, join and sync phases,
    a streams group's initial rebalance delay)."""
    if isinstance(group, ClassicGroup):
        return group.next_deadline_ms()
    if isinstance(group, ConsumerGroup | ShareGroup):
        return min(member_deadlines(group.members.values()), default=None)
    if isinstance(group, StreamsGroup):
        deadlines = member_deadlines(group.members.values())
        if group.initial_delay_deadline_ms is not None:
            deadlines.append(group.initial_delay_deadline_ms)
        return min(deadlines, default=None)
    return None


def first_retention_check_ms(runtime: Runtime) -> int:
    """When the first retention check runs: one interval after the service starts, as Kafka
    schedules it when it loads a coordinator partition."""
    interval = runtime.cluster.config.get_int("offsets.retention.check.interval.ms")
    return runtime.clock_ms() + interval


class GroupTimers:
    """The service's timer, on its registry, coordinators and clock."""

    runtime: Runtime
    registry: GroupRegistry
    classic: ClassicGroupCoordinator
    consumer: ConsumerGroupCoordinator
    share: ShareGroupCoordinator
    streams: StreamsGroups
    offsets: OffsetStore
    offset_manager: OffsetManager
    _timer: TimerHandle | None
    _tasks: set[asyncio.Task[None]]
    _next_retention_check_ms: int
    # group id -> the time before which its timers are not fired again (a failed write)
    _retry_at: dict[str, int]

    if TYPE_CHECKING:

        def _write_operation(self, group_id: str) -> AbstractContextManager[list[Record]]: ...

        def _append(self, group_id: str, records: list[Record], now_ms: int) -> ErrorCode: ...

        def _apply_classic(self, effects: list[Effect]) -> None: ...

        def topic_meta(self, name: str) -> TopicMeta | None: ...

        async def apply(self, effects: Iterable[share_group.Effect]) -> None: ...

        def delete_group(self, group_id: str) -> ErrorCode: ...

    def _due_ms(self, group: Group) -> int | None:
        deadline = group_deadline_ms(group)
        if deadline is None:
            return None
        return max(deadline, self._retry_at.get(group.group_id, deadline))

    def _rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadlines = [d for group in self.registry if (d := self._due_ms(group)) is not None]
        if self.offsets.has_any() or any(expires(group) for group in self.registry):
            deadlines.append(self._next_retention_check_ms)
        if deadlines:
            self._timer = self.runtime.clock.call_at(min(deadlines), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        now = self.runtime.clock_ms()
        for group in list(self.registry):
            due = self._due_ms(group)
            if due is None or due > now:
                continue
            written = (
                self._fire_classic(group, now)
                if isinstance(group, ClassicGroup)
                else self._fire_modern(group, now)
            )
            if written:
                self._retry_at.pop(group.group_id, None)
            else:
                self._retry_at[group.group_id] = now + RETRY_BACKOFF_MS
        self._retry_at = {
            g: t for g, t in self._retry_at.items() if self.registry.get(g) is not None
        }
        self._expire_offsets(now)
        self._rearm()

    def _fire_modern(self, group: Group, now_ms: int) -> bool:
        """A KIP-848, share or streams group's due timers, as one write."""
        effects: list[share_group.Effect] = []
        try:
            with self._write_operation(group.group_id):
                group = self.registry.get(group.group_id) or group  # the copy it runs on
                if isinstance(group, ConsumerGroup):
                    for member_id in self.consumer.expire_group(group, now_ms, self.topic_meta):
                        log.info("consumer_member_removed", group=group.group_id, member=member_id)
                elif isinstance(group, ShareGroup):
                    effects = self.share.expire_group(group, now_ms)
                elif isinstance(group, StreamsGroup):
                    self.streams.fire(group, now_ms)
        except GroupError as error:
            log.warning("group_timer_not_written", group=group.group_id, error=error.code.name)
            return False
        if effects:  # released once the removal is written
            task = asyncio.get_running_loop().create_task(self.apply(effects))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return True

    def _fire_classic(self, group: ClassicGroup, now_ms: int) -> bool:
        """A classic group's due timers: when they empty the group its record is written
        before any parked request is answered; not written, the group is as it was."""
        saved = classic_snapshot(group)
        effects = self.classic.rebalance.tick_group(group, now_ms)
        if any(isinstance(e, PersistGroup) for e in effects):
            error = self._append(group.group_id, [group_record(group)], now_ms)
            if error != ErrorCode.none:
                self.registry.restore(group.group_id, saved)
                log.warning("group_timer_not_written", group=group.group_id, error=error.name)
                return False
        self._apply_classic([e for e in effects if not isinstance(e, PersistGroup)])
        return True

    def transactional_commit_group(self, group_id: str) -> None:
        """The group a TxnOffsetCommit names when there is none: an empty simple classic group,
        made at once as Kafka makes it (nothing written), which the retention check then keeps
        while the transaction is open and deletes after it if no offset was committed."""
        self.classic.simple_group(group_id, self.runtime.clock_ms())
        with contextlib.suppress(RuntimeError):  # no event loop (a handler called in a test)
            self._rearm()

    def _expire_offsets(self, now_ms: int) -> None:
        """Kafka's ``cleanupGroupMetadata``: tombstones for offsets past their retention, and
        the groups ``cleanup.groups_to_delete`` finds deleted with theirs in the same write (a
        failed write keeps both until the next check)."""
        config = self.runtime.cluster.config
        if now_ms < self._next_retention_check_ms:
            return
        self._next_retention_check_ms = now_ms + config.get_int(
            "offsets.retention.check.interval.ms"
        )
        retention_ms = config.get_int("offsets.retention.minutes") * 60_000
        open_offsets = self.offset_manager.pending.open_offsets()
        expired = self.offset_manager.expired_offsets(now_ms, retention_ms)
        expired = spare_open_offsets(expired, open_offsets)
        for group_id in groups_to_delete(self.registry, self.offsets, expired, open_offsets):
            expired.pop(group_id, None)
            if self.delete_group(group_id) == ErrorCode.none:
                log.info("group_expired", group=group_id)
        for group_id, records in expired.items():
            self._append(group_id, records, now_ms)
