"""``--timing fast``'s streams rows with a Kafka Streams 4.4.0 application (tests/java's
``StreamsApp``, ``group.protocol=streams``) through the recording proxy: the ORDER of the
StreamsGroupHeartbeat answers, never how long they took.

- ``--timing fast`` (no initial rebalance delay, no assignment interval): the answer to the
  member's first heartbeat carries its active tasks, with the fast heartbeat interval;
- ``--timing kafka`` (Kafka's 3 s ``group.streams.initial.rebalance.delay.ms``): that answer
  carries no task and says the assignment is delayed, as Kafka 4.4.0 answers.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.config.timing import FAST_HEARTBEAT_MS
from kemu.testing.inprocess import InProcessKemu
from tests.integration.clients.test_java_clients import CLASSES, LIB, java_probes  # noqa: F401  (fixture)
from tests.integration.config.test_timing_fast import answered, recorded

pytestmark = [pytest.mark.integration, pytest.mark.java]

STREAMS_HEARTBEAT = 88
WAIT_S = 90.0  # a bound for failing (a JVM starting), not a measurement


class StreamsApps:
    """Kafka Streams applications started by a test. ``close`` ends them through stdin (the app
    then closes cleanly, leaving its group); a test calls it while the recording proxy the apps
    talk through still stands, since an app whose broker is gone waits in ``KafkaStreams.close``
    until it is killed."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[subprocess.Popen[str]] = []

    def __call__(self, bootstrap: str, input_topic: str, output_topic: str) -> None:
        command = [
            "java",
            "-cp",
            f"{CLASSES}:{LIB}/*",
            "kemu.probe.StreamsApp",
            "--bootstrap",
            bootstrap,
            "--mode",
            "upper",
            "--guarantee",
            "at_least_once",
            "--app-id",
            f"timing-{uuid.uuid4().hex[:8]}",
            "--input",
            input_topic,
            "--output",
            output_topic,
            "--state-dir",
            str(self.tmp_path / "state"),
        ]
        log = open(self.tmp_path / "streams.log", "w")  # noqa: SIM115
        self.started.append(
            subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log, stderr=log, text=True)
        )

    def close(self) -> None:
        for process in self.started:
            if process.stdin is not None and not process.stdin.closed:
                process.stdin.close()
        for process in self.started:
            try:
                process.wait(WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        self.started.clear()


@pytest.fixture
def streams_app(java_probes: Path, tmp_path: Path) -> Iterator[StreamsApps]:  # noqa: F811
    apps = StreamsApps(tmp_path)
    yield apps
    apps.close()


def topics(bootstrap: str) -> tuple[str, str]:
    names = (f"in-{uuid.uuid4().hex[:8]}", f"out-{uuid.uuid4().hex[:8]}")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, 3, 1) for name in names]).values():
        future.result(30)
    return names


def first_heartbeat(proxy: Any) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        joins = [h for h in answered(proxy, STREAMS_HEARTBEAT) if h.request.member_epoch == 0]
        if joins:
            return joins[0]
        time.sleep(0.1)
    raise AssertionError("no StreamsGroupHeartbeat answered")


def test_a_streams_member_gets_its_tasks_in_the_answer_to_its_first_heartbeat(
    kemu_inprocess_factory: type[InProcessKemu], streams_app: StreamsApps
) -> None:
    kemu = kemu_inprocess_factory(brokers=1).start()
    input_topic, output_topic = topics(kemu.bootstrap)
    with recorded(kemu) as proxy:
        streams_app(proxy.bootstrap, input_topic, output_topic)
        joined = first_heartbeat(proxy)
        streams_app.close()
    assert joined.response.error_code == 0
    assert joined.response.active_tasks, "tasks in the join's answer"
    assigned = sum(len(tasks.partitions) for tasks in joined.response.active_tasks)
    assert assigned == 3
    assert joined.response.heartbeat_interval.total_seconds() * 1000 == int(FAST_HEARTBEAT_MS)


def test_under_kafka_timing_the_first_answer_is_delayed(
    kemu_inprocess_factory: type[InProcessKemu], streams_app: StreamsApps
) -> None:
    kemu = kemu_inprocess_factory(brokers=1, timing="kafka").start()
    input_topic, output_topic = topics(kemu.bootstrap)
    with recorded(kemu) as proxy:
        streams_app(proxy.bootstrap, input_topic, output_topic)
        joined = first_heartbeat(proxy)
        streams_app.close()
    assert joined.response.error_code == 0
    assert not joined.response.active_tasks
    assert "delay" in " ".join(s.status_detail for s in joined.response.status or ()).lower()
