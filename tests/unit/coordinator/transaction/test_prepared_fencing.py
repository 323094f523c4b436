"""Requests that reach a transaction while it is prepared (PREPARE_COMMIT/PREPARE_ABORT written,
its markers not yet), answered as Kafka 4.4.0 answers them.

Kafka 4.4.0 sets the pending transition to Complete* before it sends the markers
(``endTransaction``'s callback calls ``prepareComplete``; a load does the same), so for as long
as the markers are written its ``TransactionCoordinator`` (kafka_2.13-4.4.0.jar, read with
javap) answers from its pending-transition check:

- ``handleAddPartitionsToTransaction`` (AddOffsetsToTxn too) and ``prepareInitProducerIdTransit``
  check it first: CONCURRENT_TRANSACTIONS, whatever the producer id and epoch;
- ``endTransaction`` (EndTxn v5, transaction version 2) checks it first too;
- ``endTransactionWithTV1`` (EndTxn v4 and older) checks the producer id
  (INVALID_PRODUCER_ID_MAPPING) and the epoch (PRODUCER_FENCED) before it, then answers
  CONCURRENT_TRANSACTIONS to either outcome.

So a zombie (an older epoch) is told to wait, and is fenced once the transaction completed, except
by EndTxn v4, which fences it at once. A real single-node Kafka 4.4.0 gave every answer of
``SCENARIOS`` on 2026-12-07, each scenario's requests sent on one connection right after the
request that prepared it, within the few hundred milliseconds its markers took (a completed
transaction answers several of them otherwise). Nothing found holds Kafka's markers back for good
(``min.insync.replicas`` above the replicas does not), so that race is no test; this table is.

kemu writes the markers before it answers, so it is prepared only inside a call (or after a
crash, until the load finishes it): these run the sans-IO coordinator stopped between its
PREPARE record and ``complete``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from kemu.coordinator.transaction.coordinator import (
    STATE_NAMES,
    Outcome,
    TransactionCoordinator,
)
from kemu.protocol.errors import ErrorCode

EPOCH = 2  # the producer's epoch when its transaction ends
TIMEOUT_MS = 60_000

# (request, producer id, epoch, commit): request one of "end v4", "end v5", "add partitions",
# "add offsets", "init"; producer id "current", "other" (one the coordinator never gave) or
# "none" (InitProducerId naming none)
Request = tuple[str, str, int, bool]


@dataclass(frozen=True)
class Scenario:
    ending: str  # how the transaction got prepared: "commit v4", "commit v5", "fence"
    ending_answer: tuple[str, int]  # its error and the epoch answered (-1 with an error)
    described: tuple[str, int]  # DescribeTransactions after the requests: state, epoch
    answers: dict[str, tuple[Request, str]]


SCENARIOS: dict[str, Scenario] = {
    "commit, transaction version 1": Scenario(
        ending="commit v4",
        ending_answer=("none", -1),
        described=("PrepareCommit", EPOCH),
        answers={
            "EndTxn commit again": (("end v4", "current", EPOCH, True), "concurrent_transactions"),
            "EndTxn abort": (("end v4", "current", EPOCH, False), "concurrent_transactions"),
            "EndTxn, older epoch": (("end v4", "current", EPOCH - 1, True), "producer_fenced"),
            "EndTxn, newer epoch": (("end v4", "current", EPOCH + 1, True), "producer_fenced"),
            "EndTxn, another id": (("end v4", "other", EPOCH, True), "invalid_producer_id_mapping"),
            "AddPartitionsToTxn": (
                ("add partitions", "current", EPOCH, False),
                "concurrent_transactions",
            ),
            "AddPartitionsToTxn, older epoch": (
                ("add partitions", "current", EPOCH - 1, False),
                "concurrent_transactions",
            ),
            "AddOffsetsToTxn": (
                ("add offsets", "current", EPOCH, False),
                "concurrent_transactions",
            ),
            "AddOffsetsToTxn, older epoch": (
                ("add offsets", "current", EPOCH - 1, False),
                "concurrent_transactions",
            ),
            "InitProducerId, older epoch": (
                ("init", "current", EPOCH - 1, False),
                "concurrent_transactions",
            ),
            "InitProducerId, another id": (("init", "other", 0, False), "concurrent_transactions"),
            "InitProducerId, no id": (("init", "none", -1, False), "concurrent_transactions"),
        },
    ),
    "commit, transaction version 2": Scenario(
        ending="commit v5",
        ending_answer=("none", EPOCH + 1),
        described=("PrepareCommit", EPOCH + 1),
        answers={
            "EndTxn commit retried": (
                ("end v5", "current", EPOCH, True),
                "concurrent_transactions",
            ),
            "EndTxn abort retried": (
                ("end v5", "current", EPOCH, False),
                "concurrent_transactions",
            ),
            "EndTxn, the bumped epoch": (
                ("end v5", "current", EPOCH + 1, True),
                "concurrent_transactions",
            ),
            "EndTxn, older epoch": (
                ("end v5", "current", EPOCH - 1, True),
                "concurrent_transactions",
            ),
            "EndTxn, another id": (("end v5", "other", EPOCH, True), "concurrent_transactions"),
            "AddPartitionsToTxn, the bumped epoch": (
                ("add partitions", "current", EPOCH + 1, False),
                "concurrent_transactions",
            ),
            "AddPartitionsToTxn, the epoch before": (
                ("add partitions", "current", EPOCH, False),
                "concurrent_transactions",
            ),
            "AddOffsetsToTxn, the epoch before": (
                ("add offsets", "current", EPOCH, False),
                "concurrent_transactions",
            ),
            "InitProducerId, the epoch before": (
                ("init", "current", EPOCH, False),
                "concurrent_transactions",
            ),
            "InitProducerId, another id": (("init", "other", 0, False), "concurrent_transactions"),
        },
    ),
    "fenced by a new instance": Scenario(
        ending="fence",
        ending_answer=("concurrent_transactions", -1),
        described=("PrepareAbort", EPOCH + 1),
        answers={
            "zombie EndTxn v4 abort": (("end v4", "current", EPOCH, False), "producer_fenced"),
            "zombie EndTxn v4 commit": (("end v4", "current", EPOCH, True), "producer_fenced"),
            "zombie EndTxn v5 abort": (
                ("end v5", "current", EPOCH, False),
                "concurrent_transactions",
            ),
            "zombie EndTxn v5 commit": (
                ("end v5", "current", EPOCH, True),
                "concurrent_transactions",
            ),
            "zombie AddPartitionsToTxn": (
                ("add partitions", "current", EPOCH, False),
                "concurrent_transactions",
            ),
            "zombie AddOffsetsToTxn": (
                ("add offsets", "current", EPOCH, False),
                "concurrent_transactions",
            ),
            "zombie InitProducerId": (("init", "current", EPOCH, False), "concurrent_transactions"),
            "new instance again": (("init", "none", -1, False), "concurrent_transactions"),
        },
    ),
}

TXN = "prepared"
TP = ("orders", 0)
OFFSETS_TP = ("__consumer_offsets", 7)
CURRENT = 1000
OTHER = CURRENT + 1000


class Prepared:
    """A sans-IO coordinator whose transaction is prepared and its markers not written."""

    def __init__(self, ending: str) -> None:
        ids = itertools.count(CURRENT)
        self.coordinator = TransactionCoordinator(lambda: next(ids), max_timeout_ms=TIMEOUT_MS)
        for epoch in range(EPOCH + 1):  # InitProducerId without an id: epochs 0, 1, 2
            outcome = self.coordinator.init_producer_id(TXN, TIMEOUT_MS, now_ms=0)
            assert (outcome.producer_id, outcome.producer_epoch) == (CURRENT, epoch)
        added = self.coordinator.add_partitions(TXN, CURRENT, EPOCH, [TP], now_ms=1)
        assert added.error is ErrorCode.none
        self.ending = self._end(ending)

    def _end(self, ending: str) -> Outcome:
        if ending == "fence":
            return self.coordinator.init_producer_id(TXN, TIMEOUT_MS, now_ms=2)
        bump = ending == "commit v5"
        return self.coordinator.end_transaction(TXN, CURRENT, EPOCH, True, 2, bump_epoch=bump)

    def send(self, request: Request) -> str:
        kind, named, epoch, commit = request
        producer_id = {"current": CURRENT, "other": OTHER, "none": -1}[named]
        coordinator = self.coordinator
        if kind.startswith("end"):
            outcome = coordinator.end_transaction(
                TXN, producer_id, epoch, commit, 3, bump_epoch=kind == "end v5"
            )
        elif kind == "add partitions":
            outcome = coordinator.add_partitions(TXN, producer_id, epoch, [TP], now_ms=3)
        elif kind == "add offsets":
            outcome = coordinator.add_partitions(TXN, producer_id, epoch, [OFFSETS_TP], now_ms=3)
        else:
            outcome = coordinator.init_producer_id(TXN, TIMEOUT_MS, 3, producer_id, epoch)
        assert outcome.records == [] and outcome.markers is None  # refused: nothing written
        return outcome.error.name

    def described(self) -> tuple[str, int]:
        meta = self.coordinator.transactions[TXN]
        return STATE_NAMES[meta.state], meta.producer_epoch


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_prepared_transaction_answers_in_kafkas_order_of_checks(name: str) -> None:
    scenario = SCENARIOS[name]
    prepared = Prepared(scenario.ending)
    ending = prepared.ending
    answered_epoch = ending.producer_epoch if ending.error is ErrorCode.none else -1
    if scenario.ending == "commit v4":
        answered_epoch = -1  # EndTxn v4 has no epoch in its answer
    assert (ending.error.name, answered_epoch) == scenario.ending_answer
    assert ending.markers is not None  # the markers kemu would write now; held back here
    answers = {label: prepared.send(request) for label, (request, _) in scenario.answers.items()}
    assert answers == {label: expected for label, (_, expected) in scenario.answers.items()}
    assert prepared.described() == scenario.described  # nothing refused changed anything


def test_once_the_markers_are_written_the_zombie_is_fenced() -> None:
    prepared = Prepared("commit v5")
    zombie = prepared.coordinator.add_partitions(TXN, CURRENT, EPOCH - 1, [TP], now_ms=3)
    assert zombie.error is ErrorCode.concurrent_transactions  # told to wait, then
    prepared.coordinator.complete(TXN, now_ms=4)
    assert prepared.described() == ("CompleteCommit", EPOCH + 1)
    zombie = prepared.coordinator.add_partitions(TXN, CURRENT, EPOCH - 1, [TP], now_ms=5)
    assert zombie.error is ErrorCode.producer_fenced
    retried = prepared.coordinator.end_transaction(TXN, CURRENT, EPOCH, True, 5, bump_epoch=True)
    assert (retried.error, retried.producer_epoch) == (ErrorCode.none, EPOCH + 1)
    added = prepared.coordinator.add_partitions(TXN, CURRENT, EPOCH + 1, [TP], now_ms=5)
    assert added.error is ErrorCode.none
