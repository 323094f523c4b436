"""The rolling restart of a static KIP-848 consumer-group member with the Java KafkaConsumer
(kafka-clients 4.4.0, ``group.protocol=consumer``, ``group.instance.id`` set), as a Flink or Spark
job restarting a task does it, through ``kemu.probe.StaticRejoinProbe``: on kemu and, when Java
and Kafka's jars are there, on a real Kafka 4.4.0, with the same assertions.

Two consumers of one group share a 6-partition topic, three partitions each. One is closed with
the default CloseOptions: the Java client sends a static member's temporary leave (member epoch
-2, ``ConsumerMembershipManager.leaveGroupEpoch``), and the coordinator keeps the member, at epoch
-2 with its partitions, the group epoch unchanged. A new consumer with the same instance id
(a new member id) opened within the session timeout takes its place: it is handed exactly the
closed one's partitions at the member epoch they had, its listener sees one
``onPartitionsAssigned`` of them, and the other member's ConsumerRebalanceListener is called
with nothing (no revocation, no assignment) while its partitions and epoch stay as they were,
polled on for two heartbeat intervals after the rejoin. The wire-level side of the same story is
``test_static_leave_kafka.py``; librdkafka's is in ``test_static_members_and_regex.py``.

Both servers run Kafka's timers (5 s heartbeats, 45 s sessions): the scenario takes about half a
minute on each.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kemu.testing.kafka import SHARED, KafkaConfig, KafkaServer
from kemu.testing.plugin import KemuProcess
from tests.integration.clients.test_java_clients import ProbeRun, java_probes, run_probe  # noqa: F401  (fixture)
from tests.integration.parity import kafka_timing_overrides

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.parity]

TOPIC, PARTITIONS = "static-rejoin", 6
GROUP = f"{TOPIC}-group"
INSTANCE_A, INSTANCE_B = f"{GROUP}-a", f"{GROUP}-b"
STATIC_LEAVE_EPOCH = -2
OBSERVE_MS = 12_000  # beyond two of the 5 s heartbeat intervals


def run(bootstrap: str) -> ProbeRun:
    return run_probe(
        "StaticRejoinProbe",
        bootstrap,
        *("--topic", TOPIC, "--group", GROUP, "--partitions", str(PARTITIONS)),
        *("--observe-ms", str(OBSERVE_MS)),
    )


@pytest.fixture(scope="module")
def kemu_run(java_probes: Path, tmp_path_factory: pytest.TempPathFactory) -> ProbeRun:  # noqa: F811
    kemu = KemuProcess(
        brokers=1,
        log_path=tmp_path_factory.mktemp("kemu-static-rejoin") / "kemu.log",
        timing="kafka",
        overrides=kafka_timing_overrides(),
    )
    kemu.start()
    try:
        return run(kemu.bootstrap)
    finally:
        kemu.stop()


@pytest.fixture(scope="module")
def kafka_run(
    java_probes: Path,  # noqa: F811
    kafka_server: Callable[[KafkaConfig], KafkaServer],
) -> ProbeRun:
    return run(kafka_server(SHARED).bootstrap)


@pytest.fixture(params=["kemu", "kafka"])
def probe_run(request: pytest.FixtureRequest) -> ProbeRun:
    run: ProbeRun = request.getfixturevalue(f"{request.param}_run")
    return run


def owned(line: dict[str, Any], name: str) -> list[int]:
    partitions: list[int] = line[f"{name}_assignment"]
    return partitions


def test_the_two_members_settle_on_half_the_partitions_each(probe_run: ProbeRun) -> None:
    line = probe_run.one("settle")
    assert len(owned(line, "a")) == len(owned(line, "b")) == PARTITIONS // 2
    assert sorted(owned(line, "a") + owned(line, "b")) == list(range(PARTITIONS))
    assert line["a_epoch"] == line["b_epoch"] == line["group_epoch"]
    assert line["group_state"] == "Stable"
    assert set(line["members"]) == {INSTANCE_A, INSTANCE_B}


def test_close_is_a_temporary_leave_that_keeps_the_member(probe_run: ProbeRun) -> None:
    settled, closed = probe_run.one("settle"), probe_run.one("close")
    assert closed["group_epoch"] == settled["group_epoch"]
    assert set(closed["members"]) == {INSTANCE_A, INSTANCE_B}
    kept = closed["members"][INSTANCE_A]
    assert kept["member_id"] == settled["a_member_id"]
    assert kept["epoch"] == STATIC_LEAVE_EPOCH
    assert kept["assignment"] == owned(settled, "a")
    assert closed["members"][INSTANCE_B] == settled["members"][INSTANCE_B]
    # the kept member is not at the group's epoch
    assert closed["group_state"] == "Reconciling"
    # the closing consumer gave its partitions up (its own listener) before it left
    assert closed["a_callbacks"][-1] == {"callback": "revoked", "partitions": owned(settled, "a")}


def test_the_reopened_consumer_gets_exactly_its_partitions_back(probe_run: ProbeRun) -> None:
    settled, rejoined = probe_run.one("settle"), probe_run.one("rejoin")
    assert owned(rejoined, "a2") == owned(settled, "a")
    assert rejoined["a2_epoch"] == settled["a_epoch"]
    assert rejoined["a2_member_id"] != settled["a_member_id"]
    assert rejoined["a2_callbacks"] == [{"callback": "assigned", "partitions": owned(settled, "a")}]
    assert (rejoined["group_epoch"], rejoined["group_state"]) == (settled["group_epoch"], "Stable")
    assert rejoined["members"][INSTANCE_A] == {
        "member_id": rejoined["a2_member_id"],
        "epoch": settled["a_epoch"],
        "assignment": owned(settled, "a"),
    }


def test_the_other_member_sees_no_rebalance(probe_run: ProbeRun) -> None:
    settled, rejoined = probe_run.one("settle"), probe_run.one("rejoin")
    assert rejoined["b_callbacks_since_close"] == []
    assert owned(rejoined, "b") == owned(settled, "b")
    assert rejoined["b_epoch"] == settled["b_epoch"]
    assert rejoined["members"][INSTANCE_B] == settled["members"][INSTANCE_B]


def test_probe_exit_status(probe_run: ProbeRun) -> None:
    assert probe_run.returncode == 0, probe_run.stderr[-3000:]
