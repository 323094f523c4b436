"""Kafka Streams 4.4.0 applications with ``group.protocol=streams`` (KIP-1071) against a 3-broker
kemu, through ``kemu.probe.StreamsApp`` (tests/java):

- stateless exactly-once: every input record upper-cased exactly once in the read_committed
  output; the group is a streams group for DescribeGroups/ListGroups and StreamsGroupDescribe;
- a stateful count (a repartition topic the coordinator creates, a changelog-backed store):
  stopped, restarted with an empty state directory so the store is restored from its changelog,
  and the counts carry on from where they were;
- two instances of the count, one SIGKILLed mid-stream: the other takes its tasks over once its
  session expires and the output holds every count exactly once (1, 2, ... n per word).

Not part of ``make test`` (three JVMs of Kafka Streams take minutes on a small machine): run
with ``make test-streams`` (the ``heavy`` marker: deselected without ``--heavy``); figures in
docs/conformance.md.

Every test runs against kemu and, to compare, against a single-node Apache Kafka 4.4.0 from
bench/.cache/lib (skipped without it). Sessions and heartbeats are shortened with the same
``group.streams.*`` settings on both so the kill is noticed within seconds, and the applications'
transaction timeout is 5 s.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.client.cluster import GROUP_COORDINATOR, ClusterClient
from kemu.testing.plugin import KemuProcess
from tests import REPO_ROOT
from tests.integration.clients.test_java_clients import CLASSES, LIB, java_probes  # noqa: F401  (fixture)
from tests.integration.parity import kafka_timing_overrides

pytestmark = [
    pytest.mark.integration,
    pytest.mark.java,
    pytest.mark.heavy,  # make test-streams
    pytest.mark.parity,
]

WAIT_S = 90  # a bound for failing, not a measurement
WORDS = [f"w{i}" for i in range(7)]


STREAMS_OVERRIDES = {
    "group.streams.session.timeout.ms": "6000",
    "group.streams.min.session.timeout.ms": "1000",
    "group.streams.heartbeat.interval.ms": "500",
    "group.streams.min.heartbeat.interval.ms": "100",
}
ROOT = REPO_ROOT
KAFKA_JAR = ROOT / "bench" / ".cache" / "lib" / "kafka_2.13-4.4.0.jar"


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def streams_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The bootstrap of a 3-broker kemu, or (once, to compare) of a single-node Apache Kafka
    4.4.0 from bench/.cache/lib with the same group.streams.* settings."""
    if request.param == "kafka":
        yield from _kafka(tmp_path_factory)
        return
    log_path = tmp_path_factory.mktemp("kemu-streams-java") / "kemu.log"
    kemu = KemuProcess(
        brokers=3,
        log_path=log_path,
        timing="kafka",
        overrides=kafka_timing_overrides(**STREAMS_OVERRIDES),
    )
    kemu.start()
    yield kemu.bootstrap
    kemu.stop()


def _kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not KAFKA_JAR.exists():
        pytest.skip("needs Kafka's jars in bench/.cache/lib (make bench fetches them)")
    sys.path.insert(0, str(ROOT))
    from bench.servers import KafkaServer

    class StreamsKafka(KafkaServer):
        def _server_properties(self) -> str:
            extra = "".join(f"{name}={value}\n" for name, value in STREAMS_OVERRIDES.items())
            return super()._server_properties() + extra

        def _tool(self, main_class: str, args: list[str]) -> str:
            if args and args[0] == "format":
                args = [*args, "--feature", "streams.version=1"]
            return super()._tool(main_class, args)

    server = StreamsKafka(tmp_path_factory.mktemp("kafka-streams"), partitions=1)
    server.start()
    yield server.bootstrap
    server.stop()


class StreamsInstance:
    """One JVM running StreamsApp; runs until ``stop`` closes its stdin or ``kill``."""

    def __init__(self, bootstrap: str, state_dir: Path, log: Path, *args: str) -> None:
        classpath = os.pathsep.join([str(CLASSES), str(LIB / "*")])
        self.log = log
        self.process = subprocess.Popen(
            [
                "java",
                "-cp",
                classpath,
                "kemu.probe.StreamsApp",
                "--bootstrap",
                bootstrap,
                "--state-dir",
                str(state_dir),
                "--transaction-timeout-ms",
                "5000",
                *args,
            ],
            stdin=subprocess.PIPE,
            stdout=open(log.with_suffix(".out"), "w"),  # noqa: SIM115
            stderr=open(log, "w"),  # noqa: SIM115
            text=True,
        )

    def stop(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(60)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def states(self) -> str:
        return self.log.with_suffix(".out").read_text()


def create_topics(bootstrap: str, *names: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1) for name in names])
    for future in futures.values():
        future.result(30)


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for index, value in enumerate(values):
        producer.produce(topic, key=str(index), value=value)
    assert producer.flush(30) == 0


class OutputReader:
    """A read_committed consumer of the output topic, kept across waits."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"check-{uuid.uuid4()}",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe([topic])
        self.records: list[tuple[str, str]] = []

    def until(self, done: object, what: str) -> list[tuple[str, str]]:
        deadline = time.monotonic() + WAIT_S
        while not done(self.records):  # type: ignore[operator]
            assert time.monotonic() < deadline, f"{what}: got {len(self.records)} records"
            message = self.consumer.poll(0.5)
            if message is None or message.error():
                continue
            self.records.append((message.key().decode(), message.value().decode()))
        return self.records

    def close(self) -> None:
        self.consumer.close()


def final_counts(records: list[tuple[str, str]]) -> dict[str, int]:
    return {key: int(value) for key, value in records}


def assert_each_count_once(records: list[tuple[str, str]], totals: Counter[str]) -> None:
    """Exactly once: each word's counts are 1..n, each once, in order."""
    by_word: dict[str, list[int]] = {}
    for key, value in records:
        by_word.setdefault(key, []).append(int(value))
    assert by_word == {word: list(range(1, n + 1)) for word, n in totals.items()}


def test_stateless_exactly_once(
    streams_server: str,
    java_probes: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    bootstrap = streams_server
    create_topics(bootstrap, "upper-in", "upper-out")
    values = [f"value-{i}" for i in range(300)]
    produce(bootstrap, "upper-in", values)
    app = StreamsInstance(
        bootstrap,
        tmp_path / "state",
        tmp_path / "upper.log",
        "--mode", "upper", "--app-id", "upper-app", "--input", "upper-in", "--output", "upper-out",
    )  # fmt: skip
    reader = OutputReader(bootstrap, "upper-out")
    try:
        records = reader.until(lambda r: len(r) >= len(values), "upper-cased output")
        listed, described = asyncio.run(describe_group(bootstrap, "upper-app"))
    finally:
        reader.close()
        assert app.stop() == 0, app.log.read_text()[-3000:]
    assert sorted(v for _, v in records) == sorted(v.upper() for v in values)
    assert "RUNNING" in app.states()
    assert listed["upper-app"] == ("streams", "Stable")
    assert described.error_code == 0 and described.group_state == "Stable"
    assert [sub.source_topics for sub in described.topology.subtopologies] == [("upper-in",)]
    (member,) = described.members
    active = {(t.subtopology_id, p) for t in member.assignment.active_tasks for p in t.partitions}
    assert active == {("0", 0), ("0", 1), ("0", 2)}


async def describe_group(bootstrap: str, group_id: str) -> tuple[dict[str, tuple[str, str]], Any]:
    """ListGroups v5 (id -> (type, state)) and StreamsGroupDescribe v0 of one group."""
    cluster = ClusterClient(bootstrap)
    await cluster.start()
    try:
        node = await cluster.coordinator(GROUP_COORDINATOR, group_id)
        listed = await cluster.call(node, 16, 5, states_filter=(), types_filter=())
        described = await cluster.call(
            node, 89, 0, group_ids=(group_id,), include_authorized_operations=False
        )
    finally:
        await cluster.close()
    groups = {g.group_id: (g.group_type, g.group_state) for g in listed.groups}
    return groups, described.groups[0]


def test_count_restored_from_changelog(
    streams_server: str,
    java_probes: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    bootstrap = streams_server
    create_topics(bootstrap, "count-in", "count-out")
    first = [WORDS[i % len(WORDS)] for i in range(140)]
    produce(bootstrap, "count-in", first)
    args = ("--mode", "count", "--app-id", "count-app", "--input", "count-in",
            "--output", "count-out")  # fmt: skip
    reader = OutputReader(bootstrap, "count-out")
    totals = Counter(first)
    try:
        app = StreamsInstance(bootstrap, tmp_path / "state-a", tmp_path / "a.log", *args)
        reader.until(lambda r: final_counts(r) == dict(totals), "counts of the first batch")
        assert app.stop() == 0, app.log.read_text()[-3000:]
        # A new, empty state directory: the store comes back from its changelog.
        second = [WORDS[i % 3] for i in range(60)]
        produce(bootstrap, "count-in", second)
        totals += Counter(second)
        app = StreamsInstance(bootstrap, tmp_path / "state-b", tmp_path / "b.log", *args)
        records = reader.until(lambda r: final_counts(r) == dict(totals), "counts carried on")
        assert app.stop() == 0, app.log.read_text()[-3000:]
    finally:
        reader.close()
    assert_each_count_once(records, totals)
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics
    assert {"count-app-words-repartition", "count-app-counts-changelog"} <= set(topics)
    assert len(topics["count-app-counts-changelog"].partitions) == 3


def test_two_instances_one_killed_exactly_once(
    streams_server: str,
    java_probes: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    bootstrap = streams_server
    create_topics(bootstrap, "pair-in", "pair-out", partitions=4)
    args = ("--mode", "count", "--app-id", "pair-app", "--input", "pair-in",
            "--output", "pair-out")  # fmt: skip
    reader = OutputReader(bootstrap, "pair-out")
    totals: Counter[str] = Counter()
    try:
        one = StreamsInstance(bootstrap, tmp_path / "one", tmp_path / "one.log", *args)
        two = StreamsInstance(bootstrap, tmp_path / "two", tmp_path / "two.log", *args)
        first = [WORDS[i % len(WORDS)] for i in range(200)]
        produce(bootstrap, "pair-in", first)
        totals += Counter(first)
        reader.until(lambda r: final_counts(r) == dict(totals), "counts with two instances")
        one.kill()
        second = [WORDS[i % len(WORDS)] for i in range(150)]
        produce(bootstrap, "pair-in", second)
        totals += Counter(second)
        records = reader.until(lambda r: final_counts(r) == dict(totals), "counts after the kill")
        assert two.stop() == 0, two.log.read_text()[-3000:]
    finally:
        reader.close()
    assert_each_count_once(records, totals)
