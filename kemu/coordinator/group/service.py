"""The asyncio side of the group coordinator: one per process, shared by every broker.

It owns the group registry and the share-group state machine, feeds them the cluster's topics
and the clock, runs the session-expiry timer, saves share groups when kemu has a data directory
(``persistence``), and carries out the state machine's effects: share state is
initialized through the share persister before the heartbeat is answered, and a departed
member's acquired records are released through the ``share_partitions`` service when one runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import uuid
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import structlog

from kemu.broker.context import Runtime
from kemu.coordinator.group.config import broker_int, group_config_store
from kemu.coordinator.group.persistence import STORE_FILE, ShareGroupStore
from kemu.coordinator.group.registry import GroupRegistry
from kemu.coordinator.group.share_group import (
    Effect,
    HeartbeatRequest,
    HeartbeatResult,
    InitializePartitions,
    MemberRemoved,
    MembershipSettings,
    ShareGroup,
    ShareGroupCoordinator,
    TopicMeta,
)
from kemu.coordinator.share.persister import (
    UNINITIALIZED_START_OFFSET,
    PersistedState,
    SharePartitionKey,
    SharePersister,
)
from kemu.protocol.errors import ErrorCode

log = structlog.get_logger("kemu.group")

SERVICE = "group_coordinator"
PERSISTER_SERVICE = "share_persister"
SHARE_PARTITIONS_SERVICE = "share_partitions"
NO_LEADER_EPOCH = -1


def share_persister(runtime: Runtime) -> SharePersister:
    """The process's share persister: the share coordinator over ``__share_group_state``
    (whatever is registered as ``share_persister`` first, e.g. an in-memory one in tests)."""
    from kemu.coordinator.share.service import ShareCoordinatorService

    persister: SharePersister = runtime.service(PERSISTER_SERVICE, ShareCoordinatorService)
    return persister


class GroupCoordinatorService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.registry = GroupRegistry()
        self.share = ShareGroupCoordinator(self.registry, self.membership_settings)
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        data_dir = runtime.cluster.data_dir
        self.store = ShareGroupStore(data_dir / STORE_FILE if data_dir is not None else None)
        now = runtime.clock_ms()
        for group in self.store.load(now):
            timeout = self.membership_settings(group.group_id).session_timeout_ms
            for member_id, member in group.members.items():
                group.members[member_id] = replace(member, session_deadline_ms=now + timeout)
            self.registry.put(group)
        with contextlib.suppress(RuntimeError):  # no event loop yet: the first heartbeat arms
            self._rearm()

    def persist(self, group_id: str) -> None:
        """Save a share group's durable state after a change (no-op without a data dir)."""
        found = self.registry.get(group_id)
        if found is None:
            self.store.update(group_id, None)
        elif isinstance(found, ShareGroup):
            self.store.update(group_id, found)

    def membership_settings(self, group_id: str) -> MembershipSettings:
        configs = group_config_store(self.runtime)
        return MembershipSettings(
            session_timeout_ms=int(configs.value(group_id, "share.session.timeout.ms")),
            heartbeat_interval_ms=int(configs.value(group_id, "share.heartbeat.interval.ms")),
            max_size=broker_int(self.runtime.cluster.config, "group.share.max.size"),
        )

    def topic_meta(self, name: str) -> TopicMeta | None:
        topic = self.runtime.cluster.topics.get(name)
        if topic is None:
            return None
        return TopicMeta(topic.topic_id, len(topic.partitions))

    async def share_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        result = self.share.heartbeat(request, self.topic_meta, self.runtime.clock_ms())
        if result.changed:
            self.persist(request.group_id)
        self._rearm()
        await self.apply(result.effects)
        return result

    async def apply(self, effects: Iterable[Effect]) -> None:
        for effect in effects:
            try:
                if isinstance(effect, InitializePartitions):
                    await self._initialize(effect)
                elif isinstance(effect, MemberRemoved):
                    await self._release(effect)
            except Exception:
                log.exception("group_effect_failed", effect=repr(effect))

    async def _initialize(self, effect: InitializePartitions) -> None:
        persister = share_persister(self.runtime)
        for topic_id, partition in effect.partitions:
            key = SharePartitionKey(effect.group_id, topic_id, partition)
            # Kafka tracks initialized partitions durably; kemu asks the persister instead, so
            # that state surviving a restart is never reset by a fresh initialization.
            existing = await persister.read_summary(key, NO_LEADER_EPOCH)
            if existing.error == ErrorCode.none and _has_state(existing.state):
                continue
            code = await persister.initialize(key, effect.state_epoch, UNINITIALIZED_START_OFFSET)
            if code != ErrorCode.none:
                log.warning("share_state_initialize_failed", key=str(key), error=code.name)

    async def _release(self, effect: MemberRemoved) -> None:
        log.info(
            "share_member_removed",
            group=effect.group_id,
            member=effect.member_id,
            reason=effect.reason,
        )
        partitions: Any = self.runtime.services.get(SHARE_PARTITIONS_SERVICE)
        release = getattr(partitions, "release_member", None)
        if release is None:
            return
        outcome = release(effect.group_id, effect.member_id)
        if inspect.isawaitable(outcome):
            await outcome

    def forget_share_state(self, group_id: str, topic_ids: set[uuid.UUID] | None = None) -> None:
        """Share state was deleted or rewritten by an admin (DeleteGroups, Alter/Delete share
        group offsets): leaders caching it must reload it. Calls the share-partition service's
        ``forget_group(group_id, topic_ids)`` when it has one (None: every topic)."""
        partitions: Any = self.runtime.services.get(SHARE_PARTITIONS_SERVICE)
        forget = getattr(partitions, "forget_group", None)
        if forget is not None:
            forget(group_id, topic_ids)

    # --- session expiry ------------------------------------------------------------------------

    def _rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.share.next_deadline_ms()
        if deadline is None:
            return
        delay = max(0, deadline - self.runtime.clock_ms()) / 1000
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        effects = self.share.expire_sessions(self.runtime.clock_ms())
        for group_id in {e.group_id for e in effects}:
            self.persist(group_id)
        if effects:
            task = asyncio.get_running_loop().create_task(self.apply(effects))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._rearm()


def _has_state(state: PersistedState | None) -> bool:
    return state is not None and (
        state.start_offset != UNINITIALIZED_START_OFFSET or state.state_epoch > 0
    )


def group_coordinator(runtime: Runtime) -> GroupCoordinatorService:
    service: GroupCoordinatorService = runtime.service(SERVICE, GroupCoordinatorService)
    return service
