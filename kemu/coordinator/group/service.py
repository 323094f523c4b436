"""The asyncio side of the group coordinator: one per process, shared by every broker.

It owns the group registry and the group types' state machines, feeds them the cluster's
topics and the clock, runs their timers (``timers.GroupTimers``, mixed in: a timer's write that
fails leaves the group as it was and fires again after a backoff), and carries out the state
machines' effects: share state is initialized through the share persister just after the
heartbeat is answered (as Kafka does; a later heartbeat assigns the partitions; with
``kemu.group.share.initialize.before.answer``, ``--timing fast``, before it, and the member's
next heartbeat is run at once), and a departed member's acquired records are released through
the ``share_partitions`` service when one runs (the share-group half:
``share.service.ShareMembership``, mixed in).

Every group type and the committed offsets live in ``__consumer_offsets`` as Kafka's records
(``offsets_log``; ``records``, ``consumer.records``, ``share.records``, ``streams.records``),
replayed when the service starts (``load``, which also loads one coordinator partition). An
operation is Kafka's write operation (``_write_operation``): the state machine runs on a copy
of the group, the records that bring the log up to date with the copy (each type's ``diff``
against what the log holds) are appended as one batch, and only then does the group change and
the answer go out: a KIP-848, share or streams group becomes what replaying the records gives
(each type's ``group_from_image``, the load's code), with what only memory holds (sessions,
...: ``snapshots.with_memory_state``) from the copy. When the append fails the group was
never touched and the answer is Kafka's error for it (NOT_COORDINATOR for a storage error). A
timer fires the same way, and a failed one is retried after Kafka's 500 ms backoff. There is
no ``await`` between the copy and the append, so operations never interleave. A parked
JoinGroup or SyncGroup is an asyncio future the state machine holds as its waiter; the service
resolves it when an effect answers it. A KIP-848 group's regexes are resolved just after the
heartbeat that asked for it (``resolve_pending_regexes``, on the next loop tick), as Kafka's
coordinator resolves them on its executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

import structlog

from kemu.cluster.clock import TimerHandle
from kemu.cluster.context import Runtime
from kemu.cluster.services import Service
from kemu.coordinator.group import metadata_hash
from kemu.coordinator.group.classic import group as classic
from kemu.coordinator.group.classic.group import (
    ClassicGroup,
    ClassicGroupCoordinator,
    JoinCompleted,
    JoinRequest,
    JoinResponse,
    LeaveResult,
    LeavingMember,
    PersistGroup,
    StoreAssignment,
    SyncCompleted,
    SyncRequest,
    SyncResponse,
)
from kemu.coordinator.group.classic.messages import UNKNOWN_MEMBER_ID, join_error
from kemu.coordinator.group.consumer.group import (
    ConsumerGroup,
    ConsumerGroupCoordinator,
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
)
from kemu.coordinator.group.consumer.persistence import (
    ImageBuilder,
    diff,
    group_from_image,
    image_of,
)
from kemu.coordinator.group.consumer.records import ConsumerRecordKey
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.modern_group import TopicMeta, subscribed_hash
from kemu.coordinator.group.offset_manager import (
    OffsetManager,
    Record,
    group_record,
    load_group,
)
from kemu.coordinator.group.offset_operations import OffsetOperations
from kemu.coordinator.group.offsets import OffsetStore
from kemu.coordinator.group.offsets_log import TOPIC as OFFSETS_TOPIC
from kemu.coordinator.group.offsets_log import LoggedMarker, OffsetsLog
from kemu.coordinator.group.records import GroupMetadataKey, GroupMetadataValue
from kemu.coordinator.group.registry import Group, GroupRegistry
from kemu.coordinator.group.settings import GroupSettings
from kemu.coordinator.group.share import records as share_records
from kemu.coordinator.group.share.group import ShareGroup, ShareGroupCoordinator
from kemu.coordinator.group.share.legacy import migrate_share_groups_file
from kemu.coordinator.group.share.records import ShareImageBuilder, ShareRecordKey
from kemu.coordinator.group.share.service import ShareMembership
from kemu.coordinator.group.snapshots import snapshot, with_memory_state
from kemu.coordinator.group.streams.model import (
    StreamsGroup,
    StreamsHeartbeat,
    StreamsHeartbeatResult,
)
from kemu.coordinator.group.streams.records import StreamsImageBuilder, StreamsRecordKey
from kemu.coordinator.group.streams.records import group_from_image as streams_group_from_image
from kemu.coordinator.group.streams.service import NotCreatable, StreamsGroups
from kemu.coordinator.group.timers import RETRY_BACKOFF_MS, GroupTimers, first_retention_check_ms
from kemu.protocol.errors import ErrorCode

log = structlog.get_logger("kemu.group")

SERVICE = "group_coordinator"


class GroupCoordinatorService(OffsetOperations, ShareMembership, GroupTimers, GroupSettings):
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.registry = GroupRegistry()
        self.share = ShareGroupCoordinator(self.registry, self.membership_settings)
        self.classic = ClassicGroupCoordinator(self.registry, self.classic_settings)
        self.consumer = ConsumerGroupCoordinator(
            self.registry, self.consumer_settings, lambda: list(runtime.cluster.topics)
        )
        self.streams = StreamsGroups(runtime, self.registry, self.topic_meta)
        self.offsets = OffsetStore()
        self.offset_manager = OffsetManager(
            self.classic,
            self.offsets,
            self.consumer,
            runtime.cluster.config.get_int("offset.metadata.max.bytes"),
            self._topic_id,
        )
        self.offsets_log = OffsetsLog(runtime.cluster)
        self._timer: TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._next_retention_check_ms = first_retention_check_ms(runtime)
        self._retry_at: dict[str, int] = {}
        # (topic id, name, racks of each partition's replicas) -> Kafka's topic hash
        self._topic_hashes: dict[tuple[uuid.UUID, str, tuple[tuple[str, ...], ...]], int] = {}
        # What __consumer_offsets holds of each KIP-848 and share group (streams: in
        # ``StreamsGroups.log``): the records written, replayed as the load replays them.
        self._consumer_log = ImageBuilder()
        self._share_log = ShareImageBuilder()
        self.load()
        self.registry.deletion_listeners.append(self._on_group_deleted)
        now_ms = runtime.clock_ms()
        migrate_share_groups_file(
            runtime.cluster.data_dir,
            lambda group_id: self.registry.get(group_id) is not None,
            lambda group: self._put_share_group(group, now_ms),
            lambda group_id: self.write_group(group_id) == ErrorCode.none,
        )
        with contextlib.suppress(RuntimeError):  # no event loop yet: the first heartbeat arms
            self._rearm()

    def write_group(self, group_id: str) -> ErrorCode:
        """Write what changed in a KIP-848, share or streams group since the log last saw it
        (tombstones when it is gone), as one batch; the log's image moves only when written."""
        return self._write_group(group_id, [])

    def consumer_heartbeat(self, request: ConsumerHeartbeat) -> ConsumerHeartbeatResult:
        """KIP-848; raises ``GroupError`` with Kafka's error. The group's changed records are
        written before the answer; when they cannot be, the answer is Kafka's error for the
        failed append and the group is as it was."""
        before = self.registry.get(request.group_id)
        with self._write_operation(request.group_id) as first:
            result = self.consumer.heartbeat(request, self.topic_meta, self.runtime.clock_ms())
            first += self._taken_over(request.group_id, before)
        self._rearm()
        if self.consumer.pending_regexes:
            with contextlib.suppress(RuntimeError):  # no loop: resolve_pending_regexes later
                asyncio.get_running_loop().call_soon(self.resolve_pending_regexes)
        return result

    def resolve_pending_regexes(self) -> None:
        """Resolve the regexes a heartbeat asked for, after answering it, as Kafka's coordinator
        does on its executor; a group whose epoch goes up writes it, and its members get the
        regex's topics on their next heartbeat."""
        now = self.runtime.clock_ms()
        failed = False
        for group_id in list(self.consumer.pending_regexes):
            try:
                with self._write_operation(group_id):
                    self.consumer.resolve_regexes(group_id, self.topic_meta, now)
            except GroupError:  # still pending: resolved again after a backoff
                failed = True
        if failed:
            self.runtime.clock.call_later(RETRY_BACKOFF_MS, self.resolve_pending_regexes)

    @contextlib.contextmanager
    def _write_operation(self, group_id: str) -> Iterator[list[Record]]:
        """Kafka's write operation: the body runs on a copy of the group (the group as it is
        stays untouched; it may add records of its own to the list it is given, written first);
        the records that bring the log up to the copy are appended as one batch; once written,
        a KIP-848 group is what replaying them gives (``_replayed``: the load's own code), with
        what only memory holds (sessions, ...) from the copy. A refusal (``GroupError``) or a
        failed append leaves the group as it was; a failed append raises ``GroupError`` with
        Kafka's error."""
        live = self.registry.get(group_id)
        if live is not None:
            self.registry.restore(group_id, snapshot(live))
        pending_regexes = self.consumer.pending_regexes.get(group_id)
        first: list[Record] = []

        def undo() -> None:
            self.registry.restore(group_id, live)
            self.consumer.pending_regexes.pop(group_id, None)
            if pending_regexes is not None:
                self.consumer.pending_regexes[group_id] = pending_regexes

        try:
            yield first
        except GroupError:
            undo()
            raise
        error, wrote = self._group_records_written(group_id, first)
        if error != ErrorCode.none:
            undo()
            raise GroupError(error)
        self._replayed(group_id, live, wrote)

    def _replayed(self, group_id: str, live: Group | None, wrote: bool) -> None:
        """A KIP-848, share or streams group just written becomes the group its records
        rebuild (the load's code), with what only memory holds from the copy the operation
        changed; the group object stays the same one (the describe APIs may hold it). With
        nothing written, what the records hold did not change: the copy is taken as it is."""
        ran = self.registry.get(group_id)
        now: Group | None = ran
        if not wrote:
            pass
        elif isinstance(ran, ConsumerGroup):
            image = self._consumer_log.images.get(group_id)
            if image is not None and image.has_metadata:
                now = with_memory_state(group_from_image(group_id, image, 0, 0), ran)
        elif isinstance(ran, ShareGroup):
            written = self._share_log.images.get(group_id)
            if written is not None and written.holds_group:
                replayed = share_records.group_from_image(group_id, written, 0)
                now = with_memory_state(replayed, ran)
        elif isinstance(ran, StreamsGroup):
            held = self.streams.log.images.get(group_id)
            rebuilt = streams_group_from_image(group_id, held, 0, 0) if held else None
            if rebuilt is not None:
                now = with_memory_state(rebuilt, ran)
        if live is not None and now is not None and type(live) is type(now):
            vars(live).update(vars(now))
            now = live
        self.registry.restore(group_id, now)

    def _taken_over(self, group_id: str, before: Group | None) -> list[Record]:
        """The tombstone of the empty classic group ``before`` if a KIP-848-style group took
        it over (its metadata goes, its offsets stay)."""
        if isinstance(before, ClassicGroup) and not isinstance(
            self.registry.get(group_id), ClassicGroup
        ):
            return [(GroupMetadataKey(group_id), None)]
        return []

    def _write_group(
        self, group_id: str, first: list[Record], last: Iterable[Record] = ()
    ) -> ErrorCode:
        return self._group_records_written(group_id, first, last)[0]

    def _group_records_written(
        self, group_id: str, first: list[Record], last: Iterable[Record] = ()
    ) -> tuple[ErrorCode, bool]:
        """Append what changed in the group since the log last saw it: the error, and whether
        there was anything to write."""
        found = self.registry.get(group_id)
        consumer_image = image_of(found) if isinstance(found, ConsumerGroup) else None
        share_image = (
            share_records.image_of(found, self._topic_name)
            if isinstance(found, ShareGroup)
            else None
        )
        records = [
            *first,
            *diff(group_id, self._consumer_log.images.get(group_id), consumer_image),
            *share_records.diff(group_id, self._share_log.images.get(group_id), share_image),
            *self.streams.pending(group_id),
            *last,
        ]
        if not records:
            return ErrorCode.none, False
        return self._append(group_id, records, self.runtime.clock_ms()), True

    def streams_heartbeat(
        self,
        request: StreamsHeartbeat,
        not_creatable: NotCreatable = lambda names: [],
    ) -> StreamsHeartbeatResult:
        """KIP-1071; raises ``GroupError`` with Kafka's error (Kafka's error for a failed
        append of the group's records too: then the group is as it was). Missing internal
        topics are created before the answer, unless ``not_creatable`` names some of them (the
        principal may not create them): then none is, and the status says why."""
        before = self.registry.get(request.group_id)
        try:
            with self._write_operation(request.group_id) as first:
                result = self.streams.heartbeat(request)
                first += self._taken_over(request.group_id, before)
            return self.streams.create_topics(request.group_id, result, not_creatable)
        finally:
            self._rearm()

    def streams_task_topics(self, group_id: str) -> dict[str, list[str]]:
        return self.streams.task_topics(group_id)

    def _topic_name(self, topic_id: uuid.UUID) -> str:
        topic = self.runtime.cluster.topics_by_id.get(topic_id)
        return topic.name if topic is not None else ""

    def _topic_id(self, name: str) -> uuid.UUID | None:
        topic = self.runtime.cluster.topics.get(name)
        return topic.topic_id if topic is not None else None

    def topic_meta(self, name: str) -> TopicMeta | None:
        topic = self.runtime.cluster.topics.get(name)
        if topic is None:
            return None
        nodes = self.runtime.cluster.nodes
        racks = tuple(
            tuple(rack for n in p.replicas if n in nodes and (rack := nodes[n].rack) is not None)
            for p in topic.partitions
        )
        key = (topic.topic_id, name, racks)
        topic_hash = self._topic_hashes.get(key)
        if topic_hash is None:
            if len(self._topic_hashes) > 10_000:  # topics come and go: start again
                self._topic_hashes.clear()
            topic_hash = self._topic_hashes[key] = metadata_hash.topic_hash(*key)
        return TopicMeta(topic.topic_id, len(topic.partitions), topic_hash)

    # --- classic groups ------------------------------------------------------------------------

    async def join_group(self, request: JoinRequest) -> JoinResponse:
        """JoinGroup. The two joins that write (a new group's Empty record; a static member
        taking its old id's place in a Stable group) write before anything is answered; when
        the append fails the group is put back as it was (a new group: gone, an empty KIP-848
        group it took over: back) and the join gets Kafka's error for the failed append, as
        Kafka's ``classicGroupJoinToClassicGroup`` and ``updateStaticMemberThenRebalance...``
        do. A MEMBER_ID_REQUIRED answer stands (Kafka sends it before the append)."""
        waiter: asyncio.Future[JoinResponse] = asyncio.get_running_loop().create_future()
        group_id = request.group_id
        before = self.registry.get(group_id)
        saved = snapshot(before)
        now = self.runtime.clock_ms()
        effects = self.classic.join(request, waiter, now)
        if any(isinstance(e, PersistGroup) for e in effects):
            group = self.classic.group(group_id)
            written = [group_record(group)] if group is not None else []
            # An empty KIP-848 group taken over: its tombstones first, as Kafka writes them.
            error = self._write_group(group_id, [], written)
            if error != ErrorCode.none:
                effects = self._join_not_written(request, waiter, effects, saved, error)
            effects = [e for e in effects if not isinstance(e, PersistGroup)]
        self._apply_classic(effects)
        return await waiter

    def _join_not_written(
        self,
        request: JoinRequest,
        waiter: asyncio.Future[JoinResponse],
        effects: list[classic.Effect],
        saved: Group | None,
        error: ErrorCode,
    ) -> list[classic.Effect]:
        """The join's records were not written: the group as it was, the answers already given
        before the append in Kafka (fenced old ids, MEMBER_ID_REQUIRED) stand, and a parked
        joiner gets ``error``."""
        self.registry.restore(request.group_id, saved)
        kept: list[classic.Effect] = [
            e
            for e in effects
            if isinstance(e, JoinCompleted | SyncCompleted)
            and (e.waiter is not waiter or e.response.error != ErrorCode.none)
        ]
        answered = {id(e.waiter) for e in kept if isinstance(e, JoinCompleted | SyncCompleted)}
        if isinstance(saved, ClassicGroup):
            for member in saved.members.values():  # answered (fenced) when it was replaced
                if id(member.join_waiter) in answered:
                    member.join_waiter = None
                if id(member.sync_waiter) in answered:
                    member.sync_waiter = None
        if any(isinstance(e, JoinCompleted) and e.waiter is waiter for e in kept):
            return kept
        answer = join_error(error)
        if isinstance(saved, ClassicGroup):
            answer = JoinResponse(
                error,
                UNKNOWN_MEMBER_ID,
                saved.generation_id,
                saved.protocol_type or None,
                saved.protocol_name,
                saved.leader_id or "",
            )
        log.warning("join_group_not_written", group=request.group_id, error=error.name)
        return [*kept, JoinCompleted(waiter, answer)]

    async def sync_group(self, request: SyncRequest) -> SyncResponse:
        waiter: asyncio.Future[SyncResponse] = asyncio.get_running_loop().create_future()
        self._apply_classic(self.classic.sync(request, waiter, self.runtime.clock_ms()))
        return await waiter

    def heartbeat(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> ErrorCode:
        now = self.runtime.clock_ms()
        error = self.classic.heartbeat(group_id, member_id, generation_id, group_instance_id, now)
        self._rearm()
        return error

    def leave_group(self, group_id: str, members: list[LeavingMember]) -> LeaveResult:
        """LeaveGroup. A leave that empties the group writes its Empty record before anyone
        is answered; when that fails the group is as it was (the members still in it, their
        parked requests still parked) and the answer is Kafka's error for the failed append,
        as Kafka's ``classicGroupLeave`` fails as a whole."""
        now = self.runtime.clock_ms()
        saved = snapshot(self.registry.get(group_id))
        result = self.classic.leave(group_id, members, now)
        effects = list(result.effects)
        group = self.classic.group(group_id)
        if group is not None and any(isinstance(e, PersistGroup) for e in effects):
            error = self._append(group_id, [group_record(group)], now)
            if error != ErrorCode.none:
                self.registry.restore(group_id, saved)
                return LeaveResult(error)
        self._apply_classic([e for e in effects if not isinstance(e, PersistGroup)])
        return result

    def _apply_classic(self, effects: list[classic.Effect]) -> None:
        """Write what must be durable, then answer the parked requests, then re-arm. The
        leader's assignment is written before anyone gets it; if it cannot be, the state
        machine answers with Kafka's error for the failed append instead."""
        now = self.runtime.clock_ms()
        pending = list(effects)
        while pending:
            batch, pending = pending, []
            for group_id in dict.fromkeys(e.group_id for e in batch if isinstance(e, PersistGroup)):
                group = self.classic.group(group_id)
                if group is not None:
                    self._append(group_id, [group_record(group)], now)
            for effect in batch:
                if isinstance(effect, StoreAssignment):
                    group = self.classic.group(effect.group_id)
                    error = (
                        self._append(effect.group_id, [group_record(group, assigned=True)], now)
                        if group is not None
                        else ErrorCode.none
                    )
                    pending += self.classic.assignment_stored(
                        effect.group_id, effect.generation_id, error, now
                    )
                elif isinstance(effect, JoinCompleted | SyncCompleted):
                    waiter: Any = effect.waiter
                    if not waiter.done():  # its connection may be gone
                        waiter.set_result(effect.response)
        self._rearm()

    def _append(self, group_id: str, records: list[Record], now_ms: int) -> ErrorCode:
        error, first_offset = self.offsets_log.write(group_id, records, now_ms)
        if error == ErrorCode.none:
            self._replay(records, first_offset)
        else:
            log.warning("group_records_not_written", group=group_id, error=error.name)
        return error

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups' write: the tombstones of the group's offsets and records, one batch.
        The group is gone only once they are written; otherwise it stays and the answer is
        Kafka's error for the failed append."""
        group = self.registry.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        offsets = self.offset_manager.group_tombstones(
            group_id, classic=isinstance(group, ClassicGroup)
        )
        self.registry.restore(group_id, None)
        error = self._write_group(group_id, offsets)
        if error != ErrorCode.none:
            self.registry.restore(group_id, group)
            return error
        self.offsets.drop_group(group_id)
        self._rearm()
        return ErrorCode.none

    def _replay(self, records: list[Record], first_offset: int = -1) -> None:
        """Records just written (the first at ``first_offset``), applied to what the log holds
        (offsets to the offset store), as the load applies them."""
        self.offset_manager.replay(records, first_offset=first_offset)
        for key, value in records:
            if isinstance(key, ConsumerRecordKey):
                self._consumer_log.apply(key, value)  # type: ignore[arg-type]
            elif isinstance(key, ShareRecordKey):
                self._share_log.apply(key, value)  # type: ignore[arg-type]
            elif isinstance(key, StreamsRecordKey):
                self.streams.log.apply(key, value)  # type: ignore[arg-type]

    def _forget_logged(self, group_id: str) -> None:
        """Forget what the log holds of a group being unloaded (a reload replays it)."""
        self._consumer_log.images.pop(group_id, None)
        self._share_log.images.pop(group_id, None)
        self.streams.log.images.pop(group_id, None)

    def _on_group_deleted(self, group: Group) -> None:
        records = self.offset_manager.group_tombstones(
            group.group_id, classic=isinstance(group, ClassicGroup)
        )
        self._append(group.group_id, records, self.runtime.clock_ms())
        self.offsets.drop_group(group.group_id)
        self.write_group(group.group_id)

    def reload_partition(self, index: int) -> None:
        """A ``__consumer_offsets`` partition's leader moved (a broker stopped or came back):
        unload the groups it holds and their offsets, then replay the partition (``load``), as
        Kafka's new group coordinator loads the partition it takes over (members get a fresh
        session)."""
        from kemu.coordinator.group.hashing import partition_for

        topic = self.runtime.cluster.topics.get(OFFSETS_TOPIC)
        if topic is None or not 0 <= index < len(topic.partitions):
            return
        count = len(topic.partitions)
        known = {
            *(g.group_id for g in self.registry),
            *self.offsets.group_ids(),
            *self._consumer_log.images,
            *self._share_log.images,
            *self.streams.log.images,
        }
        for group_id in [g for g in known if partition_for(g, count) == index]:
            self.registry.unload(group_id)
            self.offsets.drop_group(group_id)
            self._forget_logged(group_id)
        self.offset_manager.pending.forget_groups(lambda g: partition_for(g, count) == index)
        self.load([index])
        with contextlib.suppress(RuntimeError):
            self._rearm()
        log.debug("consumer_offsets_partition_loaded", partition=index)

    def load(self, partitions: Iterable[int] | None = None) -> None:
        """Replay ``__consumer_offsets`` (the given partitions, every one by default) into the
        coordinator, as Kafka loads a coordinator partition: classic, KIP-848, share and streams
        groups and committed offsets come back from their records alone, each member with a
        fresh session."""
        now_ms = self.runtime.clock_ms()
        groups = offsets = 0
        consumer_groups = ImageBuilder()
        streams_groups = StreamsImageBuilder()
        share_groups = ShareImageBuilder()
        for entry in self.offsets_log.entries(partitions):
            if isinstance(entry, LoggedMarker):
                self.end_transaction(entry.partition, entry.producer_id, entry.commit)
                continue
            key, value = entry.key, entry.value
            if isinstance(key, StreamsRecordKey):
                groups += 1
                streams_groups.apply(key, value)  # type: ignore[arg-type]
                continue
            if isinstance(key, ConsumerRecordKey):
                groups += 1
                consumer_groups.apply(key, value)  # type: ignore[arg-type]
                continue
            if isinstance(key, ShareRecordKey):
                groups += 1
                share_groups.apply(key, value)  # type: ignore[arg-type]
                continue
            if isinstance(key, GroupMetadataKey):
                groups += 1
                if value is None:
                    if isinstance(self.registry.get(key.group), ClassicGroup):
                        self.registry.restore(key.group, None)
                elif isinstance(value, GroupMetadataValue):
                    self.registry.put(load_group(key.group, value, now_ms))
                continue
            offsets += 1
            if (
                value is not None
                and self.registry.get(key.group) is None
                and key.group not in streams_groups.images  # a streams group's offsets
                and key.group not in share_groups.images
            ):
                self.classic.simple_group(key.group, now_ms)
            self.offset_manager.replay(
                [(key, value)], producer_id=entry.producer_id, first_offset=entry.offset
            )
        for group, image in consumer_groups.groups(now_ms, 0):
            session_ms = self.consumer_settings(group.group_id).session_timeout_ms
            for member_id, member in group.members.items():
                group.members[member_id] = replace(member, session_deadline_ms=now_ms + session_ms)
            group.subscribed_metadata = self.consumer.subscribed_metadata(group, self.topic_meta)
            if group.metadata_hash == 0:  # written by a kemu of before the hash
                group.metadata_hash = subscribed_hash(group.subscribed_metadata)
            self.registry.put(group)
            self._consumer_log.images[group.group_id] = image
        self.streams.load(streams_groups, now_ms)
        for group_id, written in share_groups.images.items():
            if written.holds_group:
                self._share_log.images[group_id] = written
                self._put_share_group(share_records.group_from_image(group_id, written, 0), now_ms)
        if groups or offsets:
            log.info("consumer_offsets_loaded", group_records=groups, offset_records=offsets)

    def _put_share_group(self, group: ShareGroup, now_ms: int) -> None:
        """A share group loaded from the log (or the old file): fresh sessions, and the
        subscribed topics as they are now."""
        timeout = self.membership_settings(group.group_id).session_timeout_ms
        for member_id, member in group.members.items():
            group.members[member_id] = replace(member, session_deadline_ms=now_ms + timeout)
        names = sorted(group.subscribed_topic_names())
        found = {name: self.topic_meta(name) for name in names}
        group.subscribed_metadata = {name: meta for name, meta in found.items() if meta}
        group.initializing_since_ms = now_ms  # as Kafka stamps InitializingTopics on replay
        if group.metadata_hash == 0:  # written by a kemu of before the hash (or the old file)
            group.metadata_hash = subscribed_hash(group.subscribed_metadata)
        self.registry.put(group)


GROUP_COORDINATOR = Service(SERVICE, GroupCoordinatorService)


def group_coordinator(runtime: Runtime) -> GroupCoordinatorService:
    return runtime.services.get(GROUP_COORDINATOR)
