"""kemu's ``__transaction_state`` records and transaction markers, read by Apache Kafka 4.4.0's own
``DumpLogSegments --transaction-log-decoder`` (from the benchmark's jars in bench/.cache/lib;
skipped when they are not there): a committed and an aborted transaction of confluent-kafka's
transactional producer, written to a data dir by kemu, decode to Kafka's TransactionLogKey/Value
JSON and COMMIT/ABORT control records; the records of a transaction whose EndTxn exhausted the
producer's epoch decode with Kafka's NextProducerId/PreviousProducerId.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kemu.coordinator.transaction.coordinator import MAX_EPOCH, TransactionCoordinator
from kemu.coordinator.transaction.records import encode_key, encode_value
from kemu.protocol.records import build_batch, read_header
from kemu.storage.segments import SegmentLog
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


def test_kafka_reads_an_epoch_exhausting_prepare_as_its_own(tmp_path: Path) -> None:
    """A transaction ended by the EndTxn v5 that exhausts the epoch: Kafka reads the PREPARE
    record as its coordinator writes it (the old id at 32767, the new one as NextProducerId) and
    the COMPLETE record as switched to the new id at epoch 0."""
    if shutil.which("java") is None or not list(LIB.glob("kafka-tools-*.jar")):
        pytest.skip("needs java and Kafka's jars in bench/.cache/lib (make bench fetches them)")
    ids = itertools.count(1000)
    coordinator = TransactionCoordinator(lambda: next(ids), max_timeout_ms=60_000)
    records = list(coordinator.init_producer_id("worn-out", 10_000, 0).records)
    coordinator.transactions["worn-out"].producer_epoch = MAX_EPOCH - 1
    records += coordinator.add_partitions("worn-out", 1000, MAX_EPOCH - 1, [("o", 0)], 1).records
    records += coordinator.end_transaction(
        "worn-out", 1000, MAX_EPOCH - 1, True, 2, bump_epoch=True
    ).records
    records += coordinator.complete("worn-out", 3)
    log = SegmentLog(tmp_path / "__transaction_state-0")
    for offset, (transactional_id, value) in enumerate(records):
        assert value is not None
        batch = build_batch(
            [(encode_key(transactional_id), encode_value(value, empty=value.status == 0))],
            timestamp_ms=0,
            base_offset=offset,
        )
        log.append(read_header(batch), batch, now_ms=0)
    log.close()

    decoded = dump(
        tmp_path / "__transaction_state-0" / f"{0:020d}.log", "--transaction-log-decoder"
    )
    payloads = [
        line.split("payload: ", 1)[1] for line in decoded.splitlines() if "payload: " in line
    ]
    prepare = json.loads(payloads[2])["data"]
    assert prepare["transactionStatus"] == "PrepareCommit"
    assert (prepare["producerId"], prepare["producerEpoch"]) == (1000, MAX_EPOCH)
    assert (prepare["nextProducerId"], prepare["previousProducerId"]) == (1001, 1000)
    complete = json.loads(payloads[3])["data"]
    assert complete["transactionStatus"] == "CompleteCommit"
    assert (complete["producerId"], complete["producerEpoch"]) == (1001, 0)
    assert complete["previousProducerId"] == 1000 and "nextProducerId" not in complete
