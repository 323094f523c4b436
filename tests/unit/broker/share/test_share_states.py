"""The share-record transition table against kip-1289.md §5.2, every (from, to) pair."""

from __future__ import annotations

import itertools

import pytest

from kemu.broker.share.states import (
    TERMINAL_STATES,
    TRANSITIONS,
    AckType,
    InvalidTransition,
    RecordState,
    can_transition,
    transition,
)

# kip-1289.md §5.2, rows = from, columns = to (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVING,
# ARCHIVED, TX_PENDING); "y" allowed, "n" rejected, "-" same state (rejected).
SPEC_TABLE = """
AVAILABLE     - y n n n n
ACQUIRED      y - y y y y
ACKNOWLEDGED  n n - n n n
ARCHIVING     n n n - y n
ARCHIVED      n n n n - n
TX_PENDING    y n y y y -
"""

COLUMNS = [
    RecordState.AVAILABLE,
    RecordState.ACQUIRED,
    RecordState.ACKNOWLEDGED,
    RecordState.ARCHIVING,
    RecordState.ARCHIVED,
    RecordState.TX_PENDING,
]


def _spec() -> dict[tuple[RecordState, RecordState], bool]:
    allowed = {}
    for line in SPEC_TABLE.strip().splitlines():
        name, *cells = line.split()
        for target, cell in zip(COLUMNS, cells, strict=True):
            allowed[(RecordState[name], target)] = cell == "y"
    return allowed


SPEC = _spec()


def test_state_ids_are_kafkas() -> None:
    assert [int(s) for s in COLUMNS] == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError):
        RecordState(6)


def test_ack_type_ids() -> None:
    assert [int(t) for t in AckType] == [0, 1, 2, 3, 4]
    assert [t.name for t in AckType] == ["GAP", "ACCEPT", "RELEASE", "REJECT", "RENEW"]


def test_the_spec_table_covers_every_pair() -> None:
    assert len(SPEC) == 36
    assert set(TRANSITIONS) == set(RecordState)


@pytest.mark.parametrize(("current", "target"), list(itertools.product(COLUMNS, COLUMNS)))
def test_transition_matches_the_spec(current: RecordState, target: RecordState) -> None:
    if SPEC[(current, target)]:
        assert can_transition(current, target)
        assert transition(current, target) is target
    else:
        assert not can_transition(current, target)
        with pytest.raises(InvalidTransition) as raised:
            transition(current, target)
        assert raised.value.current is current
        assert raised.value.target is target
        assert current.name in str(raised.value)
        assert target.name in str(raised.value)


def test_the_error_names_both_states_and_the_event() -> None:
    with pytest.raises(InvalidTransition) as raised:
        transition(RecordState.ACKNOWLEDGED, RecordState.AVAILABLE, "RELEASE")
    assert raised.value.event == "RELEASE"
    assert str(raised.value) == (
        "invalid record state transition ACKNOWLEDGED -> AVAILABLE on RELEASE"
    )


def test_terminal_states_have_no_way_out() -> None:
    assert {RecordState.ACKNOWLEDGED, RecordState.ARCHIVED} == TERMINAL_STATES
    for state in RecordState:
        assert state.is_terminal == (not TRANSITIONS[state] and state in TERMINAL_STATES)


def test_tx_pending_is_entered_only_from_acquired() -> None:
    sources = {s for s in RecordState if RecordState.TX_PENDING in TRANSITIONS[s]}
    assert sources == {RecordState.ACQUIRED}
