"""Share sessions (KIP-932), sans IO: which partitions a member fetches from one broker.

A session is keyed by (broker, group, member): a member holds one with every broker that leads
a partition it fetches. Epochs follow Kafka's SharePartitionManager:

ShareFetch
* 0 opens a session (replacing any existing one) with the request's partitions; it may not
  carry acknowledgements (INVALID_REQUEST); a full cache gives SHARE_SESSION_LIMIT_REACHED.
  The session remembers the connection that opened it: when that connection closes, the
  session ends as if closed with -1 (Kafka's ConnectionDisconnectListener).
* -1 closes: the session must exist (SHARE_SESSION_NOT_FOUND); acknowledgements are applied,
  nothing is fetched (partitions named only to carry acknowledgements are not an error, where
  Kafka would refuse ones with a fetch size), then the session goes and the member's records in
  it are released.
* N must equal the session's epoch (INVALID_SHARE_SESSION_EPOCH); the request's partitions are
  added and its forgotten topics removed; the epoch advances (wrapping to 1). Such an
  incremental answer lists only the partitions with something to say (``must_answer``, Kafka's
  CachedSharePartition): records, an error (and then the next answer too), or a partition added
  to the session since it was opened that was not answered yet.
* A partition of a topic deleted while a session holds it stays in the session (``deleted``)
  until the member forgets it: each fetch answers it UNKNOWN_TOPIC_OR_PARTITION, as Kafka's
  session, which holds the partition by name too, finds no such partition.
ShareAcknowledge: epoch 0 is INVALID_SHARE_SESSION_EPOCH; -1 acknowledges then closes; N as
above.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from kemu.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1

SharePartitionRef = tuple[uuid.UUID, int]  # (topic id, partition index)
SessionKey = tuple[int, str, str]  # (broker node id, group id, member id)


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class ShareSession:
    key: SessionKey
    epoch: int  # the epoch the next request must carry
    last_used_ms: int
    partitions: dict[SharePartitionRef, None] = field(default_factory=dict)  # ordered set
    cursor: int = 0  # where the next fetch starts, so partitions take turns
    connection: object | None = None  # what opened it (compared by identity), if known
    # Partitions the next incremental answer must list even with nothing new (Kafka's
    # requiresUpdateInResponse): added after the session opened, or errored last time.
    requires_update: set[SharePartitionRef] = field(default_factory=set)
    # Partitions held of a topic deleted since (answered UNKNOWN_TOPIC_OR_PARTITION).
    deleted: set[SharePartitionRef] = field(default_factory=set)

    def must_answer(self, ref: SharePartitionRef, *, records: bool, error: bool) -> bool:
        """Whether an incremental answer lists ``ref`` (Kafka's
        CachedSharePartition.maybeUpdateResponseData), updating what the next one must list."""
        listed = records or ref in self.requires_update
        self.requires_update.discard(ref)
        if error:
            self.requires_update.add(ref)
            listed = True
        return listed

    def fetch_order(self) -> list[SharePartitionRef]:
        """The session's partitions, starting one further along each time (fairness)."""
        refs = list(self.partitions)
        if not refs:
            return refs
        start = self.cursor % len(refs)
        self.cursor = start + 1
        return refs[start:] + refs[:start]


@dataclass(frozen=True, slots=True)
class SessionDecision:
    error: ErrorCode = ErrorCode.none
    session: ShareSession | None = None
    final: bool = False  # acknowledge, then close the session and release its records
    message: str | None = None


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[SessionKey, ShareSession] = {}

    def for_fetch(
        self,
        key: SessionKey,
        epoch: int,
        requested: Iterable[SharePartitionRef],
        forgotten: Iterable[SharePartitionRef],
        *,
        has_acknowledgements: bool,
        now_ms: int,
        connection: object | None = None,
    ) -> SessionDecision:
        wanted = list(requested)
        if epoch == FINAL_EPOCH:
            session = self.sessions.get(key)
            if session is None:
                return SessionDecision(ErrorCode.share_session_not_found)
            return SessionDecision(session=session, final=True)
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                return SessionDecision(
                    ErrorCode.invalid_request,
                    message="Acknowledge data present in the initial share fetch request",
                )
            self.sessions.pop(key, None)
            if len(self.sessions) >= self.max_sessions:
                return SessionDecision(ErrorCode.share_session_limit_reached)
            session = ShareSession(
                key, next_epoch(INITIAL_EPOCH), now_ms, dict.fromkeys(wanted), connection=connection
            )
            self.sessions[key] = session
            return SessionDecision(session=session)
        session = self.sessions.get(key)
        if session is None:
            return SessionDecision(ErrorCode.share_session_not_found)
        if session.epoch != epoch:
            return SessionDecision(ErrorCode.invalid_share_session_epoch)
        for ref in wanted:
            if ref not in session.partitions:
                session.partitions[ref] = None
                session.requires_update.add(ref)
        for ref in forgotten:
            session.partitions.pop(ref, None)
            session.requires_update.discard(ref)
            session.deleted.discard(ref)
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        return SessionDecision(session=session)

    def for_acknowledge(self, key: SessionKey, epoch: int, now_ms: int) -> SessionDecision:
        if epoch == INITIAL_EPOCH:
            return SessionDecision(ErrorCode.invalid_share_session_epoch)
        session = self.sessions.get(key)
        if session is None:
            return SessionDecision(ErrorCode.share_session_not_found)
        if epoch == FINAL_EPOCH:
            return SessionDecision(session=session, final=True)
        if session.epoch != epoch:
            return SessionDecision(ErrorCode.invalid_share_session_epoch)
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        return SessionDecision(session=session)

    def close(self, key: SessionKey) -> ShareSession | None:
        return self.sessions.pop(key, None)

    def close_opened_by(self, key: SessionKey, connection: object) -> ShareSession | None:
        """The connection that opened session ``key`` closed: end the session, unless a newer
        one (from another connection) replaced it."""
        session = self.sessions.get(key)
        if session is None or session.connection is not connection:
            return None
        return self.sessions.pop(key)

    def of_member(self, group_id: str, member_id: str) -> list[ShareSession]:
        return [s for k, s in self.sessions.items() if k[1] == group_id and k[2] == member_id]

    def remove_member(self, group_id: str, member_id: str) -> list[ShareSession]:
        """Drop the member's sessions on every broker (it left the group)."""
        keys = [k for k in self.sessions if k[1] == group_id and k[2] == member_id]
        return [self.sessions.pop(k) for k in keys]

    def forget_topic(self, topic_id: uuid.UUID) -> None:
        """A topic was deleted: every session holding partitions of it marks them ``deleted``
        (they stay until the member forgets them)."""
        for session in self.sessions.values():
            session.deleted.update(r for r in session.partitions if r[0] == topic_id)
