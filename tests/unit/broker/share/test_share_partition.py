"""SharePartitionCore: every transition, driven with real batches and a virtual clock."""

from __future__ import annotations

import pytest

from kemu.broker.share.partition import (
    AckBatch,
    AcquireMode,
    SharePartitionConfig,
    SharePartitionCore,
)
from kemu.broker.share.states import AckType, RecordState
from kemu.coordinator.share.persister import PersistedBatch, PersistedState
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import CONTROL_COMMIT
from tests.unit.share_helpers import FakeLog, ack, acquire, new_core, ranges

A, Q, K, G, R, T = (
    RecordState.AVAILABLE,
    RecordState.ACQUIRED,
    RecordState.ACKNOWLEDGED,
    RecordState.ARCHIVING,
    RecordState.ARCHIVED,
    RecordState.TX_PENDING,
)
GAP, ACCEPT, RELEASE, REJECT, RENEW = (int(t) for t in AckType)


def log_of(*sizes: int) -> FakeLog:
    log = FakeLog()
    for size in sizes:
        log.append(size)
    return log


# --- initialisation ---------------------------------------------------------------------------


def test_uninitialised_start_takes_the_reset_offset_and_must_be_written() -> None:
    core, effects = SharePartitionCore.from_persisted(
        PersistedState(0, -1), SharePartitionConfig(), reset_offset=42
    )
    assert (core.start, core.end) == (42, 42)
    assert effects.start_moved and effects.durable and effects.start_offset == 42


def test_initialised_start_is_kept_and_nothing_is_written() -> None:
    core, effects = SharePartitionCore.from_persisted(
        PersistedState(3, 10), SharePartitionConfig(), reset_offset=0
    )
    assert core.start == 10 and core.state_epoch == 3
    assert not effects.durable


def test_loading_persisted_batches_fills_gaps_and_skips_the_terminal_prefix() -> None:
    batches = (
        PersistedBatch(5, 9, 2, 1),  # below start: dropped
        PersistedBatch(10, 12, 4, 1),  # terminal prefix: SPSO moves past it
        PersistedBatch(15, 16, 0, 2),  # AVAILABLE, delivered twice
        PersistedBatch(17, 17, 5, 1, 77, 3, 1),  # TX_PENDING staged ACCEPT
        PersistedBatch(18, 19, 2, 1),
    )
    core = new_core(start=10, batches=batches)
    core.check_invariants()
    assert core.start == 13 and core.end == 20
    assert core.spans() == [
        (13, 14, A, 0, None),
        (15, 16, A, 2, None),
        (17, 17, T, 1, None),
        (18, 19, K, 1, None),
    ]
    assert core.delivery_complete_count == 2
    assert core.pending_transactions() == {(77, 3)}


def test_log_start_past_the_persisted_start_archives_what_is_gone() -> None:
    config = SharePartitionConfig()
    core, effects = SharePartitionCore.from_persisted(
        PersistedState(0, 0, batches=(PersistedBatch(0, 9, 0, 1),)),
        config,
        reset_offset=0,
        log_start_offset=5,
    )
    assert core.start == 5
    assert effects.start_moved
    assert core.spans() == [(5, 9, A, 1, None)]


# --- acquire ----------------------------------------------------------------------------------


def test_acquire_takes_whole_batches_and_locks_them() -> None:
    log, core = log_of(3, 4, 5), new_core(lock_ms=1000)
    result = acquire(core, log, "m1", now=100, max_records=5)
    # batch-optimized: the second batch is taken whole although it passes max_records
    assert ranges(result) == [(0, 6, 1)]
    assert result.count == 7
    assert result.records == (log.batches[0][1], log.batches[1][1])
    assert core.spans() == [(0, 6, Q, 1, "m1")]
    assert core.end == 7
    assert core.next_deadline() == 1100
    # acquisitions are persisted as AVAILABLE with their delivery count
    assert [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in result.effects.batches
    ] == [(0, 6, 0, 1)]
    core.check_invariants()


def test_a_second_member_gets_the_next_records_never_the_same_ones() -> None:
    log, core = log_of(3, 4, 5), new_core()
    first = acquire(core, log, "m1", now=0, max_records=3)
    second = acquire(core, log, "m2", now=0, max_records=3)
    third = acquire(core, log, "m3", now=0, max_records=3)
    assert ranges(first) == [(0, 2, 1)]
    assert ranges(second) == [(3, 6, 1)]
    assert ranges(third) == [(7, 11, 1)]
    assert acquire(core, log, "m4", now=0).count == 0
    assert core.owner_of(4) == "m2"


def test_record_limit_acquires_exactly_max_records_and_leaves_the_rest_available() -> None:
    log, core = log_of(10), new_core()
    result = acquire(core, log, "m1", now=0, max_records=4, mode=AcquireMode.RECORD_LIMIT)
    assert ranges(result) == [(0, 3, 1)]
    assert result.records == (log.batches[0][1],)  # the whole batch goes out
    assert core.spans() == [(0, 3, Q, 1, "m1"), (4, 9, A, 0, None)]
    again = acquire(core, log, "m2", now=0, max_records=4, mode=AcquireMode.RECORD_LIMIT)
    assert ranges(again) == [(4, 7, 1)]
    assert again.records == (log.batches[0][1],)


def test_batch_optimized_splits_acquired_records_by_batch_size_on_batch_boundaries() -> None:
    log, core = log_of(3, 3, 3, 3), new_core()
    result = acquire(core, log, "m1", now=0, max_records=100, batch_size=5)
    assert ranges(result) == [(0, 5, 1), (6, 11, 1)]


def test_max_bytes_stops_at_a_batch_boundary_but_always_sends_one_batch() -> None:
    log, core = log_of(3, 3, 3), new_core()
    size = len(log.batches[0][1])
    result = acquire(core, log, "m1", now=0, max_bytes=size + 1)
    assert ranges(result) == [(0, 2, 1)]
    tiny = acquire(core, log, "m1", now=0, max_bytes=1)
    assert ranges(tiny) == [(3, 5, 1)]
    assert acquire(core, log, "m1", now=0, max_bytes=1, min_one=False).count == 0


def test_the_in_flight_limit_stops_new_records_but_not_redelivery() -> None:
    log, core = log_of(*([10] * 30)), new_core(max_in_flight=100)
    first = acquire(core, log, "m1", now=0, max_records=1000)
    assert first.count == 100 and core.in_flight == 100
    assert not core.can_acquire()
    assert acquire(core, log, "m2", now=0).count == 0
    assert core.acknowledge("m1", [ack(20, 29, RELEASE)], 1).error == ErrorCode.none
    assert core.can_acquire()
    again = acquire(core, log, "m2", now=2)
    assert ranges(again) == [(20, 29, 2)]
    assert core.in_flight == 100


def test_the_in_flight_limit_overshoots_by_at_most_one_batch() -> None:
    log, core = log_of(7, 7, 7), new_core(max_in_flight=10)
    assert acquire(core, log, "m1", now=0).count == 14
    assert core.end == 14


def test_released_records_are_redelivered_with_a_higher_delivery_count() -> None:
    log, core = log_of(5), new_core()
    acquire(core, log, "m1", now=0)
    release = core.acknowledge("m1", [ack(0, 4, RELEASE)], 10)
    assert release.error == ErrorCode.none
    assert release.effects.available
    assert core.spans() == [(0, 4, A, 1, None)]
    assert core.next_fetch_offset() == 0
    assert ranges(acquire(core, log, "m2", now=20)) == [(0, 4, 2)]


def test_redelivery_reports_different_delivery_counts_as_separate_ranges() -> None:
    log, core = log_of(6), new_core()
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 2, RELEASE)], 1)
    acquire(core, log, "m1", now=2)  # 0-2 at count 2
    core.acknowledge("m1", [ack(0, 5, RELEASE)], 3)
    assert ranges(acquire(core, log, "m2", now=4)) == [(0, 2, 3), (3, 5, 2)]


# --- acknowledge ------------------------------------------------------------------------------


def test_accept_acknowledges_and_the_start_offset_advances() -> None:
    log, core = log_of(5, 5), new_core()
    acquire(core, log, "m1", now=0)
    result = core.acknowledge("m1", [ack(0, 4, ACCEPT)], 1)
    assert result.error == ErrorCode.none
    assert core.start == 5
    # Kafka writes the acknowledged records with the start offset they had, 0, and 5 records
    # complete; the move to 5 is written by the next write
    effects = result.effects
    assert effects.start_moved and effects.start_offset == 0
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in effects.batches] == [
        (0, 4, int(K))
    ]
    assert effects.delivery_complete_count == 5
    assert core.delivery_complete_count == 0
    later = core.acknowledge("m1", [ack(5, 6, ACCEPT)], 2).effects
    assert later.start_offset == 5 and later.delivery_complete_count == 2


def test_the_start_offset_stops_at_the_first_record_still_in_flight() -> None:
    log, core = log_of(10), new_core()
    acquire(core, log, "m1", now=0)
    result = core.acknowledge("m1", [ack(3, 6, ACCEPT)], 1)
    assert core.start == 0
    assert core.delivery_complete_count == 4
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in result.effects.batches] == [
        (3, 6, 2)
    ]
    assert core.spans() == [(0, 2, Q, 1, "m1"), (3, 6, K, 1, None), (7, 9, Q, 1, "m1")]
    core.acknowledge("m1", [ack(0, 2, ACCEPT)], 2)
    assert core.start == 7
    assert core.delivery_complete_count == 0


def test_reject_and_gap_archive() -> None:
    log, core = log_of(4), new_core()
    acquire(core, log, "m1", now=0)
    assert core.acknowledge("m1", [ack(1, 1, REJECT), ack(2, 2, GAP)], 1).error == ErrorCode.none
    assert core.spans() == [(0, 0, Q, 1, "m1"), (1, 2, R, 1, None), (3, 3, Q, 1, "m1")]


def test_per_offset_types_apply_offset_by_offset() -> None:
    log, core = log_of(5), new_core()
    acquire(core, log, "m1", now=0)
    result = core.acknowledge("m1", [ack(0, 4, ACCEPT, RELEASE, REJECT, GAP, ACCEPT)], 1)
    assert result.error == ErrorCode.none
    assert core.spans() == [(1, 1, A, 1, None), (2, 3, R, 1, None), (4, 4, K, 1, None)]
    assert core.start == 1


def test_release_at_the_delivery_limit_archives() -> None:
    log, core = log_of(2), new_core(limit=2)
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 1, RELEASE)], 1)
    assert ranges(acquire(core, log, "m1", now=2)) == [(0, 1, 2)]
    result = core.acknowledge("m1", [ack(0, 1, RELEASE)], 3)
    assert not result.effects.available
    assert core.start == 2 and core.spans() == []


def test_dlq_sends_rejected_and_exhausted_records_to_archiving() -> None:
    log = log_of(2)
    core = new_core(limit=1)
    core.config = SharePartitionConfig(delivery_count_limit=1, dlq_enabled=True)
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 0, REJECT), ack(1, 1, RELEASE)], 1)
    assert core.spans() == [(0, 1, G, 1, None)]  # ARCHIVING holds the start offset


def test_acknowledging_another_members_records_fails_and_changes_nothing() -> None:
    log, core = log_of(4, 4), new_core()
    acquire(core, log, "m1", now=0, max_records=4)
    acquire(core, log, "m2", now=0, max_records=4)
    before = core.spans()
    result = core.acknowledge("m1", [ack(0, 3, ACCEPT), ack(4, 4, ACCEPT)], 1)
    assert result.error == ErrorCode.invalid_record_state
    assert core.spans() == before  # all or nothing
    assert not result.effects.durable


@pytest.mark.parametrize(
    ("batches", "code"),
    [
        ([ack(0, 3, ACCEPT, ACCEPT)], ErrorCode.invalid_request),  # type count mismatch
        ([ack(0, 3)], ErrorCode.invalid_request),  # no types
        ([ack(0, 3, 9)], ErrorCode.invalid_request),  # unknown type
        ([ack(3, 1, ACCEPT)], ErrorCode.invalid_request),  # first after last
        ([ack(0, 2, ACCEPT), ack(2, 3, ACCEPT)], ErrorCode.invalid_request),  # overlap
        ([ack(2, 3, ACCEPT), ack(0, 1, ACCEPT)], ErrorCode.invalid_request),  # unordered
        ([ack(0, 9, ACCEPT)], ErrorCode.invalid_request),  # past the window
        ([ack(1, 2, ACCEPT)], ErrorCode.invalid_record_state),  # 2 is not acquired
    ],
)
def test_invalid_acknowledgements(batches: list[AckBatch], code: ErrorCode) -> None:
    log, core = log_of(4, 2), new_core()
    acquire(core, log, "m1", now=0, max_records=2, mode=AcquireMode.RECORD_LIMIT)
    before = core.spans()
    result = core.acknowledge("m1", batches, 1)
    assert result.error == code and result.message
    assert core.spans() == before


def test_a_batch_entirely_below_the_start_offset_is_skipped() -> None:
    """As Kafka 4.4.0 (SharePartition.acknowledge: "already archived", a trace log), e.g. a
    holder whose lock expired acknowledging after another member completed the records: NONE,
    nothing changes, nothing is written (share/test_share_acks_below_start_kafka.py)."""
    log, core = log_of(2, 2), new_core()
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 1, ACCEPT)], 1)
    before = core.spans()
    for kind in (ACCEPT, RELEASE, REJECT, GAP, RENEW):
        result = core.acknowledge("m1", [ack(0, 1, kind)], 2)
        assert (result.error, result.message) == (ErrorCode.none, None), kind
        assert not result.effects.durable and not result.effects.available
    assert core.start == 2 and core.spans() == before
    # another member's, too: nobody holds complete records
    assert core.acknowledge("m2", [ack(0, 1, ACCEPT)], 3).error == ErrorCode.none


def test_a_batch_below_the_start_offset_does_not_fail_the_others() -> None:
    log, core = log_of(2, 2, 2), new_core()
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 1, ACCEPT)], 1)
    result = core.acknowledge("m1", [ack(0, 0, ACCEPT), ack(2, 3, ACCEPT)], 2)
    assert result.error == ErrorCode.none and core.start == 4
    assert core.owner_of(4) == "m1"
    # a batch above that is refused still fails the lot, the skipped one with it
    refused = core.acknowledge("m2", [ack(0, 1, ACCEPT), ack(4, 5, ACCEPT)], 3)
    assert refused.error == ErrorCode.invalid_record_state
    assert core.start == 4 and core.owner_of(4) == "m1"


def test_a_malformed_batch_below_the_start_offset_is_still_invalid_request() -> None:
    """Kafka checks the acknowledge types (and the request's batches) before the start."""
    log, core = log_of(2, 2), new_core()
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 1, ACCEPT)], 1)
    for batches in ([ack(0, 1, 9)], [ack(0, 1, ACCEPT, ACCEPT, ACCEPT)], [ack(1, 0, ACCEPT)]):
        assert core.acknowledge("m1", batches, 2).error == ErrorCode.invalid_request, batches


def test_a_release_below_the_start_offset_defers_nothing() -> None:
    log, core = log_of(2, 2), new_core()
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 1, ACCEPT)], 1)
    result = core.acknowledge("m1", [ack(0, 1, RELEASE), ack(2, 3, RELEASE)], 2, defer_release=True)
    assert result.error == ErrorCode.none
    assert result.deferred == (ack(2, 3, RELEASE),)


def test_a_batch_straddling_the_start_offset_acknowledges_from_the_start() -> None:
    log, core = log_of(2, 2), new_core()
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 1, ACCEPT)], 1)
    result = core.acknowledge("m1", [ack(1, 3, ACCEPT)], 2)
    assert result.error == ErrorCode.none and core.start == 4


def test_acknowledging_after_everything_completed_is_an_invalid_record_state() -> None:
    log, core = log_of(2), new_core()
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 1, ACCEPT)], 1)
    assert core.acknowledge("m1", [ack(5, 6, ACCEPT)], 2).error == ErrorCode.invalid_record_state


# --- locks ------------------------------------------------------------------------------------


def test_lock_expiry_makes_records_available_again() -> None:
    log, core = log_of(3), new_core(lock_ms=1000)
    acquire(core, log, "m1", now=0)
    assert not core.expire_locks(999).durable
    effects = core.expire_locks(1000)
    assert effects.available
    assert [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in effects.batches
    ] == [(0, 2, 0, 1)]
    assert core.spans() == [(0, 2, A, 1, None)]
    assert core.next_deadline() is None
    assert core.acknowledge("m1", [ack(0, 2, ACCEPT)], 1001).error == (
        ErrorCode.invalid_record_state
    )


def test_lock_expiry_at_the_delivery_limit_archives() -> None:
    log, core = log_of(3), new_core(lock_ms=10, limit=2)
    acquire(core, log, "m1", now=0)
    core.expire_locks(10)
    acquire(core, log, "m1", now=20)
    effects = core.expire_locks(30)
    assert not effects.available
    assert core.start == 3


def test_lock_expiry_at_the_limit_behind_a_held_record_is_persisted() -> None:
    log, core = log_of(1, 1), new_core(lock_ms=10, limit=1)
    acquire(core, log, "m1", now=0, max_records=1)
    acquire(core, log, "m2", now=5, max_records=1)
    effects = core.expire_locks(14)  # only m1's lock (deadline 10) has passed
    # archived at the limit, written with the start it had (0), as Kafka writes
    assert [(b.first_offset, b.delivery_state, b.delivery_count) for b in effects.batches] == [
        (0, int(R), 1)
    ]
    assert effects.start_offset == 0
    assert core.start == 1
    core.acknowledge("m2", [ack(1, 1, RELEASE)], 14)
    assert core.start == 2


def test_lock_expiry_archive_is_written_when_the_start_cannot_move() -> None:
    log, core = log_of(1, 1), new_core(lock_ms=10, limit=1)
    acquire(core, log, "m1", now=5, max_records=1)
    acquire(core, log, "m2", now=0, max_records=1)
    effects = core.expire_locks(12)  # m2's lock on offset 1 passed, m1 still holds 0
    assert [(b.first_offset, b.delivery_state, b.delivery_count) for b in effects.batches] == [
        (1, 4, 1)
    ]
    assert core.start == 0


def test_renew_extends_the_lock_and_writes_nothing() -> None:
    log, core = log_of(4), new_core(lock_ms=100)
    acquire(core, log, "m1", now=0)
    renewed = core.acknowledge("m1", [ack(0, 1, RENEW)], 50)
    assert renewed.error == ErrorCode.none and not renewed.effects.durable
    core.expire_locks(100)
    assert core.spans() == [(0, 1, Q, 1, "m1"), (2, 3, A, 1, None)]
    core.expire_locks(150)
    assert core.spans() == [(0, 3, A, 1, None)]


def test_renew_of_records_not_held_fails() -> None:
    log, core = log_of(4), new_core(lock_ms=100)
    acquire(core, log, "m1", now=0)
    core.expire_locks(100)
    assert core.acknowledge("m1", [ack(0, 1, RENEW)], 101).error == ErrorCode.invalid_record_state


def test_only_the_expired_acquisition_is_released() -> None:
    log, core = log_of(2, 2), new_core(lock_ms=100)
    acquire(core, log, "m1", now=0, max_records=2)
    acquire(core, log, "m2", now=50, max_records=2)
    core.expire_locks(120)
    assert core.spans() == [(0, 1, A, 1, None), (2, 3, Q, 1, "m2")]
    assert core.next_deadline() == 150


# --- member departure -------------------------------------------------------------------------


def test_release_member_frees_its_records_keeping_the_delivery_count() -> None:
    # Kafka 4.4.0 releases a departed member's records with DeliveryCountOps.NO_OP
    log, core = log_of(2, 2), new_core()
    acquire(core, log, "m1", now=0, max_records=2)
    acquire(core, log, "m2", now=0, max_records=2)
    effects = core.release_member("m1", 5)
    assert effects.available
    assert core.spans() == [(0, 1, A, 1, None), (2, 3, Q, 1, "m2")]
    assert not core.release_member("nobody", 6).durable


def test_release_member_archives_at_the_delivery_limit() -> None:
    log, core = log_of(2), new_core(limit=1)
    acquire(core, log, "m1", now=0)
    core.release_member("m1", 5)
    assert core.start == 2  # both archived: their one delivery reached the limit


# --- read_committed ---------------------------------------------------------------------------


def test_read_committed_archives_aborted_and_control_batches() -> None:
    log = FakeLog()
    log.append(2)  # 0-1
    aborted_base = log.append(3, transactional=True, producer_id=7)  # 2-4 aborted
    control = log.append_control(7)  # 5
    log.append(2)  # 6-7
    core = new_core()
    result = acquire(core, log, "m1", now=0, read_committed=True, aborted=[(7, aborted_base, 5)])
    assert ranges(result) == [(0, 1, 1), (6, 7, 1)]
    assert result.records == (log.batches[0][1], log.batches[3][1])
    assert core.state_of(aborted_base) is R and core.state_of(control) is R
    core.acknowledge("m1", [ack(0, 1, ACCEPT), ack(6, 7, ACCEPT)], 1)
    assert core.start == 8


def test_read_committed_keeps_another_producers_committed_batch_inside_an_aborted_range() -> None:
    log = FakeLog()
    aborted_first = log.append(2, transactional=True, producer_id=7)  # 0-1, aborted later
    committed = log.append(2, transactional=True, producer_id=8)  # 2-3, committed
    log.append(1, transactional=True, producer_id=7)  # 4, still producer 7's aborted txn
    log.append_control(8, marker=CONTROL_COMMIT)  # 5
    log.append_control(7)  # 6: producer 7 aborts [0, 6]
    core = new_core()
    result = acquire(core, log, "m1", now=0, read_committed=True, aborted=[(7, aborted_first, 6)])
    assert ranges(result) == [(committed, committed + 1, 1)]
    assert core.start == committed  # the aborted records before it are archived and gone
    assert core.state_of(4) is R


def test_read_uncommitted_hands_control_batches_out_for_the_client_to_skip() -> None:
    log = FakeLog()
    log.append(1)
    log.append_control(7)
    core = new_core()
    result = acquire(core, log, "m1", now=0)
    assert ranges(result) == [(0, 1, 1)]
    assert core.acknowledge("m1", [ack(0, 1, ACCEPT, GAP)], 1).error == ErrorCode.none
    assert core.start == 2


# --- offsets missing from the log -------------------------------------------------------------


def test_offsets_missing_between_new_batches_are_archived() -> None:
    log = FakeLog()
    log.append(2)
    log.skip(3)
    log.append(2)
    core = new_core()
    result = acquire(core, log, "m1", now=0)
    assert ranges(result) == [(0, 1, 1), (5, 6, 1)]
    core.acknowledge("m1", [ack(0, 1, ACCEPT)], 1)
    assert core.start == 5


def test_available_records_the_log_lost_are_archived_on_the_next_read() -> None:
    log, core = log_of(2, 2, 2), new_core()
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 5, RELEASE)], 1)
    del log.batches[0:2]  # compaction removed 0-3
    result = acquire(core, log, "m2", now=2)
    assert ranges(result) == [(4, 5, 2)]
    assert core.start == 4


def test_log_start_advance_archives_available_and_later_released_records() -> None:
    log, core = log_of(2, 2, 2), new_core()
    acquire(core, log, "m1", now=0, max_records=2)
    acquire(core, log, "m2", now=0, max_records=2)
    core.acknowledge("m2", [ack(2, 3, RELEASE)], 1)
    effects = core.advance_log_start(4)
    assert core.spans() == [(0, 1, Q, 1, "m1"), (2, 3, R, 1, None)]  # 2-3 lost with the log
    assert not effects.start_moved  # m1 still holds 0-1
    core.acknowledge("m1", [ack(0, 1, RELEASE)], 2)
    assert core.start == 4 and core.end == 4


def test_a_log_start_that_did_not_move_changes_nothing() -> None:
    log, core = log_of(2, 2, 2), new_core()
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(2, 3, ACCEPT)], 1)
    core.advance_log_start(0)
    before = core.spans()
    effects = core.advance_log_start(0)
    assert not effects.durable and not effects.available and not effects.dead_letters
    assert effects.start_offset == core.start == 0
    assert effects.delivery_complete_count == 2
    assert core.spans() == before


def test_log_start_past_an_empty_window_moves_it() -> None:
    core = new_core()
    effects = core.advance_log_start(100)
    assert effects.start_moved and core.start == core.end == 100


# --- KIP-1289 staging -------------------------------------------------------------------------


def staged_core() -> tuple[FakeLog, SharePartitionCore]:
    log, core = log_of(5), new_core(lock_ms=100)
    acquire(core, log, "m1", now=0)
    return log, core


def test_stage_moves_acquired_records_to_tx_pending_and_persists_the_stage() -> None:
    _, core = staged_core()
    result = core.stage("m1", 100, 1, [ack(0, 2, ACCEPT)], 10)
    assert result.error == ErrorCode.none
    assert core.spans()[0] == (0, 2, T, 1, "m1")
    staged = result.effects.batches[0]
    assert (staged.first_offset, staged.last_offset, staged.delivery_state) == (0, 2, 5)
    assert (staged.staged_producer_id, staged.staged_producer_epoch, staged.staged_ack_type) == (
        100,
        1,
        ACCEPT,
    )


def test_tx_pending_is_never_acquired_expired_released_or_passed_by_the_start() -> None:
    log, core = staged_core()
    core.stage("m1", 100, 1, [ack(0, 2, ACCEPT)], 10)
    core.acknowledge("m1", [ack(3, 4, RELEASE)], 11)
    core.expire_locks(10_000)
    core.release_member("m1", 10_001)
    assert core.spans()[0] == (0, 2, T, 1, "m1")
    assert ranges(acquire(core, log, "m2", now=10_002)) == [(3, 4, 2)]
    core.acknowledge("m2", [ack(3, 4, ACCEPT)], 10_003)
    assert core.start == 0  # blocked by TX_PENDING
    assert core.acknowledge("m1", [ack(0, 2, ACCEPT)], 1).error == ErrorCode.invalid_record_state


def test_commit_applies_the_staged_outcome() -> None:
    _, core = staged_core()
    core.stage("m1", 100, 1, [ack(0, 4, ACCEPT, ACCEPT, REJECT, ACCEPT, ACCEPT)], 10)
    assert core.apply_marker(100, 2, commit=True, now_ms=20).batches == ()  # wrong epoch
    assert core.apply_marker(101, 1, commit=True, now_ms=20).batches == ()  # wrong producer
    effects = core.apply_marker(100, 1, commit=True, now_ms=20)
    assert effects.start_moved and core.start == 5
    assert core.pending_transactions() == set()


def test_abort_makes_staged_records_available_with_their_delivery_count() -> None:
    log, core = staged_core()
    core.stage("m1", 100, 1, [ack(0, 4, REJECT)], 10)
    effects = core.apply_marker(100, 1, commit=False, now_ms=20)
    assert effects.available
    assert core.spans() == [(0, 4, A, 1, None)]
    assert ranges(acquire(core, log, "m2", now=30)) == [(0, 4, 2)]


def test_stage_accepts_only_accept_reject_and_gap() -> None:
    _, core = staged_core()
    for kind in (RELEASE, RENEW):
        result = core.stage("m1", 100, 1, [ack(0, 1, kind)], 10)
        assert result.error == ErrorCode.invalid_request
        assert result.message == "Only ACCEPT or REJECT permitted in transaction"
    assert core.stage("m2", 100, 1, [ack(0, 1, ACCEPT)], 10).error == ErrorCode.invalid_record_state
    gap = core.stage("m1", 100, 1, [ack(0, 1, GAP, ACCEPT)], 10)
    assert gap.error == ErrorCode.none
    assert core.spans()[:2] == [(0, 0, T, 1, "m1"), (1, 1, T, 1, "m1")]  # the gap too (Q8)
    core.apply_marker(100, 1, commit=True, now_ms=11)
    assert core.start == 2  # offset 0 archived, offset 1 acknowledged


def test_staged_state_survives_a_reload() -> None:
    log, core = staged_core()
    core.stage("m1", 100, 1, [ack(0, 2, ACCEPT)], 10)
    reloaded, _ = SharePartitionCore.from_persisted(
        PersistedState(0, core.start, batches=core.persisted_view()), core.config, reset_offset=0
    )
    assert reloaded.spans()[0] == (0, 2, T, 1, None)
    assert ranges(acquire(reloaded, log, "m2", now=0)) == [(3, 4, 2)]
    reloaded.apply_marker(100, 1, commit=True, now_ms=1)
    assert reloaded.start == 3


# --- spans stay coarse ------------------------------------------------------------------------


def test_uniform_batches_cost_one_span_each_and_merge_back() -> None:
    log, core = log_of(*([10] * 100)), new_core(max_in_flight=10_000)
    acquire(core, log, "m1", now=0, max_records=10_000)
    assert len(core.spans()) == 1  # one acquisition, one span
    core.acknowledge("m1", [ack(500, 999, ACCEPT)], 1)
    core.acknowledge("m1", [ack(10, 19, RELEASE)], 1)
    assert len(core.spans()) == 4
    core.acknowledge("m1", [ack(0, 9, ACCEPT)], 2)
    assert len(core.spans()) == 3 and core.start == 10
    core.check_invariants()
