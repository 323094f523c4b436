"""The TX_PENDING transitions the other KIP-1289 tests leave out (spec §5.2, §5.7, §11.3 and
Q6), on the sans-IO share-partition core: staging from states other than ACQUIRED, a marker
reaching records nobody staged, the log start passing staged records, an abort at the
delivery limit with a dead-letter queue, malformed batches (all or nothing), and the
control plane's operator actions."""

from __future__ import annotations

import pytest

from kemu.broker.share.acknowledgement import AckBatch
from kemu.broker.share.admin import expire_locks, set_range
from kemu.broker.share.partition import SharePartitionConfig, SharePartitionCore
from kemu.broker.share.states import RecordState
from kemu.coordinator.share.persister import PersistedState
from kemu.protocol.errors import ErrorCode
from tests.unit.share_helpers import FakeLog, ack, acquire, ranges

A, Q, K, G, R, T = (
    RecordState.AVAILABLE,
    RecordState.ACQUIRED,
    RecordState.ACKNOWLEDGED,
    RecordState.ARCHIVING,
    RecordState.ARCHIVED,
    RecordState.TX_PENDING,
)
ACCEPT, RELEASE, REJECT = 1, 2, 3


def acquired_five(**config: object) -> tuple[FakeLog, SharePartitionCore]:
    """m1 holds offsets 0-4, delivered once."""
    log = FakeLog()
    log.append(5)
    core, _ = SharePartitionCore.from_persisted(
        PersistedState(0, 0),
        SharePartitionConfig(**config),  # type: ignore[arg-type]
        reset_offset=0,
    )
    acquire(core, log, "m1", now=0)
    return log, core


def test_only_acquired_records_can_be_staged() -> None:
    """§11.3 InFlightStateTxnTest: staging from AVAILABLE or ACKNOWLEDGED fails, nothing
    changes (TX_PENDING is Q5's, in test_kip1289_markers)."""
    _, core = acquired_five()
    core.acknowledge("m1", [ack(0, 0, ACCEPT), ack(1, 1, RELEASE)], 1)
    before = core.spans()
    assert core.start == 1 and before[0][:3] == (1, 1, A)  # 0 ACKNOWLEDGED, past the start
    for first in (0, 1):  # 0 ACKNOWLEDGED (below the start now), 1 AVAILABLE
        refused = core.stage("m1", 100, 1, [ack(first, first, ACCEPT)], 2)
        assert refused.error is ErrorCode.invalid_record_state, first
        assert refused.effects.batches == ()
    assert core.spans() == before
    assert core.pending_transactions() == set()


def test_a_batch_starting_below_the_start_offset_is_not_staged() -> None:
    """A ShareAcknowledge skips the complete part of a batch that straddles the start offset,
    as Kafka does; a transaction cannot (seed 16 of the simulation): the member's ACCEPT of
    offset 0 was committed already, so a second transaction naming 0-1 would commit its output
    for 0 again. INVALID_RECORD_STATE, nothing staged, 1 still the member's."""
    _, core = acquired_five()
    core.stage("m1", 100, 1, [ack(0, 0, ACCEPT)], 1)
    core.apply_marker(100, 1, commit=True, now_ms=2)
    before = core.spans()
    assert core.start == 1 and before[0][:3] == (1, 4, Q)
    refused = core.stage("m1", 100, 2, [ack(0, 1, ACCEPT)], 3)
    assert refused.error is ErrorCode.invalid_record_state
    assert refused.message == (
        "The offset cannot be acknowledged in a transaction: records 0-0 are complete"
    )
    assert refused.effects.batches == ()
    assert core.spans() == before and core.owner_of(1) == "m1"
    assert core.pending_transactions() == set()
    # the plain acknowledgement of the same batch skips offset 0 and accepts 1
    assert core.acknowledge("m1", [ack(0, 1, ACCEPT)], 4).error is ErrorCode.none
    assert core.start == 2


def test_a_batch_entirely_below_the_start_offset_is_not_staged() -> None:
    """A ShareAcknowledge skips a batch entirely below the start offset, as Kafka does; a
    transaction refuses it, alone or beside records the member holds: the records are complete,
    a commit would put out its output for them a second time. INVALID_RECORD_STATE, nothing
    staged."""
    _, core = acquired_five()
    core.stage("m1", 100, 1, [ack(0, 1, ACCEPT)], 1)
    core.apply_marker(100, 1, commit=True, now_ms=2)
    before = core.spans()
    assert core.start == 2 and before[0][:3] == (2, 4, Q)
    for batches in ([ack(0, 1, ACCEPT)], [ack(0, 0, REJECT), ack(2, 4, ACCEPT)]):
        refused = core.stage("m1", 100, 2, batches, 3)
        assert refused.error is ErrorCode.invalid_record_state, batches
        assert refused.message is not None and refused.message.startswith(
            "The offset cannot be acknowledged in a transaction: records 0-"
        )
        assert refused.effects.batches == () and refused.staged == ()
    assert core.spans() == before and core.owner_of(2) == "m1"
    assert core.pending_transactions() == set()
    # the plain acknowledgement of the same batches skips 0-1 and accepts 2-4
    assert core.acknowledge("m1", [ack(0, 1, ACCEPT), ack(2, 4, ACCEPT)], 4).error is (
        ErrorCode.none
    )
    assert core.start == 5


def test_a_marker_changes_nothing_it_did_not_stage() -> None:
    """§11.3: a marker on ACQUIRED records (nothing staged) is a no-op, lock kept."""
    _, core = acquired_five()
    before = core.spans()
    deadline = core.next_deadline()
    for commit in (True, False):
        effects = core.apply_marker(100, 1, commit=commit, now_ms=5)
        assert effects.batches == () and not effects.available
    assert core.spans() == before and core.next_deadline() == deadline
    assert [s[2] for s in core.spans()] == [Q]


def test_the_log_start_passing_staged_records_leaves_them_to_their_transaction() -> None:
    """§5.7: TX_PENDING is left only by a marker; records retention or DeleteRecords removed
    meanwhile are archived by an abort (there is nothing to deliver again) and acknowledged
    by a commit."""
    for commit, outcome in ((True, K), (False, R)):
        _, core = acquired_five()
        assert core.stage("m1", 100, 1, [ack(0, 2, ACCEPT)], 1).error is ErrorCode.none
        core.advance_log_start(3)
        assert core.spans()[0][:3] == (0, 2, T) and core.start == 0
        assert core.pending_transactions() == {(100, 1)}
        effects = core.apply_marker(100, 1, commit=commit, now_ms=2)
        written = [(b.first_offset, b.last_offset, b.delivery_state) for b in effects.batches]
        assert written == [(0, 2, int(outcome))]
        assert core.start == 3, commit  # either way done: the start moves past them
        assert not effects.available


def test_an_abort_at_the_delivery_limit_with_a_dead_letter_queue_is_archiving() -> None:
    """Q6 with KIP-1191: the abort of a record's last delivery archives it as a release at the
    limit would, through the dead-letter queue (ARCHIVING, a dead letter due)."""
    log = FakeLog()
    log.append(2)
    config = SharePartitionConfig(delivery_count_limit=2, dlq_enabled=True)
    core, _ = SharePartitionCore.from_persisted(PersistedState(0, 0), config, reset_offset=0)
    acquire(core, log, "m1", now=0)
    core.acknowledge("m1", [ack(0, 1, RELEASE)], 1)
    assert ranges(acquire(core, log, "m1", now=2)) == [(0, 1, 2)]
    assert core.stage("m1", 100, 1, [ack(0, 1, ACCEPT)], 3).error is ErrorCode.none
    effects = core.apply_marker(100, 1, commit=False, now_ms=4)
    assert [s[2] for s in core.spans()] == [G]
    assert [(d.first_offset, d.last_offset) for d in effects.dead_letters] == [(0, 1)]
    assert ranges(acquire(core, log, "m2", now=5)) == []


def test_a_committed_reject_with_a_dead_letter_queue_is_archiving() -> None:
    """§5.2: TX_PENDING -> ARCHIVING on a committed REJECT when the group has a DLQ."""
    _, core = acquired_five(dlq_enabled=True)
    assert core.stage("m1", 100, 1, [ack(0, 0, REJECT)], 1).error is ErrorCode.none
    effects = core.apply_marker(100, 1, commit=True, now_ms=2)
    assert core.spans()[0][:3] == (0, 0, G)
    assert [(d.first_offset, d.last_offset) for d in effects.dead_letters] == [(0, 0)]


@pytest.mark.parametrize(
    ("batches", "message"),
    [
        ([AckBatch(0, 2, (1, 1))], "Acknowledge types must be one type or one per offset"),
        ([AckBatch(0, 0, ())], "Acknowledge types must be one type or one per offset"),
        ([AckBatch(2, 0, (1,))], "Acknowledgement batch first offset is invalid"),
        ([AckBatch(-1, 0, (1,))], "Acknowledgement batch first offset is invalid"),
        ([AckBatch(3, 7, (1,))], "The last offset in request is past acquired records"),
        ([AckBatch(0, 2, (1,)), AckBatch(2, 3, (1,))], "overlap or are unordered"),
        ([AckBatch(3, 3, (1,)), AckBatch(0, 0, (1,))], "overlap or are unordered"),
        ([AckBatch(0, 0, (9,))], "Only ACCEPT or REJECT permitted in transaction"),
        ([AckBatch(0, 0, (1,)), AckBatch(1, 1, (2,))], "Only ACCEPT or REJECT permitted"),
    ],
)
def test_malformed_batches_are_invalid_request_and_stage_nothing(
    batches: list[AckBatch], message: str
) -> None:
    """§10.5 and §5.2: the batches of a stage are checked as ShareAcknowledge's, and a
    partition's staging is all or nothing (a good batch beside a bad one is not staged)."""
    _, core = acquired_five()
    before = core.spans()
    result = core.stage("m1", 100, 1, batches, 1)
    assert result.error is ErrorCode.invalid_request
    assert result.message is not None and message in result.message
    assert result.effects.batches == () and core.spans() == before


def test_operator_actions_leave_tx_pending_to_its_transaction() -> None:
    """The control plane's release / archive of a range and its lock expiry (``docs/control.md``)
    skip TX_PENDING records (§5.2: only a marker leaves TX_PENDING)."""
    _, core = acquired_five()
    assert core.stage("m1", 100, 1, [ack(0, 1, ACCEPT)], 1).error is ErrorCode.none
    for target in (A, R):
        moved, _ = set_range(core, 0, 4, target)
        assert core.spans()[0][:3] == (0, 1, T), target
    assert moved == 3  # 2-4 only
    expired, _ = expire_locks(core, None, 2)
    assert expired == 0 and core.spans()[0][:3] == (0, 1, T)
    assert core.pending_transactions() == {(100, 1)}
    core.apply_marker(100, 1, commit=True, now_ms=3)
    assert core.start == 5  # 0-1 acknowledged, 2-4 archived by the operator


# --- a stage whose write was refused (§5.2 revertStagedTxnAcknowledge, §5.3 step 8, §7) -------


def test_a_reverted_stage_is_acquired_again_under_the_lock_it_had() -> None:
    """The records go back to ACQUIRED for the same member, staged fields cleared, delivery
    count unchanged, under their acquisition's deadline; nothing is written (the durable
    state never saw the stage) and the same stage then succeeds."""
    log, core = acquired_five(record_lock_duration_ms=1000)
    log.append(3)
    acquire(core, log, "m1", now=500)  # 5-7: a later lock
    before = core.spans()
    batches = [ack(0, 4, ACCEPT, ACCEPT, REJECT, ACCEPT, ACCEPT), ack(5, 6, ACCEPT)]
    staged = core.stage("m1", 100, 1, batches, 600)
    assert staged.error is ErrorCode.none
    assert [(r.first, r.last, r.deadline) for r in staged.staged] == [
        (0, 1, 1000),
        (2, 2, 1000),
        (3, 4, 1000),
        (5, 6, 1500),
    ]
    core.revert_stage(100, 1, staged.staged)
    core.check_invariants()
    assert core.spans() == before  # 3-4 and 5-6 apart again: their locks differ
    assert core.pending_transactions() == set()
    assert all(span.staged_pid == -1 for span in core.window._spans.spans)
    assert core.next_deadline() == 1000
    again = core.stage("m1", 100, 1, batches, 700)
    assert again.error is ErrorCode.none and again.effects.batches == staged.effects.batches
    core.apply_marker(100, 1, commit=True, now_ms=800)
    assert core.start == 7 and core.spans()[0][:3] == (7, 7, Q)


def test_a_reverted_retry_keeps_what_the_first_stage_made_durable() -> None:
    """A retry that grows a stage (0-1 staged and written before, 2-3 new) is taken back for
    2-3 only: 0-1 stay TX_PENDING, as the durable state holds them."""
    _, core = acquired_five()
    assert core.stage("m1", 100, 1, [ack(0, 1, ACCEPT)], 1).error is ErrorCode.none
    grown = core.stage("m1", 100, 1, [ack(0, 3, ACCEPT)], 2)
    assert [(r.first, r.last) for r in grown.staged] == [(2, 3)]
    core.revert_stage(100, 1, grown.staged)
    core.check_invariants()
    assert [s[:3] for s in core.spans()] == [(0, 1, T), (2, 4, Q)]
    assert core.pending_transactions() == {(100, 1)}


def test_a_lock_that_ran_out_during_the_refused_write_expires_at_once() -> None:
    """As Kafka's rolled-back acknowledgement: the reverted records keep their lock, so one
    that passed its deadline meanwhile is released by the next expiry, count kept."""
    _, core = acquired_five(record_lock_duration_ms=1000)
    staged = core.stage("m1", 100, 1, [ack(0, 4, ACCEPT)], 900)
    core.revert_stage(100, 1, staged.staged)
    assert core.next_deadline() == 1000
    effects = core.expire_locks(1200)
    core.check_invariants()
    assert core.spans() == [(0, 4, A, 1, None)] and effects.available
