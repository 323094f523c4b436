"""Which of kemu's crash points the exactly-once crash harness (``bench/eos_crash.py``) injects.

It reads them from ``kemu.cluster.crash_points`` minus the points its pipeline cannot reach
(each with a reason), so a point added to kemu is injected without editing the harness; before,
it picked from a copy of the first three points and never tried the KIP-1289 marker and
enlistment points.
"""

from __future__ import annotations

import random
import sys

from tests import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))  # bench/ is not an installed package

from bench.eos_crash import CRASH_POINTS, UNREACHABLE_CRASH_POINTS, deal, parse
from kemu.cluster.crash_points import POINTS


def test_every_reachable_crash_point_is_injected() -> None:
    assert set(UNREACHABLE_CRASH_POINTS) <= POINTS  # no stale exclusion
    assert set(CRASH_POINTS) == POINTS - set(UNREACHABLE_CRASH_POINTS)
    assert all(reason for reason in UNREACHABLE_CRASH_POINTS.values())
    for point in (
        "txn.prepared",
        "txn.share_state_marker_written",
        "txn.data_marker_written",
        "txn.markers_appended",
        "txn.markers_written",
        "share.enlisted",
        "share.staged",
    ):
        assert point in CRASH_POINTS


def test_the_points_are_in_a_fixed_order() -> None:
    """The seed replays the schedule, whatever the interpreter's string hash seed."""
    assert list(CRASH_POINTS) == sorted(CRASH_POINTS)


def test_deal_tries_every_point_before_repeating_one() -> None:
    points = CRASH_POINTS
    dealt = deal(points, len(points) * 2 + 1, random.Random(5))
    assert len(dealt) == len(points) * 2 + 1
    assert set(dealt[: len(points)]) == set(points)
    assert set(dealt[len(points) : 2 * len(points)]) == set(points)
    assert deal(points, 0, random.Random(5)) == []
    assert deal(points, 9, random.Random(5)) == deal(points, 9, random.Random(5))


def test_the_default_run_deals_every_point_twice() -> None:
    assert parse(["--seed", "5"]).crash_point_kills == 2 * len(CRASH_POINTS)
