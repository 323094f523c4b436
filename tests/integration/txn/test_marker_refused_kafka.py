"""A transaction whose marker a partition refuses, on the wire, on kemu and on a real Kafka 4.4.0
(bench's jars; skipped without them).

A producer (transaction version 2: Produce v12 enlists the partitions, EndTxn v5) writes a
record to two topics; a tool (WriteTxnMarkers v1, as ``kafka-transactions.sh abort`` sends it)
then writes an ABORT marker to the first with a later epoch of the producer (its epoch + 3). The
producer ends the transaction: the coordinator's marker at epoch + 1 is refused there
(INVALID_PRODUCER_EPOCH) and Kafka's ``TransactionMarkerRequestCompletionHandler`` cancels the
transaction's markers: the second topic has its marker, but the COMPLETE record is never
written. Kafka 4.4.0 answers (recorded 2026-12-07, the same on kemu):

- the tool's marker: NONE; EndTxn: NONE with the bumped epoch (answered at the PREPARE record);
- the second topic's marker is written (its last stable offset reaches its end), the first
  keeps the tool's marker alone (its record aborted);
- the transaction stays PrepareCommit (PrepareAbort for an abort), DescribeTransactions says,
  after the second topic's marker and for as long as it is watched;
- InitProducerId, a new instance (no producer id): CONCURRENT_TRANSACTIONS; EndTxn v5 again:
  CONCURRENT_TRANSACTIONS.

Unit tests of the same: tests/unit/coordinator/transaction/test_marker_refused.py.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.protocol.errors import ErrorCode
from kemu.testing.kafka import SHARE_GROUPS
from kemu.testing.wire_client import WireClient
from tests.integration.txn.wire_parity import (
    INIT_PRODUCER_ID,
    Server,
    end_and_stable_offsets,
    end_txn,
    init_producer_id,
    produce_enlisting,
    serve,
    until_ready,
    write_marker,
)

pytestmark = [pytest.mark.integration, pytest.mark.parity]

DESCRIBE_TXNS = 65
REFUSING, WRITTEN = "marker-refused-a", "marker-refused-b"
TIMEOUT = datetime.timedelta(seconds=60)
WATCHED_S = 3.0  # how long the transaction is watched after the second topic's marker

Answers = dict[str, object]


def kafka_answers(prepared: str) -> Answers:
    return {
        "tool marker": "none",
        "end txn": ("none", 1),  # the epoch the answer gives, from the producer's
        "end offsets": {REFUSING: (2, 2), WRITTEN: (2, 2)},  # (end, last stable)
        "states watched": {prepared},
        "init producer id": "concurrent_transactions",
        "end txn again": "concurrent_transactions",
    }


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with serve(
        request,
        tmp_path_factory,
        name="marker-refused",
        kemu_overrides=SHARE_GROUPS.kemu_overrides(),
    ) as started:
        yield started


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[WireClient]:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in (REFUSING, WRITTEN)]).values():
        future.result(timeout=30)
    client = WireClient(server.bootstrap, client_id="marker-refused")
    try:
        yield client
    finally:
        client.close()


def _state(client: WireClient, transactional_id: str) -> str:
    answer = client.call(1, DESCRIBE_TXNS, 0, transactional_ids=(transactional_id,))
    return str(answer.transaction_states[0].transaction_state)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_refused_marker_leaves_the_transaction_prepared(
    server: Server, client: WireClient, commit: bool
) -> None:
    transactional_id = f"tx-refused-{uuid.uuid4().hex[:8]}"
    pid, epoch = init_producer_id(client, transactional_id, TIMEOUT)
    # a topic just created answers offset -1 until its leader is there
    before = {
        topic: until_ready(lambda t=topic: end_and_stable_offsets(client, t)[0], lambda o: o >= 0)
        for topic in (REFUSING, WRITTEN)
    }
    for topic in (REFUSING, WRITTEN):
        assert produce_enlisting(client, topic, transactional_id, pid, epoch) == ErrorCode.none
    tool = write_marker(client, REFUSING, pid, epoch + 3, commit=False)
    answers: Answers = {"tool marker": tool.name}
    error, answered_epoch = end_txn(client, transactional_id, pid, epoch, commit=commit)
    answers["end txn"] = (error.name, answered_epoch - epoch)

    def offsets() -> dict[str, tuple[int, int]]:
        """Each topic's end and last stable offset, from where the topic ended before."""
        found = {topic: end_and_stable_offsets(client, topic) for topic in (REFUSING, WRITTEN)}
        return {
            topic: (end - before[topic], stable - before[topic])
            for topic, (end, stable) in found.items()
        }

    # the markers are written after the answer: the second topic's last stable offset moves
    answers["end offsets"] = until_ready(offsets, lambda found: found[WRITTEN] == (2, 2))
    states: set[str] = set()
    deadline = time.monotonic() + WATCHED_S
    while time.monotonic() < deadline:
        states.add(_state(client, transactional_id))
        time.sleep(0.2)
    answers["states watched"] = states
    init = client.call(
        1,
        INIT_PRODUCER_ID,
        5,
        transactional_id=transactional_id,
        transaction_timeout=TIMEOUT,
        producer_id=-1,
        producer_epoch=-1,
    )
    answers["init producer id"] = ErrorCode(init.error_code).name
    again, _ = end_txn(client, transactional_id, pid, answered_epoch, commit=commit)
    answers["end txn again"] = again.name
    assert answers == kafka_answers("PrepareCommit" if commit else "PrepareAbort")
