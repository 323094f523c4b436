"""ShareCoordinatorShard: Kafka 4.4's share-coordinator rules, without I/O.

Several scenarios are ports of Kafka's ShareCoordinatorShardTest (named after the Kafka test).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kemu.coordinator.share.persister import PersistedBatch, PersistedState, SharePartitionKey
from kemu.coordinator.share.records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateRecordKey,
    decode_record,
    encode_key,
    encode_value,
)
from kemu.coordinator.share.shard import (
    FENCED_LEADER_EPOCH_MESSAGE,
    FENCED_STATE_EPOCH_MESSAGE,
    NEGATIVE_LEADER_EPOCH,
    NEGATIVE_PARTITION_ID,
    NEGATIVE_STATE_EPOCH,
    READ_UNINITIALIZED,
    WRITE_UNINITIALIZED,
    ShardResult,
    ShareCoordinatorShard,
    ShareState,
    combine,
)
from kemu.protocol.errors import ErrorCode

TOPIC = uuid.UUID(int=0xABCDEF)
OTHER_TOPIC = uuid.UUID(int=0x123456)
KEY = SharePartitionKey("group1", TOPIC, 0)
NOW = 1_700_000_000_000


def make_shard(updates_per_snapshot: int = 500) -> ShareCoordinatorShard:
    counts = {TOPIC: 2, OTHER_TOPIC: 1}
    return ShareCoordinatorShard(counts.get, updates_per_snapshot)


def apply(shard: ShareCoordinatorShard, result: ShardResult) -> ShardResult:
    """Replay what an operation produced, through the real byte encoding, as the service does."""
    for record in result.records:
        key, value = decode_record(encode_key(record.key), encode_value(record.value))
        shard.replay(key, value)
    return result


def init_by_replay(
    shard: ShareCoordinatorShard, key: SharePartitionKey, state_epoch: int = 0
) -> None:
    """Kafka's test helper initSharePartition: a snapshot with leader epoch -1, start -1."""
    shard.replay(
        StateRecordKey(SHARE_SNAPSHOT, key.group_id, key.topic_id, key.partition),
        ShareSnapshotValue(0, state_epoch, -1, -1, 0, 0, (), -1),
    )


def write(
    shard: ShareCoordinatorShard,
    batches: tuple[PersistedBatch, ...],
    *,
    start_offset: int = 0,
    count: int = 0,
    leader_epoch: int = 0,
    state_epoch: int = 0,
    key: SharePartitionKey = KEY,
) -> ShardResult:
    return shard.write(
        key,
        state_epoch=state_epoch,
        leader_epoch=leader_epoch,
        start_offset=start_offset,
        delivery_complete_count=count,
        batches=batches,
        now_ms=NOW,
    )


# --- initialize ---------------------------------------------------------------------------------


def test_initialize_writes_a_snapshot() -> None:
    shard = make_shard()
    result = shard.initialize(KEY, 5, 10, now_ms=NOW)
    assert result.error is ErrorCode.none
    [record] = result.records
    assert record.key == StateRecordKey(SHARE_SNAPSHOT, "group1", TOPIC, 0)
    assert record.value == ShareSnapshotValue(0, 5, 0, 10, NOW, NOW, (), 0)
    assert shard.states == {}  # nothing changes before the record is replayed
    apply(shard, result)
    assert shard.states[KEY] == ShareState(0, 5, 0, 10, 0, (), NOW, NOW)


def test_initialize_without_start_offset_has_unknown_delivery_complete_count() -> None:
    shard = make_shard()
    [record] = shard.initialize(KEY, 0, -1, now_ms=NOW).records
    assert record.value == ShareSnapshotValue(0, 0, 0, -1, NOW, NOW, (), -1)


def test_reinitialize_bumps_snapshot_epoch_and_fences_older_state_epochs() -> None:
    shard = make_shard()
    apply(shard, shard.initialize(KEY, 5, 10, now_ms=NOW))
    again = apply(shard, shard.initialize(KEY, 5, 20, now_ms=NOW + 1))
    assert again.records[0].value == ShareSnapshotValue(1, 5, 0, 20, NOW + 1, NOW + 1, (), 0)
    stale = shard.initialize(KEY, 4, 0, now_ms=NOW)
    assert (stale.error, stale.message, stale.records) == (
        ErrorCode.fenced_state_epoch,
        FENCED_STATE_EPOCH_MESSAGE,
        (),
    )


@pytest.mark.parametrize(
    ("key", "state_epoch", "error", "message"),
    [
        (SharePartitionKey("g", TOPIC, -1), 0, ErrorCode.invalid_request, NEGATIVE_PARTITION_ID),
        (KEY, -1, ErrorCode.invalid_request, NEGATIVE_STATE_EPOCH),
        (
            SharePartitionKey("g", uuid.UUID(int=9), 0),
            0,
            ErrorCode.unknown_topic_or_partition,
            None,
        ),
        (SharePartitionKey("g", TOPIC, 2), 0, ErrorCode.unknown_topic_or_partition, None),
    ],
)
def test_initialize_errors(
    key: SharePartitionKey, state_epoch: int, error: ErrorCode, message: str | None
) -> None:
    result = make_shard().initialize(key, state_epoch, 0, now_ms=NOW)
    assert result.error is error
    assert result.records == ()
    if message is not None:
        assert result.message == message


# --- write --------------------------------------------------------------------------------------


def test_write_fails_on_uninitialized_partition() -> None:
    shard = make_shard()
    result = write(shard, (PersistedBatch(0, 10, 0, 1),))
    assert (result.error, result.message, result.records) == (
        ErrorCode.invalid_request,
        WRITE_UNINITIALIZED,
        (),
    )


def test_write_appends_an_update_with_only_the_written_batches() -> None:
    shard = make_shard()
    apply(shard, shard.initialize(KEY, 0, 0, now_ms=NOW))
    apply(shard, write(shard, (PersistedBatch(0, 10, 0, 1),), count=0))
    result = apply(shard, write(shard, (PersistedBatch(11, 20, 0, 1),), count=21))
    [record] = result.records
    assert record.key.record_type == SHARE_UPDATE
    assert record.value == ShareUpdateValue(0, 0, 0, (PersistedBatch(11, 20, 0, 1),), 21)
    # testSubsequentWriteStateSnapshotEpochUpdatesSuccessfully: same state coalesces
    assert shard.states[KEY].batches == (PersistedBatch(0, 20, 0, 1),)
    assert shard.states[KEY].delivery_complete_count == 21


def test_write_snapshots_after_the_configured_number_of_updates() -> None:
    shard = make_shard(updates_per_snapshot=2)
    apply(shard, shard.initialize(KEY, 0, 0, now_ms=NOW))
    kinds = []
    for index in range(5):
        result = apply(shard, write(shard, (PersistedBatch(index, index, 2, 1),)))
        kinds.append(result.records[0].key.record_type)
    assert kinds == [SHARE_UPDATE, SHARE_UPDATE, SHARE_SNAPSHOT, SHARE_UPDATE, SHARE_UPDATE]
    assert shard.states[KEY].snapshot_epoch == 1
    assert shard.states[KEY].batches == (PersistedBatch(0, 4, 2, 1),)
    snapshot = shard.states[KEY]
    assert snapshot.create_timestamp == NOW


def test_non_sequential_batch_updates() -> None:
    """Kafka's testNonSequentialBatchUpdates: a batch between two updates is never lost."""
    shard = make_shard(updates_per_snapshot=0)  # every write is a snapshot
    init_by_replay(shard, KEY)
    apply(shard, shard.read(KEY, 0, now_ms=NOW))  # the first read records leader epoch 0
    apply(shard, write(shard, (PersistedBatch(0, 10, 0, 1),)))
    b1 = PersistedBatch(100, 109, 1, 1)
    b2 = PersistedBatch(110, 119, 1, 2)
    b3 = PersistedBatch(120, 129, 1, 0)
    first = apply(shard, write(shard, (b1, b2, b3), start_offset=100))
    assert first.records[0].value == ShareSnapshotValue(3, 0, 0, 100, NOW, NOW, (b1, b2, b3), 0)
    apply(shard, write(shard, (PersistedBatch(100, 109, 2, 1),), start_offset=-1, count=10))
    final = apply(
        shard, write(shard, (PersistedBatch(120, 129, 2, 1),), start_offset=110, count=10)
    )
    assert final.records[0].value == ShareSnapshotValue(
        5, 0, 0, 110, NOW, NOW, (b2, PersistedBatch(120, 129, 2, 1)), 10
    )


def test_start_offset_only_moves_forward() -> None:
    shard = make_shard()
    apply(shard, shard.initialize(KEY, 0, 50, now_ms=NOW))
    apply(shard, write(shard, (PersistedBatch(50, 59, 2, 1),), start_offset=60, count=0))
    stale = apply(shard, write(shard, (PersistedBatch(40, 65, 0, 1),), start_offset=40, count=7))
    assert stale.records[0].value == ShareUpdateValue(0, 0, 60, (PersistedBatch(60, 65, 0, 1),), 0)
    assert shard.states[KEY].start_offset == 60
    assert shard.states[KEY].batches == (PersistedBatch(60, 65, 0, 1),)


def test_delivery_complete_count_never_falls_at_the_same_start_offset() -> None:
    shard = make_shard()
    apply(shard, shard.initialize(KEY, 0, 0, now_ms=NOW))
    apply(shard, write(shard, (PersistedBatch(0, 4, 2, 1),), count=5))
    lower = apply(shard, write(shard, (PersistedBatch(5, 5, 0, 1),), count=3))
    assert lower.records[0].value.delivery_complete_count == 5  # type: ignore[union-attr]


def test_write_keeps_the_recorded_leader_epoch() -> None:
    shard = make_shard()
    apply(shard, shard.initialize(KEY, 0, 0, now_ms=NOW))
    result = apply(shard, write(shard, (PersistedBatch(0, 0, 2, 1),), leader_epoch=7))
    assert result.records[0].value.leader_epoch == 0  # type: ignore[union-attr]
    assert shard.leader_epochs[KEY] == 0


def test_write_fenced_leader_epoch() -> None:
    shard = make_shard()
    init_by_replay(shard, KEY)
    apply(shard, shard.read(KEY, 1, now_ms=NOW))
    result = write(shard, (PersistedBatch(0, 10, 0, 1),), leader_epoch=0)
    assert (result.error, result.message, result.records) == (
        ErrorCode.fenced_leader_epoch,
        FENCED_LEADER_EPOCH_MESSAGE,
        (),
    )
    assert shard.leader_epochs[KEY] == 1


def test_write_fenced_state_epoch() -> None:
    shard = make_shard()
    init_by_replay(shard, KEY, state_epoch=1)
    result = write(shard, (PersistedBatch(11, 20, 0, 1),), leader_epoch=5, state_epoch=0)
    assert (result.error, result.records) == (ErrorCode.fenced_state_epoch, ())
    assert shard.state_epochs[KEY] == 1


@pytest.mark.parametrize(
    ("key", "leader_epoch", "state_epoch", "error", "message"),
    [
        (
            SharePartitionKey("group1", TOPIC, -1),
            0,
            0,
            ErrorCode.invalid_request,
            NEGATIVE_PARTITION_ID,
        ),
        (KEY, -1, 0, ErrorCode.invalid_request, NEGATIVE_LEADER_EPOCH),
        (KEY, 0, -1, ErrorCode.invalid_request, NEGATIVE_STATE_EPOCH),
        (
            SharePartitionKey("group1", TOPIC, 5),
            0,
            0,
            ErrorCode.invalid_request,
            WRITE_UNINITIALIZED,
        ),
    ],
)
def test_write_invalid_requests(
    key: SharePartitionKey, leader_epoch: int, state_epoch: int, error: ErrorCode, message: str
) -> None:
    shard = make_shard()
    init_by_replay(shard, KEY)
    result = write(shard, (), key=key, leader_epoch=leader_epoch, state_epoch=state_epoch)
    assert (result.error, result.message, result.records) == (error, message, ())


def test_write_to_a_partition_the_topic_does_not_have() -> None:
    shard = make_shard()
    key = SharePartitionKey("group1", OTHER_TOPIC, 3)
    init_by_replay(shard, key)
    result = write(shard, (), key=key)
    assert result.error is ErrorCode.unknown_topic_or_partition


def test_overlapping_batches_in_one_write_later_wins() -> None:
    shard = make_shard()
    apply(shard, shard.initialize(KEY, 0, 0, now_ms=NOW))
    result = apply(shard, write(shard, (PersistedBatch(0, 9, 0, 1), PersistedBatch(5, 6, 2, 1))))
    expected = (PersistedBatch(0, 4, 0, 1), PersistedBatch(5, 6, 2, 1), PersistedBatch(7, 9, 0, 1))
    assert result.records[0].value.state_batches == expected  # type: ignore[union-attr]
    assert shard.states[KEY].batches == expected


# --- read ---------------------------------------------------------------------------------------


def test_read_fails_on_uninitialized_partition() -> None:
    result = make_shard().read(KEY, 1, now_ms=NOW)
    assert (result.error, result.message) == (ErrorCode.invalid_request, READ_UNINITIALIZED)


def test_read_returns_the_merged_state() -> None:
    shard = make_shard()
    apply(shard, shard.initialize(KEY, 3, 0, now_ms=NOW))
    apply(shard, write(shard, (PersistedBatch(0, 10, 0, 1),), state_epoch=3, count=4))
    result = shard.read(KEY, 0, now_ms=NOW)
    assert result.records == ()
    assert result.state == PersistedState(3, 0, 0, 4, (PersistedBatch(0, 10, 0, 1),))


def test_read_with_a_new_leader_epoch_records_it() -> None:
    """Kafka's testReadStateLeaderEpochUpdateSuccess."""
    shard = make_shard()
    init_by_replay(shard, KEY)
    result = apply(shard, shard.read(KEY, 2, now_ms=NOW))
    assert result.state == PersistedState(0, -1, -1, -1, ())
    [record] = result.records
    assert record.key.record_type == SHARE_UPDATE
    assert record.value == ShareUpdateValue(0, 2, -1, (), -1)
    assert shard.leader_epochs[KEY] == 2
    assert shard.read(KEY, 2, now_ms=NOW).records == ()  # same epoch: nothing to record
    fenced = shard.read(KEY, 1, now_ms=NOW)
    assert (fenced.error, fenced.message) == (
        ErrorCode.fenced_leader_epoch,
        FENCED_LEADER_EPOCH_MESSAGE,
    )


def test_read_rejects_a_negative_leader_epoch() -> None:
    shard = make_shard()
    init_by_replay(shard, KEY)
    result = shard.read(KEY, -1, now_ms=NOW)
    assert (result.error, result.message, result.records) == (
        ErrorCode.invalid_request,
        NEGATIVE_LEADER_EPOCH,
        (),
    )


def test_read_of_a_deleted_topic() -> None:
    shard = make_shard()
    key = SharePartitionKey("group1", uuid.UUID(int=77), 0)
    init_by_replay(shard, key)
    assert shard.read(key, 0, now_ms=NOW).error is ErrorCode.unknown_topic_or_partition


# --- read summary -------------------------------------------------------------------------------


def test_read_summary() -> None:
    shard = make_shard()
    assert make_shard().read_summary(KEY).state == PersistedState(0, -1, 0, -1)
    apply(shard, shard.initialize(KEY, 2, 0, now_ms=NOW))
    apply(shard, shard.read(KEY, 4, now_ms=NOW))
    apply(
        shard, write(shard, (PersistedBatch(0, 2, 2, 1),), leader_epoch=4, state_epoch=2, count=3)
    )
    summary = shard.read_summary(KEY)
    assert summary.records == ()
    assert summary.state == PersistedState(2, 0, 4, 3)
    assert shard.read_summary(SharePartitionKey("g", TOPIC, -1)).error is ErrorCode.invalid_request


# --- delete and tombstones ----------------------------------------------------------------------


def test_delete_writes_a_tombstone_that_forgets_everything() -> None:
    shard = make_shard()
    apply(shard, shard.initialize(KEY, 1, 0, now_ms=NOW))
    result = apply(shard, shard.delete(KEY))
    [record] = result.records
    assert (record.key, record.value) == (StateRecordKey(SHARE_SNAPSHOT, "group1", TOPIC, 0), None)
    assert KEY not in shard.states
    assert KEY not in shard.leader_epochs
    assert KEY not in shard.state_epochs
    # After a delete an older state epoch may initialize again.
    assert shard.initialize(KEY, 0, 0, now_ms=NOW).error is ErrorCode.none


def test_delete_of_unknown_key_succeeds_without_records() -> None:
    assert make_shard().delete(KEY) == ShardResult()


def test_delete_topic_tombstones_only_its_keys() -> None:
    shard = make_shard()
    other = SharePartitionKey("group1", OTHER_TOPIC, 0)
    for key in (KEY, SharePartitionKey("group2", TOPIC, 1), other):
        apply(shard, shard.initialize(key, 0, 0, now_ms=NOW))
    result = apply(shard, shard.delete_topic(TOPIC))
    assert len(result.records) == 2
    assert list(shard.states) == [other]


# --- replay -------------------------------------------------------------------------------------


def test_replay_snapshot_then_updates() -> None:
    """Kafka's testReplayWithShareSnapshot, then an update merged on top."""
    shard = make_shard()
    snapshot_key = StateRecordKey(SHARE_SNAPSHOT, "group1", TOPIC, 0)
    shard.replay(
        snapshot_key, ShareSnapshotValue(0, 0, 1, 0, 5, 5, (PersistedBatch(0, 10, 0, 1),), 11)
    )
    assert shard.leader_epochs[KEY] == 1
    shard.replay(
        snapshot_key, ShareSnapshotValue(1, 1, 2, 0, 6, 6, (PersistedBatch(11, 12, 0, 1),), 13)
    )
    assert shard.states[KEY] == ShareState(1, 1, 2, 0, 13, (PersistedBatch(11, 12, 0, 1),), 6, 6)
    update_key = StateRecordKey(SHARE_UPDATE, "group1", TOPIC, 0)
    shard.replay(update_key, ShareUpdateValue(1, -1, 12, (PersistedBatch(12, 14, 2, 1),), 3))
    assert shard.states[KEY] == ShareState(1, 1, 2, 12, 3, (PersistedBatch(12, 14, 2, 1),), 6, 6)
    assert shard.updates_since_snapshot[KEY] == 1


def test_replay_update_without_snapshot() -> None:
    shard = make_shard()
    shard.replay(
        StateRecordKey(SHARE_UPDATE, "group1", TOPIC, 0),
        ShareUpdateValue(2, 3, 4, (PersistedBatch(4, 5, 0, 1),), 0),
    )
    assert shard.states[KEY] == ShareState(2, 0, 3, 4, 0, (PersistedBatch(4, 5, 0, 1),))


def test_staged_fields_survive_write_and_replay() -> None:
    shard = make_shard()
    apply(shard, shard.initialize(KEY, 0, 0, now_ms=NOW))
    staged = PersistedBatch(
        0, 4, 5, 1, staged_producer_id=42, staged_producer_epoch=3, staged_ack_type=1
    )
    apply(shard, write(shard, (staged,)))
    assert shard.read(KEY, 0, now_ms=NOW).state.batches == (staged,)  # type: ignore[union-attr]
    aborted = PersistedBatch(0, 4, 0, 1)
    apply(shard, write(shard, (aborted,)))
    assert shard.read(KEY, 0, now_ms=NOW).state.batches == (aborted,)  # type: ignore[union-attr]


def test_combine_prunes_below_the_start_offset() -> None:
    assert combine((PersistedBatch(0, 9, 0, 1),), (PersistedBatch(8, 12, 2, 1),), 5) == (
        PersistedBatch(5, 7, 0, 1),
        PersistedBatch(8, 12, 2, 1),
    )


# --- properties ---------------------------------------------------------------------------------

_write_steps = st.lists(
    st.tuples(
        st.integers(-1, 30),  # start offset (-1: unchanged)
        st.integers(-1, 20),  # delivery complete count
        st.lists(
            st.builds(
                lambda first, length, state, count: PersistedBatch(
                    first, first + length, state, count
                ),
                st.integers(0, 40),
                st.integers(0, 6),
                st.sampled_from([0, 2, 4, 5]),
                st.integers(1, 4),
            ),
            max_size=3,
        ).map(tuple),
        st.booleans(),  # a read with a new leader epoch before this write
    ),
    max_size=12,
)


def _play(updates_per_snapshot: int, steps: list[Any]) -> tuple[ShareCoordinatorShard, list[Any]]:
    shard = make_shard(updates_per_snapshot)
    log: list[Any] = []

    def run(result: ShardResult) -> None:
        assert result.error is ErrorCode.none, result
        for record in result.records:
            log.append(record)
        apply(shard, result)

    run(shard.initialize(KEY, 0, 0, now_ms=NOW))
    leader_epoch = 0
    for start, count, batches, bump in steps:
        if bump:
            leader_epoch += 1
            run(shard.read(KEY, leader_epoch, now_ms=NOW))
        run(write(shard, batches, start_offset=start, count=count, leader_epoch=leader_epoch))
    return shard, log


@pytest.mark.slow  # 150 generated histories: make test, not make check
@settings(max_examples=150, deadline=None)
@given(_write_steps, st.integers(0, 4))
def test_snapshot_cadence_never_changes_the_state(steps: list[Any], cadence: int) -> None:
    """Whether a write became an update or a snapshot, the merged state is the same, and
    replaying the log from scratch rebuilds exactly the live state."""
    reference, _ = _play(500, steps)
    shard, log = _play(cadence, steps)
    expected = reference.states[KEY]
    actual = shard.states[KEY]
    assert (actual.start_offset, actual.delivery_complete_count, actual.batches) == (
        expected.start_offset,
        expected.delivery_complete_count,
        expected.batches,
    )
    assert actual.leader_epoch == expected.leader_epoch
    rebuilt = make_shard(cadence)
    for record in log:
        rebuilt.replay(record.key, record.value)
    assert rebuilt.states == shard.states
    assert rebuilt.leader_epochs == shard.leader_epochs
    assert rebuilt.updates_since_snapshot == shard.updates_since_snapshot
    # The start offset never goes back, and nothing below it is kept.
    assert all(b.first_offset >= actual.start_offset for b in actual.batches)
