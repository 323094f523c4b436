"""Java's KafkaShareConsumer (kafka-clients 4.4.0: ShareGroupHeartbeat, ShareFetch and
ShareAcknowledge v2) against a 3-broker kemu, through ``kemu.probe.ShareConsumerProbe``.

Every record is delivered once with delivery count 1 and, once committed, never again; in
explicit mode RELEASE redelivers (delivery count 2) and REJECT does not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kemu.testing.plugin import KemuProcess

pytestmark = [pytest.mark.integration, pytest.mark.java]

JAVA_DIR = Path(__file__).resolve().parents[1] / "java"
JAR = JAVA_DIR / "target" / "kemu-java-probes-0.1.0.jar"
CLASSPATH = os.environ.get(
    "KEMU_JAVA_CLASSPATH", os.pathsep.join([str(JAR), str(JAVA_DIR / "target" / "lib" / "*")])
)
PARTITIONS = 3
RECORDS = 30


def earliest(admin: AdminClient, group: str) -> None:
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def _probe_built() -> bool:
    if "KEMU_JAVA_CLASSPATH" in os.environ:
        return True
    if not JAR.exists():
        return False
    with zipfile.ZipFile(JAR) as jar:
        return "kemu/probe/ShareConsumerProbe.class" in jar.namelist()


@pytest.mark.skipif(
    shutil.which("java") is None or not _probe_built(), reason="needs java and `make java`"
)
def test_java_share_consumer(kemu_cluster: KemuProcess) -> None:
    topic = f"share-java-{uuid.uuid4().hex[:8]}"
    group, explicit = f"g-{topic}", f"x-{topic}"
    admin = AdminClient({"bootstrap.servers": kemu_cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    earliest(admin, group)
    earliest(admin, explicit)
    producer = Producer({"bootstrap.servers": kemu_cluster.bootstrap})
    for index in range(RECORDS):
        producer.produce(topic, value=b"v%d" % index, partition=index % PARTITIONS)
    assert producer.flush(30) == 0

    checks = {line["check"]: line for line in _run_probe(kemu_cluster, topic, group, explicit)}
    failed = {name: line.get("error") for name, line in checks.items() if not line["ok"]}
    assert failed == {}

    every = sorted(f"{p}:{o}" for p in range(PARTITIONS) for o in range(RECORDS // PARTITIONS))
    consumed = checks["consume_all"]
    assert sorted(consumed["records"]) == every  # each record once
    assert set(consumed["delivery_counts"].values()) == {1}
    assert consumed["commit_errors"] == {}
    assert checks["nothing_left"]["records"] == []

    released = checks["explicit_release"]
    assert sorted(released["first"]) == every
    assert sorted(released["second"]) == [f"{p}:0#2" for p in range(PARTITIONS)]
    assert released["commit_errors"] == {}


def _run_probe(kemu: KemuProcess, topic: str, group: str, explicit: str) -> list[dict[str, Any]]:
    command = [
        "java",
        "-cp",
        CLASSPATH,
        "kemu.probe.ShareConsumerProbe",
        "--bootstrap",
        kemu.bootstrap,
        "--topic",
        topic,
        "--group",
        group,
        "--explicit-group",
        explicit,
        "--records",
        str(RECORDS),
        "--partitions",
        str(PARTITIONS),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines or done.returncode:
        print(done.stderr[-6000:], file=sys.stderr)
    assert lines, f"probe printed nothing (exit {done.returncode})"
    return lines
