"""A transaction whose marker a partition refused, as the control API and ``kemu ctl
transactions`` show it, on a kemu in the test's process driven on the wire.

A producer (transaction version 2: Produce v12, EndTxn v5) writes a record to two topics; a tool
(WriteTxnMarkers v1) writes an ABORT marker to the first with a later epoch of the producer; the
producer commits. As Kafka 4.4.0's coordinator (tests/integration/txn/test_marker_refused_kafka.py
compares the wire side with it), kemu's cancels the transaction's markers: the second topic has
its marker, the transaction stays PrepareCommit, and the control plane lists it with
``marker_status`` ``cancelled`` and the first topic's partition in ``pending_markers``.
"""

from __future__ import annotations

import datetime
import json
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.control.client import ctl_main
from kemu.protocol.errors import ErrorCode
from kemu.testing.inprocess import InProcessKemu
from kemu.testing.wire_client import WireClient
from tests.integration.txn.wire_parity import (
    end_and_stable_offsets,
    end_txn,
    init_producer_id,
    produce_enlisting,
    until_ready,
    write_marker,
)

pytestmark = pytest.mark.integration

TIMEOUT = datetime.timedelta(seconds=60)


def test_a_refused_marker_is_listed_pending(
    kemu_inprocess_factory: type[InProcessKemu], capsys: pytest.CaptureFixture[str]
) -> None:
    kemu = kemu_inprocess_factory(brokers=1, with_control=True).start()
    run = uuid.uuid4().hex[:8]
    refusing, written = f"refusing-{run}", f"written-{run}"
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in (refusing, written)]).values():
        future.result(timeout=30)
    transactional_id = f"tx-{run}"
    client = WireClient(kemu.bootstrap, client_id="control-markers")
    try:
        pid, epoch = init_producer_id(client, transactional_id, TIMEOUT)
        for topic in (refusing, written):
            assert produce_enlisting(client, topic, transactional_id, pid, epoch) == (
                ErrorCode.none
            )
        assert write_marker(client, refusing, pid, epoch + 3, commit=False) == ErrorCode.none
        ended = end_txn(client, transactional_id, pid, epoch, commit=True)
        assert ended == (ErrorCode.none, epoch + 1)
        until_ready(lambda: end_and_stable_offsets(client, written), lambda found: found == (2, 2))
    finally:
        client.close()

    [listed] = [t for t in kemu.control.transactions() if t["transactional_id"] == transactional_id]
    assert listed["state"] == "PrepareCommit"
    assert listed["partitions"] == sorted([[refusing, 0], [written, 0]])
    assert (listed["marker_status"], listed["pending_markers"]) == ("cancelled", [[refusing, 0]])

    assert ctl_main(kemu.control_url, "transactions", [], None) == 0
    printed = json.loads(capsys.readouterr().out)
    [shown] = [t for t in printed if t["transactional_id"] == transactional_id]
    assert (shown["marker_status"], shown["pending_markers"]) == ("cancelled", [[refusing, 0]])
