"""Java kafka-clients 4.4.0 KafkaConsumer with subscribe() in a classic consumer group
(``group.protocol=classic``) against a 3-broker kemu, through ``kemu.probe.ConsumerGroupProbe``
(one JVM launch; see its javadoc for the checks): two consumers share a 6-partition topic and
read every record exactly once with commitSync; Admin sees the group, its members, assignments
and committed offsets; after both leave, a new consumer reads only the records produced since.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_java_clients import ProbeRun, java_probes, run_probe  # noqa: F401  (fixture)

from kemu.testing.plugin import KemuProcess

pytestmark = [pytest.mark.integration, pytest.mark.java]

TOPIC, GROUP = "java-group", "java-group-members"
PARTITIONS, RECORDS, MORE, CONSUMERS = 6, 300, 30, 2


@pytest.fixture(scope="module")
def group_kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuProcess]:
    log_path = tmp_path_factory.mktemp("kemu-group-java") / "kemu.log"
    kemu = KemuProcess(
        brokers=3, log_path=log_path, overrides=["group.initial.rebalance.delay.ms=300"]
    )
    kemu.start()
    yield kemu
    kemu.stop()


@pytest.fixture(scope="module")
def group_run(java_probes: Path, group_kemu: KemuProcess) -> ProbeRun:  # noqa: F811
    return run_probe(
        "ConsumerGroupProbe",
        group_kemu.bootstrap,
        "--topic",
        TOPIC,
        "--group",
        GROUP,
        "--partitions",
        str(PARTITIONS),
        "--records",
        str(RECORDS),
        "--more",
        str(MORE),
        "--consumers",
        str(CONSUMERS),
    )


def _end_offsets_total(committed: dict[str, int]) -> int:
    return sum(committed.values())


def test_group_reads_every_record_exactly_once(group_run: ProbeRun) -> None:
    line = group_run.one("group_consume")
    assert (line["received"], line["distinct"], line["duplicates"]) == (RECORDS, RECORDS, 0)
    consumers = line["consumers"]
    assert len(consumers) == CONSUMERS
    assert all(c["commit_failures"] == 0 for c in consumers)
    # One generation for both, and the six partitions split between them.
    assert len({c["generation"] for c in consumers}) == 1
    owned = sorted(p for c in consumers for p in c["assignment"])
    assert owned == list(range(PARTITIONS))
    assert all(len(c["assignment"]) == PARTITIONS // CONSUMERS for c in consumers)
    assert len({c["member_id"] for c in consumers}) == CONSUMERS
    assert _end_offsets_total(line["committed"]) == RECORDS


def test_admin_sees_the_classic_group(group_run: ProbeRun) -> None:
    line = group_run.one("admin_view")
    assert GROUP in line["listed"]
    assert (line["state"], line["type"], line["assignor"]) == ("Stable", "Classic", "range")
    assert line["members"] == CONSUMERS
    assert line["assigned_partitions"] == list(range(PARTITIONS))
    assert line["committed"] == group_run.one("group_consume")["committed"]


def test_a_new_consumer_resumes_from_the_committed_offsets(group_run: ProbeRun) -> None:
    line = group_run.one("resume")
    assert line["count"] == MORE
    assert line["values"] == list(range(RECORDS, RECORDS + MORE))
    assert line["generation"] > 1


def test_probe_exit_status(group_run: ProbeRun) -> None:
    assert group_run.returncode == 0, group_run.stderr[-3000:]
