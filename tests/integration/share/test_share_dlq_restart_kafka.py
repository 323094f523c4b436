"""``test_share_dlq_restart.py``'s scenario against a real Apache Kafka 4.4.0: a share consumer
RELEASEs a record's first delivery, holds its second and last (``share.delivery.count.limit``
2, a DLQ configured), and the broker is SIGKILLed and restarted on the same log dirs.

Kafka persists a record's state and delivery count with an acknowledgement, a lock expiry or a
member's leave, never with an acquisition: what ``__share_group_state`` held at the kill was
the RELEASE's AVAILABLE at delivery count 1. The restarted Kafka loads that and delivers the
record again, a third time, with delivery count 2; no dead letter. kemu persists the
acquisition and dead-letters the record instead (docs/reliability.md).

The Kafka is this test's own (it is killed), single-node KRaft from bench/.cache/lib with
share.version=2 as ``test_share_dlq.py``'s; skipped without java or the jars."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from kemu.client import Admin
from kemu.client.admin import SharePartitionOffset
from kemu.testing.kafka import (
    HOST,
    READY_TIMEOUT_S,
    KafkaServer,
    missing_prerequisite,
    wait_ready,
)
from tests.integration.share.test_share_dlq import (
    DLQ_KAFKA,
    TIMEOUT,
    lag_reaches_zero,
    state_batches_of,
)
from tests.integration.share.test_share_dlq_restart import (
    deliveries_after_the_restart,
    die_holding_the_last_delivery,
    prepare,
)

pytestmark = [pytest.mark.integration, pytest.mark.parity]


class KillableKafka(KafkaServer):
    """A KafkaServer that can be SIGKILLed and started again on its ports and log dirs (a
    ``start`` would format new storage on new ports)."""

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def restart(self) -> None:
        with (self.workdir / "server.out").open("ab") as out:
            process = subprocess.Popen(
                self._command(), stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir
            )
        self.process = process
        try:
            wait_ready(
                HOST, self.port, time.monotonic(), READY_TIMEOUT_S, lambda: process.poll() is None
            )
        except Exception as error:
            self.stop()
            raise RuntimeError(f"kafka did not restart; see {self.workdir}/server.out") from error


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[KillableKafka]:
    reason = missing_prerequisite()
    if reason is not None:
        pytest.skip(reason)
    server = KillableKafka(
        tmp_path / "kafka",
        partitions=1,
        features=DLQ_KAFKA.features,
        properties={
            **DLQ_KAFKA.properties,
            # one __consumer_offsets partition instead of 50: less to create and to load again
            "offsets.topic.num.partitions": "1",
            # the restarted broker's registration is refused until the killed one's session
            # expires (DUPLICATE_BROKER_REGISTRATION): 4 s instead of 9, heartbeats every 0.5 s
            "broker.session.timeout.ms": "4000",
            "broker.heartbeat.interval.ms": "500",
        },
        quick=True,
    )
    server.workdir.mkdir()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def persisted(bootstrap: str, group: str, offset: int) -> list[tuple[str, int]]:
    """(delivery state, delivery count) of ``offset`` in each ``__share_group_state`` record of
    ``group``, in the order written."""
    return [
        (batch["deliveryStateName"], batch["deliveryCount"])
        for batch in state_batches_of(bootstrap, group, offset)
    ]


async def share_offsets(bootstrap: str) -> dict[int, SharePartitionOffset]:
    """DescribeShareGroupOffsets of ``lost-group`` on ``lost``: start offset and lag."""
    async with Admin(bootstrap) as admin:
        return await admin.share_group_offsets("lost-group", "lost")


def end_offset(bootstrap: str, topic: str) -> int:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        _, high = reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
        return int(high)
    finally:
        reader.close()


@pytest.mark.java
def test_kafka_delivers_a_last_delivery_lost_with_a_sigkill_once_more(
    kafka: KillableKafka,
) -> None:
    bootstrap = kafka.bootstrap
    prepare(bootstrap)
    assert asyncio.run(die_holding_the_last_delivery(bootstrap, kafka.kill)) == [1, 2]
    kafka.restart()

    # the RELEASE of delivery 1 is all that was persisted; the acquisition of delivery 2 is not
    assert persisted(bootstrap, "lost-group", 0) == [("AVAILABLE", 1)]
    assert asyncio.run(share_offsets(bootstrap)) == {0: SharePartitionOffset(0, 0, 1)}
    # delivered a third time, counted as the second (kemu: dead-lettered, nothing delivered)
    assert asyncio.run(deliveries_after_the_restart(bootstrap, polls=120)) == [2]
    assert persisted(bootstrap, "lost-group", 0)[-1] == ("ACKNOWLEDGED", 2)
    assert asyncio.run(lag_reaches_zero(bootstrap, "lost-group", "lost")) == 0
    assert end_offset(bootstrap, "dlq.lost") == 0  # no dead letter
