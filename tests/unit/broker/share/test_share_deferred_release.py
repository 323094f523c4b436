"""SharePartitionCore: RELEASE acknowledgements held back while the same ShareFetch acquires.

In Kafka a ShareFetch's piggy-backed acknowledgements are still being written to the share
coordinator when its fetch acquires, so the consumer does not get straight back what it released;
the ShareFetch handler reproduces that with ``acknowledge(defer_release=True)`` and
``release_deferred`` after the first acquisition.
"""

from __future__ import annotations

from kemu.broker.share.partition import AckBatch
from kemu.broker.share.states import AckType, RecordState
from kemu.protocol.errors import ErrorCode
from tests.unit.share_helpers import FakeLog, ack, acquire, new_core, ranges

ACCEPT, RELEASE = int(AckType.ACCEPT), int(AckType.RELEASE)


def test_deferred_releases_are_checked_but_held_until_applied() -> None:
    log, core = FakeLog(), new_core()
    log.append(4)
    log.append(4)
    acquire(core, log, "m", 0, max_records=4)  # 0-3
    result = core.acknowledge(
        "m", [ack(0, 3, ACCEPT, RELEASE, RELEASE, ACCEPT)], 1, defer_release=True
    )
    assert result.error == ErrorCode.none
    assert result.deferred == (AckBatch(1, 2, (RELEASE,)),)
    assert core.state_of(1) is RecordState.ACQUIRED  # still held by m
    # the accepted record 0 is done, so the start moved; 3 is acknowledged
    assert core.start == 1
    assert ranges(acquire(core, log, "m", 2)) == [(4, 7, 1)]  # not 1-2
    effects = core.release_deferred("m", result.deferred)
    assert effects.available
    assert core.state_of(1) is RecordState.AVAILABLE
    assert ranges(acquire(core, log, "n", 3)) == [(1, 2, 2)]
    core.check_invariants()


def test_an_invalid_acknowledgement_defers_nothing() -> None:
    log, core = FakeLog(), new_core()
    log.append(4)
    acquire(core, log, "m", 0)
    result = core.acknowledge("other", [ack(0, 3, RELEASE)], 1, defer_release=True)
    assert result.error == ErrorCode.invalid_record_state
    assert result.deferred == ()


def test_a_deferred_release_skips_records_the_member_no_longer_holds() -> None:
    log, core = FakeLog(), new_core(lock_ms=100)
    log.append(4)
    acquire(core, log, "m", 0)
    result = core.acknowledge("m", [ack(0, 3, RELEASE)], 1, defer_release=True)
    core.expire_locks(200)  # the lock ran out meanwhile: released, count kept
    acquire(core, log, "n", 201)  # and someone else took them
    effects = core.release_deferred("m", result.deferred)
    assert not effects.batches
    assert core.owner_of(0) == "n"
    core.check_invariants()


def test_a_deferred_release_at_the_delivery_limit_archives() -> None:
    log, core = FakeLog(), new_core(limit=2)
    log.append(1)
    for member in "ab":
        acquire(core, log, member, 0)
        result = core.acknowledge(member, [ack(0, 0, RELEASE)], 0, defer_release=True)
        core.release_deferred(member, result.deferred)
    assert core.start == 1  # archived after its second delivery
    core.check_invariants()
