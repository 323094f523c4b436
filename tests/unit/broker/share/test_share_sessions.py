"""ShareSessionCache: epochs, limits, forgotten partitions, keys per broker."""

from __future__ import annotations

import uuid

from kemu.broker.share.sessions import MAX_EPOCH, ShareSessionCache, next_epoch
from kemu.protocol.errors import ErrorCode

T = uuid.uuid4()
KEY = (1, "g", "m")


def open_session(cache: ShareSessionCache, key: tuple[int, str, str] = KEY) -> None:
    decision = cache.for_fetch(key, 0, [(T, 0)], [], has_acknowledgements=False, now_ms=0)
    assert decision.error == ErrorCode.none


def test_epochs_advance_and_wrap_to_one() -> None:
    assert next_epoch(0) == 1 and next_epoch(7) == 8 and next_epoch(MAX_EPOCH) == 1


def test_fetch_epochs() -> None:
    cache = ShareSessionCache(10)
    assert cache.for_fetch(KEY, 1, [], [], has_acknowledgements=False, now_ms=0).error == (
        ErrorCode.share_session_not_found
    )
    open_session(cache)
    session = cache.sessions[KEY]
    assert session.epoch == 1 and list(session.partitions) == [(T, 0)]
    assert cache.for_fetch(KEY, 2, [], [], has_acknowledgements=False, now_ms=1).error == (
        ErrorCode.invalid_share_session_epoch
    )
    decision = cache.for_fetch(KEY, 1, [(T, 1)], [(T, 0)], has_acknowledgements=True, now_ms=1)
    assert decision.error == ErrorCode.none and not decision.final
    assert list(session.partitions) == [(T, 1)] and session.epoch == 2
    final = cache.for_fetch(KEY, -1, [(T, 1)], [], has_acknowledgements=True, now_ms=2)
    assert final.final and final.session is session
    assert cache.close(KEY) is session and not cache.sessions


def test_initial_fetch_replaces_the_session_and_refuses_acknowledgements() -> None:
    cache = ShareSessionCache(10)
    open_session(cache)
    cache.for_fetch(KEY, 1, [], [], has_acknowledgements=False, now_ms=0)
    with_acks = cache.for_fetch(KEY, 0, [], [], has_acknowledgements=True, now_ms=0)
    assert with_acks.error == ErrorCode.invalid_request
    open_session(cache)
    assert cache.sessions[KEY].epoch == 1


def test_the_limit_counts_sessions_across_members_but_a_reopen_fits() -> None:
    cache = ShareSessionCache(2)
    open_session(cache, (1, "g", "a"))
    open_session(cache, (2, "g", "a"))  # the same member on another broker: its own session
    refused = cache.for_fetch((1, "g", "b"), 0, [], [], has_acknowledgements=False, now_ms=0)
    assert refused.error == ErrorCode.share_session_limit_reached
    open_session(cache, (1, "g", "a"))


def test_acknowledge_epochs() -> None:
    cache = ShareSessionCache(10)
    assert cache.for_acknowledge(KEY, 1, 0).error == ErrorCode.share_session_not_found
    open_session(cache)
    assert cache.for_acknowledge(KEY, 0, 0).error == ErrorCode.invalid_share_session_epoch
    assert cache.for_acknowledge(KEY, 3, 0).error == ErrorCode.invalid_share_session_epoch
    assert cache.for_acknowledge(KEY, 1, 0).error == ErrorCode.none
    assert cache.sessions[KEY].epoch == 2
    assert cache.for_acknowledge(KEY, -1, 0).final


def test_member_removal_and_topic_deletion() -> None:
    cache = ShareSessionCache(10)
    open_session(cache, (1, "g", "a"))
    open_session(cache, (2, "g", "a"))
    open_session(cache, (1, "g", "b"))
    assert len(cache.remove_member("g", "a")) == 2
    cache.forget_topic(T)
    assert list(cache.sessions) == [(1, "g", "b")]
    # the partitions stay, marked deleted, until the member forgets them
    session = cache.sessions[(1, "g", "b")]
    assert list(session.partitions) == [(T, 0)] and session.deleted == {(T, 0)}
    decision = cache.for_fetch((1, "g", "b"), 1, [], [(T, 0)], has_acknowledgements=False, now_ms=0)
    assert decision.error == ErrorCode.none
    assert not session.partitions and not session.deleted


def test_partitions_take_turns() -> None:
    cache = ShareSessionCache(10)
    cache.for_fetch(KEY, 0, [(T, 0), (T, 1), (T, 2)], [], has_acknowledgements=False, now_ms=0)
    session = cache.sessions[KEY]
    assert [p for _, p in session.fetch_order()] == [0, 1, 2]
    assert [p for _, p in session.fetch_order()] == [1, 2, 0]
    assert [p for _, p in session.fetch_order()] == [2, 0, 1]


def test_a_session_ends_with_the_connection_that_opened_it() -> None:
    cache = ShareSessionCache(10)
    first, second = object(), object()
    cache.for_fetch(KEY, 0, [(T, 0)], [], has_acknowledgements=False, now_ms=0, connection=first)
    assert cache.close_opened_by(KEY, second) is None  # another connection: not its session
    closed = cache.close_opened_by(KEY, first)
    assert closed is not None and closed.key == KEY and KEY not in cache.sessions
    assert cache.close_opened_by(KEY, first) is None  # already gone


def test_a_session_reopened_elsewhere_outlives_the_old_connection() -> None:
    cache = ShareSessionCache(10)
    old, new = object(), object()
    cache.for_fetch(KEY, 0, [(T, 0)], [], has_acknowledgements=False, now_ms=0, connection=old)
    cache.for_fetch(KEY, 0, [(T, 0)], [], has_acknowledgements=False, now_ms=1, connection=new)
    assert cache.close_opened_by(KEY, old) is None
    assert cache.sessions[KEY].connection is new
