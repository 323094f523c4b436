"""The share-state RPCs over the wire against kemu started by the CLI, across a SIGKILL.

A tiny blocking client sends kio-encoded requests (FindCoordinator SHARE to route, then
Initialize/Write/Read/ReadSummary ShareGroupState) the way a share-partition leader does. After
SIGKILL and a restart on the same data dir, ReadShareGroupState answers exactly what it answered
before; and ``__share_group_state`` read by confluent-kafka's Consumer, like any topic, decodes
(``kemu.coordinator.share.decode``) to that same state, as does ``kemu decode-share-state``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.coordinator.share.decode import LogRecord, ShareStateDecoder
from kemu.coordinator.share.keys import kafka_uuid
from kemu.protocol.errors import ErrorCode
from kemu.testing.plugin import KemuProcess
from kemu.testing.wire_client import WireClient as BlockingWireClient

pytestmark = [pytest.mark.integration, pytest.mark.process]  # SIGKILL and a restart

STATE_PARTITIONS = 3
FIND_COORDINATOR, METADATA = 10, 3
INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
SHARE_KEY_TYPE = 2


class WireClient(BlockingWireClient):
    """Blocking kio-framed requests to the brokers of one kemu (kemu/testing/wire_client.py)."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap, client_id="share-state-test", timeout=10)
        self.sockets.clear()

    # --- the RPCs -----------------------------------------------------------------------------

    def topic_id(self, name: str) -> uuid.UUID:
        topic = self.nested(METADATA, 12, "MetadataRequestTopic", name=name, topic_id=None)
        response = self.call(1, METADATA, 12, topics=(topic,), allow_auto_topic_creation=False)
        [found] = response.topics
        assert found.error_code == ErrorCode.none
        return uuid.UUID(str(found.topic_id))

    def coordinator(self, group: str, topic_id: uuid.UUID, partition: int) -> int:
        key = f"{group}:{kafka_uuid(topic_id)}:{partition}"
        response = self.call(
            1, FIND_COORDINATOR, 6, key_type=SHARE_KEY_TYPE, coordinator_keys=(key,)
        )
        [found] = response.coordinators
        assert found.error_code == ErrorCode.none, found
        return int(found.node_id)

    def _one(
        self,
        api_key: int,
        version: int,
        topic_class: str,
        group: str,
        topic_id: uuid.UUID,
        node: int,
        **partition: Any,
    ) -> Any:
        batches = partition.pop("state_batches", ())
        if batches:
            partition["state_batches"] = tuple(
                self.nested(
                    api_key,
                    version,
                    "StateBatch",
                    first_offset=a,
                    last_offset=b,
                    delivery_state=s,
                    delivery_count=c,
                )
                for a, b, s, c in batches
            )
        data = self.nested(api_key, version, "PartitionData", **partition)
        topic = self.nested(api_key, version, topic_class, topic_id=topic_id, partitions=(data,))
        response = self.call(node, api_key, version, group_id=group, topics=(topic,))
        [result] = response.results
        [answer] = result.partitions
        return answer

    def initialize(
        self, group: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start: int
    ) -> Any:
        node = self.coordinator(group, topic_id, partition)
        return self._one(
            INITIALIZE,
            0,
            "InitializeStateData",
            group,
            topic_id,
            node,
            partition=partition,
            state_epoch=state_epoch,
            start_offset=start,
        )

    def write(
        self,
        group: str,
        topic_id: uuid.UUID,
        partition: int,
        *,
        node: int | None = None,
        **fields: Any,
    ) -> Any:
        node = node or self.coordinator(group, topic_id, partition)
        return self._one(
            WRITE, 1, "WriteStateData", group, topic_id, node, partition=partition, **fields
        )

    def read(self, group: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> Any:
        node = self.coordinator(group, topic_id, partition)
        return self._one(
            READ,
            0,
            "ReadStateData",
            group,
            topic_id,
            node,
            partition=partition,
            leader_epoch=leader_epoch,
        )

    def summary(self, group: str, topic_id: uuid.UUID, partition: int) -> Any:
        node = self.coordinator(group, topic_id, partition)
        return self._one(
            SUMMARY,
            1,
            "ReadStateSummaryData",
            group,
            topic_id,
            node,
            partition=partition,
            leader_epoch=0,
        )


def state_of(read: Any) -> tuple[Any, ...]:
    """What a ReadShareGroupState partition result says, as comparable data."""
    return (
        read.error_code,
        read.state_epoch,
        read.start_offset,
        tuple(
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in read.state_batches
        ),
    )


def decoded_state(state: dict[str, Any]) -> tuple[Any, ...]:
    return (
        ErrorCode.none,
        state["stateEpoch"],
        state["startOffset"],
        tuple(
            (b["firstOffset"], b["lastOffset"], b["deliveryState"], b["deliveryCount"])
            for b in state["stateBatches"]
        ),
    )


def drive(client: WireClient, topic_id: uuid.UUID) -> dict[tuple[str, int], Any]:
    """Initialize, write and read several share partitions; returns what reads answer."""
    keys = [(group, partition) for group in ("alpha", "beta", "gamma") for partition in (0, 1)]
    for number, (group, partition) in enumerate(keys):
        assert client.initialize(group, topic_id, partition, number, 0).error_code == 0
        assert client.read(group, topic_id, partition, 1).error_code == ErrorCode.none
        for step in range(4):  # with 2 updates per snapshot: updates and snapshots both
            first = step * 10
            answer = client.write(
                group,
                topic_id,
                partition,
                state_epoch=number,
                leader_epoch=1,
                start_offset=first,
                delivery_complete_count=step,
                state_batches=[(first, first + 4, 2, 1), (first + 5, first + 14, 0, step + 1)],
            )
            assert (answer.error_code, answer.error_message) == (ErrorCode.none, None)
    summary = client.summary("alpha", topic_id, 1)
    assert (summary.error_code, summary.start_offset, summary.delivery_complete_count) == (
        ErrorCode.none,
        30,
        3,
    )
    return {key: client.read(key[0], topic_id, key[1], 1) for key in keys}


def consume_state_topic(bootstrap: str) -> list[LogRecord]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        ends = {}
        for partition in range(STATE_PARTITIONS):
            _, high = consumer.get_watermark_offsets(
                TopicPartition("__share_group_state", partition), timeout=10
            )
            ends[partition] = high
        # from the log start: the coordinator prunes what every key's latest snapshot covers
        # (every share.coordinator.state.topic.prune.interval.ms)
        consumer.assign(
            [TopicPartition("__share_group_state", p, OFFSET_BEGINNING) for p in ends if ends[p]]
        )
        records: list[LogRecord] = []
        positions = dict.fromkeys(ends, -1)
        deadline = time.monotonic() + 30
        while any(positions[p] < ends[p] for p in ends if ends[p]) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            records.append(
                LogRecord(message.partition(), message.offset(), message.key(), message.value())
            )
            positions[message.partition()] = message.offset() + 1
        assert {p: positions[p] for p in ends if ends[p]} == {p: e for p, e in ends.items() if e}
        return records
    finally:
        consumer.close()


def test_share_state_survives_sigkill_and_decodes(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    kemu = kemu_factory(
        brokers=3,
        data_dir=tmp_path / "data",
        overrides=[
            f"share.coordinator.state.topic.num.partitions={STATE_PARTITIONS}",
            "share.coordinator.snapshot.update.records.per.snapshot=2",
        ],
    ).start()
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    for future in admin.create_topics([NewTopic("orders", 2, 1)]).values():
        future.result(10)

    client = WireClient(kemu.bootstrap)
    topic_id = client.topic_id("orders")
    before = drive(client, topic_id)
    for read in before.values():
        assert read.error_code == ErrorCode.none
    assert before[("beta", 1)].state_epoch == 3
    assert before[("beta", 1)].start_offset == 30

    # A broker that does not lead the key's state partition refuses it.
    right = client.coordinator("alpha", topic_id, 0)
    wrong = client.write(
        "alpha", topic_id, 0, node=right % 3 + 1, state_epoch=0, leader_epoch=1, start_offset=0
    )
    assert wrong.error_code == ErrorCode.not_coordinator
    client.close()

    kemu.kill()
    kemu.start()
    client = WireClient(kemu.bootstrap)
    after = {key: client.read(key[0], topic_id, key[1], 1) for key in before}
    client.close()
    assert {k: state_of(v) for k, v in after.items()} == {k: state_of(v) for k, v in before.items()}

    # The topic, read like any other, replays to the same state.
    decoder = ShareStateDecoder()
    for record in consume_state_topic(kemu.bootstrap):
        assert "error" not in decoder.add(record)
    decoded = {(s["groupId"], s["partition"]): decoded_state(s) for s in decoder.states()}
    assert decoded == {k: state_of(v) for k, v in before.items()}

    # So does the CLI, from the cluster and from the data dir.
    for source in (["--bootstrap", kemu.first_broker], ["--data-dir", str(tmp_path / "data")]):
        completed = subprocess.run(
            [sys.executable, "-m", "kemu.cli", "decode-share-state", "--states-only", *source],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert completed.returncode == 0, completed.stderr
        output = completed.stdout
        states = [json.loads(line)["state"] for line in output.splitlines()]
        assert {(s["groupId"], s["partition"]): decoded_state(s) for s in states} == decoded
