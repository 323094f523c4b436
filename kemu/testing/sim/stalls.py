"""Stalls, and the expiries they (and the other faults) cause.

A stall freezes a client process (``SimLoop.freeze``: a GC pause, a swapped-out host, SIGSTOP)
with its connections open, at a point of its work where it holds what the broker only lends
(``Actor.stall_points``: the harness arms a stall, the actor stalls when it gets there), for
longer than the broker waits: a share consumer holding acquired records outlives their
acquisition locks and its member session, a producer in the middle of a transaction outlives
the transaction's timeout (a pipeline either, holding records before its transaction, or with
its share acknowledgements staged TX_PENDING in it); a consumer-group member outlives its
session with its positions not committed. When it thaws, what it was doing goes on
where it stopped, and learns what the broker did meanwhile.

``counting_expiries`` counts, into the run's faults, what kemu's timers did: acquisition locks
expired (``expiry.lock``), share and consumer group members removed at the end of their session
(``expiry.session.share``, ``expiry.session.consumer``), transactions aborted at their timeout
(``expiry.txn``). Counted where kemu's sans-IO cores decide them, for whatever reason (a stall,
a dead client, a slow answer); nothing is drawn, so counting moves no trace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from kemu.broker.share.acknowledgement import Acknowledgement
from kemu.coordinator.group.consumer.group import ConsumerGroupCoordinator
from kemu.coordinator.group.share.group import ShareGroupCoordinator
from kemu.coordinator.transaction.coordinator import TransactionCoordinator

# How long a stall lasts, in virtual seconds: longer than every lock, session and transaction
# timeout the simulated kemu and its clients use (world.py, workload.py), yet short enough
# that the broker often stays up through one (kemu crashes every few simulated seconds, and a
# boot gives every member a fresh session and releases every acquisition)
STALL_SECONDS = (3.5, 8.0)


@contextlib.contextmanager
def counting_expiries(note: Callable[[str], None]) -> Iterator[None]:
    """For the block, ``note(kind)`` once per expiry kemu decides (the module docstring)."""
    expire_locks = Acknowledgement.expire_locks
    share_expire = ShareGroupCoordinator.expire_group
    consumer_expire = ConsumerGroupCoordinator.expire_group
    txn_expire = TransactionCoordinator.expire

    def locks(self: Acknowledgement, now_ms: int) -> Any:
        before = self.window.lock_expiries
        effects = expire_locks(self, now_ms)
        if self.window.lock_expiries > before:
            note("expiry.lock")
        return effects

    def share_sessions(self: ShareGroupCoordinator, group: Any, now_ms: int) -> Any:
        effects = share_expire(self, group, now_ms)
        for _ in effects:
            note("expiry.session.share")
        return effects

    def consumer_sessions(
        self: ConsumerGroupCoordinator, group: Any, now_ms: int, topics: Any
    ) -> list[str]:
        late = consumer_expire(self, group, now_ms, topics)
        for _ in late:
            note("expiry.session.consumer")
        return late

    def transactions(self: TransactionCoordinator, now_ms: int) -> Any:
        outcomes = txn_expire(self, now_ms)
        for _ in outcomes:
            note("expiry.txn")
        return outcomes

    patches: list[tuple[Any, str, Any, Any]] = [
        (Acknowledgement, "expire_locks", expire_locks, locks),
        (ShareGroupCoordinator, "expire_group", share_expire, share_sessions),
        (ConsumerGroupCoordinator, "expire_group", consumer_expire, consumer_sessions),
        (TransactionCoordinator, "expire", txn_expire, transactions),
    ]
    for owner, name, _, patched in patches:
        setattr(owner, name, patched)
    try:
        yield
    finally:
        for owner, name, original, _ in patches:
            setattr(owner, name, original)
