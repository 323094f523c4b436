"""Every random choice kemu makes comes from one seed (``kemu serve --seed``), so a run replays."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kemu.broker.faults import FaultTable
from kemu.broker.fetch_session import FetchSessionCache
from kemu.cluster import seeded
from kemu.coordinator.group.classic.rebalance import random_member_id


@pytest.fixture(autouse=True)
def restore_seed() -> Iterator[None]:
    before = seeded.current_seed()
    yield
    seeded.reseed(before)


def draws() -> tuple[list[uuid.UUID], list[float], list[int], str]:
    ids = [seeded.new_uuid() for _ in range(3)]
    fractions = [FaultTable(runtime=None).random.random() for _ in range(2)]  # type: ignore[arg-type]
    cache = FetchSessionCache()
    decisions = [cache.decide(1, 0, 0, now_ms=0) for _ in range(3)]
    sessions = [d.session.session_id for d in decisions if d.session is not None]
    return ids, fractions, sessions, random_member_id("client")


def test_the_same_seed_makes_the_same_choices() -> None:
    seeded.reseed(42)
    first = draws()
    seeded.reseed(42)
    assert draws() == first
    seeded.reseed(43)
    assert draws() != first


def test_ids_are_version_4_uuids() -> None:
    seeded.reseed(7)
    drawn = seeded.new_uuid()
    assert drawn.version == 4 and drawn.variant == uuid.RFC_4122


def test_without_a_seed_one_is_drawn_and_told() -> None:
    drawn = seeded.reseed(None)
    assert drawn == seeded.current_seed() and drawn >= 0
