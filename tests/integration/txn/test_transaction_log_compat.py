"""kemu's ``__transaction_state`` records and transaction markers, read by Apache Kafka 4.4.0's own
``DumpLogSegments --transaction-log-decoder`` (from the benchmark's jars in bench/.cache/lib;
skipped when they are not there): a committed and an aborted transaction of confluent-kafka's
transactional producer, written to a data dir by kemu, decode to Kafka's TransactionLogKey/Value
JSON and COMMIT/ABORT control records.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kemu.testing.plugin import KemuProcess
from tests import REPO_ROOT
from tests.integration.txn.test_transactions import create_topic, transactional_producer

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.parity]

LIB = REPO_ROOT / "bench" / ".cache" / "lib"
DUMP = "org.apache.kafka.tools.DumpLogSegments"


def dump(path: Path, *extra: str) -> str:
    done = subprocess.run(
        ["java", "-cp", f"{LIB}/*", DUMP, "--files", str(path), "--print-data-log", *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def test_kafka_decodes_the_transaction_log_and_markers(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    if shutil.which("java") is None or not list(LIB.glob("kafka-tools-*.jar")):
        pytest.skip("needs java and Kafka's jars in bench/.cache/lib (make bench fetches them)")
    data = tmp_path / "data"
    process = kemu_factory(brokers=3, data_dir=data).start()
    create_topic(process.bootstrap, "compat", partitions=1)
    producer = transactional_producer(process.bootstrap, "compat-tid")
    producer.begin_transaction()
    producer.produce("compat", b"kept", partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce("compat", b"dropped", partition=0)
    producer.flush(30)
    producer.abort_transaction(30)
    process.stop()

    state_log = max(data.glob("__transaction_state-*/*.log"), key=lambda p: p.stat().st_size)
    decoded = dump(state_log, "--transaction-log-decoder")
    statuses = [
        line.split('"transactionStatus":"')[1].split('"')[0]
        for line in decoded.splitlines()
        if '"transactionStatus"' in line
    ]
    assert statuses == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "CompleteCommit",
        "Ongoing",
        "PrepareAbort",
        "CompleteAbort",
    ]
    assert '"transactionalId":"compat-tid"' in decoded
    assert '"transactionPartitions":[{"topic":"compat","partitionIds":[0]}]' in decoded
    markers = dump(data / "compat-0" / "00000000000000000000.log")
    assert "endTxnMarker: COMMIT" in markers and "endTxnMarker: ABORT" in markers
