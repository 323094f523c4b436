"""Transactions the coordinator ends, as Java kafka-clients 4.4.0 sees them
(``kemu.probe.TxnAdminProbe``), on kemu and on a real Kafka 4.4.0 (bench's jars; skipped
without them):

- a commit after the coordinator aborted the transaction on timeout throws
  InvalidTxnStateException (INVALID_TXN_STATE, not PRODUCER_FENCED);
- Admin forceTerminateTransaction over an open transaction leaves it Empty with the producer
  epoch bumped twice (the fencing abort, then the InitProducerId retry), same producer id.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kemu.testing.plugin import KemuProcess
from tests import REPO_ROOT
from tests.integration.clients.test_java_clients import ProbeRun, java_probes, run_probe  # noqa: F401  (fixture)
from tests.integration.parity import kafka_timing_overrides

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.parity]
ROOT = REPO_ROOT
BROKER_JAR = ROOT / "bench" / ".cache" / "lib" / "kafka_2.13-4.4.0.jar"


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
    if shutil.which("java") is None or not BROKER_JAR.exists():
        pytest.skip("needs java and Kafka's jars in bench/.cache/lib (make bench fetches them)")
    sys.path.insert(0, str(ROOT))
    from bench.servers import KafkaServer

    class QuickAbortKafka(KafkaServer):
        """Looks for timed-out transactions every second (Kafka's default is every 10 s)."""

        def _server_properties(self) -> str:
            return super()._server_properties() + (
                "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000\n"
                "transaction.state.log.num.partitions=3\n"
            )

    server = QuickAbortKafka(workdir, partitions=1)
    server.start()
    try:
        yield run_probe("TxnAdminProbe", server.bootstrap)
    finally:
        server.stop()


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
