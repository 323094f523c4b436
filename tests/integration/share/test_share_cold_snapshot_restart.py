"""A share partition written once stops pinning ``__share_group_state``, and a kemu restarted
over the pruned log answers the same state (``kemu serve`` with
``share.coordinator.cold.partition.snapshot.interval.ms=1000``, Kafka 4.4.0's internal config).

Over the wire, as a share-partition leader does (the tiny client of test_share_state_rpcs.py):
one key is initialized and written once, another written on; without cold-partition snapshots
the state partition's log start (the low watermark confluent-kafka reads) stays at the first
key's initial snapshot for ever. With them it moves past all of that key's records; after a
SIGKILL and a restart on the same data dir, ReadShareGroupState answers what it answered before.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.protocol.errors import ErrorCode
from kemu.testing.plugin import KemuProcess
from tests.integration.share.test_share_state_rpcs import WireClient, state_of

pytestmark = [pytest.mark.integration, pytest.mark.process]


def log_start(bootstrap: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        low, _ = consumer.get_watermark_offsets(
            TopicPartition("__share_group_state", 0), timeout=10
        )
        return int(low)
    finally:
        consumer.close()


def test_a_key_written_once_is_cold_snapshotted_and_the_pruned_log_restarts(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    kemu = kemu_factory(
        data_dir=tmp_path / "data",
        overrides=[
            "share.coordinator.state.topic.num.partitions=1",
            "share.coordinator.snapshot.update.records.per.snapshot=2",
            "share.coordinator.cold.partition.snapshot.interval.ms=1000",
            "share.coordinator.state.topic.prune.interval.ms=1000",
        ],
        extra_args=["--strict-config"],  # the internal config is a known one
    ).start()
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    for future in admin.create_topics([NewTopic("orders", 2, 1)]).values():
        future.result(10)
    client = WireClient(kemu.bootstrap)
    topic_id = client.topic_id("orders")

    # offsets 0..2: the cold key's initial snapshot, its leader epoch, its one write
    assert client.initialize("cold", topic_id, 0, 0, 0).error_code == ErrorCode.none
    assert client.read("cold", topic_id, 0, 1).error_code == ErrorCode.none
    once = client.write(
        "cold",
        topic_id,
        0,
        state_epoch=0,
        leader_epoch=1,
        start_offset=0,
        delivery_complete_count=5,
        state_batches=[(0, 4, 2, 1), (5, 9, 0, 1)],
    )
    assert once.error_code == ErrorCode.none
    assert client.initialize("hot", topic_id, 1, 0, 0).error_code == ErrorCode.none
    for step in range(6):
        answer = client.write(
            "hot",
            topic_id,
            1,
            state_epoch=0,
            leader_epoch=0,
            start_offset=step,
            delivery_complete_count=0,
            state_batches=[(step, step, 2, 1)],
        )
        assert answer.error_code == ErrorCode.none

    deadline = time.monotonic() + 60  # a timeout for a loaded machine, not a speed claim
    while log_start(kemu.bootstrap) <= 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    pruned_to = log_start(kemu.bootstrap)
    assert pruned_to > 2  # past every record of the key written once
    keys = [("cold", 0), ("hot", 1)]
    before = {key: state_of(client.read(key[0], topic_id, key[1], 1)) for key in keys}
    assert before[("cold", 0)] == (ErrorCode.none, 0, 0, ((0, 4, 2, 1), (5, 9, 0, 1)))
    client.close()

    kemu.kill()
    kemu.start()
    assert log_start(kemu.bootstrap) >= pruned_to
    client = WireClient(kemu.bootstrap)
    after = {key: state_of(client.read(key[0], topic_id, key[1], 1)) for key in keys}
    client.close()
    assert after == before
