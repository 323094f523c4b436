"""Transactions the coordinator ends, as Java kafka-clients 4.4.0 sees them
(``kemu.probe.TxnAdminProbe``), on kemu and on a real Kafka 4.4.0 (bench's jars; skipped
without them):

- a commit after the coordinator aborted the transaction on timeout throws
  InvalidTxnStateException (INVALID_TXN_STATE, not PRODUCER_FENCED);
- after that timeout abort, a send (Produce, INVALID_PRODUCER_EPOCH on the wire) throws
  InvalidProducerEpochException and is abortable: abortTransaction works and the next
  transaction commits; sendOffsetsToTransaction (TxnOffsetCommit v5, INVALID_PRODUCER_EPOCH on
  the wire, ``test_txn_after_timeout.py``) throws ProducerFencedException, fatal;
- Admin forceTerminateTransaction over an open transaction leaves it Empty with the producer
  epoch bumped twice (the fencing abort, then the InitProducerId retry), same producer id.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kemu.testing.kafka import SHARE_GROUPS, KafkaServer
from kemu.testing.plugin import KemuProcess
from tests.integration.clients.test_java_clients import ProbeRun, java_probes, run_probe  # noqa: F401  (fixture)
from tests.integration.parity import kafka_timing_overrides

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.parity]


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def endings(
    request: pytest.FixtureRequest,
    java_probes: Path,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ProbeRun]:
    workdir = tmp_path_factory.mktemp(f"txn-endings-{request.param}")
    if request.param == "kemu":
        kemu = KemuProcess(
            brokers=1,
            log_path=workdir / "kemu.log",
            timing="kafka",
            overrides=kafka_timing_overrides(),
        ).start()
        try:
            yield run_probe("TxnAdminProbe", kemu.bootstrap)
        finally:
            kemu.stop()
        return
    # the session's share-group Kafka: it looks for timed-out transactions every second (Kafka's
    # default is every 10 s)
    kafka: KafkaServer = request.getfixturevalue("kafka_server")(SHARE_GROUPS)
    yield run_probe("TxnAdminProbe", kafka.bootstrap)


def test_commit_after_timeout_abort_is_invalid_txn_state(endings: ProbeRun) -> None:
    line = endings.one("timeout_commit")
    assert line["state_before_commit"] in ("PrepareAbort", "CompleteAbort")
    assert line["commit_error"] == "InvalidTxnStateException"


def test_force_terminate_ends_empty_with_the_epoch_bumped_twice(endings: ProbeRun) -> None:
    line = endings.one("force_terminate")
    assert line["state_before"] == "Ongoing"
    assert line["state_after"] == "Empty"
    assert line["epoch_after"] == line["epoch_before"] + 2
    assert line["same_producer_id"] is True


def test_send_after_timeout_abort_is_abortable(endings: ProbeRun) -> None:
    line = endings.one("timeout_send")
    assert line["state_before"] in ("PrepareAbort", "CompleteAbort")
    assert line["error"] == "InvalidProducerEpochException"
    assert line["abort_error"] is None
    assert line["next_commit_error"] is None


def test_send_offsets_after_timeout_abort_is_fatal(endings: ProbeRun) -> None:
    line = endings.one("timeout_send_offsets")
    assert line["state_before"] in ("PrepareAbort", "CompleteAbort")
    assert line["error"] == "ProducerFencedException"
    assert line["abort_error"] == "ProducerFencedException"
    assert line["next_commit_error"] == "ProducerFencedException"
