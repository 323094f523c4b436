"""Named places where a test can make kemu die as if SIGKILLed, to test recovery from there.

``KEMU_CRASH_AT`` (environment) names one or more points, comma-separated; reaching one of them
sends the process SIGKILL at once: nothing is flushed or closed, exactly like ``kill -9`` at
that instant. Unset (always, outside tests), ``crash_point`` is a set lookup and nothing more.

Points (each where a crash leaves durable state that recovery must finish):
* ``txn.prepared``: a transaction's PREPARE_COMMIT/PREPARE_ABORT is in ``__transaction_state``,
  no marker is written yet.
* ``txn.share_state_marker_written``: the first marker written to a ``__share_group_state``
  partition is durable (KIP-1289: beside the TX_PENDING records it resolves); nothing has
  replayed it, so no ShareUpdate states the outcome, and the partitions after it in the
  transaction's (sorted) order have no marker yet.
* ``txn.data_marker_written``: the first marker written to any other partition is durable; the
  partitions after it have none yet (a ``__share_group_state`` partition sorts after a topic
  whose name starts with an upper-case letter or a digit, before a lower-case one).
* ``txn.markers_appended``: every marker is durable; nothing has applied them yet (the share
  coordinator has written no ShareUpdate for them, no share-partition leader, group
  coordinator or marker listener was told).
* ``txn.markers_written``: every marker is written and the share coordinator has written the
  ShareUpdates stating what they resolved; the COMPLETE_* record is not written.
* ``share.enlisted``: KIP-1289 TxnShareAcknowledge enlisted the ``__share_group_state``
  partitions in the transaction (durable in ``__transaction_state``), nothing is staged yet.
* ``share.staged``: KIP-1289 records are durably TX_PENDING, the client has no answer yet.
* ``share.archiving``: KIP-1191 records are durably ARCHIVING, not yet written to the DLQ topic.
* ``share.dead_lettered``: KIP-1191 records are durably ARCHIVING and written to the DLQ topic,
  ARCHIVED is not written yet.
* ``clean.cleaned_written``: the log cleaner wrote and synced ``<base>.log.cleaned`` (not yet
  committed: the old segments stand).
* ``clean.swap_committed``: it renamed it ``<base>.<end>.swap`` (committed: opening finishes it).
* ``clean.old_segments_deleted``: the run's later segments are deleted, the swap not renamed yet.
* ``topic.logs_created``: a new topic's partition logs exist, the catalogue does not name it.
* ``topic.deleted``: the catalogue no longer names a deleted topic, its logs are still there.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

ENVIRONMENT = "KEMU_CRASH_AT"
POINTS = frozenset(
    {
        "txn.prepared",
        "txn.share_state_marker_written",
        "txn.data_marker_written",
        "txn.markers_appended",
        "txn.markers_written",
        "share.enlisted",
        "share.staged",
        "share.archiving",
        "share.dead_lettered",
        "clean.cleaned_written",
        "clean.swap_committed",
        "clean.old_segments_deleted",
        "topic.logs_created",
        "topic.deleted",
    }
)

_armed = frozenset(
    name.strip() for name in os.environ.get(ENVIRONMENT, "").split(",") if name.strip()
)


# The deterministic simulation (kemu/testing/sim) kills its simulated process here instead.
_hook: Callable[[str], None] | None = None


def set_crash_hook(hook: Callable[[str], None] | None) -> None:
    """Call ``hook(name)`` at every crash point reached (None: stop)."""
    global _hook
    _hook = hook


def crash_point(name: str) -> None:
    """SIGKILL this process here if ``KEMU_CRASH_AT`` names ``name``."""
    assert name in POINTS, name
    if name in _armed:
        os.kill(os.getpid(), signal.SIGKILL)
    if _hook is not None:
        _hook(name)
