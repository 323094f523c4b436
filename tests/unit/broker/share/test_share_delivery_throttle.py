"""Throttled delivery in SharePartitionCore (Kafka's SharePartition): records delivered often go
out fewer at a time, and a record on its last attempt goes alone.

The franz-go share ETL test found why it matters: short-lived consumers that each fetch and then
release everything on close, one after another, pushed a whole released batch through all five
deliveries in a quarter of a second, and it was archived; with throttling only one record per
such consumer reaches its last attempt.
"""

from __future__ import annotations

from kemu.broker.share.partition import AcquireMode, SharePartitionCore
from kemu.broker.share.states import AckType, RecordState
from tests.unit.share_helpers import FakeLog, ack, acquire, new_core, ranges

RELEASE = int(AckType.RELEASE)
ACCEPT = int(AckType.ACCEPT)


def bounce(core: SharePartitionCore, log: FakeLog, member: str, now: int) -> list[tuple[int, ...]]:
    """``member`` fetches and releases everything it got: what it was handed."""
    got = ranges(acquire(core, log, member, now))
    for first, last, _ in got:
        core.acknowledge(member, [ack(first, last, RELEASE)], now)
    return [tuple(r) for r in got]


def test_the_threshold_is_half_the_delivery_limit_and_at_least_two() -> None:
    assert new_core(limit=5).acquisition._throttle_from == 3
    assert new_core(limit=6).acquisition._throttle_from == 3
    assert new_core(limit=10).acquisition._throttle_from == 5
    assert new_core(limit=2).acquisition._throttle_from == 2
    assert new_core(limit=3).acquisition._throttle_from == 2


def test_below_the_threshold_the_whole_batch_is_redelivered() -> None:
    log, core = FakeLog(), new_core(limit=5)
    log.append(16)
    assert bounce(core, log, "a", 0) == [(0, 15, 1)]
    assert bounce(core, log, "b", 1) == [(0, 15, 2)]


def test_past_the_threshold_each_fetch_takes_half_as_many_then_one() -> None:
    log, core = FakeLog(), new_core(limit=5)
    log.append(16)
    bounce(core, log, "a", 0)  # delivery 1
    bounce(core, log, "b", 1)  # delivery 2
    # delivery count 2 < 3: still whole
    assert bounce(core, log, "c", 2) == [(0, 15, 3)]
    # count 3 reached the threshold: 16 >> 1
    assert bounce(core, log, "d", 3) == [(0, 7, 4)]
    # 0-7 are on their last attempt (count 4): one at a time
    assert bounce(core, log, "e", 4) == [(0, 0, 5)]
    assert bounce(core, log, "f", 5) == [(1, 1, 5)]
    # 0 and 1 were released on their last attempt: archived, so the start moved past them
    assert core.start == 2
    assert core.state_of(2) is RecordState.AVAILABLE
    core.check_invariants()


def test_a_record_on_its_last_attempt_goes_alone() -> None:
    log, core = FakeLog(), new_core(limit=5)
    log.append(4)
    for member in "abcd":
        bounce(core, log, member, 0)
    # the fourth delivery was throttled to 4 >> 1 = 2 records: 0-1 at count 4, 2-3 at count 3
    assert [(first, last, count) for first, last, _, count, _ in core.spans()] == [
        (0, 1, 4),
        (2, 3, 3),
    ]
    assert ranges(acquire(core, log, "e", 1)) == [(0, 0, 5)]
    core.acknowledge("e", [ack(0, 0, ACCEPT)], 1)
    assert ranges(acquire(core, log, "f", 2)) == [(1, 1, 5)]
    core.check_invariants()


def test_a_throttled_batch_is_not_followed_by_fresh_records_in_the_same_fetch() -> None:
    log, core = FakeLog(), new_core(limit=5)
    log.append(4)  # 0-3
    for member in "abc":
        bounce(core, log, member, 0)  # 0-3 at count 3
    log.append(4)  # 4-7, fresh
    assert ranges(acquire(core, log, "d", 1)) == [(0, 1, 4)]
    assert ranges(acquire(core, log, "e", 1)) == [(2, 3, 4)]
    assert ranges(acquire(core, log, "f", 1)) == [(4, 7, 1)]


def test_a_fetch_that_acquired_records_stops_before_a_throttled_batch() -> None:
    log, core = FakeLog(), new_core(limit=5)
    log.append(4)  # 0-3
    log.append(4)  # 4-7
    assert ranges(acquire(core, log, "h", 0, max_records=4)) == [(0, 3, 1)]  # h holds 0-3
    for member in "abc":
        assert bounce(core, log, member, 0) == [(4, 7, int(member, 16) - 9)]
    core.acknowledge("h", [ack(0, 3, RELEASE)], 1)  # 0-3 at count 1, 4-7 at count 3
    assert ranges(acquire(core, log, "d", 2)) == [(0, 3, 2)]
    assert ranges(acquire(core, log, "e", 2)) == [(4, 5, 4)]
    core.check_invariants()


def test_record_limit_caps_a_throttled_fetch_too() -> None:
    log, core = FakeLog(), new_core(limit=5)
    log.append(16)
    for member in "abc":
        bounce(core, log, member, 0)
    got = acquire(core, log, "d", 1, max_records=3, mode=AcquireMode.RECORD_LIMIT)
    assert ranges(got) == [(0, 2, 4)]
    core.check_invariants()
