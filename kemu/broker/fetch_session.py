"""Incremental fetch sessions (KIP-227), sans IO.

A session remembers which partitions a consumer fetches and what it was last told about each
(high watermark, last stable offset, log start offset), so that incremental requests can name
only what changed and responses can leave out partitions with nothing new.

Epochs: 0 opens a new session (closing the named one), -1 closes (and fetches without a
session), N>0 must equal the session's next epoch.
"""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from dataclasses import dataclass, field

from kemu.cluster import seeded
from kemu.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
DEFAULT_SLOTS = 1000

PartitionKey = tuple[object, int]  # (topic name or topic id, partition index)


@dataclass(slots=True)
class SessionPartition:
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_high_watermark: int = -1
    last_stable_offset: int = -1
    last_log_start: int = -1


@dataclass(slots=True)
class FetchSession:
    session_id: int
    node_id: int
    next_epoch: int
    last_used_ms: int
    partitions: OrderedDict[PartitionKey, SessionPartition] = field(default_factory=OrderedDict)


@dataclass(frozen=True, slots=True)
class SessionDecision:
    """What a fetch request means for sessions: which session (if any), full or incremental."""

    session: FetchSession | None
    incremental: bool
    error: ErrorCode = ErrorCode.none


class FetchSessionCache:
    def __init__(self, slots: int = DEFAULT_SLOTS, seed: int | None = None) -> None:
        self.slots = slots
        self.sessions: dict[tuple[int, int], FetchSession] = {}
        self._random = seeded.derived_random() if seed is None else random.Random(seed)
        self._sequence = itertools.count(1)

    def _new_id(self) -> int:
        while True:
            candidate = self._random.randint(1, 2**31 - 1)
            if all(candidate != sid for (_, sid) in self.sessions):
                return candidate

    def decide(self, node_id: int, session_id: int, epoch: int, now_ms: int) -> SessionDecision:
        if epoch == FINAL_EPOCH:
            if session_id:
                self.sessions.pop((node_id, session_id), None)
            return SessionDecision(None, incremental=False)
        if epoch == INITIAL_EPOCH:
            if session_id:
                self.sessions.pop((node_id, session_id), None)
            if len(self.sessions) >= self.slots:
                self._evict_oldest()
            session = FetchSession(self._new_id(), node_id, 1, now_ms)
            self.sessions[(node_id, session.session_id)] = session
            return SessionDecision(session, incremental=False)
        existing = self.sessions.get((node_id, session_id))
        if existing is None:
            return SessionDecision(None, False, ErrorCode.fetch_session_id_not_found)
        session = existing
        if session.next_epoch != epoch:
            return SessionDecision(None, False, ErrorCode.invalid_fetch_session_epoch)
        session.next_epoch = 1 if epoch == 2**31 - 1 else epoch + 1
        session.last_used_ms = now_ms
        return SessionDecision(session, incremental=True)

    def _evict_oldest(self) -> None:
        oldest = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        del self.sessions[(oldest.node_id, oldest.session_id)]

    def remove_topic(self, topic_keys: set[object]) -> None:
        """Drop a deleted topic's partitions from every session."""
        for session in self.sessions.values():
            for key in [k for k in session.partitions if k[0] in topic_keys]:
                del session.partitions[key]
