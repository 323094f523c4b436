"""Kafka 4.4.0's own kafka-transactions tool (TransactionsCommand from bench's jars; skipped
without java or the jars) against a 3-broker kemu: describe-producers and find-hanging answered
by a follower replica, as Kafka answers them from any broker hosting the log, with the producer's
last timestamp filled in."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.testing.plugin import KemuProcess
from tests import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.parity]
ROOT = REPO_ROOT
LIB = ROOT / "bench" / ".cache" / "lib"
TOPIC = "replicated"


def transactions_tool(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "java",
            "-Xmx256M",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            f"{LIB}/*",
            "org.apache.kafka.tools.TransactionsCommand",
            "--bootstrap-server",
            bootstrap,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_follower_answers_describe_producers_and_find_hanging(
    kemu_cluster: KemuProcess,
) -> None:
    if shutil.which("java") is None or not (LIB / "kafka-tools-4.4.0.jar").exists():
        pytest.skip("needs java and Kafka's jars in bench/.cache/lib (make bench fetches them)")
    admin = AdminClient({"bootstrap.servers": kemu_cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]])])[TOPIC].result(15)
    producer = Producer({"bootstrap.servers": kemu_cluster.bootstrap, "enable.idempotence": True})
    producer.produce(TOPIC, b"v", timestamp=1_700_000_000_123)
    assert producer.flush(15) == 0

    described = transactions_tool(
        kemu_cluster.bootstrap,
        "describe-producers",
        "--topic",
        TOPIC,
        "--partition",
        "0",
        "--broker-id",
        "2",
    )
    assert described.returncode == 0, described.stdout + described.stderr
    header, row = described.stdout.strip().splitlines()[:2]
    columns = dict(zip(header.split(), row.split(), strict=False))
    assert columns["LastSequence"] == "0"
    assert columns["LastTimestamp"] == "1700000000123"

    hanging = transactions_tool(kemu_cluster.bootstrap, "find-hanging", "--broker-id", "3")
    assert hanging.returncode == 0, hanging.stdout + hanging.stderr
    assert hanging.stdout.split()[:3] == ["Topic", "Partition", "ProducerId"]
