"""The share coordinator's state for one ``__share_group_state`` partition, without I/O.

Behaviour follows Kafka 4.4's ``ShareCoordinatorShard``. Every operation is a pure function of the
current state: it returns the records to append and the answer to give once they are durable. The
state changes only through ``replay``, which the owner calls for each record after the append
succeeded, and at load time for every record in the log. So a failed append changes nothing.

Per share-partition key the shard keeps the merged state, the highest leader epoch and state
epoch seen, and how many ShareUpdates followed the last snapshot.

* initialize: ShareSnapshot with the requested state epoch and start offset, no batches, snapshot
  epoch one past the previous one (0 the first time); FENCED_STATE_EPOCH when the state epoch is
  older than the recorded one.
* write: INVALID_REQUEST for a negative partition, leader or state epoch or an uninitialized key;
  FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH for stale epochs; then a ShareUpdate holding only the
  written batches, or, once ``share.coordinator.snapshot.update.records.per.snapshot`` updates
  followed the last snapshot, a ShareSnapshot holding the whole merged state. The start offset
  only moves forward; a write keeps the recorded leader and state epochs (reads move the leader
  epoch).
* read: the merged state; a read with a new leader epoch also appends a record carrying it.
* read summary: start offset, delivery complete count and epochs (start offset -1 when unknown).
* delete: a tombstone (ShareSnapshot key, null value) when the key exists.
* a transaction marker (KIP-1289, ``txn_markers``): the COMMIT/ABORT control batch a transaction
  wrote to this partition resolves the TX_PENDING records it staged in every key here, as it is
  replayed; ``settle_markers`` then gives the ShareUpdates that write the outcome out explicitly
  (for readers of the log that do not interpret markers), which change nothing on replay.
* cold partitions (``snapshot_cold_partitions``, Kafka's ``snapshotColdPartitions``, run every
  ``share.coordinator.cold.partition.snapshot.interval.ms``): a fresh ShareSnapshot of every key
  whose write timestamp (that of its latest snapshot; a ShareUpdate carries none) is at least
  the interval old: the same state, snapshot epoch one up, create timestamp kept, write
  timestamp now. Nothing when every key's latest snapshot already is such a cold one (create
  and write timestamps differ): the partition is quiet. So a key written once and never again
  stops holding the state log's prune point at its old snapshot.
* Every operation answers UNKNOWN_TOPIC_OR_PARTITION when the topic id or partition is not in the
  cluster.

Batches are merged with ``merge_batches`` (later writes win per offset). Kafka 4.4 instead keeps,
for overlapping offsets, the batch with the higher (delivery count, delivery state); the two agree
whenever writes never lower that pair, which holds without KIP-1289 (an abort lowers
TX_PENDING back to AVAILABLE). GROUP_ID_NOT_FOUND is listed in the RPC schemas but Kafka's share
coordinator never returns it, and neither does kemu. Pruning the topic below the oldest
snapshot still needed is the service's (``service.redundant_below``).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from kemu.coordinator.share.persister import (
    UNINITIALIZED_START_OFFSET,
    PersistedBatch,
    PersistedState,
    SharePartitionKey,
    merge_batches,
)
from kemu.coordinator.share.records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateRecordKey,
    StateValue,
)
from kemu.coordinator.share.txn_markers import resolve
from kemu.protocol.errors import ErrorCode

# Kafka's Errors messages, so that clients and logs read the same.
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
NEGATIVE_LEADER_EPOCH = "The leader epoch cannot be a negative number."
NEGATIVE_STATE_EPOCH = "The state epoch cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
FENCED_LEADER_EPOCH_MESSAGE = (
    "The leader epoch in the request is older than the epoch on the broker."
)
FENCED_STATE_EPOCH_MESSAGE = (
    "The coordinator rejected the request because the state epoch did not match."
)
UNKNOWN_TOPIC_OR_PARTITION_MESSAGE = "This server does not host this topic-partition."

DEFAULT_UPDATES_PER_SNAPSHOT = 500
NO_START = -1  # combine() with it drops no batch

PartitionCount = Callable[[uuid.UUID], "int | None"]
"""How many partitions the topic with this id has; None when it does not exist."""


@dataclass(frozen=True, slots=True)
class ShareState:
    """The merged state of one share partition (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: tuple[PersistedBatch, ...] = ()
    create_timestamp: int = 0
    write_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class StateRecord:
    key: StateRecordKey
    value: StateValue | None  # None is a tombstone


@dataclass(frozen=True, slots=True)
class ShardResult:
    """Records to append, then the answer: an error, or the state a read asked for."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    records: tuple[StateRecord, ...] = ()
    state: PersistedState | None = None


def _failed(error: ErrorCode, message: str) -> ShardResult:
    return ShardResult(error, message)


class ShareCoordinatorShard:
    def __init__(
        self,
        partition_count: PartitionCount,
        updates_per_snapshot: int = DEFAULT_UPDATES_PER_SNAPSHOT,
    ) -> None:
        self.partition_count = partition_count
        self.updates_per_snapshot = updates_per_snapshot
        self.states: dict[SharePartitionKey, ShareState] = {}
        self.leader_epochs: dict[SharePartitionKey, int] = {}
        self.state_epochs: dict[SharePartitionKey, int] = {}
        self.updates_since_snapshot: dict[SharePartitionKey, int] = {}
        # keys a marker resolved since their last record: the batches it resolved
        self.marker_resolved: dict[SharePartitionKey, tuple[PersistedBatch, ...]] = {}

    def __iter__(self) -> Iterator[tuple[SharePartitionKey, ShareState]]:
        return iter(sorted(self.states.items()))

    # --- operations ---------------------------------------------------------------------------

    def initialize(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int, *, now_ms: int
    ) -> ShardResult:
        if key.partition < 0:
            return _failed(ErrorCode.invalid_request, NEGATIVE_PARTITION_ID)
        if state_epoch < 0:
            return _failed(ErrorCode.invalid_request, NEGATIVE_STATE_EPOCH)
        if self.state_epochs.get(key, state_epoch) > state_epoch:
            return _failed(ErrorCode.fenced_state_epoch, FENCED_STATE_EPOCH_MESSAGE)
        unknown = self._unknown_partition(key)
        if unknown is not None:
            return unknown
        current = self.states.get(key)
        snapshot = ShareSnapshotValue(
            snapshot_epoch=0 if current is None else current.snapshot_epoch + 1,
            state_epoch=state_epoch,
            leader_epoch=0,
            start_offset=start_offset,
            create_timestamp=now_ms,
            write_timestamp=now_ms,
            delivery_complete_count=-1 if start_offset == UNINITIALIZED_START_OFFSET else 0,
        )
        return ShardResult(records=(StateRecord(_key(SHARE_SNAPSHOT, key), snapshot),))

    def write(
        self,
        key: SharePartitionKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: tuple[PersistedBatch, ...],
        now_ms: int,
    ) -> ShardResult:
        if key.partition < 0:
            return _failed(ErrorCode.invalid_request, NEGATIVE_PARTITION_ID)
        if leader_epoch < 0:
            return _failed(ErrorCode.invalid_request, NEGATIVE_LEADER_EPOCH)
        if state_epoch < 0:
            return _failed(ErrorCode.invalid_request, NEGATIVE_STATE_EPOCH)
        current = self.states.get(key)
        if current is None:
            return _failed(ErrorCode.invalid_request, WRITE_UNINITIALIZED)
        if self.leader_epochs.get(key, leader_epoch) > leader_epoch:
            return _failed(ErrorCode.fenced_leader_epoch, FENCED_LEADER_EPOCH_MESSAGE)
        if self.state_epochs.get(key, state_epoch) > state_epoch:
            return _failed(ErrorCode.fenced_state_epoch, FENCED_STATE_EPOCH_MESSAGE)
        unknown = self._unknown_partition(key)
        if unknown is not None:
            return unknown
        record = self._state_record(
            key,
            current,
            leader_epoch=current.leader_epoch,
            start_offset=start_offset,
            delivery_complete_count=delivery_complete_count,
            batches=batches,
            now_ms=now_ms,
        )
        return ShardResult(records=(record,))

    def read(self, key: SharePartitionKey, leader_epoch: int, *, now_ms: int) -> ShardResult:
        if key.partition < 0:
            return _failed(ErrorCode.invalid_request, NEGATIVE_PARTITION_ID)
        if leader_epoch < 0:
            return _failed(ErrorCode.invalid_request, NEGATIVE_LEADER_EPOCH)
        current = self.states.get(key)
        if current is None:
            return _failed(ErrorCode.invalid_request, READ_UNINITIALIZED)
        recorded_epoch = self.leader_epochs.get(key)
        if recorded_epoch is not None and recorded_epoch > leader_epoch:
            return _failed(ErrorCode.fenced_leader_epoch, FENCED_LEADER_EPOCH_MESSAGE)
        unknown = self._unknown_partition(key)
        if unknown is not None:
            return unknown
        state = PersistedState(
            current.state_epoch,
            current.start_offset,
            current.leader_epoch,
            current.delivery_complete_count,
            current.batches,
        )
        if recorded_epoch == leader_epoch:
            return ShardResult(state=state)
        # A new leader took over: record its epoch so that the old one is fenced from now on.
        record = self._state_record(
            key,
            current,
            leader_epoch=leader_epoch,
            start_offset=current.start_offset,
            delivery_complete_count=current.delivery_complete_count,
            batches=(),
            now_ms=now_ms,
        )
        return ShardResult(records=(record,), state=state)

    def read_summary(self, key: SharePartitionKey) -> ShardResult:
        if key.partition < 0:
            return _failed(ErrorCode.invalid_request, NEGATIVE_PARTITION_ID)
        unknown = self._unknown_partition(key)
        if unknown is not None:
            return unknown
        current = self.states.get(key)
        if current is None:
            return ShardResult(state=PersistedState(0, UNINITIALIZED_START_OFFSET, 0, -1))
        return ShardResult(
            state=PersistedState(
                current.state_epoch,
                current.start_offset,
                current.leader_epoch,
                current.delivery_complete_count,
            )
        )

    def delete(self, key: SharePartitionKey) -> ShardResult:
        if key.partition < 0:
            return _failed(ErrorCode.invalid_request, NEGATIVE_PARTITION_ID)
        unknown = self._unknown_partition(key)
        if unknown is not None:
            return unknown
        if key not in self.states:
            return ShardResult()
        return ShardResult(records=(StateRecord(_key(SHARE_SNAPSHOT, key), None),))

    def delete_topic(self, topic_id: uuid.UUID) -> ShardResult:
        """Tombstones for every key of a deleted topic (Kafka does this on topic deletion)."""
        return ShardResult(
            records=tuple(
                StateRecord(_key(SHARE_SNAPSHOT, key), None)
                for key, _ in self
                if key.topic_id == topic_id
            )
        )

    def snapshot_cold_partitions(self, *, now_ms: int, interval_ms: int) -> ShardResult:
        """Kafka's ``snapshotColdPartitions``: a ShareSnapshot of the unchanged state of every key
        not snapshotted for ``interval_ms``, so that its older records become redundant."""
        cold_snapshotted = sum(
            1 for state in self.states.values() if state.create_timestamp != state.write_timestamp
        )
        if cold_snapshotted == len(self.states):
            return ShardResult()  # quiet: every key's latest snapshot is a cold one already
        records = []
        for key, current in self:
            if now_ms - current.write_timestamp < interval_ms:
                continue
            snapshot = ShareSnapshotValue(
                snapshot_epoch=current.snapshot_epoch + 1,
                state_epoch=current.state_epoch,
                leader_epoch=current.leader_epoch,
                start_offset=current.start_offset,
                create_timestamp=current.create_timestamp,
                write_timestamp=now_ms,
                state_batches=current.batches,
                delivery_complete_count=current.delivery_complete_count,
            )
            records.append(StateRecord(_key(SHARE_SNAPSHOT, key), snapshot))
        return ShardResult(records=tuple(records))

    # --- replay -------------------------------------------------------------------------------

    def replay(self, key: StateRecordKey, value: StateValue | None) -> None:
        """Apply one record of the log: a snapshot replaces the state, an update merges."""
        share_key = SharePartitionKey(key.group_id, key.topic_id, key.partition)
        self.marker_resolved.pop(share_key, None)
        if key.record_type == SHARE_SNAPSHOT:
            if value is None:
                self.states.pop(share_key, None)
                self.leader_epochs.pop(share_key, None)
                self.state_epochs.pop(share_key, None)
                self.updates_since_snapshot.pop(share_key, None)
            elif isinstance(value, ShareSnapshotValue):
                self._replay_snapshot(share_key, value)
        elif key.record_type == SHARE_UPDATE and isinstance(value, ShareUpdateValue):
            self._replay_update(share_key, value)

    def _replay_snapshot(self, key: SharePartitionKey, value: ShareSnapshotValue) -> None:
        self._raise_epoch(self.leader_epochs, key, value.leader_epoch)
        self._raise_epoch(self.state_epochs, key, value.state_epoch)
        self.states[key] = ShareState(
            value.snapshot_epoch,
            value.state_epoch,
            value.leader_epoch,
            value.start_offset,
            value.delivery_complete_count,
            value.state_batches,
            value.create_timestamp,
            value.write_timestamp,
        )
        if self.updates_since_snapshot.get(key, 0) >= self.updates_per_snapshot:
            self.updates_since_snapshot[key] = 0

    def _replay_update(self, key: SharePartitionKey, value: ShareUpdateValue) -> None:
        self._raise_epoch(self.leader_epochs, key, value.leader_epoch)
        current = self.states.get(key)
        if current is None:
            # An update without its snapshot (pruned log): it is all we know.
            self.states[key] = ShareState(
                value.snapshot_epoch,
                0,
                value.leader_epoch,
                value.start_offset,
                value.delivery_complete_count,
                value.state_batches,
            )
        else:
            start = current.start_offset if value.start_offset == -1 else value.start_offset
            self.states[key] = ShareState(  # not dataclasses.replace: this runs per record
                current.snapshot_epoch,
                current.state_epoch,
                current.leader_epoch if value.leader_epoch == -1 else value.leader_epoch,
                start,
                value.delivery_complete_count,
                combine(current.batches, value.state_batches, start),
                current.create_timestamp,
                current.write_timestamp,
            )
        self.updates_since_snapshot[key] = self.updates_since_snapshot.get(key, 0) + 1

    def replay_marker(
        self, producer_id: int, producer_epoch: int, commit: bool
    ) -> list[SharePartitionKey]:
        """Apply a transaction's COMMIT or ABORT marker of this partition's log (KIP-1289):
        resolve what it staged in every key here. Returns the keys it changed."""
        changed = []
        for key, current in list(self.states.items()):
            if current.start_offset < 0:
                continue
            resolution = resolve(
                current.start_offset, current.batches, producer_id, producer_epoch, commit
            )
            if resolution is None:
                continue
            self.states[key] = replace(
                current,
                start_offset=resolution.start_offset,
                delivery_complete_count=resolution.delivery_complete_count,
                batches=resolution.batches,
            )
            earlier = self.marker_resolved.get(key, ())
            self.marker_resolved[key] = (*earlier, *resolution.resolved)
            changed.append(key)
        return changed

    def settle_markers(self) -> ShardResult:
        """ShareUpdates stating what markers resolved since each key's last record.

        The resolved batches are stated with their outcome even where the new start offset has
        passed them (a replay drops those, so the state is the same): the latest record naming
        an offset then gives its outcome, ACKNOWLEDGED or ARCHIVED, which is what Kafka's ITs
        read back (``verifyLatestShareStateDeliveryState``), not the TX_PENDING of its stage."""
        records = []
        for key in sorted(self.marker_resolved):
            current = self.states.get(key)
            if current is None:
                continue
            update = ShareUpdateValue(
                snapshot_epoch=current.snapshot_epoch,
                leader_epoch=current.leader_epoch,
                start_offset=current.start_offset,
                state_batches=combine((), self.marker_resolved[key], NO_START),
                delivery_complete_count=current.delivery_complete_count,
            )
            records.append(StateRecord(_key(SHARE_UPDATE, key), update))
        return ShardResult(records=tuple(records))

    @staticmethod
    def _raise_epoch(
        epochs: dict[SharePartitionKey, int], key: SharePartitionKey, epoch: int
    ) -> None:
        if epochs.get(key, epoch) <= epoch:
            epochs[key] = epoch

    # --- helpers ------------------------------------------------------------------------------

    def _unknown_partition(self, key: SharePartitionKey) -> ShardResult | None:
        count = self.partition_count(key.topic_id)
        if count is None or key.partition >= count:
            return _failed(ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_OR_PARTITION_MESSAGE)
        return None

    def _state_record(
        self,
        key: SharePartitionKey,
        current: ShareState,
        *,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: tuple[PersistedBatch, ...],
        now_ms: int,
    ) -> StateRecord:
        """A ShareUpdate, or a full ShareSnapshot once enough updates followed the last one."""
        new_start = max(start_offset, current.start_offset)
        if start_offset == current.start_offset:
            count = max(delivery_complete_count, current.delivery_complete_count)
        elif start_offset < current.start_offset:
            count = current.delivery_complete_count  # a stale start offset brings a stale count
        else:
            count = delivery_complete_count
        if self.updates_since_snapshot.get(key, 0) >= self.updates_per_snapshot:
            snapshot = ShareSnapshotValue(
                snapshot_epoch=current.snapshot_epoch + 1,
                state_epoch=current.state_epoch,
                leader_epoch=leader_epoch,
                start_offset=new_start,
                create_timestamp=now_ms,
                write_timestamp=now_ms,
                state_batches=combine(current.batches, batches, new_start),
                delivery_complete_count=count,
            )
            return StateRecord(_key(SHARE_SNAPSHOT, key), snapshot)
        update = ShareUpdateValue(
            snapshot_epoch=current.snapshot_epoch,
            leader_epoch=leader_epoch,
            start_offset=new_start,
            state_batches=combine((), batches, new_start),
            delivery_complete_count=count,
        )
        return StateRecord(_key(SHARE_UPDATE, key), update)


def combine(
    existing: tuple[PersistedBatch, ...], updates: tuple[PersistedBatch, ...], start_offset: int
) -> tuple[PersistedBatch, ...]:
    """``merge_batches``, also when the updates overlap one another (the later one wins)."""
    ordered = sorted(updates, key=lambda b: b.first_offset)
    overlapping = any(a.last_offset >= b.first_offset for a, b in itertools.pairwise(ordered))
    if not overlapping:
        return merge_batches(existing, updates, start_offset)
    merged = existing
    for update in updates:
        merged = merge_batches(merged, (update,), start_offset)
    return merge_batches(merged, (), start_offset)


def _key(record_type: int, key: SharePartitionKey) -> StateRecordKey:
    return StateRecordKey(record_type, key.group_id, key.topic_id, key.partition)
