"""The share-record state machine: states, acknowledgement types and the transition table.

Everything that decides whether a record may move from one delivery state to another lives
here, as data. Operations elsewhere (acquire, acknowledge, lock expiry, member leave,
transactional staging) name the state they want and call ``transition``; an illegal move
raises one ``InvalidTransition`` naming both states. This module does not know why a record
moves (which member, which lock, which transaction): that is the share partition's business.

Theory: a record is AVAILABLE until a consumer ACQUIRES it under a time-limited lock; the
owning consumer then ACCEPTs (ACKNOWLEDGED), RELEASEs (AVAILABLE again) or REJECTs (ARCHIVED,
or ARCHIVING while a dead-letter write is pending, KIP-1191). KIP-1289 adds TX_PENDING: an
acquired record whose acknowledgement is staged in a producer transaction; the transaction's
commit applies the staged outcome, its abort makes the record AVAILABLE again. ACKNOWLEDGED and
ARCHIVED are terminal.

The table is exactly kip-1289.md §5.2 (Kafka's ``RecordState.validateTransition`` with the
KIP-1289 row and column).
"""

from __future__ import annotations

from enum import IntEnum


class RecordState(IntEnum):
    """Delivery state of a share-partition record; the ids are Kafka's (persisted as such)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3
    ARCHIVED = 4
    TX_PENDING = 5

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})


class AckType(IntEnum):
    """Acknowledge types on the wire (ShareFetch/ShareAcknowledge ``AcknowledgeTypes``)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # v2+, KIP-1222: extend the acquisition lock, state unchanged


_A, _Q, _K, _G, _R, _T = (
    RecordState.AVAILABLE,
    RecordState.ACQUIRED,
    RecordState.ACKNOWLEDGED,
    RecordState.ARCHIVING,
    RecordState.ARCHIVED,
    RecordState.TX_PENDING,
)

TRANSITIONS: dict[RecordState, frozenset[RecordState]] = {
    _A: frozenset({_Q}),
    _Q: frozenset({_A, _K, _G, _R, _T}),
    _K: frozenset(),
    _G: frozenset({_R}),
    _R: frozenset(),
    _T: frozenset({_A, _K, _G, _R}),  # abort -> AVAILABLE; commit -> the staged outcome
}
"""Allowed moves, from -> {to}. A move to the same state is never a transition."""


class InvalidTransition(Exception):
    """A record was asked to move between two states the table does not connect."""

    def __init__(self, current: RecordState, target: RecordState, event: str = "") -> None:
        cause = f" on {event}" if event else ""
        super().__init__(f"invalid record state transition {current.name} -> {target.name}{cause}")
        self.current = current
        self.target = target
        self.event = event


def can_transition(current: RecordState, target: RecordState) -> bool:
    return target in TRANSITIONS[current]


def transition(current: RecordState, target: RecordState, event: str = "") -> RecordState:
    """``target`` if the table allows ``current -> target``, else ``InvalidTransition`` naming
    both states and the ``event`` (acquire, accept, lock expiry, ...) that asked for it."""
    if target not in TRANSITIONS[current]:
        raise InvalidTransition(current, target, event)
    return target
