"""The control plane's transaction view shows what is left of a prepared transaction's markers:
``marker_status`` (``retrying`` after a marker failed to write, ``completing`` when the COMPLETE
record did, ``cancelled`` after a partition refused one, None otherwise) and ``pending_markers``,
the partitions whose marker is not written yet (docs/control.md, Transactions)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kemu.cluster.clock import VirtualClock
from kemu.cluster.context import Runtime
from kemu.control.verbs import Control
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode
from tests.unit.coordinator.transaction.test_marker_write_failure import (
    AUDIT,
    NOW,
    ORDERS,
    RETRY_WAIT_MS,
    STATE_LOG,
    TIMEOUT_MS,
    TopicFailingLog,
    _cluster,
    _disk_error,
    _produce,
)


@pytest.fixture(autouse=True)
def _healthy_disk() -> Iterator[None]:
    TopicFailingLog.failing = set()
    yield
    TopicFailingLog.failing = set()


class Txn:
    """A coordinator over a cluster of its own, its id ``t`` Ongoing with a record in orders-0
    and audit-0, and the control verbs over the same process."""

    def __init__(self) -> None:
        self.clock = VirtualClock(start_ms=NOW)
        self.cluster = _cluster()
        runtime = Runtime(cluster=self.cluster, clock=self.clock)
        self.service = transaction_coordinator(runtime)
        self.control = Control(runtime)
        started = self.service.init_producer_id("t", TIMEOUT_MS, -1, -1)
        self.pid, self.epoch = started.producer_id, started.producer_epoch
        assert self.service.add_partitions("t", self.pid, self.epoch, [ORDERS, AUDIT]).error is (
            ErrorCode.none
        )
        for tp in (ORDERS, AUDIT):
            _produce(self.cluster, tp, self.pid, self.epoch)

    def commit(self) -> None:
        ended = self.service.end_transaction("t", self.pid, self.epoch, True, bump_epoch=True)
        assert ended.error is ErrorCode.none

    def viewed(self) -> dict[str, Any]:
        """``t`` in the transactions verb's answer, with the fields these tests look at."""
        [found] = [t for t in self.control.transactions() if t["transactional_id"] == "t"]
        return {key: found[key] for key in ("state", "marker_status", "pending_markers")}


def test_an_ongoing_transaction_has_no_markers_outstanding() -> None:
    txn = Txn()
    assert txn.viewed() == {"state": "Ongoing", "marker_status": None, "pending_markers": []}


def test_a_marker_being_retried_is_pending_until_written() -> None:
    txn = Txn()
    with _disk_error("orders"):
        txn.commit()
        assert txn.viewed() == {
            "state": "PrepareCommit",
            "marker_status": "retrying",
            "pending_markers": [["orders", 0]],
        }
        txn.clock.advance(RETRY_WAIT_MS)  # still failing
        assert txn.viewed()["pending_markers"] == [["orders", 0]]
    txn.clock.advance(RETRY_WAIT_MS)
    assert txn.control.transactions() == []  # complete: no longer open


def test_a_completion_record_being_retried_has_its_markers_written() -> None:
    txn = Txn()
    # the state log fails once the markers are written, before the COMPLETE record
    txn.service.add_marker_listener(lambda markers: TopicFailingLog.failing.add(STATE_LOG))
    txn.commit()
    assert txn.viewed() == {
        "state": "PrepareCommit",
        "marker_status": "completing",
        "pending_markers": [],
    }
    TopicFailingLog.failing = set()
    txn.clock.advance(RETRY_WAIT_MS)
    assert txn.control.transactions() == []


def test_a_refused_marker_leaves_its_partition_pending_for_good() -> None:
    txn = Txn()
    # a tool ends the transaction in orders-0 with a later epoch of the producer
    orders = txn.cluster.topics["orders"].partitions[0]
    orders.write_marker(txn.pid, txn.epoch + 3, False, coordinator_epoch=0, now_ms=NOW)
    txn.commit()
    cancelled = {
        "state": "PrepareCommit",
        "marker_status": "cancelled",
        "pending_markers": [["orders", 0]],
    }
    assert txn.viewed() == cancelled
    txn.clock.advance(10 * TIMEOUT_MS)
    assert txn.viewed() == cancelled
