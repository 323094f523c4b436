"""KIP-1191 in the sans-IO share-partition core: which transitions produce dead letters, with
which cause, and how ``complete_dead_letters`` finishes them (ARCHIVING -> ARCHIVED)."""

from __future__ import annotations

from share_helpers import FakeLog, ack, acquire

from kemu.broker.share.partition import (
    CAUSE_DELIVERY_LIMIT,
    CAUSE_REJECTED,
    DeadLetter,
    SharePartitionConfig,
    SharePartitionCore,
)
from kemu.broker.share.states import AckType, RecordState
from kemu.coordinator.share.persister import PersistedBatch, PersistedState

ACCEPT, RELEASE, REJECT = AckType.ACCEPT, AckType.RELEASE, AckType.REJECT
G, R = RecordState.ARCHIVING, RecordState.ARCHIVED


def dlq_core(
    records: int = 4, limit: int = 2, dlq: bool = True
) -> tuple[FakeLog, SharePartitionCore]:
    log = FakeLog()
    log.append(records)
    core, _ = SharePartitionCore.from_persisted(
        PersistedState(0, 0),
        SharePartitionConfig(
            delivery_count_limit=limit, dlq_enabled=dlq, record_lock_duration_ms=100
        ),
        reset_offset=0,
    )
    return log, core


def test_a_reject_goes_archiving_and_asks_for_one_dead_letter() -> None:
    log, core = dlq_core()
    acquire(core, log, "m1", now=0)
    result = core.acknowledge("m1", [ack(0, 3, ACCEPT, REJECT, REJECT, ACCEPT)], 1)
    assert result.effects.dead_letters == (DeadLetter(1, 2, 1, CAUSE_REJECTED),)
    # the ARCHIVING state is in the batches to persist first, and it holds the start offset
    persisted = [(b.first_offset, b.last_offset, b.delivery_state) for b in result.effects.batches]
    assert persisted == [(1, 2, 3), (3, 3, 2)]
    assert core.start == 1 and core.state_of(1) is G
    core.check_invariants()


def test_completing_the_dead_letters_archives_them_and_moves_the_start() -> None:
    log, core = dlq_core()
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 3, ACCEPT, REJECT, REJECT, ACCEPT)], 1)
    assert core.archiving() == [(1, 2, 1)]
    done = core.complete_dead_letters([(1, 2)])
    assert done.dead_letters == ()
    assert core.start == 4 and core.spans() == []
    assert done.start_moved and done.start_offset == 4
    assert core.archiving() == []
    # again: nothing left to do, nothing to write
    assert not core.complete_dead_letters([(1, 2)]).durable
    core.check_invariants()


def test_release_and_lock_expiry_at_the_limit_are_the_delivery_count_cause() -> None:
    log, core = dlq_core(records=2, limit=2)
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 1, RELEASE)], 1)
    acquire(core, log, "m1", now=2)  # delivery 2 of 2
    released = core.acknowledge("m1", [ack(0, 0, RELEASE)], 3)
    assert released.effects.dead_letters == (DeadLetter(0, 0, 2, CAUSE_DELIVERY_LIMIT),)
    expired = core.expire_locks(10_000)
    assert expired.dead_letters == (DeadLetter(1, 1, 2, CAUSE_DELIVERY_LIMIT),)
    assert core.spans() == [(0, 1, G, 2, None)]


def test_below_the_limit_a_release_is_no_dead_letter() -> None:
    log, core = dlq_core(limit=3)
    acquire(core, log, "m1", now=0)
    assert core.acknowledge("m1", [ack(0, 3, RELEASE)], 1).effects.dead_letters == ()


def test_without_a_dead_letter_queue_rejects_archive_at_once() -> None:
    log, core = dlq_core(dlq=False)
    acquire(core, log, "m1", now=0)
    result = core.acknowledge("m1", [ack(0, 3, REJECT)], 1)
    assert result.effects.dead_letters == ()
    assert core.start == 4


def test_a_committed_transactional_reject_is_a_dead_letter_an_accept_is_not() -> None:
    log, core = dlq_core()
    acquire(core, log, "m1", now=0)
    core.stage("m1", 100, 1, [ack(0, 3, ACCEPT, REJECT, ACCEPT, ACCEPT)], 1)
    committed = core.apply_marker(100, 1, commit=True, now_ms=2)
    assert committed.dead_letters == (DeadLetter(1, 1, 1, CAUSE_REJECTED),)
    assert core.start == 1 and core.state_of(1) is G
    core.complete_dead_letters([(1, 1)])
    assert core.start == 4


def test_an_abort_at_the_limit_is_a_delivery_count_dead_letter() -> None:
    log, core = dlq_core(records=1, limit=2)
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 0, RELEASE)], 1)
    acquire(core, log, "m1", now=2)
    core.stage("m1", 100, 1, [ack(0, 0, ACCEPT)], 3)
    aborted = core.apply_marker(100, 1, commit=False, now_ms=4)
    assert aborted.dead_letters == (DeadLetter(0, 0, 2, CAUSE_DELIVERY_LIMIT),)


def test_archiving_records_loaded_from_persisted_state_are_recovered_dead_letters() -> None:
    # a crash after ARCHIVING was persisted: the load asks for the writes again, flagged
    # recovered so the caller looks in the DLQ topic first; the cause follows Kafka's rule on
    # resume (delivery count at the limit -> delivery count exceeded, else rejected)
    state = PersistedState(
        0,
        0,
        batches=(
            PersistedBatch(0, 1, int(G), 1),
            PersistedBatch(2, 2, 2, 1),
            PersistedBatch(3, 3, int(G), 2),
        ),
    )
    config = SharePartitionConfig(delivery_count_limit=2, dlq_enabled=True)
    core, effects = SharePartitionCore.from_persisted(state, config, reset_offset=0)
    assert effects.dead_letters == (
        DeadLetter(0, 1, 1, CAUSE_REJECTED, recovered=True),
        DeadLetter(3, 3, 2, CAUSE_DELIVERY_LIMIT, recovered=True),
    )
    assert core.start == 0
    done = core.complete_dead_letters([(0, 1), (3, 3)])
    assert core.start == 4 and core.spans() == []
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in done.batches] == []
    assert done.start_offset == 4
    core.check_invariants()


def test_a_partial_completion_keeps_the_start_at_the_first_archiving_record() -> None:
    log, core = dlq_core()
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 3, REJECT)], 1)
    core.complete_dead_letters([(2, 3)])
    assert core.start == 0 and core.spans() == [(0, 1, G, 1, None), (2, 3, R, 1, None)]
    core.check_invariants()
    core.complete_dead_letters([(0, 1)])
    assert core.start == 4
