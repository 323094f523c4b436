"""Java kafka-clients 4.4.0 transactions against a 3-broker kemu through
``kemu.probe.TransactionProbe`` (see its javadoc): with transaction version 2 finalized (kemu
serves EndTxn v5), the producer adds partitions by producing and every EndTxn bumps its epoch.

A committed, an aborted and a committed-with-offsets transaction; read_committed sees only the
committed records, read_uncommitted all of them, and the group's offset is the one sent with the
transaction; a second producer with the same transactional id fences the first (its late
record gets INVALID_PRODUCER_EPOCH, as from Kafka's partition leader, so its commit fails with
InvalidProducerEpochException) and its own commit is the only record read_committed sees; Admin
lists and describes an open transaction and sees it CompleteAbort after the abort. A
consume-transform-produce loop copies a topic exactly once with a subscribed read_committed
consumer, over the classic and the KIP-848 consumer group protocol. The client speaks Kafka
4.4's newest versions to kemu: ApiVersions v5 and TxnOffsetCommit v6 (counted by /metrics).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kemu.testing.inprocess import InProcessKemu
from tests.integration.clients.test_java_clients import ProbeRun, java_probes, run_probe  # noqa: F401  (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.java]

RECORDS = 30


@pytest.fixture(scope="module")
def txn_kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    log_path = tmp_path_factory.mktemp("kemu-txn-java") / "kemu.log"
    kemu = InProcessKemu(
        brokers=3,
        log_path=log_path,
        with_control=True,
        overrides=[
            "group.initial.rebalance.delay.ms=300",
            # KIP-848 reconciles one heartbeat at a time: beat often so the test is quick.
            "group.consumer.heartbeat.interval.ms=500",
            "group.consumer.min.heartbeat.interval.ms=500",
        ],
    ).start()
    try:
        yield kemu
    finally:
        kemu.stop()


@pytest.fixture(scope="module")
def txn_run(java_probes: Path, txn_kemu: InProcessKemu) -> ProbeRun:  # noqa: F811
    return run_probe(
        "TransactionProbe", txn_kemu.bootstrap, "--topic", "java-txn", "--records", str(RECORDS)
    )


def test_read_committed_sees_only_committed_records(txn_run: ProbeRun) -> None:
    line = txn_run.one("commit_abort")
    assert line["committed_count"] == RECORDS + 1
    assert line["committed_aborted_seen"] == 0
    assert line["committed_has_last"] is True
    assert line["uncommitted_count"] == 2 * RECORDS + 1
    assert line["group_offset"] == 7
    assert line["epoch_after"] == 3  # TV2: EndTxn v5 bumped the epoch three times


def test_second_producer_fences_the_first(txn_run: ProbeRun) -> None:
    line = txn_run.one("fencing")
    # Kafka's partition leader answers the fenced producer's Produce with INVALID_PRODUCER_EPOCH
    # (not the coordinator's PRODUCER_FENCED): the Java client's commit fails with it.
    assert line["first_outcome"] == (
        "InvalidProducerEpochException: Producer attempted to produce with an old epoch."
    )
    assert line["committed"] == ["fresh"]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consume_transform_produce_exactly_once(txn_run: ProbeRun, protocol: str) -> None:
    line = txn_run.one("eos_loop", protocol=protocol)
    assert line["generation"] >= 1  # the group's generation / member epoch went with the offsets
    assert (line["copied"], line["committed"], line["sink_committed"]) == (60, 60, 60)


def test_admin_lists_and_describes_transactions(txn_run: ProbeRun) -> None:
    line = txn_run.one("admin_view")
    assert line["listed"] == ["Ongoing"]  # once: only its coordinator's broker lists it
    assert (line["state"], line["has_start"]) == ("Ongoing", True)
    assert line["partitions"] == ["java-txn-admin-0"]
    assert line["timeout_ms"] == 60000
    assert line["after_abort"] == "CompleteAbort"
    (producer,) = line["producers"]
    assert producer["txn_start"] == 0


def test_probe_exit_status(txn_run: ProbeRun) -> None:
    assert txn_run.returncode == 0, txn_run.stderr[-3000:]


def test_the_client_uses_kafka_44s_newest_versions(
    txn_run: ProbeRun, txn_kemu: InProcessKemu
) -> None:
    # ApiVersions v5 (KIP-1242) and TxnOffsetCommit v6 (KIP-1319): no UNSUPPORTED_VERSION fallback
    from prometheus_client.parser import text_string_to_metric_families

    used: dict[str, set[str]] = {}
    refused: set[str] = set()
    for family in text_string_to_metric_families(txn_kemu.control.metrics()):
        for sample in family.samples:
            if sample.name == "kafka_network_requests_total" and sample.value > 0:
                used.setdefault(sample.labels["api"], set()).add(sample.labels["version"])
            errors = sample.name == "kafka_network_request_errors_total" and sample.value > 0
            if errors and sample.labels["api"] == "api_versions":
                refused.add(sample.labels["error"])
    assert used["api_versions"] == {"5"}
    # the ClusterId/NodeId the client sends once it knows them match the broker it reached
    assert not refused
    assert "6" in used["txn_offset_commit"]
