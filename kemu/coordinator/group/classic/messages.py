"""Classic groups' vocabulary: states, settings, the requests, answers and effects. Sans-IO.

Parked requests are opaque ``waiter`` objects supplied by the caller; their answers come back as
``JoinCompleted``/``SyncCompleted`` effects, possibly from a later call (another member's join,
a timer). ``PersistGroup`` asks for the group's metadata record to be written;
``StoreAssignment`` too, and for the outcome to be told back (``assignment_stored``): the
leader's SyncGroup is answered only once the assignment is written.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from kemu.protocol.errors import ErrorCode

GROUP_TYPE = "classic"
EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD = (
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
)
UNKNOWN_MEMBER_ID = ""
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's classicGroupNewMemberJoinTimeoutMs

Waiter = Hashable
Protocol = tuple[str, bytes]  # (name, metadata), in the member's order of preference


@dataclass(frozen=True, slots=True)
class ClassicSettings:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1


SettingsProvider = Callable[[str], ClassicSettings]


# --- requests and answers ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    requires_known_member_id: bool = True  # JoinGroup v4+
    supports_skip_assignment: bool = True  # JoinGroup v9+
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResponse:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    member_id: str
    generation_id: int
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResponse:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveResult:
    error: ErrorCode
    members: tuple[tuple[LeavingMember, ErrorCode], ...] = ()
    effects: tuple[Effect, ...] = ()


@dataclass(frozen=True, slots=True)
class JoinCompleted:
    waiter: Waiter
    response: JoinResponse


@dataclass(frozen=True, slots=True)
class SyncCompleted:
    waiter: Waiter
    response: SyncResponse


@dataclass(frozen=True, slots=True)
class PersistGroup:
    """Write the group's metadata record (its current generation, members and assignment)."""

    group_id: str


@dataclass(frozen=True, slots=True)
class StoreAssignment:
    """Write the group's metadata record with the leader's assignment, then tell the
    coordinator whether it was written (``ClassicGroupCoordinator.assignment_stored``)."""

    group_id: str
    generation_id: int


Effect = JoinCompleted | SyncCompleted | PersistGroup | StoreAssignment


def join_error(error: ErrorCode, member_id: str = UNKNOWN_MEMBER_ID) -> JoinResponse:
    return JoinResponse(error, member_id)
