"""A broker with ``--data-dir`` loses nothing it acknowledged when it is SIGKILLed mid-stream,
and a clean restart brings back its topics, their ids and configs.

confluent-kafka produces (acks=all) in a background thread and records every delivery report;
kemu is killed while requests are in flight and restarted from the same directory on the same
ports; a fresh consumer then reads every partition from offset 0.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from kemu.broker.handlers import load_handlers
from kemu.testing.plugin import KemuProcess

pytestmark = [pytest.mark.integration, pytest.mark.process]

PARTITIONS = 3
INIT_PRODUCER_ID, CREATE_TOPICS, DESCRIBE_CONFIGS = 22, 19, 32


def served(api_key: int) -> bool:
    return api_key in load_handlers()


@dataclass
class Stream:
    """Produces numbered records until stopped; keeps what the broker acknowledged."""

    producer: Producer
    topic: str
    acked: list[tuple[int, int, bytes, bytes]] = field(default_factory=list)  # partition, offset
    failed: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: int = 0

    def on_delivery(self, error: KafkaError | None, message: Message) -> None:
        with self.lock:
            if error is not None:
                self.failed.append(str(error))
            else:
                self.acked.append(
                    (message.partition(), message.offset(), message.key(), message.value())
                )

    def run(self) -> None:
        while not self.stop.is_set():
            key = f"key-{self.sent}".encode()
            value = f"value-{self.sent}-".encode() + bytes(self.sent % 200)
            try:
                self.producer.produce(self.topic, value, key, on_delivery=self.on_delivery)
                self.sent += 1
            except BufferError:
                self.producer.poll(0.05)  # queue full while the broker is down: wait
                continue
            self.producer.poll(0)
            if self.sent % 50 == 0:
                time.sleep(0.005)

    def count(self) -> int:
        with self.lock:
            return len(self.acked)

    def wait_for(self, count: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.count() < count:
            assert time.monotonic() < deadline, f"only {self.count()} of {count} acknowledged"
            assert not self.failed, self.failed[:5]
            time.sleep(0.02)


def read_everything(bootstrap: str, topic: str) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    """Every record of every partition, by (partition, offset), read from offset 0."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        records: dict[tuple[int, int], tuple[bytes, bytes]] = {}
        finished: set[int] = set()
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
            for p in range(PARTITIONS)
        }
        deadline = time.monotonic() + 60
        while len(finished) < PARTITIONS:
            assert time.monotonic() < deadline, f"reading stalled with {len(records)} records"
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                if message.offset() >= ends[message.partition()]:
                    finished.add(message.partition())
                continue
            records[(message.partition(), message.offset())] = (message.key(), message.value())
        return records
    finally:
        consumer.close()


def producer_for(bootstrap: str, idempotence: bool) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": idempotence,
            "linger.ms": 5,
            "batch.num.messages": 50,
            "message.timeout.ms": 120_000,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 500,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
        }
    )


@pytest.mark.parametrize("idempotence", [False, True], ids=["plain", "idempotent"])
def test_sigkill_mid_stream_loses_no_acknowledged_record(
    kemu_factory: type[KemuProcess], tmp_path: Path, idempotence: bool
) -> None:
    if idempotence and not served(INIT_PRODUCER_ID):
        pytest.skip("InitProducerId is not served yet")
    kemu = kemu_factory(
        brokers=3,
        data_dir=tmp_path / "data",
        overrides=[f"num.partitions={PARTITIONS}", "log.segment.bytes=65536"],
    ).start()
    topic = f"durable-{uuid.uuid4().hex[:8]}"
    producer = producer_for(kemu.bootstrap, idempotence)
    stream = Stream(producer, topic)
    thread = threading.Thread(target=stream.run, daemon=True)
    thread.start()
    try:
        stream.wait_for(3000)
        kemu.kill()  # SIGKILL with produce requests in flight
        before_kill = stream.count()
        assert stream.sent > before_kill  # records were still on their way
        acked_before = list(stream.acked[:before_kill])
        time.sleep(0.3)
        kemu.start()  # same data dir, same ports
        stream.wait_for(before_kill + 1500)
    finally:
        stream.stop.set()
        thread.join(10)
    assert producer.flush(60) == 0
    assert not stream.failed, stream.failed[:5]

    records = read_everything(kemu.bootstrap, topic)
    positions = [(p, o) for p, o, _, _ in stream.acked]
    assert len(positions) == len(set(positions)), "two acknowledgements for one offset"
    for partition, offset, key, value in stream.acked:
        assert records.get((partition, offset)) == (key, value), (partition, offset, key)
    # offsets continue after the restart: every partition got records past its pre-kill ones
    for partition in range(PARTITIONS):
        before = max((o for p, o, _, _ in acked_before if p == partition), default=-1)
        after = [o for p, o, _, _ in stream.acked[before_kill:] if p == partition]
        assert after and min(after) > before
    if idempotence:
        keys = [key for key, _ in records.values()]
        assert len(keys) == len(set(keys)), "an idempotent producer's retry was written twice"

    # a new producer after the restart appends at the log end
    ends = {p: max(o for q, o in records if q == p) + 1 for p in range(PARTITIONS)}
    late = Producer({"bootstrap.servers": kemu.bootstrap, "acks": "all"})
    delivered: list[Message] = []
    for partition in range(PARTITIONS):
        late.produce(
            topic,
            b"late",
            b"late",
            partition=partition,
            on_delivery=lambda e, m: delivered.append(m),
        )
    assert late.flush(30) == 0
    assert {(m.partition(), m.offset()) for m in delivered} == set(ends.items())


def _describe(bootstrap: str, topic: str) -> tuple[Any, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    from confluent_kafka import TopicCollection

    description = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    cluster_id = admin.describe_cluster().result(30).cluster_id
    return description, cluster_id


def test_sigterm_restart_keeps_topics_ids_and_data(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    kemu = kemu_factory(
        brokers=3, data_dir=tmp_path / "data", overrides=[f"num.partitions={PARTITIONS}"]
    ).start()
    topic = "kept"
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "acks": "all"})
    for i in range(30):
        producer.produce(topic, f"v{i}".encode(), f"k{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    before, cluster_before = _describe(kemu.bootstrap, topic)
    records_before = read_everything(kemu.bootstrap, topic)
    assert len(records_before) == 30

    kemu.stop()  # SIGTERM: flushes and closes the logs
    kemu.start()

    after, cluster_after = _describe(kemu.bootstrap, topic)
    assert cluster_after == cluster_before
    assert str(after.topic_id) == str(before.topic_id)
    assert [p.id for p in after.partitions] == [p.id for p in before.partitions]
    assert [p.leader.id for p in after.partitions] == [p.leader.id for p in before.partitions]
    assert read_everything(kemu.bootstrap, topic) == records_before


def test_sigterm_restart_keeps_topic_configs(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    if not (served(CREATE_TOPICS) and served(DESCRIBE_CONFIGS)):
        pytest.skip("CreateTopics / DescribeConfigs are not served yet")
    kemu = kemu_factory(brokers=3, data_dir=tmp_path / "data").start()
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    overrides = {"retention.ms": "3600000", "max.message.bytes": "200000"}
    admin.create_topics([NewTopic("configured", 2, 1, config=overrides)])["configured"].result(30)

    def configs() -> dict[str, str]:
        client = AdminClient({"bootstrap.servers": kemu.bootstrap})
        resource = ConfigResource(ConfigResource.Type.TOPIC, "configured")
        entries = client.describe_configs([resource])[resource].result(30)
        return {name: entries[name].value for name in overrides}

    assert configs() == overrides
    kemu.stop()
    kemu.start()
    assert configs() == overrides


def test_topic_segment_bytes_rolls_segments_on_disk(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    if not served(CREATE_TOPICS):
        pytest.skip("CreateTopics is not served yet")
    data_dir = tmp_path / "data"
    kemu = kemu_factory(brokers=1, data_dir=data_dir).start()
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic("rolled", 1, 1)])["rolled"].result(30)
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 20})

    def produce(megabytes: int) -> None:
        for i in range(megabytes * 100):
            producer.produce("rolled", bytes(10_000), str(i).encode())
            producer.poll(0)
        assert producer.flush(30) == 0

    def segments() -> list[str]:
        return sorted(p.name for p in (data_dir / "rolled-0").glob("*.log"))

    produce(2)
    assert segments() == ["00000000000000000000.log"]
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "rolled",
        incremental_configs=[
            ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    produce(3)
    assert len(segments()) >= 3
    kemu.kill()
    kemu.start()
    consumer = Consumer({"bootstrap.servers": kemu.bootstrap, "group.id": "unused"})
    assert consumer.get_watermark_offsets(TopicPartition("rolled", 0), 10) == (0, 500)
    consumer.close()


def test_restarts_skip_the_scan_of_what_is_known_synced(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    """A clean stop leaves Kafka's clean-shutdown marker and recovery-point checkpoint, and a
    summary beside every segment; the next start opens every log from them, a start after a
    SIGKILL from the last checkpoint on, and both find every record where it was."""
    data_dir = tmp_path / "data"
    kemu = kemu_factory(
        brokers=1,
        data_dir=data_dir,
        overrides=[
            f"num.partitions={PARTITIONS}",
            "log.segment.bytes=16384",
            "log.flush.offset.checkpoint.interval.ms=500",
        ],
    ).start()
    topic = "summarized"
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "acks": "all"})
    for i in range(1500):
        producer.produce(topic, b"v" * 400 + b"%d" % i, b"k%d" % i, partition=i % PARTITIONS)
        if i % 100 == 99:  # batches of about 13 KB: segments of 16 KiB roll
            assert producer.flush(30) == 0
    records = read_everything(kemu.bootstrap, topic)
    assert len(records) == 1500

    kemu.stop()  # SIGTERM: flushed, closed, summarized, marked clean
    assert (data_dir / ".kafka_cleanshutdown").exists()
    checkpoint = (data_dir / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert checkpoint[0] == "0" and int(checkpoint[1]) == len(checkpoint) - 2
    ends = {p: max(o for q, o in records if q == p) + 1 for p in range(PARTITIONS)}
    for partition, end in ends.items():
        assert f"{topic} {partition} {end}" in checkpoint
        segments = sorted((data_dir / f"{topic}-{partition}").glob("*.log"))
        assert len(segments) > 1
        assert all(segment.with_suffix(".scan").exists() for segment in segments)

    kemu.start()
    assert "clean_shutdown=True" in kemu.log_path.read_text()  # type: ignore[union-attr]
    assert not (data_dir / ".kafka_cleanshutdown").exists()
    assert read_everything(kemu.bootstrap, topic) == records
    more = Producer({"bootstrap.servers": kemu.bootstrap, "acks": "all"})
    for i in range(300):
        more.produce(topic, b"w%d" % i, b"j%d" % i, partition=i % PARTITIONS)
    assert more.flush(30) == 0
    time.sleep(1.5)  # a flush and a checkpoint go by
    kemu.kill()
    kemu.start()  # unclean: summaries below the recovery point, a scan from there on
    after = read_everything(kemu.bootstrap, topic)
    assert len(after) == 1800
    assert {position: after[position] for position in records} == records
