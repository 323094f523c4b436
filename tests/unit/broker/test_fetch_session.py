"""The sans-IO incremental fetch session cache (KIP-227): epochs, errors, eviction."""

from __future__ import annotations

import uuid

import pytest

from kemu.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSessionCache,
    SessionPartition,
)
from kemu.protocol.errors import ErrorCode

NODE = 1
MAX_EPOCH = 2**31 - 1


def open_session(cache: FetchSessionCache, now_ms: int = 0, node_id: int = NODE) -> int:
    decision = cache.decide(node_id, 0, INITIAL_EPOCH, now_ms)
    assert decision.error is ErrorCode.none
    assert decision.session is not None
    assert not decision.incremental
    return decision.session.session_id


def test_final_epoch_without_a_session_is_a_sessionless_full_fetch() -> None:
    cache = FetchSessionCache(seed=1)
    decision = cache.decide(NODE, 0, FINAL_EPOCH, now_ms=0)
    assert decision.session is None
    assert not decision.incremental
    assert decision.error is ErrorCode.none
    assert cache.sessions == {}


def test_initial_epoch_opens_a_session_expecting_epoch_one() -> None:
    cache = FetchSessionCache(seed=1)
    session_id = open_session(cache, now_ms=100)
    session = cache.sessions[(NODE, session_id)]
    assert 0 < session_id <= MAX_EPOCH
    assert session.next_epoch == 1
    assert session.last_used_ms == 100
    assert session.node_id == NODE


def test_matching_epochs_are_incremental_and_advance() -> None:
    cache = FetchSessionCache(seed=1)
    session_id = open_session(cache)
    for epoch in range(1, 6):
        decision = cache.decide(NODE, session_id, epoch, now_ms=epoch * 10)
        assert decision.error is ErrorCode.none
        assert decision.incremental
        assert decision.session is cache.sessions[(NODE, session_id)]
        assert decision.session.next_epoch == epoch + 1
        assert decision.session.last_used_ms == epoch * 10


@pytest.mark.parametrize("epoch", [2, 7, MAX_EPOCH])
def test_wrong_epoch_is_refused_and_leaves_the_session_as_it_was(epoch: int) -> None:
    cache = FetchSessionCache(seed=1)
    session_id = open_session(cache)
    decision = cache.decide(NODE, session_id, epoch, now_ms=5)
    assert decision.error is ErrorCode.invalid_fetch_session_epoch
    assert decision.session is None
    session = cache.sessions[(NODE, session_id)]
    assert (session.next_epoch, session.last_used_ms) == (1, 0)
    assert cache.decide(NODE, session_id, 1, now_ms=6).incremental  # the right one still works


def test_replayed_epoch_is_refused() -> None:
    cache = FetchSessionCache(seed=1)
    session_id = open_session(cache)
    assert cache.decide(NODE, session_id, 1, 0).error is ErrorCode.none
    assert cache.decide(NODE, session_id, 1, 0).error is ErrorCode.invalid_fetch_session_epoch


def test_unknown_session_id_is_not_found() -> None:
    cache = FetchSessionCache(seed=1)
    decision = cache.decide(NODE, 12345, 1, now_ms=0)
    assert decision.error is ErrorCode.fetch_session_id_not_found
    assert decision.session is None


def test_sessions_belong_to_one_broker() -> None:
    cache = FetchSessionCache(seed=1)
    session_id = open_session(cache, node_id=1)
    assert cache.decide(2, session_id, 1, 0).error is ErrorCode.fetch_session_id_not_found
    assert cache.decide(1, session_id, 1, 0).error is ErrorCode.none


def test_final_epoch_closes_the_named_session() -> None:
    cache = FetchSessionCache(seed=1)
    session_id = open_session(cache)
    decision = cache.decide(NODE, session_id, FINAL_EPOCH, now_ms=0)
    assert decision.session is None
    assert not decision.incremental
    assert (NODE, session_id) not in cache.sessions
    assert cache.decide(NODE, session_id, 1, 0).error is ErrorCode.fetch_session_id_not_found


def test_initial_epoch_with_a_session_id_replaces_that_session() -> None:
    cache = FetchSessionCache(seed=1)
    old = open_session(cache)
    decision = cache.decide(NODE, old, INITIAL_EPOCH, now_ms=1)
    assert decision.session is not None and not decision.incremental
    new = decision.session.session_id
    assert new != old
    assert set(cache.sessions) == {(NODE, new)}


def test_epoch_wraps_from_max_to_one() -> None:
    cache = FetchSessionCache(seed=1)
    session_id = open_session(cache)
    cache.sessions[(NODE, session_id)].next_epoch = MAX_EPOCH
    decision = cache.decide(NODE, session_id, MAX_EPOCH, now_ms=0)
    assert decision.incremental
    assert cache.sessions[(NODE, session_id)].next_epoch == 1
    assert cache.decide(NODE, session_id, 1, now_ms=0).incremental


def test_full_cache_evicts_the_least_recently_used_session() -> None:
    cache = FetchSessionCache(slots=2, seed=1)
    first = open_session(cache, now_ms=0)
    second = open_session(cache, now_ms=10)
    assert cache.decide(NODE, first, 1, now_ms=20).incremental  # first is now the fresher one
    third = open_session(cache, now_ms=30)
    assert set(cache.sessions) == {(NODE, first), (NODE, third)}
    assert cache.decide(NODE, second, 1, 40).error is ErrorCode.fetch_session_id_not_found


def test_cache_never_exceeds_its_slots() -> None:
    cache = FetchSessionCache(slots=5, seed=2)
    ids = [open_session(cache, now_ms=t) for t in range(50)]
    assert len(cache.sessions) == 5
    assert {sid for _, sid in cache.sessions} == set(ids[-5:])


def test_session_ids_are_unique_and_seeded() -> None:
    one, two = FetchSessionCache(seed=7), FetchSessionCache(seed=7)
    ids = [open_session(one, now_ms=t) for t in range(200)]
    assert len(set(ids)) == 200
    assert ids == [open_session(two, now_ms=t) for t in range(200)]


def test_remove_topic_drops_its_partitions_from_every_session() -> None:
    cache = FetchSessionCache(seed=1)
    gone_id = uuid.uuid4()
    sessions = [cache.sessions[(NODE, open_session(cache))] for _ in range(3)]
    for session in sessions:
        session.partitions[("gone", 0)] = SessionPartition(0, 100)
        session.partitions[(gone_id, 1)] = SessionPartition(0, 100)
        session.partitions[("kept", 0)] = SessionPartition(5, 100)
    cache.remove_topic({"gone", gone_id})
    for session in sessions:
        assert list(session.partitions) == [("kept", 0)]
        assert session.partitions[("kept", 0)].fetch_offset == 5


def test_partitions_keep_their_order() -> None:
    cache = FetchSessionCache(seed=1)
    session = cache.sessions[(NODE, open_session(cache))]
    for index in (3, 1, 2):
        session.partitions[("t", index)] = SessionPartition(0, 1)
    assert [index for _, index in session.partitions] == [3, 1, 2]
    fresh = SessionPartition(0, 1)
    assert (fresh.last_high_watermark, fresh.last_stable_offset, fresh.last_log_start) == (
        -1,
        -1,
        -1,
    )
    assert fresh.current_leader_epoch == -1
