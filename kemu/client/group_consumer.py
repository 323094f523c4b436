"""GroupConsumer: a KIP-848 consumer-group member (ConsumerGroupHeartbeat) that fetches its
assigned partitions and commits its positions (OffsetCommit / OffsetFetch with its member epoch).

Membership, as Java's consumer with ``group.protocol=consumer``: the member picks its own id
(v1), joins with epoch 0 and heartbeats in the background at the interval the coordinator
answers. Every heartbeat here is a full one (subscription, rebalance timeout and the partitions
the member owns), which the coordinator answers with the assignment, so an answer lost on the
way is repaired by the next one. Reconciling an assignment: partitions taken away are dropped
(their positions forgotten), and the next heartbeat, sent at once, shows them released, so the
coordinator hands them to their new owner; partitions added start at the group's committed
offset (OffsetFetch), or at ``auto_offset_reset`` when there is none. A fenced or unknown member
rejoins at once with epoch 0 under the same id, owning nothing, and its partitions are dropped
by the next reconciliation (as Java's does without a listener: ``ConsumerMembershipManager``
completes the lost callback at once and rejoins; with one, see below); a member whose group
was deleted under it (GROUP_ID_NOT_FOUND) loses them for good, as Java's (``membership``): the
next ``poll()`` raises the error, and the member neither heartbeats nor rejoins.

With a ``RebalanceListener`` (``kemu/client/rebalance.py``), reconciliation waits for the
application as Java's does: ``poll()`` runs ``on_partitions_revoked`` before revoked partitions
are released (the member keeps them, and may commit them, meanwhile), ``on_partitions_assigned``
after every reconciliation, and, when the member was fenced or its session ended,
``on_partitions_lost`` before it rejoins; ``close()`` runs ``on_partitions_revoked`` first.

Delivery is at least once from the committed offset: ``commit()`` commits the positions of the
partitions the member owns (after the records ``poll()`` handed out), and a partition that moves
to another member, or a member that restarts, resumes at the last commit. Commits and
reconciliation take turns (one lock), so a commit of a partition is in the group's log before
the heartbeat that releases it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import random
import uuid
from collections.abc import Iterable
from typing import Any

from kemu.client.backoff import Backoff
from kemu.client.cluster import GROUP_COORDINATOR, RetriableError
from kemu.client.connection import ConnectionClosed
from kemu.client.consumer import Consumer, ConsumerRecord
from kemu.client.errors import COORDINATOR_MOVED, CommitFailedError, IllegalStateError, KafkaError
from kemu.client.membership import FATAL_TO_MEMBER, Fatal
from kemu.client.rebalance import RebalanceListener
from kemu.client.share_types import new_member_id
from kemu.client.txn_offsets import ConsumerGroupMetadata
from kemu.protocol.errors import ErrorCode

CONSUMER_GROUP_HEARTBEAT, OFFSET_COMMIT, OFFSET_FETCH, LIST_OFFSETS = 68, 8, 9, 2
JOIN_EPOCH, LEAVE_EPOCH = 0, -1
LATEST = -1
AUTO_OFFSET_RESET = ("earliest", "latest")
# The member's epoch moved on (a rebalance, or a restart of the coordinator): rejoin.
MEMBER_LOST = frozenset({ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id})
COMMIT_REFUSED = frozenset(
    {
        ErrorCode.stale_member_epoch,
        ErrorCode.fenced_member_epoch,
        ErrorCode.unknown_member_id,
        ErrorCode.illegal_generation,
        ErrorCode.rebalance_in_progress,
    }
)

Partition = tuple[str, int]

log = logging.getLogger("kemu.client.group")


class GroupConsumer:
    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        *,
        isolation_level: str = "read_committed",
        auto_offset_reset: str = "latest",
        max_wait_ms: int = 500,
        rebalance_timeout_ms: int = 60_000,
        client_id: str = "kemu-group-consumer",
        allow_auto_topic_creation: bool = True,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
        listener: RebalanceListener | None = None,
    ) -> None:
        if auto_offset_reset not in AUTO_OFFSET_RESET:
            raise ValueError("auto_offset_reset is 'earliest' or 'latest'")
        self.group_id = group_id
        self.member_id = new_member_id()
        self.member_epoch = JOIN_EPOCH
        self.auto_offset_reset = auto_offset_reset
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.max_wait_ms = max_wait_ms
        # the fetching half: positions of the owned partitions, read_committed skipping aborts
        self._reader = Consumer(
            bootstrap,
            isolation_level=isolation_level,
            client_id=client_id,
            max_wait_ms=max_wait_ms,
            allow_auto_topic_creation=allow_auto_topic_creation,
            backoff=backoff,
            rng=rng,
        )
        self.cluster = self._reader.cluster
        self._subscription: tuple[str, ...] = ()
        self._target: set[Partition] | None = None  # an assignment not reconciled yet
        # the member epoch the owned partitions (and so what poll() hands out) belong to: a
        # heartbeat may bring a newer epoch whose assignment is not reconciled yet
        self._positions_epoch = JOIN_EPOCH
        self._lock = asyncio.Lock()  # fetch rounds, commits and reconciliation take turns
        self._heartbeat_now = asyncio.Event()
        self._heartbeat_interval = 5.0
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._fatal = Fatal(group_id)
        self._closed = False
        self._listener = listener
        # fenced, its session ended or its group gone, with a listener: poll() runs
        # on_partitions_lost and drops the partitions, and only then does the member rejoin
        self._lost = False

    async def __aenter__(self) -> GroupConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- the application's side ----------------------------------------------------------------

    async def subscribe(self, topics: Iterable[str]) -> None:
        """Join the group for ``topics`` (or change the subscription); heartbeats continue in
        the background. The assignment comes with a heartbeat and is taken by ``poll()``."""
        if self._closed:
            raise IllegalStateError("the consumer is closed")
        self._subscription = tuple(sorted(set(topics)))
        if self._fatal.refuses_join():
            return
        await self.cluster.start()
        for topic in self._subscription:
            await self.cluster.topic(topic)
        await self._heartbeat()
        if self._heartbeat_task is None:
            self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    def assignment(self) -> set[Partition]:
        """The partitions this member owns now."""
        return set(self._reader.positions)

    def position(self, topic: str, partition: int) -> int:
        """The offset of the next record ``poll()`` hands out for an owned partition."""
        return self._reader.positions[(topic, partition)]

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Hand out the owned partition's records from ``offset`` on (e.g. from offsets kept
        outside Kafka, in ``on_partitions_assigned``). Raises ``IllegalStateError`` for a
        partition this member does not own."""
        if (topic, partition) not in self._reader.positions:
            raise IllegalStateError(f"{topic}-{partition} is not assigned to this member")
        if offset < 0:
            raise ValueError("an offset is 0 or more")
        self._reader.positions[(topic, partition)] = offset

    async def poll(self, timeout: float = 1.0) -> list[ConsumerRecord]:
        """Records of the owned partitions from their positions; empty after ``timeout`` seconds
        without any. Applies an assignment the coordinator sent since the last call. Raises,
        once, the error that put the member out of its group for good."""
        if self._closed:
            raise IllegalStateError("the consumer is closed")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if self._listener is not None:
                await self._reconcile_with_listener(self._listener)
            self._fatal.raise_once()
            remaining = deadline - loop.time()
            async with self._lock:
                if self._listener is None:
                    await self._reconcile()
                owned = bool(self._reader.positions)
                if owned:
                    records = await self._reader.poll(min(remaining, self.max_wait_ms / 1000))
                    if records:
                        return records
            if loop.time() >= deadline:
                return []
            if not owned:  # nothing assigned yet: wait for a heartbeat to bring something
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._heartbeat_now.wait(), min(remaining, 0.1))
                await asyncio.sleep(min(max(remaining, 0.0), 0.05))

    async def commit(self, offsets: dict[Partition, int] | None = None) -> dict[Partition, int]:
        """Commit ``offsets`` (default: the position of every owned partition) with the
        member's epoch; answers what was committed. Partitions this member no longer owns are
        left out (their new owner commits them). Raises ``CommitFailedError`` when the
        coordinator refuses the member (its epoch moved on: poll and commit again)."""
        async with self._lock:
            if self._listener is None:  # with one, poll() reconciles (and runs its callbacks)
                await self._reconcile()
            wanted = dict(self._reader.positions) if offsets is None else dict(offsets)
            wanted = {tp: o for tp, o in wanted.items() if tp in self._reader.positions}
            if wanted:
                epoch = self.member_epoch
                await self.cluster.retry(lambda: self._offset_commit(wanted, epoch))
            return wanted

    def group_metadata(self) -> ConsumerGroupMetadata:
        """For ``TransactionalProducer.send_offsets_to_transaction``: the member, with the epoch
        of the partitions it owns now, those ``poll()`` reads. Not the epoch of the last
        heartbeat: one that took partitions away (or a rejoin after the member was lost) is
        applied by the next ``poll()``, and until then the records handed out may be of
        partitions the new epoch no longer has, which the coordinator must refuse."""
        return ConsumerGroupMetadata(self.group_id, self.member_id, self._positions_epoch)

    async def committed(self, partitions: Iterable[Partition]) -> dict[Partition, int | None]:
        """The group's committed offset of each partition (None: nothing committed)."""
        return await self.cluster.retry(lambda: self._offset_fetch(sorted(set(partitions))))

    async def close(self) -> None:
        """Leave the group (epoch -1, so its partitions move at once) and close the
        connections. Nothing is committed by close itself: commit first what was processed (a
        listener's ``on_partitions_revoked`` runs first, and may)."""
        if self._closed:
            return
        failure: BaseException | None = None
        if self._listener is not None and self._reader.positions:
            owned = sorted(self._reader.positions)
            try:  # as Java's: revoked while still in the group, lost when out of it
                if self.member_epoch > JOIN_EPOCH and not self._lost:
                    await self._listener.on_partitions_revoked(owned)
                else:
                    await self._listener.on_partitions_lost(owned)
            except Exception as exc:  # still close; the application hears of it after
                failure = exc
        self._closed = True
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            with contextlib.suppress(BaseException):
                await self._heartbeat_task
        if self.member_epoch > JOIN_EPOCH:
            with contextlib.suppress(KafkaError, RetriableError, ConnectionClosed, OSError):
                await asyncio.wait_for(self._send_heartbeat(leave=True), 5)
        await self._reader.close()
        if failure is not None:
            raise failure

    # --- membership ----------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._heartbeat_now.wait(), self._heartbeat_interval)
            self._heartbeat_now.clear()
            if self._target is not None and self._listener is None:
                # an assignment to reconcile first, so this heartbeat shows it
                async with self._lock:
                    await self._reconcile()
            try:
                await self._heartbeat()
            except (KafkaError, RetriableError, ConnectionClosed) as exc:
                if self._fatal.error is not None:
                    return  # out for good: no more heartbeats
                log.warning("consumer group heartbeat failed: %s", exc)

    async def _heartbeat(self) -> None:
        await self.cluster.retry(self._send_heartbeat)

    async def _send_heartbeat(self, *, leave: bool = False) -> None:
        if self._lost and not leave:
            return  # out of the group until poll() has run on_partitions_lost
        node = await self.cluster.coordinator(GROUP_COORDINATOR, self.group_id)
        owned: dict[uuid.UUID, list[int]] = {}
        # a joining member owns nothing (what it had may be another's already)
        held = () if self.member_epoch == JOIN_EPOCH else sorted(self._reader.positions)
        for topic, partition in held:
            info = self.cluster.topics.get(topic)
            if info is not None:
                owned.setdefault(info.topic_id, []).append(partition)
        version = await self.cluster.version(CONSUMER_GROUP_HEARTBEAT, 1, node)
        response = await self.cluster.call(
            node,
            CONSUMER_GROUP_HEARTBEAT,
            version,
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=LEAVE_EPOCH if leave else self.member_epoch,
            instance_id=None,
            rack_id=None,
            rebalance_timeout=datetime.timedelta(milliseconds=self.rebalance_timeout_ms),
            subscribed_topic_names=None if leave else self._subscription,
            server_assignor=None,
            topic_partitions=(
                None
                if leave
                else tuple(
                    self.cluster.nested(
                        CONSUMER_GROUP_HEARTBEAT,
                        version,
                        "TopicPartitions",
                        topic_id=topic_id,
                        partitions=tuple(partitions),
                    )
                    for topic_id, partitions in owned.items()
                )
            ),
        )
        error = response.error_code
        if error in COORDINATOR_MOVED:
            self.cluster.forget_coordinator(GROUP_COORDINATOR, self.group_id)
            raise RetriableError(error.name)
        if leave:
            return
        if error in MEMBER_LOST:
            # As Java's onPartitionsLost: what this member owned may be someone else's now.
            self.member_epoch = JOIN_EPOCH
            if self._listener is not None:
                self._lost, self._target = True, None  # as Java's FENCED state
                return
            self._target = set()
            raise RetriableError(error.name)
        if error == FATAL_TO_MEMBER:
            self.member_epoch = JOIN_EPOCH  # in no group: close() sends no leave
            # its partitions are lost, as Java's transitionToFatal
            if self._listener is not None:
                self._lost, self._target = True, None
            else:
                self._target = set()
            raise self._fatal.fail(self.member_id, error, response.error_message)
        if error != ErrorCode.none:
            raise KafkaError(error, response.error_message)
        self.member_epoch = int(response.member_epoch)
        interval = response.heartbeat_interval
        seconds = interval.total_seconds() if hasattr(interval, "total_seconds") else interval
        if seconds > 0:
            self._heartbeat_interval = float(seconds)
        if response.assignment is not None:
            await self._learn_assignment(response.assignment.topic_partitions)

    async def _learn_assignment(self, topic_partitions: Iterable[Any]) -> None:
        pairs = [
            (uuid.UUID(str(entry.topic_id)), int(partition))
            for entry in topic_partitions
            for partition in entry.partitions
        ]
        if any(topic_id not in self.cluster.topic_names for topic_id, _ in pairs):
            await self.cluster.refresh_metadata(self._subscription)
        target = {
            (self.cluster.topic_names[topic_id], partition)
            for topic_id, partition in pairs
            if topic_id in self.cluster.topic_names
        }
        # with a listener, a member that (re)joined reconciles even an empty assignment, as
        # Java's, whose onPartitionsAssigned then runs with no partitions
        joined = self._listener is not None and self._positions_epoch == JOIN_EPOCH
        if target != set(self._reader.positions) or (joined and self._target is None):
            self._target = target
            if self._listener is None:  # with one, poll() reconciles and then heartbeats
                self._heartbeat_now.set()  # reconcile, then show it to the coordinator at once
        elif self._target is None:
            self._positions_epoch = self.member_epoch  # the same partitions, a newer epoch

    async def _reconcile(self) -> None:
        """Apply the last assignment (the caller holds the lock): drop revoked partitions, start
        added ones at the committed offset."""
        target = self._target
        if target is None:
            return
        epoch = self.member_epoch  # the one that came with ``target``
        positions = self._reader.positions
        for tp in set(positions) - target:
            del positions[tp]
        await self._start(sorted(target - set(positions)))
        self._positions_epoch = epoch
        if self._target is target:
            self._target = None

    async def _reconcile_with_listener(self, listener: RebalanceListener) -> None:
        """``_reconcile`` with the listener's callbacks, run outside the lock (a callback may
        commit): revoked partitions are released after ``on_partitions_revoked`` returns, added
        ones are fetched from only after ``on_partitions_assigned`` did; the member is
        fenced or its session ended: ``on_partitions_lost``, and it rejoins."""
        positions = self._reader.positions
        while True:
            if self._lost:
                lost = sorted(positions)
                try:  # Java rejoins even when the callback fails
                    if lost:
                        await listener.on_partitions_lost(lost)
                finally:
                    self._lost = False
                    positions.clear()
                    self._positions_epoch = JOIN_EPOCH
                    if self._fatal.error is None:
                        self._heartbeat_now.set()  # rejoin now
                return
            target = self._target
            if target is None:
                return
            revoked = sorted(set(positions) - target)
            if revoked:
                await listener.on_partitions_revoked(revoked)
                async with self._lock:
                    for tp in revoked:
                        positions.pop(tp, None)
                continue  # the assignment may have moved on while the callback ran
            async with self._lock:
                if self._target is not target or self._lost:
                    continue
                epoch = self.member_epoch
                added = sorted(target - set(positions))
                await self._start(added)
                self._positions_epoch = epoch
                if self._target is target:
                    self._target = None
            try:
                await listener.on_partitions_assigned(added)
            except BaseException:
                # not taken: nothing is fetched of them, and the next poll() tries again
                for tp in added:
                    positions.pop(tp, None)
                if self._target is None:
                    self._target = target
                raise
            self._heartbeat_now.set()  # show the coordinator what the member owns now
            return

    async def _start(self, added: list[Partition]) -> None:
        """Own ``added`` from the group's committed offsets (or ``auto_offset_reset``)."""
        if not added:
            return
        committed = await self.cluster.retry(lambda: self._offset_fetch(added))
        for tp in added:
            start = committed.get(tp)
            self._reader.positions[tp] = (
                start if start is not None else await self._reset_offset(tp)
            )

    async def _reset_offset(self, tp: Partition) -> int:
        node = await self.cluster.leader(*tp)
        if self.auto_offset_reset == "earliest":
            return await self.cluster.retry(lambda: self._reader._earliest(node, *tp))
        return await self.cluster.retry(lambda: self._latest(node, *tp))

    async def _latest(self, node: int, topic: str, index: int) -> int:
        version = await self.cluster.version(LIST_OFFSETS, 7, node)
        response = await self.cluster.call(
            node,
            LIST_OFFSETS,
            version,
            replica_id=-1,
            isolation_level=self._reader.isolation,
            topics=(
                self.cluster.nested(
                    LIST_OFFSETS,
                    version,
                    "ListOffsetsTopic",
                    name=topic,
                    partitions=(
                        self.cluster.nested(
                            LIST_OFFSETS,
                            version,
                            "ListOffsetsPartition",
                            partition_index=index,
                            current_leader_epoch=-1,
                            timestamp=LATEST,
                        ),
                    ),
                ),
            ),
        )
        [found] = response.topics[0].partitions
        if found.error_code != ErrorCode.none:
            raise KafkaError(found.error_code, f"ListOffsets {topic}-{index}")
        return int(found.offset)

    # --- offsets -------------------------------------------------------------------------------

    async def _offset_commit(self, offsets: dict[Partition, int], epoch: int) -> None:
        if self.member_epoch != epoch:
            # The member rejoined (or moved on) while the commit was retried: its partitions
            # may be another member's now, which may have read an older commit and would see
            # this one land under it. Only the epoch the positions belong to may commit them.
            raise CommitFailedError(
                ErrorCode.stale_member_epoch, "the member's epoch moved on during the commit"
            )
        node = await self.cluster.coordinator(GROUP_COORDINATOR, self.group_id)
        version = await self.cluster.version(OFFSET_COMMIT, 9, node)
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, offset))
        response = await self.cluster.call(
            node,
            OFFSET_COMMIT,
            version,
            group_id=self.group_id,
            generation_id_or_member_epoch=epoch,
            member_id=self.member_id,
            group_instance_id=None,
            topics=tuple(
                self.cluster.nested(
                    OFFSET_COMMIT,
                    version,
                    "OffsetCommitRequestTopic",
                    name=topic,
                    partitions=tuple(
                        self.cluster.nested(
                            OFFSET_COMMIT,
                            version,
                            "OffsetCommitRequestPartition",
                            partition_index=partition,
                            committed_offset=offset,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                        for partition, offset in entries
                    ),
                )
                for topic, entries in by_topic.items()
            ),
        )
        errors = {
            partition.error_code
            for topic in response.topics
            for partition in topic.partitions
            if partition.error_code != ErrorCode.none
        }
        if errors & COORDINATOR_MOVED:
            self.cluster.forget_coordinator(GROUP_COORDINATOR, self.group_id)
            raise RetriableError("the group coordinator moved")
        refused = errors & COMMIT_REFUSED
        if refused:
            raise CommitFailedError(min(refused), "the member's epoch moved on: poll again")
        if errors:
            raise KafkaError(min(errors), f"OffsetCommit of {self.group_id}")

    async def _offset_fetch(self, partitions: list[Partition]) -> dict[Partition, int | None]:
        node = await self.cluster.coordinator(GROUP_COORDINATOR, self.group_id)
        version = await self.cluster.version(OFFSET_FETCH, 9, node)
        if version < 8:
            raise KafkaError(ErrorCode.unsupported_version, "OffsetFetch v8+ is needed")
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        member = {"member_id": self.member_id, "member_epoch": self.member_epoch}
        if version < 9 or self.member_epoch <= JOIN_EPOCH:
            member = {"member_id": None, "member_epoch": -1} if version >= 9 else {}
        group = self.cluster.nested(
            OFFSET_FETCH,
            version,
            "OffsetFetchRequestGroup",
            group_id=self.group_id,
            topics=tuple(
                self.cluster.nested(
                    OFFSET_FETCH,
                    version,
                    "OffsetFetchRequestTopics",
                    name=topic,
                    partition_indexes=tuple(indexes),
                )
                for topic, indexes in by_topic.items()
            ),
            **member,
        )
        response = await self.cluster.call(
            node, OFFSET_FETCH, version, groups=(group,), require_stable=True
        )
        [answer] = response.groups
        if answer.error_code in COORDINATOR_MOVED:
            self.cluster.forget_coordinator(GROUP_COORDINATOR, self.group_id)
            raise RetriableError(answer.error_code.name)
        if answer.error_code == ErrorCode.unstable_offset_commit:
            raise RetriableError("a transactional commit of the group is pending")
        if answer.error_code in COMMIT_REFUSED:
            raise RetriableError(f"{answer.error_code.name}: the next heartbeat has the epoch")
        if answer.error_code != ErrorCode.none:
            raise KafkaError(answer.error_code, f"OffsetFetch of {self.group_id}")
        found: dict[Partition, int | None] = {}
        for topic in answer.topics:
            for partition in topic.partitions:
                tp = (str(topic.name), int(partition.partition_index))
                if partition.error_code == ErrorCode.unstable_offset_commit:
                    raise RetriableError("a transactional commit of the group is pending")
                if partition.error_code != ErrorCode.none:
                    raise KafkaError(partition.error_code, f"OffsetFetch {tp[0]}-{tp[1]}")
                offset = int(partition.committed_offset)
                found[tp] = offset if offset >= 0 else None
        return found
