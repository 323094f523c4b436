"""Closing an explicit-mode Java KafkaShareConsumer (kafka-clients 4.4.0) that accepted part of
a poll, and ``Admin.listShareGroupOffsets`` once every record is acknowledged — the same probe
(``kemu.probe.ShareCloseProbe``) against kemu and, when Java and Kafka's jars are there, against
a real Kafka 4.4.0, whose answers are the reference.

The topic's 20 records are 5 batches of 4; the first consumer (``max.poll.records`` 6) gets two
batches from its first poll, ACCEPTs 3 records and closes. At close the Java client sends one
ShareAcknowledge with epoch -1 carrying only the ACCEPTs: no RELEASE for the 5 records it
handed out unacknowledged, nor for records it may have prefetched into its buffer. The broker
releases everything the member still holds as Kafka 4.4.0's
``SharePartition.releaseAcquiredRecords`` does, with ``DeliveryCountOps.NO_OP``: the delivery
count is kept, so the next consumer sees delivery count 2 for every record the first one
acquired (handed out or only fetched) and 1 for records never acquired.

After everything is acknowledged, Kafka reports the *persisted* start offset, which each write
carries as it was before that write moved it (here 3: the second consumer's acknowledgement of
3..19 was written with start offset 3 and DeliveryCompleteCount 17), so the lag is 0 and the
start offset may stay below the end.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

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

from kemu.testing.kafka import SHARE_GROUPS, KafkaConfig, KafkaServer
from kemu.testing.plugin import KemuProcess
from tests.integration.clients.test_java_clients import ProbeRun, java_probes, run_probe  # noqa: F401  (fixture)
from tests.integration.parity import kafka_timing_overrides

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.parity]

TOPIC, GROUP = "share-close", "share-close"
RECORDS, BATCH, POLL_RECORDS, ACCEPT = 20, 4, 6, 3


def prepare(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(60)
    resource = ConfigResource(
        ResourceType.GROUP,
        GROUP,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 500})
    for index in range(RECORDS):
        producer.produce(TOPIC, value=b"c%d" % index, partition=0)
        if index % BATCH == BATCH - 1:  # one batch of BATCH records
            assert producer.flush(60) == 0
    assert producer.flush(60) == 0


def run(bootstrap: str) -> ProbeRun:
    prepare(bootstrap)
    return run_probe(
        "ShareCloseProbe",
        bootstrap,
        "--topic",
        TOPIC,
        "--group",
        GROUP,
        "--records",
        str(RECORDS),
        "--poll-records",
        str(POLL_RECORDS),
        "--accept",
        str(ACCEPT),
    )


def check_close_counts(result: ProbeRun) -> None:
    first = result.one("close_half")
    polled = [int(k.split("#")[0]) for k in first["polled"]]
    assert first["accepted"] == [f"{o}#1" for o in range(ACCEPT)]
    assert len(polled) > ACCEPT and polled == list(range(len(polled)))
    after = dict(k.split("#") for k in result.one("after_close")["records"])
    assert sorted(map(int, after)) == list(range(ACCEPT, RECORDS))
    # handed to the application, not acknowledged, released at close: delivered twice now
    assert all(after[str(o)] == "2" for o in range(ACCEPT, len(polled)))
    # the rest: 2 if the first consumer had fetched it, 1 if not; fetched ones come first
    counts = [int(after[str(o)]) for o in range(len(polled), RECORDS)]
    assert counts == sorted(counts, reverse=True) and set(counts) <= {1, 2}
    assert counts[-1] == 1


def check_offsets(result: ProbeRun) -> None:
    offsets = result.one("offsets_after_ack")["offsets"]
    assert list(offsets) == [f"{TOPIC}-0"]
    (figures,) = offsets.values()
    assert figures["lag"] == 0
    assert ACCEPT <= figures["start"] < RECORDS


# On both servers: share heartbeats every 500 ms rather than Kafka's 5 s.
SHARE_HEARTBEAT = {
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "500",
}


@pytest.fixture(scope="module")
def kemu_run(java_probes: Path, tmp_path_factory: pytest.TempPathFactory) -> ProbeRun:  # noqa: F811
    kemu = KemuProcess(
        brokers=1,
        log_path=tmp_path_factory.mktemp("kemu-close") / "kemu.log",
        timing="kafka",
        overrides=kafka_timing_overrides(**SHARE_HEARTBEAT),
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
    return run(kafka_server(SHARE_GROUPS).bootstrap)  # its share heartbeats: SHARE_HEARTBEAT


def test_close_releases_every_held_record_with_its_delivery_counted(kemu_run: ProbeRun) -> None:
    check_close_counts(kemu_run)


def test_offsets_after_everything_is_acknowledged(kemu_run: ProbeRun) -> None:
    check_offsets(kemu_run)


def test_kafka_close_counts(kafka_run: ProbeRun) -> None:
    check_close_counts(kafka_run)


def test_kafka_offsets_after_everything_is_acknowledged(kafka_run: ProbeRun) -> None:
    check_offsets(kafka_run)
