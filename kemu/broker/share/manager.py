"""The share-partition manager: one per process, shared by every virtual broker.

It owns an actor per (group, topic-partition) and the share-session cache, and is the runtime
service ``share_partitions``. The group coordinator calls ``release_member(group, member)``
when a member leaves or its session times out; ShareFetch and ShareAcknowledge reach the
actors through it.

A share session also ends when the client connection that opened it closes (a consumer that
crashed or was killed): the member's records in it are released at once, as Kafka's
ConnectionDisconnectListener does, rather than when their locks expire.

A member that leaves gracefully may still send its final acknowledgements (ShareAcknowledge
with epoch -1) after its leave heartbeat was handled: librdkafka does. So while the member
still has share sessions, its records are released when those close, or after
``departure_grace_s`` at the latest (a crashed member never closes them).

The persister is the runtime service ``share_persister``: the share coordinator over
``__share_group_state`` (unit tests may register an in-memory one first).
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kemu.broker.share.actor import SharePartitionActor
from kemu.broker.share.sessions import SessionKey, ShareSession, ShareSessionCache
from kemu.cluster.services import Service
from kemu.coordinator.group.ports import SHARE_LEADERS
from kemu.coordinator.share.persister import (
    SharePartitionKey,
    SharePersister,
)

if TYPE_CHECKING:
    from kemu.cluster.context import Runtime

SERVICE = "share_partitions"
ARCHIVING = 3  # the persisted delivery state of a record whose dead-letter write is pending
DEPARTURE_GRACE_S = 5.0


def share_persister(runtime: Runtime) -> SharePersister:
    """The share coordinator over ``__share_group_state``: share partitions always persist
    through it, so what they hold survives a restart."""
    from kemu.coordinator.share.service import share_coordinator

    return share_coordinator(runtime)


class SharePartitionManager:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        runtime.services.provide(SHARE_LEADERS, self)  # the group coordinator's port
        self.actors: dict[SharePartitionKey, SharePartitionActor] = {}
        self.sessions = ShareSessionCache(
            runtime.cluster.config.get_int("group.share.max.share.sessions")
        )
        self.departure_grace_s = DEPARTURE_GRACE_S
        self._tasks: set[asyncio.Task[None]] = set()
        self._grace_timers: set[asyncio.TimerHandle] = set()
        # every actor still referenced, retired ones too: a retired actor's lock expiry may be
        # pending when the broker stops
        self._every_actor: weakref.WeakSet[SharePartitionActor] = weakref.WeakSet()

    def actor(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartitionActor:
        key = SharePartitionKey(group_id, topic_id, partition)
        found = self.actors.get(key)
        if found is None:
            found = self.actors[key] = SharePartitionActor(
                key, self.runtime, lambda: share_persister(self.runtime)
            )
            self._every_actor.add(found)
        return found

    def existing(
        self, group_id: str, topic_id: uuid.UUID, partition: int
    ) -> SharePartitionActor | None:
        return self.actors.get(SharePartitionKey(group_id, topic_id, partition))

    async def release_member(self, group_id: str, member_id: str) -> None:
        """The member left the group: release all it holds, now or once its sessions had the
        chance to close (see the module docstring)."""
        if not self.sessions.of_member(group_id, member_id) or self.departure_grace_s <= 0:
            await self._release_departed(group_id, member_id)
            return
        loop = asyncio.get_running_loop()

        def later() -> None:
            self._grace_timers.discard(timer)
            task = loop.create_task(self._release_departed(group_id, member_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        timer = loop.call_later(self.departure_grace_s, later)
        self._grace_timers.add(timer)

    async def stop(self) -> None:
        """The broker stops: cancel the departure timers and every actor's lock timer, then
        cancel and await the work they started (none is left pending when the loop closes)."""
        for timer in self._grace_timers:
            timer.cancel()
        self._grace_timers.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for actor in list(self._every_actor):
            await actor.stop()

    async def _release_departed(self, group_id: str, member_id: str) -> None:
        self.sessions.remove_member(group_id, member_id)
        for key, actor in list(self.actors.items()):
            if key.group_id == group_id:
                await actor.release_member(member_id)

    async def close_session(self, session: ShareSession) -> None:
        """A session ended (epoch -1): release the member's records in its partitions."""
        self.sessions.close(session.key)
        await self._release_session(session)

    def connection_closed(self, key: SessionKey, connection: object) -> None:
        """The client connection ``connection`` that opened session ``key`` closed."""
        session = self.sessions.close_opened_by(key, connection)
        if session is None:
            return  # closed with -1 already, or replaced by a session from another connection
        task = asyncio.get_running_loop().create_task(self._release_session(session))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _release_session(self, session: ShareSession) -> None:
        _, group_id, member_id = session.key
        for topic_id, index in session.partitions:
            actor = self.existing(group_id, topic_id, index)
            if actor is not None:
                await actor.release_member(member_id)

    async def resume_dead_letters(self, state_partitions: Iterable[int] | None = None) -> int:
        """KIP-1191: load every share partition whose persisted state has ARCHIVING records
        (dead letters still to write) and is not loaded, so that the writes do not wait for a
        consumer: after a restart, or when a transaction's marker resolved staged REJECTs while
        the partition was not loaded. Returns how many it loaded."""
        from kemu.broker.share.settings import share_settings
        from kemu.coordinator.share.service import ShareCoordinatorService

        persister = share_persister(self.runtime)
        if not isinstance(persister, ShareCoordinatorService):
            return 0  # a test's in-memory persister
        indexes = sorted(persister.shards if state_partitions is None else set(state_partitions))
        # markers written before anyone listened (a transaction recovery completes at start-up)
        persister.follow_markers(i for i in indexes if i in persister.shards)
        shards = [persister.shards[i] for i in indexes if i in persister.shards]
        pending = [
            key
            for shard in shards
            for key, state in shard
            if any(
                batch.delivery_state == ARCHIVING and batch.last_offset >= state.start_offset
                for batch in state.batches
            )
        ]
        loaded = 0
        for key in pending:
            topic = self.runtime.cluster.topics_by_id.get(key.topic_id)
            if topic is None or not 0 <= key.partition < len(topic.partitions):
                continue
            actor = self.actor(key.group_id, key.topic_id, key.partition)
            if actor.core is not None:
                continue  # loaded: it wrote them already, or is writing them now
            settings = share_settings(self.runtime, key.group_id)
            await actor.resume(topic.partitions[key.partition], settings)
            loaded += 1
        return loaded

    def reload_partition(self, topic_id: uuid.UUID, partition: int) -> int:
        """The source partition's leader moved: every group's share partition there reloads
        its state from the share coordinator on next use. Returns how many there were."""
        actors = [
            actor
            for key, actor in self.actors.items()
            if key.topic_id == topic_id and key.partition == partition
        ]
        for actor in actors:
            task = asyncio.get_running_loop().create_task(actor.reload())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return len(actors)

    def forget_group(self, group_id: str, topic_ids: set[uuid.UUID] | None = None) -> None:
        """An admin deleted or rewrote the group's share state (DeleteGroups, Alter/Delete share
        group offsets): drop the cached partitions (``topic_ids`` None: all) so that the next
        request reloads them."""
        for key in list(self.actors):
            if key.group_id == group_id and (topic_ids is None or key.topic_id in topic_ids):
                self.actors.pop(key).retire()

    def forget_topic(self, topic_id: uuid.UUID) -> None:
        """A topic was deleted: drop its share partitions; sessions holding them mark them
        deleted."""
        self.sessions.forget_topic(topic_id)
        for key in [k for k in self.actors if k.topic_id == topic_id]:
            self.actors.pop(key).retire()


SHARE_PARTITIONS = Service(SERVICE, SharePartitionManager)


def share_partitions(runtime: Runtime) -> SharePartitionManager:
    return runtime.services.get(SHARE_PARTITIONS)
