"""The share-group half of the group coordinator service (``GroupCoordinatorService`` mixes it
in): KIP-932 heartbeats, and carrying out their effects. Share state is initialized through the
share persister just after the heartbeat is answered (with
``kemu.group.share.initialize.before.answer``, ``--timing fast``, before it, and the member's next
heartbeat is run at once); a departed member's acquired records are released through the share
leaders' port when one runs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING

import structlog

from kemu.cluster.context import Runtime
from kemu.coordinator.group.assignor import TopicPartition
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.modern_group import TopicMeta
from kemu.coordinator.group.offset_manager import Record
from kemu.coordinator.group.ports import SHARE_LEADERS
from kemu.coordinator.group.share import records as share_records
from kemu.coordinator.group.share.deletion import (
    Partitions,
    deleting_all,
    offsets_deleted,
    offsets_deleting,
)
from kemu.coordinator.group.share.group import (
    Effect,
    InitializePartitions,
    MemberRemoved,
    ShareGroup,
    ShareGroupCoordinator,
    ShareHeartbeat,
    ShareHeartbeatResult,
)
from kemu.coordinator.group.timers import RETRY_BACKOFF_MS
from kemu.coordinator.share.persister import (
    UNINITIALIZED_START_OFFSET,
    PersistedState,
    SharePartitionKey,
)
from kemu.protocol.errors import ErrorCode

log = structlog.get_logger("kemu.group")

# --timing fast: a share heartbeat waits for the share-state initialization it asks for
INITIALIZE_FIRST = "kemu.group.share.initialize.before.answer"
NO_LEADER_EPOCH = -1


class ShareMembership:
    """Share-group heartbeats and their effects, on the service's registry and clock."""

    runtime: Runtime
    share: ShareGroupCoordinator
    _share_log: share_records.ShareImageBuilder  # what the log holds of each share group
    _tasks: set[asyncio.Task[None]]

    if TYPE_CHECKING:

        def _rearm(self) -> None: ...

        def _write_operation(self, group_id: str) -> AbstractContextManager[list[Record]]: ...

        def topic_meta(self, name: str) -> TopicMeta | None: ...

        def write_group(self, group_id: str) -> ErrorCode: ...

        def _topic_name(self, topic_id: uuid.UUID) -> str: ...

    async def share_heartbeat(self, request: ShareHeartbeat) -> ShareHeartbeatResult:
        """KIP-932; raises ``GroupError`` with Kafka's error (Kafka's error for a failed append
        of the group's records too: then the group is as it was and no effect is carried
        out)."""
        result = self._share_heartbeat(request)
        # As Kafka's coordinator: share state is initialized after the heartbeat is answered;
        # a later heartbeat assigns what it initialized. With
        # kemu.group.share.initialize.before.answer (--timing fast) the initialization is
        # awaited and that later heartbeat happens at once, so the answer carries the partitions.
        initializing = self._initialize_in_background(result)
        if initializing is not None and self.runtime.cluster.config.get_bool(INITIALIZE_FIRST):
            await asyncio.wait({initializing})  # not cancelled with the request
            result = self._heartbeat_again(request, result)
        await self.apply(e for e in result.effects if not isinstance(e, InitializePartitions))
        return result

    def _share_heartbeat(self, request: ShareHeartbeat) -> ShareHeartbeatResult:
        try:
            with self._write_operation(request.group_id):
                result = self.share.heartbeat(request, self.topic_meta, self.runtime.clock_ms())
        finally:
            self._rearm()
        return result

    def _initialize_in_background(self, result: ShareHeartbeatResult) -> asyncio.Task[None] | None:
        initializing = [e for e in result.effects if isinstance(e, InitializePartitions)]
        if not initializing:
            return None
        task = asyncio.get_running_loop().create_task(self.apply(initializing))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _heartbeat_again(
        self, request: ShareHeartbeat, first: ShareHeartbeatResult
    ) -> ShareHeartbeatResult:
        """The member's next plain heartbeat, now that its partitions' share state is
        initialized: what Kafka answers one heartbeat interval later. A member gone or fenced
        in between keeps the first answer (its own next heartbeat learns it)."""
        again = replace(request, member_epoch=first.member_epoch, subscribed_topic_names=None)
        try:
            second = self._share_heartbeat(again)
        except GroupError:
            return first
        self._initialize_in_background(second)  # partitions added in between, as usual
        return replace(
            second,
            assignment=second.assignment if second.assignment is not None else first.assignment,
            effects=first.effects,
            changed=first.changed or second.changed,
        )

    async def background_done(self) -> None:
        """Wait until the work started in the background so far (share-state initialization,
        regex resolutions) is done."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def remove_share_member(self, group_id: str, member_id: str, reason: str) -> None:
        """Remove a share-group member now (raises GroupError for an unknown group or member);
        what it held is released."""
        try:
            with self._write_operation(group_id):
                effect = self.share.remove_member(group_id, member_id, reason)
        finally:
            self._rearm()
        await self.apply((effect,))

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
        from kemu.coordinator.share.service import share_persister

        persister = share_persister(self.runtime)
        done: list[TopicPartition] = []
        failed: list[TopicPartition] = []
        try:
            for topic_id, partition in effect.partitions:
                key = SharePartitionKey(effect.group_id, topic_id, partition)
                # Kafka tracks initialized partitions durably; kemu asks the persister instead,
                # so that state surviving a restart is never reset by a fresh initialization.
                existing = await persister.read_summary(key, NO_LEADER_EPOCH)
                if existing.error == ErrorCode.none and _has_state(existing.state):
                    done.append((topic_id, partition))
                    continue
                start = 0 if topic_id in effect.from_start else UNINITIALIZED_START_OFFSET
                code = await persister.initialize(key, effect.state_epoch, start)
                if code != ErrorCode.none:
                    log.warning("share_state_initialize_failed", key=str(key), error=code.name)
                    failed.append((topic_id, partition))
                else:
                    done.append((topic_id, partition))
        finally:
            asked = set(effect.partitions)
            failed.extend(sorted(asked - set(done) - set(failed)))  # not reached: try again
            self._initialized(effect.group_id, done, failed)

    def _initialized(
        self, group_id: str, done: list[TopicPartition], failed: list[TopicPartition]
    ) -> None:
        """Record what the persister initialized (assignable from the next heartbeat) and
        what it could not (asked for again), written first: a failed write leaves the group
        as it was and is tried again after a backoff, as Kafka retries a failed timer."""
        try:
            with self._write_operation(group_id):
                self.share.partitions_initialized(group_id, done)
                self.share.partitions_initialized(group_id, failed, succeeded=False)
        except GroupError as error:
            log.warning("share_state_initialized_not_written", group=group_id, error=error.code)
            self.runtime.clock.call_later(
                RETRY_BACKOFF_MS, self._initialized, group_id, done, failed
            )

    def share_offsets_altering(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        topic_ids: Iterable[uuid.UUID] = (),
    ) -> ShareGroup:
        """AlterShareGroupOffsets, before the persister: the empty group, created if need be,
        with ``partitions`` being initialized again, written (Kafka writes no more than its
        ShareGroupStatePartitionMetadata record: a new group's epochs are not written). Raises
        ``GroupError``: a group with members or of another type, or a failed write (then the
        group is as it was; one this created is gone). ``share_offsets_altered`` follows."""
        try:
            with self._write_operation(group_id):
                self.share.empty_group_for_offsets(group_id, create=True)
                self.share.initializing_again(
                    group_id, partitions, topic_ids, now_ms=self.runtime.clock_ms()
                )
        finally:
            self._rearm()
        return self.share.describe(group_id)

    def share_offsets_altered(
        self, group_id: str, done: list[TopicPartition], failed: list[TopicPartition]
    ) -> None:
        """AlterShareGroupOffsets, after the persister: what it initialized again is
        initialized, what it could not is no longer being initialized; written (a failed write
        is tried again after a backoff), as a heartbeat's initialization is."""
        self._initialized(group_id, done, failed)

    def share_offsets_deleting(
        self, group_id: str, topics: Mapping[uuid.UUID, int]
    ) -> Partitions | None:
        """DeleteShareGroupOffsets, before the persister: the group's ShareGroupStatePartition
        Metadata written with the eligible ``topics`` (ids: partition counts) moved to deleting
        (``deletion.offsets_deleting``), even unchanged, as Kafka writes it; the partitions to
        delete. None, nothing written, when the log holds no such record of the group (Kafka
        then answers no topic). Raises ``GroupError`` (unknown, of another type, with members,
        a failed write)."""
        try:
            with self._write_operation(group_id) as first:
                group = self.share.empty_group_for_offsets(group_id, create=False)
                held = self._share_log.images.get(group_id)
                if held is None or held.state_partitions is None:
                    return None
                eligible = offsets_deleting(group, topics)
                first += self._state_partitions_unchanged(group)
        finally:
            self._rearm()
        return eligible

    def share_offsets_deleted(self, group_id: str, topic_ids: set[uuid.UUID]) -> ErrorCode:
        """DeleteShareGroupOffsets, after the persister deleted ``topic_ids``' state: the record
        written again without them deleting (none deleted: nothing written). The error of a
        failed write."""
        if not topic_ids:
            return ErrorCode.none
        try:
            with self._write_operation(group_id):
                group = self.share.registry.get(group_id)
                if isinstance(group, ShareGroup):
                    offsets_deleted(group, topic_ids)
        except GroupError as error:
            return error.code
        finally:
            self._rearm()
        return ErrorCode.none

    def share_group_deleting(self, group_id: str) -> Partitions:
        """DeleteGroups of the empty share group, before the persister: every topic it has
        share state of moved to deleting (``deletion.deleting_all``), written when the log holds
        its ShareGroupStatePartitionMetadata (even unchanged); the partitions to delete. Raises
        ``GroupError`` (a failed write)."""
        try:
            with self._write_operation(group_id) as first:
                group = self.share.describe(group_id)
                candidates = deleting_all(group, self._partition_count)
                first += self._state_partitions_unchanged(group)
        finally:
            self._rearm()
        return candidates

    def _state_partitions_unchanged(self, group: ShareGroup) -> list[Record]:
        return [
            *share_records.state_partitions_rewritten(
                group.group_id,
                self._share_log.images.get(group.group_id),
                share_records.image_of(group, self._topic_name),
            )
        ]

    def _partition_count(self, topic_id: uuid.UUID) -> int | None:
        meta = self.topic_meta(self._topic_name(topic_id))
        return meta.partitions if meta is not None and meta.topic_id == topic_id else None

    async def _release(self, effect: MemberRemoved) -> None:
        log.info(
            "share_member_removed",
            group=effect.group_id,
            member=effect.member_id,
            reason=effect.reason,
        )
        leaders = self.runtime.services.built(SHARE_LEADERS)
        if leaders is not None:
            await leaders.release_member(effect.group_id, effect.member_id)

    def share_topic_deleted(self, topic_id: uuid.UUID) -> None:
        """A topic was deleted: each share group with share state of it has its
        ShareGroupStatePartitionMetadata written again without the topic, as Kafka's
        coordinator does on topic deletion (the share coordinator tombstones the state itself).
        A failed write is tried again after a backoff."""
        failed = []
        for group_id in self.share.groups_with_state_of(topic_id):
            try:
                with self._write_operation(group_id):
                    self.share.topic_deleted(group_id, topic_id)
            except GroupError as error:
                log.warning("share_topic_deletion_not_written", group=group_id, error=error.code)
                failed.append(group_id)
        self._rearm()
        if failed:
            self.runtime.clock.call_later(RETRY_BACKOFF_MS, self.share_topic_deleted, topic_id)

    def forget_share_state(self, group_id: str, topic_ids: set[uuid.UUID] | None = None) -> None:
        """Share state was deleted or rewritten by an admin (DeleteGroups, Alter/Delete share
        group offsets): leaders caching it must reload it (``topic_ids`` None: every topic)."""
        leaders = self.runtime.services.built(SHARE_LEADERS)
        if leaders is not None:
            leaders.forget_group(group_id, topic_ids)


def _has_state(state: PersistedState | None) -> bool:
    return state is not None and (
        state.start_offset != UNINITIALIZED_START_OFFSET or state.state_epoch > 0
    )
