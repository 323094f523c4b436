"""The share coordinator: ``ShareCoordinatorShard``s over the ``__share_group_state`` log.

One service per process (runtime service ``"share_persister"``) serves every virtual broker: the
share-partition leaders use it in-process through the ``SharePersister`` protocol, and the
Initialize/Read/Write/Delete ShareGroupState and ReadShareGroupStateSummary handlers use it for
requests from the wire (answering NOT_COORDINATOR when the receiving broker does not lead the
state partition).

An operation computes its records on the shard of the key's state partition, appends them as one
v2 batch to that partition's log with ``Partition.append``, and only then replays them into the
shard and answers; so an answer promises exactly the durability of the log (a SegmentLog append
is in the page cache when it returns, and survives a SIGKILL), and a failed append changes
nothing. There is no ``await`` between computing and appending, so operations on one event loop
never interleave.

The topic is created on first use, as Kafka creates it, with Kafka's configs for it
(``cleanup.policy=delete``, ``retention.ms=-1``, ``compression.type=producer``,
``segment.bytes=share.coordinator.state.topic.segment.bytes``, ``min.insync.replicas`` from
``share.coordinator.state.topic.min.isr``, capped by the replication factor since kemu keeps one
copy), ``share.coordinator.state.topic.num.partitions`` partitions and a replication factor capped
by the broker count. When the service starts (at server start) every partition of an existing
topic is replayed from its log start to rebuild the shards.

KIP-1289: the transaction coordinator writes the COMMIT/ABORT markers of a transaction that
staged share acknowledgements into the state partitions it enlisted. Before each operation on
a partition the service replays whatever was appended there since (``_catch_up``), so a marker
resolves its TX_PENDING records (``txn_markers``) before anyone reads the state, whether it was
written a moment ago, before a crash, or by recovery at start-up; the outcome is then written out
as ShareUpdates. ``follow_markers`` does the same at once when markers are written.

Snapshots and pruning (as Kafka's ShareCoordinatorShard and its ``lastRedundantOffset``): every
``share.coordinator.snapshot.update.records.per.snapshot`` updates a key gets a ShareSnapshot of
its whole state; the service keeps, per state partition, the offset of each live key's latest
snapshot, and every ``share.coordinator.state.topic.prune.interval.ms`` (5 minutes, Kafka's
``write-state-record-prune`` job) a timer moves each partition's log start up to their minimum
(``advance_start``, DeleteRecords' path), dropping whole segments below. Everything below is
redundant: every live key's latest snapshot is at or above it, and a snapshot is computed from
a state that already replayed every earlier marker, so neither a record nor a KIP-1289 marker
that the latest snapshot does not cover is ever dropped; a deleted key's tombstone only goes
with the records before it. A restart replays from the log start.

Cold partitions (Kafka's ``snapshot-cold-partitions`` job): every
``share.coordinator.cold.partition.snapshot.interval.ms`` (5 minutes) a timer on the runtime's
clock asks every shard for ``snapshot_cold_partitions`` and appends what it gives, then re-arms;
a key written once and never again so gets a newer snapshot and stops holding the log start
back. The timers are armed only where they can run (a virtual clock, or a running event loop):
a service built outside one (offline tools, synchronous tests) has none, and prunes only when
asked (``prune_all``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable

import structlog

from kemu.cluster.clock import Repeating
from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Topic, TopicError
from kemu.cluster.services import Service
from kemu.coordinator.share.decode import batch_records, control_marker
from kemu.coordinator.share.keys import coordinator_key, partition_for_key_string
from kemu.coordinator.share.persister import (
    PersistedBatch,
    ReadResult,
    SharePartitionKey,
    SharePersister,
)
from kemu.coordinator.share.records import (
    SHARE_SNAPSHOT,
    RecordDecodeError,
    StateRecordKey,
    StateValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kemu.coordinator.share.shard import ShardResult, ShareCoordinatorShard
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import BatchHeader, CorruptBatch, build_batch, read_header
from kemu.storage.batch_memo import BatchMemo

log = structlog.get_logger("kemu.share_coordinator")

SERVICE = "share_persister"
COLD_SNAPSHOT_INTERVAL = "share.coordinator.cold.partition.snapshot.interval.ms"  # internal
PRUNE_INTERVAL = "share.coordinator.state.topic.prune.interval.ms"  # internal
SHARE_STATE_TOPIC = "__share_group_state"
NOT_COORDINATOR_MESSAGE = "This is not the correct coordinator."


def share_persister(runtime: Runtime) -> SharePersister:
    """The process's share persister: the share coordinator, created (and its log replayed) on
    first use, or a stand-in provided first (an in-memory one in tests)."""
    return runtime.services.get(SHARE_PERSISTER)


def share_coordinator(runtime: Runtime) -> ShareCoordinatorService:
    """The same object as ``share_persister``, which must be the share coordinator: its RPCs
    and placement run only there."""
    service = share_persister(runtime)
    if not isinstance(service, ShareCoordinatorService):
        # Someone registered a stand-in (an in-memory persister) first: the RPCs cannot run
        # over it, and what it holds is not durable.
        raise RuntimeError(
            f"runtime service {SERVICE!r} is a {type(service).__name__}, not the share "
            "coordinator; provide SHARE_PERSISTER only with a persister for tests that need no RPCs"
        )
    return service


# Decoded batches of __share_group_state by their bytes: off unless a process that loads the log
# again and again turns it on (the simulation; see kemu.storage.batch_memo).
DecodedRecord = tuple[int, StateRecordKey | None, StateValue | None, str | None]
DECODED_BATCHES: BatchMemo[list[DecodedRecord]] = BatchMemo()


def _decode_batch(
    header: BatchHeader, batch: bytes, keys: dict[bytes, StateRecordKey]
) -> list[DecodedRecord]:
    """(offset, key, value, None) of each keyed record of a data batch, or (offset, None, None,
    why) for one that does not decode; raises CorruptBatch for a batch that does not parse."""
    decoded: list[DecodedRecord] = []
    for offset, key, value in batch_records(header, batch):
        if key is None:
            continue
        try:
            decoded_key = keys.get(key)
            if decoded_key is None:
                decoded_key = keys[key] = decode_key(key)
            decoded_value = decode_value(decoded_key.record_type, value)
            decoded.append((offset, decoded_key, decoded_value, None))
        except RecordDecodeError as error:
            decoded.append((offset, None, None, str(error)))
    return decoded


class ShareCoordinatorService:
    """Implements ``SharePersister`` for the share-partition leaders."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.cluster = runtime.cluster
        self.shards: dict[int, ShareCoordinatorShard] = {}
        self.replayed: dict[int, int] = {}  # per state partition: the next offset to replay
        # per state partition: the offset of each key's latest ShareSnapshot (pruning)
        self.snapshot_offsets: dict[int, dict[SharePartitionKey, int]] = {}
        existing = self.cluster.topics.get(SHARE_STATE_TOPIC)
        if existing is not None:
            self._load(existing)
        self._cold_timer = self._every(COLD_SNAPSHOT_INTERVAL, self.snapshot_cold_partitions)
        self._prune_timer = self._every(PRUNE_INTERVAL, self.prune_all)

    # --- where state lives -------------------------------------------------------------------

    def _config(self, name: str) -> int:
        return self.cluster.config.get_int(name)

    @property
    def num_partitions(self) -> int:
        """The topic's partition count, or the configured one before it exists (as Kafka)."""
        existing = self.cluster.topics.get(SHARE_STATE_TOPIC)
        if existing is not None:
            return len(existing.partitions)
        return self._config("share.coordinator.state.topic.num.partitions")

    def coordinator_partition(self, key_string: str) -> int:
        """The ``__share_group_state`` partition for a ``groupId:topicId:partition`` key."""
        return partition_for_key_string(key_string, self.num_partitions)

    def partition_for(self, key: SharePartitionKey) -> int:
        return self.coordinator_partition(coordinator_key(key))

    def coordinator_node(self, key_string: str) -> BrokerNode | None:
        """The broker leading the key's state partition (FindCoordinator, key type SHARE);
        creates the topic on first use."""
        partition = self.topic().partitions[self.coordinator_partition(key_string)]
        return self.cluster.nodes.get(partition.leader_id)

    def is_coordinator(self, node_id: int, key: SharePartitionKey) -> bool:
        partition = self.topic().partitions[self.partition_for(key)]
        return partition.leader_id == node_id

    def topic(self) -> Topic:
        found = self.cluster.topics.get(SHARE_STATE_TOPIC)
        if found is not None:
            return found
        replication = min(
            self._config("share.coordinator.state.topic.replication.factor"),
            len(self.cluster.nodes),
        )
        min_isr = min(self._config("share.coordinator.state.topic.min.isr"), replication)
        configs = {
            "cleanup.policy": "delete",
            "compression.type": "producer",
            "segment.bytes": str(self._config("share.coordinator.state.topic.segment.bytes")),
            "min.insync.replicas": str(min_isr),
            "retention.ms": "-1",
        }
        try:
            return self.cluster.create_topic(
                SHARE_STATE_TOPIC,
                self._config("share.coordinator.state.topic.num.partitions"),
                replication,
                configs,
            )
        except TopicError:
            return self.cluster.topics[SHARE_STATE_TOPIC]

    def shard(self, index: int) -> ShareCoordinatorShard:
        found = self.shards.get(index)
        if found is None:
            found = self.shards[index] = ShareCoordinatorShard(
                self._partition_count,
                self._config("share.coordinator.snapshot.update.records.per.snapshot"),
            )
        return found

    def _partition_count(self, topic_id: uuid.UUID) -> int | None:
        topic = self.cluster.topics_by_id.get(topic_id)
        return None if topic is None else len(topic.partitions)

    # --- loading ------------------------------------------------------------------------------

    def _load(self, topic: Topic) -> None:
        records = markers = 0
        for partition in topic.partitions:
            replayed, resolved = self._catch_up(partition.index)
            records += replayed
            markers += resolved
        log.info(
            "share_state_loaded",
            partitions=len(topic.partitions),
            records=records,
            markers=markers,
            keys=sum(len(s.states) for s in self.shards.values()),
        )
        for partition in topic.partitions:
            self._settle_markers(partition.index)

    def _catch_up(self, index: int) -> tuple[int, int]:
        """Replay what was appended to a state partition since it was last replayed: all of it
        at start-up, later the transaction markers the transaction coordinator writes there
        (the coordinator's own appends are replayed as they are made). Returns how many records
        were replayed and how many markers resolved staged records."""
        partition = self.topic().partitions[index]
        start = max(self.replayed.get(index, 0), partition.log_start_offset)
        end = partition.high_watermark
        if start >= end:
            return 0, 0
        shard = self.shard(index)
        records = markers = 0
        # A state partition holds a few keys written many times: each is decoded once.
        keys: dict[bytes, StateRecordKey] = {}
        for header, batch in partition.log.batches(start, end):
            if header.last_offset < start:
                continue
            if header.is_control:
                commit = control_marker(batch)
                if commit is not None and shard.replay_marker(
                    header.producer_id, header.producer_epoch, commit
                ):
                    markers += 1
                continue
            entries = DECODED_BATCHES.get(batch)
            if entries is None:
                try:
                    entries = _decode_batch(header, batch, keys)
                except CorruptBatch as error:
                    log.warning(
                        "share_state_batch_skipped",
                        partition=index,
                        offset=header.base_offset,
                        reason=str(error),
                    )
                    continue
                DECODED_BATCHES.put(batch, entries)
            for offset, decoded_key, decoded_value, failure in entries:
                if offset < start:
                    continue
                try:
                    if failure is not None:
                        raise RecordDecodeError(failure)
                    assert decoded_key is not None
                    shard.replay(decoded_key, decoded_value)
                    self._note_snapshot(index, offset, decoded_key, decoded_value)
                except RecordDecodeError as error:
                    # Kafka's loader skips record types it does not know, too.
                    log.warning(
                        "share_state_record_skipped",
                        partition=index,
                        offset=offset,
                        reason=str(error),
                    )
                    continue
                records += 1
        self.replayed[index] = end
        return records, markers

    def _settle_markers(self, index: int) -> None:
        """Write out, as ShareUpdates, what transaction markers resolved in a state partition."""
        if self.shard(index).marker_resolved:
            result = self._append(index, self.shard(index).settle_markers())
            if result.error is not ErrorCode.none:
                log.warning("share_state_marker_settle_failed", partition=index)

    def reload_partition(self, index: int) -> int:
        """The state partition's leader moved (a broker stopped or came back): drop its shard
        and replay it from the log, as Kafka's new share coordinator loads the partition it
        takes over (TX_PENDING staging and KIP-1289 markers included). Returns the number of
        keys loaded."""
        self.shards.pop(index, None)
        self.replayed.pop(index, None)
        self.snapshot_offsets.pop(index, None)
        records, markers = self._catch_up(index)
        self._settle_markers(index)
        keys = len(self.shards[index].states) if index in self.shards else 0
        log.debug(
            "share_state_partition_loaded",
            partition=index,
            records=records,
            markers=markers,
            keys=keys,
        )
        return keys

    def follow_markers(self, indexes: Iterable[int]) -> None:
        """Transaction markers were just written to these state partitions: replay them now
        (they would be at the next operation anyway) so that reads see their outcome."""
        for index in sorted(set(indexes)):
            if 0 <= index < len(self.topic().partitions):
                self._catch_up(index)
                self._settle_markers(index)

    # --- running operations -------------------------------------------------------------------

    def run(
        self, key: SharePartitionKey, operation: Callable[[ShareCoordinatorShard], ShardResult]
    ) -> ShardResult:
        """Compute on the key's shard, append the records, replay them, then answer."""
        return self._run_on(self.partition_for(key), operation)

    def _run_on(
        self, index: int, operation: Callable[[ShareCoordinatorShard], ShardResult]
    ) -> ShardResult:
        self._catch_up(index)
        self._settle_markers(index)
        return self._append(index, operation(self.shard(index)))

    def _append(self, index: int, result: ShardResult) -> ShardResult:
        """Append an operation's records, then replay them into the shard."""
        if not result.records:
            return result
        partition = self.topic().partitions[index]
        shard = self.shard(index)
        now = self.runtime.clock_ms()
        batch = build_batch(
            [(encode_key(r.key), encode_value(r.value)) for r in result.records], timestamp_ms=now
        )
        try:
            appended = partition.append([(read_header(batch), batch)], now_ms=now)
        except OSError as error:
            log.error("share_state_append_failed", partition=index, error=str(error))
            # Kafka turns a storage error on the state topic into NOT_COORDINATOR.
            return ShardResult(ErrorCode.not_coordinator, NOT_COORDINATOR_MESSAGE)
        if appended.error is not ErrorCode.none:
            return ShardResult(ErrorCode.not_coordinator, NOT_COORDINATOR_MESSAGE)
        for offset, record in enumerate(result.records, appended.base_offset):
            shard.replay(record.key, record.value)
            self._note_snapshot(index, offset, record.key, record.value)
        self.replayed[index] = partition.high_watermark
        return result

    def _note_snapshot(
        self, index: int, offset: int, key: StateRecordKey, value: StateValue | None
    ) -> None:
        """Remember where a key's latest snapshot is (or forget a deleted key)."""
        if key.record_type != SHARE_SNAPSHOT:
            return
        offsets = self.snapshot_offsets.setdefault(index, {})
        share_key = SharePartitionKey(key.group_id, key.topic_id, key.partition)
        if value is None:
            offsets.pop(share_key, None)
        else:
            offsets[share_key] = offset

    def redundant_below(self, index: int) -> int:
        """Kafka's lastRedundantOffset: the records of a state partition below this offset are
        covered by the latest snapshot of every live key (or belong to deleted keys)."""
        partition = self.topic().partitions[index]
        shard = self.shard(index)
        offsets = self.snapshot_offsets.get(index, {})
        # with no live key, everything but the last record (a tombstone, say) is redundant
        lowest = partition.high_watermark - 1
        for key in shard.states:
            found = offsets.get(key)
            if found is None:
                return partition.log_start_offset  # a key whose snapshot we have not seen
            lowest = min(lowest, found)
        return lowest

    def prune(self, index: int) -> None:
        """Move the state partition's log start up to the redundant offset."""
        partition = self.topic().partitions[index]
        target = self.redundant_below(index)
        if target > partition.log_start_offset:
            partition.log.advance_start(target)
            log.debug("share_state_pruned", partition=index, log_start=target)

    def prune_all(self) -> None:
        """``prune`` every state partition this service has loaded or written (the timer's
        job)."""
        if SHARE_STATE_TOPIC not in self.cluster.topics:
            return
        for index in sorted(self.shards):
            self.prune(index)

    # --- timers: pruning and cold partitions --------------------------------------------------

    def _every(self, interval_config: str, job: Callable[[], object]) -> Repeating | None:
        """``job`` every ``interval_config`` ms, where a timer can run (a virtual clock, or a
        running event loop)."""
        if not self.runtime.clock.virtual:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return None
        return Repeating(self.runtime.clock, self._config(interval_config), job)

    def close(self) -> None:
        """Stop the timers."""
        for timer in (self._cold_timer, self._prune_timer):
            if timer is not None:
                timer.cancel()
        self._cold_timer = self._prune_timer = None

    def snapshot_cold_partitions(self) -> int:
        """Append each shard's cold-partition snapshots; returns how many."""
        if SHARE_STATE_TOPIC not in self.cluster.topics:
            return 0
        now = self.runtime.clock_ms()
        interval = self.cluster.config.get_int(COLD_SNAPSHOT_INTERVAL)
        written = 0
        for index in sorted(self.shards):
            result = self._run_on(
                index, lambda s: s.snapshot_cold_partitions(now_ms=now, interval_ms=interval)
            )
            if result.error is ErrorCode.none:
                written += len(result.records)
            else:
                log.warning("share_state_cold_snapshot_failed", partition=index)
        if written:
            log.debug("share_state_cold_snapshots", records=written)
        return written

    def initialize_sync(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> ShardResult:
        now = self.runtime.clock_ms()
        return self.run(key, lambda s: s.initialize(key, state_epoch, start_offset, now_ms=now))

    def read_sync(self, key: SharePartitionKey, leader_epoch: int) -> ShardResult:
        now = self.runtime.clock_ms()
        return self.run(key, lambda s: s.read(key, leader_epoch, now_ms=now))

    def write_sync(
        self,
        key: SharePartitionKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: tuple[PersistedBatch, ...],
    ) -> ShardResult:
        now = self.runtime.clock_ms()
        return self.run(
            key,
            lambda s: s.write(
                key,
                state_epoch=state_epoch,
                leader_epoch=leader_epoch,
                start_offset=start_offset,
                delivery_complete_count=delivery_complete_count,
                batches=batches,
                now_ms=now,
            ),
        )

    def delete_sync(self, key: SharePartitionKey) -> ShardResult:
        return self.run(key, lambda s: s.delete(key))

    def read_summary_sync(self, key: SharePartitionKey) -> ShardResult:
        return self.run(key, lambda s: s.read_summary(key))

    def delete_topic_state(self, topic_id: uuid.UUID) -> int:
        """Tombstone every share partition of a deleted topic (Kafka does so on topic
        deletion); returns how many keys were dropped."""
        dropped = 0
        for index in sorted(self.shards):
            result = self._run_on(index, lambda s: s.delete_topic(topic_id))
            if result.error is ErrorCode.none:
                dropped += len(result.records)
        return dropped

    # --- SharePersister -----------------------------------------------------------------------

    async def initialize(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> ErrorCode:
        return self.initialize_sync(key, state_epoch, start_offset).error

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ReadResult:
        result = self.read_sync(key, leader_epoch)
        return ReadResult(result.error, result.state, result.message)

    async def write_state(
        self,
        key: SharePartitionKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: tuple[PersistedBatch, ...],
    ) -> ErrorCode:
        return self.write_sync(
            key,
            state_epoch=state_epoch,
            leader_epoch=leader_epoch,
            start_offset=start_offset,
            delivery_complete_count=delivery_complete_count,
            batches=batches,
        ).error

    async def delete_state(self, key: SharePartitionKey) -> ErrorCode:
        return self.delete_sync(key).error

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadResult:
        result = self.read_summary_sync(key)
        return ReadResult(result.error, result.state, result.message)


def _implements_the_protocol(service: ShareCoordinatorService) -> SharePersister:
    return service  # mypy checks here that the service is a SharePersister


# The share persister every caller shares (``share_persister`` and ``share_coordinator``).
SHARE_PERSISTER: Service[SharePersister] = Service(SERVICE, ShareCoordinatorService)
