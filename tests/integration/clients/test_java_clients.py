"""Java kafka-clients 4.4.0 against a 3-broker kemu, through the probes in ``tests/java``.

Each probe is one JVM launch that runs several checks and prints one JSON line per check
(``{"check": ..., "ok": ..., ...}``); JVM start-up is slow on small machines, so each probe runs
once per module and the tests below assert on its lines:

- ``ProduceConsume``: KafkaProducer at default settings (idempotent, acks=all), once per
  compression codec, to a 3-partition topic; KafkaConsumer with assign() + seekToBeginning()
  must read back exactly what the producer's RecordMetadata reported.
- ``AdminProbe``: describeCluster, createTopics (with configs), describeTopics (by name and id),
  listOffsets (earliest, latest, max timestamp, by timestamp), deleteRecords, describeConfigs,
  deleteTopics.

The probes are built with Maven when ``tests/java/target`` is missing or older than the sources
(``make java`` does the same), so plain ``pytest`` works too.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from kemu.testing.inprocess import InProcessKemu
from kemu.testing.kafka import QUICK_JVM_OPTS
from tests import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.java]

JAVA_DIR = REPO_ROOT / "tests" / "java"
TARGET = JAVA_DIR / "target"
CLASSES = TARGET / "classes"
LIB = TARGET / "lib"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
RECORDS_PER_CODEC = 40
ROUND_TRIP_PARTITIONS = 3
ADMIN_TOPIC = "java-admin"
ADMIN_PARTITIONS = 6
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
PROBE_TIMEOUT_S = 300
MAVEN_BUILD = [
    "mvn",
    "-q",
    "-B",
    "-DskipTests",
    "package",
    "dependency:copy-dependencies",
    "-DoutputDirectory=target/lib",
]


def _newest_mtime(paths: Iterator[Path]) -> float:
    return max((path.stat().st_mtime for path in paths), default=0.0)


def _build_is_stale() -> bool:
    if not (LIB / "kafka-clients-4.4.0.jar").exists():
        return True
    built = _newest_mtime(CLASSES.rglob("*.class"))
    sources = _newest_mtime(iter([JAVA_DIR / "pom.xml", *JAVA_DIR.joinpath("src").rglob("*")]))
    return built < sources


@pytest.fixture(scope="session")
def java_probes() -> Path:
    """The probes' build directory, built with Maven first when missing or stale."""
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("needs java and mvn")
    TARGET.mkdir(exist_ok=True)
    with open(TARGET / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # other sessions may be building the same tree
        if _build_is_stale():
            shutil.rmtree(LIB, ignore_errors=True)
            # Offline first (everything is in ~/.m2 after one online build), as `make java`.
            for offline in (["-o"], []):
                build = subprocess.run(
                    [*MAVEN_BUILD, *offline],
                    cwd=JAVA_DIR,
                    capture_output=True,
                    text=True,
                    timeout=900,
                    check=False,
                )
                if build.returncode == 0:
                    break
            output = build.stdout[-4000:] + build.stderr[-4000:]
            assert build.returncode == 0, f"mvn failed:\n{output}"
    return TARGET


@dataclass
class ProbeRun:
    returncode: int
    lines: list[dict[str, Any]]
    stderr: str

    def one(self, check: str, **match: Any) -> dict[str, Any]:
        """The line of ``check`` (whose fields equal ``match``), asserted to be ok."""
        found = [
            line
            for line in self.lines
            if line["check"] == check and all(line.get(k) == v for k, v in match.items())
        ]
        stderr_tail = self.stderr[-3000:]
        assert found, f"no {check} {match} line (exit {self.returncode}):\n{stderr_tail}"
        (line,) = found
        assert line["ok"], f"{check} {match} failed: {json.dumps(line.get('error'), indent=1)}"
        return line


def run_probe(main_class: str, bootstrap: str, *args: str) -> ProbeRun:
    classpath = os.pathsep.join([str(CLASSES), str(LIB / "*")])
    command = [
        *("java", *QUICK_JVM_OPTS, "-cp", classpath),
        *(f"kemu.probe.{main_class}", "--bootstrap", bootstrap),
    ]
    done = subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return ProbeRun(done.returncode, lines, done.stderr)


def kafka_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass
class JavaCluster:
    kemu: InProcessKemu
    cluster_id: str


@pytest.fixture(scope="module")
def java_cluster(
    java_probes: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JavaCluster]:
    """A fresh 3-broker kemu (like ``kemu_inprocess``) shared by this module's probe runs."""
    cluster_id = kafka_cluster_id()
    log_path = tmp_path_factory.mktemp("kemu-java") / "kemu.log"
    kemu = InProcessKemu(brokers=3, log_path=log_path, cluster_id=cluster_id)
    kemu.start()
    yield JavaCluster(kemu, cluster_id)
    kemu.stop()


@pytest.fixture(scope="module")
def round_trips(java_cluster: JavaCluster) -> ProbeRun:
    return run_probe(
        "ProduceConsume",
        java_cluster.kemu.bootstrap,
        "--topic-prefix",
        "java-roundtrip",
        "--partitions",
        str(ROUND_TRIP_PARTITIONS),
        "--records",
        str(RECORDS_PER_CODEC),
        "--codecs",
        ",".join(CODECS),
    )


@pytest.fixture(scope="module")
def admin_run(java_cluster: JavaCluster) -> ProbeRun:
    return run_probe(
        "AdminProbe",
        java_cluster.kemu.bootstrap,
        "--topic",
        ADMIN_TOPIC,
        "--partitions",
        str(ADMIN_PARTITIONS),
    )


def _stored(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record[k] for k in ("partition", "offset", "timestamp", "key", "value", "headers")}


@pytest.mark.parametrize("codec", CODECS)
def test_produce_then_consume_from_beginning(round_trips: ProbeRun, codec: str) -> None:
    line = round_trips.one("produce_consume", codec=codec)
    assert (line["idempotence"], line["acks"]) == (True, "-1")
    sent, received = line["sent"], line["received"]
    assert len(sent) == RECORDS_PER_CODEC
    # The producer put each record where it asked, with the timestamp it gave.
    assert all(r["partition"] == r["requested_partition"] for r in sent)
    assert all(r["timestamp"] == r["requested_timestamp"] for r in sent)
    # Offsets are dense from 0 in every partition.
    per_partition = Counter(r["partition"] for r in sent)
    assert set(per_partition) == set(range(ROUND_TRIP_PARTITIONS))
    for partition, count in per_partition.items():
        offsets = sorted(r["offset"] for r in sent if r["partition"] == partition)
        assert offsets == list(range(count))
    # The consumer reads back byte for byte what RecordMetadata placed, in offset order.
    assert line["mismatches"] == []
    assert sorted(map(_stored, received), key=lambda r: (r["partition"], r["offset"])) == sorted(
        map(_stored, sent), key=lambda r: (r["partition"], r["offset"])
    )
    for partition in range(ROUND_TRIP_PARTITIONS):
        offsets = [r["offset"] for r in received if r["partition"] == partition]
        assert offsets == sorted(offsets)
    assert line["timestamp_types"] == ["CreateTime"]
    expected_ends = {str(p): n for p, n in per_partition.items()}
    assert line["end_offsets"] == expected_ends
    assert line["beginning_offsets"] == {str(p): 0 for p in per_partition}
    # The awkward records made it: null key, null value, empty value, a 64 KiB value.
    assert any(r["key"] is None for r in received)
    assert any(r["value"] is None for r in received)
    assert any(r["value"] == "" for r in received)
    assert any(r["value"] and len(base64.b64decode(r["value"])) == 64 * 1024 for r in received)
    assert any(["null", None] in r["headers"] for r in received)


@pytest.mark.parametrize("codec", CODECS)
def test_list_offsets_read_inside_java_batches(
    round_trips: ProbeRun, java_cluster: JavaCluster, codec: str
) -> None:
    """ListOffsets decodes the Java producer's (compressed) batches: every record's timestamp
    finds the first record at or after it, and MAX_TIMESTAMP the first record carrying it."""
    line = round_trips.one("produce_consume", codec=codec)
    topic = line["topic"]
    by_partition: dict[int, list[tuple[int, int]]] = {}
    for record in line["sent"]:
        by_partition.setdefault(record["partition"], []).append(
            (record["offset"], record["timestamp"])
        )
    for stored in by_partition.values():
        stored.sort()
    found: dict[tuple[int, int], int] = {}  # (partition, timestamp) -> offset
    client = Consumer({"bootstrap.servers": java_cluster.kemu.bootstrap, "group.id": "lookups"})
    try:
        # One lookup per partition and call: librdkafka keeps one entry per partition.
        for index in range(max(map(len, by_partition.values()))):
            asked = {
                partition: stored[index][1]
                for partition, stored in by_partition.items()
                if index < len(stored)
            }
            queries = [TopicPartition(topic, p, timestamp) for p, timestamp in asked.items()]
            for answer in client.offsets_for_times(queries, timeout=30):
                assert answer.error is None
                found[answer.partition, asked[answer.partition]] = answer.offset
    finally:
        client.close()
    expected = {
        (partition, timestamp): next(o for o, t in stored if t >= timestamp)
        for partition, stored in by_partition.items()
        for _, timestamp in stored
    }
    assert found == expected
    admin = AdminClient({"bootstrap.servers": java_cluster.kemu.bootstrap})
    specs = {TopicPartition(topic, p): OffsetSpec.max_timestamp() for p in by_partition}
    for partition, future in admin.list_offsets(specs).items():
        stored = by_partition[partition.partition]
        latest = max(t for _, t in stored)
        answer = future.result(timeout=30)
        first = next(o for o, t in stored if t == latest)
        assert (answer.offset, answer.timestamp) == (first, latest)


def test_round_trip_probe_exit_status(round_trips: ProbeRun) -> None:
    assert [line["codec"] for line in round_trips.lines] == list(CODECS)
    assert round_trips.returncode == 0, [line.get("error") for line in round_trips.lines]


def test_describe_cluster(admin_run: ProbeRun, java_cluster: JavaCluster) -> None:
    line = admin_run.one("describe_cluster")
    assert line["cluster_id"] == java_cluster.cluster_id
    endpoints = {(n["host"], n["port"]) for n in line["nodes"]}
    bootstrap = {
        (host, int(port))
        for host, port in (e.rsplit(":", 1) for e in java_cluster.kemu.bootstrap.split(","))
    }
    assert endpoints == bootstrap
    assert sorted(n["id"] for n in line["nodes"]) == [1, 2, 3]
    assert line["controller"] in line["nodes"]


def test_create_topics_with_configs(admin_run: ProbeRun) -> None:
    created = admin_run.one("create_topics")
    topic = created[ADMIN_TOPIC]
    assert topic["topic_id"] != ZERO_TOPIC_ID
    assert (topic["partitions"], topic["replication_factor"]) == (ADMIN_PARTITIONS, 3)
    configs = topic["configs"]
    for name, value in (
        ("retention.ms", "123456789"),
        ("cleanup.policy", "delete"),
        ("max.message.bytes", "2000000"),
    ):
        assert (configs[name]["value"], configs[name]["source"]) == (value, "DYNAMIC_TOPIC_CONFIG")
    assert configs["segment.bytes"]["source"] == "DEFAULT_CONFIG"
    # No partitions or replication factor given: the broker's num.partitions and
    # default.replication.factor (both 1 by default).
    defaults = created[f"{ADMIN_TOPIC}-defaults"]
    assert (defaults["partitions"], defaults["replication_factor"]) == (1, 1)
    assert defaults["topic_id"] not in (ZERO_TOPIC_ID, topic["topic_id"])
    assert defaults["configs"]["retention.ms"]["source"] == "DEFAULT_CONFIG"

    again = admin_run.one("create_existing_topic")
    assert again["error"]["type"].endswith("TopicExistsException")
    listed = admin_run.one("list_topics")["names"]
    assert {ADMIN_TOPIC, f"{ADMIN_TOPIC}-defaults"} <= set(listed)


def test_describe_topics(admin_run: ProbeRun) -> None:
    created = admin_run.one("create_topics")[ADMIN_TOPIC]
    line = admin_run.one("describe_topics")
    assert (line["name"], line["topic_id"], line["internal"]) == (
        ADMIN_TOPIC,
        created["topic_id"],
        False,
    )
    partitions = line["partitions"]
    assert [p["partition"] for p in partitions] == list(range(ADMIN_PARTITIONS))
    for p in partitions:
        assert sorted(p["replicas"]) == [1, 2, 3]
        assert sorted(p["isr"]) == [1, 2, 3]
        assert p["leader"] == p["replicas"][0]
    assert {p["leader"] for p in partitions} == {1, 2, 3}  # leaders spread over the brokers
    assert line["name_by_id"] == ADMIN_TOPIC


def test_list_offsets(admin_run: ProbeRun) -> None:
    produced = admin_run.one("produce")
    base = produced["base_timestamp"]
    steps = [0, 1, 2, 3, 9, 4, 5, 6, 7, 8]  # AdminProbe.TIMESTAMP_STEPS, seconds
    assert produced["records"] == [
        {"offset": i, "timestamp": base + step * 1000} for i, step in enumerate(steps)
    ]
    line = admin_run.one("list_offsets")

    def at(offset: int, timestamp: int) -> tuple[int, int]:
        return offset, timestamp

    def found(name: str) -> tuple[int, int]:
        return line[name]["offset"], line[name]["timestamp"]

    assert line["earliest"]["offset"] == 0
    assert line["latest"]["offset"] == 10
    assert found("max_timestamp") == at(4, base + 9000)
    assert found("for_timestamp") == at(3, base + 3000)
    assert found("for_timestamp_exact") == at(2, base + 2000)
    assert found("for_timestamp_late") == at(4, base + 9000)
    assert found("for_future_timestamp") == at(-1, -1)
    assert line["empty_earliest"]["offset"] == line["empty_latest"]["offset"] == 0
    assert found("empty_max_timestamp") == at(-1, -1)
    assert line["latest"]["leader_epoch"] is not None


def test_list_offsets_inside_one_batch(admin_run: ProbeRun) -> None:
    produced = admin_run.one("produce")
    base = produced["base_timestamp"]
    steps = [20, 21, 25, 22, 23]  # AdminProbe.BATCH_TIMESTAMP_STEPS, seconds
    assert produced["batched_records"] == [
        {"offset": i, "timestamp": base + step * 1000} for i, step in enumerate(steps)
    ]
    line = admin_run.one("list_offsets_in_batch")
    assert (line["max_timestamp"]["offset"], line["max_timestamp"]["timestamp"]) == (
        2,
        base + 25_000,
    )
    assert (line["for_timestamp"]["offset"], line["for_timestamp"]["timestamp"]) == (
        1,
        base + 21_000,
    )


def test_delete_records_moves_log_start(admin_run: ProbeRun) -> None:
    line = admin_run.one("delete_records")
    assert line["low_watermark"] == 4
    assert line["earliest_after"]["offset"] == 4
    assert line["latest_after"]["offset"] == 10
    assert line["consumer_position"] == 4
    assert line["consumed_offsets"] == [4, 5, 6, 7, 8, 9]
    beyond = admin_run.one("delete_records_out_of_range")
    assert beyond["error"]["type"].endswith("OffsetOutOfRangeException")


def test_describe_topic_configs(admin_run: ProbeRun) -> None:
    line = admin_run.one("describe_configs")
    configs = line["configs"]
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["source"]) == (
        "123456789",
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert configs["cleanup.policy"]["type"] == "LIST"
    assert (configs["segment.bytes"]["value"], configs["segment.bytes"]["source"]) == (
        "1073741824",
        "DEFAULT_CONFIG",
    )
    assert all(entry["type"] not in (None, "UNKNOWN") for entry in configs.values())
    assert not any(entry["sensitive"] for entry in configs.values())
    for name in ("retention.ms", "cleanup.policy", "max.message.bytes"):
        synonyms = line["synonyms"][name]
        assert synonyms[0] == {
            "name": name,
            "value": configs[name]["value"],
            "source": "DYNAMIC_TOPIC_CONFIG",
        }
        # Then the broker-level setting it overrides; for retention.ms only the default of
        # log.retention.hours applies, and Kafka lists none of the log.retention.* chain then.
        assert len(synonyms) == (1 if name == "retention.ms" else 2)


def test_delete_topics(admin_run: ProbeRun) -> None:
    line = admin_run.one("delete_topics")
    assert ADMIN_TOPIC not in line["topics_after"]
    assert f"{ADMIN_TOPIC}-defaults" not in line["topics_after"]
    assert line["describe_after_error"]["type"].endswith("UnknownTopicOrPartitionException")
