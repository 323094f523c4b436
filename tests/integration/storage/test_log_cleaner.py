"""Log compaction over the wire: a compacted topic read from the start shows the latest value per
key at its original offset, with gaps, as Kafka shows it, before and after a SIGKILL and restart;
__consumer_offsets stops growing with the number of commits and still restores them on restart;
read_committed consumers see the same thing once the cleaner has removed aborted transactions; an
idempotent producer's last batch stays as an empty batch that librdkafka, kafka-python and
aiokafka all read past.

The cleaner runs every ``log.cleaner.backoff.ms`` (100 ms here); small segments
(``log.segment.bytes``, ``offsets.topic.segment.bytes``) roll so that data becomes cleanable. The
tests poll for the effect, never for a time.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from kemu.protocol.records import BATCH_HEADER_SIZE, BatchHeader, read_header
from kemu.testing.plugin import KemuProcess

pytestmark = [pytest.mark.integration, pytest.mark.process]

FAST_CLEANER = ["log.cleaner.backoff.ms=100"]
KEYS = 10
VERSIONS = 30


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)


def read_all(
    bootstrap: str, topic: str, *, isolation: str = "read_uncommitted"
) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of partition 0 from the start, as a fresh consumer sees it."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        found: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        position = low
        while position < high and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                position = consumer.position([TopicPartition(topic, 0)])[0].offset
                continue
            assert message.error() is None, message.error()
            found.append((message.offset(), message.key(), message.value()))
            position = message.offset() + 1
        return found
    finally:
        consumer.close()


def log_bytes(data_dir: Path, directory: str) -> int:
    return sum(path.stat().st_size for path in (data_dir / directory).glob("*.log"))


def test_compacted_topic_keeps_the_latest_value_per_key_with_gaps(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    kemu = kemu_factory(
        brokers=1, data_dir=data_dir, overrides=[*FAST_CLEANER, "log.segment.bytes=2048"]
    ).start()
    topic = "compacted"
    create(
        kemu.bootstrap,
        topic,
        {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"},
    )
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 0})
    latest: dict[bytes, bytes | None] = {}
    producer.produce(topic, b"written once", b"sticky")  # offset 0: never superseded
    latest[b"sticky"] = b"written once"
    produced = 1
    for version in range(VERSIONS):
        for key in range(KEYS):
            if version % 3 == 2 and key % 2 == 0:
                continue  # every third round writes odd keys only: gaps between latest values
            name = f"key-{key}".encode()
            value: bytes | None = f"value-{key}-{version}".encode()
            if key == 1 and version == VERSIONS - 1:
                value = None  # a tombstone: kept delete.retention.ms (a day) after cleaning
            producer.produce(topic, value, name)
            latest[name] = value
            produced += 1
        producer.flush(10)
    low, high = Consumer(
        {"bootstrap.servers": kemu.bootstrap, "group.id": "watermarks"}
    ).get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert (low, high) == (0, produced)

    wait_until(
        lambda: len(read_all(kemu.bootstrap, topic)) < produced / 2, "the cleaner to compact"
    )
    seen = read_all(kemu.bootstrap, topic)
    offsets = [offset for offset, _, _ in seen]
    assert offsets == sorted(set(offsets))
    assert offsets[-1] == produced - 1
    assert offsets[0] == 0  # the key written once stays where it was written ...
    assert offsets[1] > 1  # ... and the superseded versions after it are gone: a gap
    assert any(b - a > 1 for a, b in itertools.pairwise(offsets)), offsets
    last: dict[bytes | None, bytes | None] = {}
    for _, key, value in seen:
        last[key] = value
    assert last == latest
    assert last[b"key-1"] is None  # the tombstone
    # a key appears once in the cleaned part: only versions in the active segment repeat
    first_offsets = {offset: key for offset, key, _ in seen}
    assert len(first_offsets) == len(seen)
    # ListOffsets is unchanged by compaction
    watermark_consumer = Consumer({"bootstrap.servers": kemu.bootstrap, "group.id": "wm2"})
    assert watermark_consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (
        0,
        produced,
    )
    # a fetch from an offset the cleaner removed starts at the next record kept
    removed = next(o for o in range(produced) if o not in set(offsets))
    consumer = Consumer(
        {"bootstrap.servers": kemu.bootstrap, "group.id": "from-gap", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, removed)])
    message = None
    while message is None:
        message = consumer.poll(1)
    assert message.offset() == min(o for o in offsets if o > removed)
    consumer.close()
    watermark_consumer.close()

    kemu.kill()
    kemu.start()
    assert read_all(kemu.bootstrap, topic) == seen


def test_consumer_offsets_stops_growing_and_restores_commits_after_restart(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    kemu = kemu_factory(
        brokers=1,
        data_dir=data_dir,
        overrides=[
            *FAST_CLEANER,
            "offsets.topic.num.partitions=1",
            "offsets.topic.segment.bytes=4096",
        ],
    ).start()
    topic = "events"
    create(kemu.bootstrap, topic, {})
    consumer = Consumer(
        {"bootstrap.servers": kemu.bootstrap, "group.id": "committer", "enable.auto.commit": False}
    )
    commits = 2_500
    for offset in range(1, commits + 1):
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    consumer.close()
    # every commit is a record of ~100 bytes: 250 kB before cleaning, 60 segments
    wait_until(
        lambda: log_bytes(data_dir, "__consumer_offsets-0") < 3 * 4096,
        "__consumer_offsets to be compacted",
    )
    kemu.kill()
    kemu.start()
    fresh = Consumer(
        {"bootstrap.servers": kemu.bootstrap, "group.id": "committer", "enable.auto.commit": False}
    )
    committed = fresh.committed([TopicPartition(topic, 0)], timeout=10)
    fresh.close()
    assert committed[0].offset == commits


def test_read_committed_after_aborted_transactions_are_cleaned(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    kemu = kemu_factory(
        brokers=1, data_dir=data_dir, overrides=[*FAST_CLEANER, "log.segment.bytes=1024"]
    ).start()
    topic = "txn-compacted"
    create(
        kemu.bootstrap,
        topic,
        {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"},
    )
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "transactional.id": "cleaner-txn"})
    producer.init_transactions(30)
    expected: dict[bytes, bytes] = {}
    for round_number in range(20):
        producer.begin_transaction()
        for key in range(4):
            producer.produce(topic, f"aborted-{round_number}".encode(), f"k{key}".encode())
        producer.abort_transaction(30)
        producer.begin_transaction()
        for key in range(4):
            value = f"committed-{round_number}".encode()
            producer.produce(topic, value, f"k{key}".encode())
            expected[f"k{key}".encode()] = value
        producer.commit_transaction(30)
    plain = Producer({"bootstrap.servers": kemu.bootstrap})
    for filler in range(40):  # rolls the last transactional segment
        plain.produce(topic, b"x" * 40, f"filler-{filler}".encode())
    plain.flush(10)

    def committed_view() -> dict[bytes | None, bytes | None]:
        view: dict[bytes | None, bytes | None] = {}
        for _, key, value in read_all(kemu.bootstrap, topic, isolation="read_committed"):
            if key is not None and key.startswith(b"k"):
                view[key] = value
        return view

    def cleaned() -> bool:
        """The aborted records removed and the committed ones compacted: a pass can do the
        first before a later one does the second (a CI run under load read in between)."""
        records = read_all(kemu.bootstrap, topic)
        aborted = any(value is not None and value.startswith(b"aborted") for _, _, value in records)
        kept = [key for _, key, _ in records if key is not None and key.startswith(b"k")]
        return not aborted and len(kept) < 20 * 4

    wait_until(cleaned, "the cleaner to remove aborted records and compact the committed ones")
    assert committed_view() == expected
    after = read_all(kemu.bootstrap, topic, isolation="read_committed")
    assert len([key for _, key, _ in after if key is not None and key.startswith(b"k")]) < 20 * 4
    kemu.kill()
    kemu.start()
    assert committed_view() == expected
    assert read_all(kemu.bootstrap, topic, isolation="read_committed") == after


def batch_headers(directory: Path) -> list[BatchHeader]:
    """Every batch header in a partition directory's segment files, read without opening the
    log (kemu owns it meanwhile)."""
    found = []
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        position = 0
        while position + BATCH_HEADER_SIZE <= len(data):
            header = read_header(data, position)
            if position + header.size > len(data):
                break
            found.append(header)
            position += header.size
    return found


def cleaned_to_the_active_segment(directory: Path) -> bool:
    """Whether the cleaner checkpoint (``cleaner-offset``) is at the active segment's base."""
    try:
        checkpoint = int((directory / "cleaner-offset").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return False
    return checkpoint == max(int(path.name[:20]) for path in directory.glob("*.log"))


def read_with_kafka_python(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    partition = KafkaTopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    found: list[tuple[int, bytes, bytes]] = []
    deadline = time.monotonic() + 30
    while consumer.position(partition) < end and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            found.extend((r.offset, r.key, r.value) for r in records)
    consumer.close()
    return found


async def read_with_aiokafka(
    bootstrap: str, topic: str, end: int
) -> list[tuple[int, bytes, bytes]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partition = AioTopicPartition(topic, 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        found: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while await consumer.position(partition) < end and time.monotonic() < deadline:
            fetched = await consumer.getmany(timeout_ms=500)
            for records in fetched.values():
                found.extend((r.offset, r.key, r.value) for r in records)
        return found
    finally:
        await consumer.stop()


def test_an_idempotent_producers_last_batch_stays_empty_and_every_client_reads_past_it(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    kemu = kemu_factory(
        brokers=1, data_dir=data_dir, overrides=[*FAST_CLEANER, "log.segment.bytes=1024"]
    ).start()
    topic = "idempotent-compacted"
    create(
        kemu.bootstrap, topic, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
    )
    idempotent = Producer({"bootstrap.servers": kemu.bootstrap, "enable.idempotence": True})
    idempotent.produce(topic, b"from the idempotent producer", b"shared")
    idempotent.flush(10)
    plain = Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 0})
    for version in range(40):
        plain.produce(topic, f"plain-{version}".encode(), b"shared")
        plain.produce(topic, f"other-{version}".encode(), f"other-{version % 4}".encode())
        plain.flush(10)
    end = 81

    def emptied() -> list[BatchHeader]:
        return [
            h
            for h in batch_headers(data_dir / f"{topic}-0")
            if h.producer_id >= 0 and h.record_count == 0
        ]

    wait_until(lambda: bool(emptied()), "the idempotent producer's batch to be emptied")
    # and for the cleaner to be done: a round still going (the cleaner runs while the records
    # are written) would clean between the reads compared below
    wait_until(
        lambda: cleaned_to_the_active_segment(data_dir / f"{topic}-0"),
        "the cleaner to reach the active segment",
    )
    header = emptied()[0]
    assert (header.base_offset, header.last_offset_delta, header.base_sequence) == (0, 0, 0)
    expected = read_all(kemu.bootstrap, topic)
    assert expected[0][0] > 0 and expected[-1][0] == end - 1
    assert read_with_kafka_python(kemu.bootstrap, topic, end) == expected
    assert asyncio.run(read_with_aiokafka(kemu.bootstrap, topic, end)) == expected
    kemu.kill()
    kemu.start()
    assert emptied()  # still there after a restart: it carries the producer's sequence
    assert read_all(kemu.bootstrap, topic) == expected


@pytest.mark.parametrize(
    "point", ["clean.cleaned_written", "clean.swap_committed", "clean.old_segments_deleted"]
)
def test_sigkill_in_the_middle_of_a_cleaning_leaves_a_readable_log(
    kemu_factory: type[KemuProcess], tmp_path: Path, point: str
) -> None:
    data_dir = tmp_path / "data"
    topic = "crashy"
    kemu = kemu_factory(
        brokers=1,
        data_dir=data_dir,
        overrides=["log.cleaner.backoff.ms=500", "log.segment.bytes=1024"],
        env={"KEMU_CRASH_AT": point},
    ).start()
    # the default dirty ratio (0.5): the first cleaning starts once segments have rolled
    create(kemu.bootstrap, topic, {"cleanup.policy": "compact"})
    # the cleaner may crash kemu while records are still being produced: only what was
    # acknowledged counts (in order: one record in flight at a time)
    producer = Producer(
        {"bootstrap.servers": kemu.bootstrap, "linger.ms": 0, "message.timeout.ms": 5000}
    )
    latest: dict[bytes, bytes] = {}
    acked: list[int] = []
    failed: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is None:
            latest[message.key()] = message.value()
            acked.append(message.offset())
        else:
            failed.append(error)

    for version in range(25):
        for key in range(6):
            if not failed:  # kemu is gone: stop producing
                producer.produce(
                    topic, f"v{version}".encode(), f"k{key}".encode(), on_delivery=on_delivery
                )
                producer.flush(10)
    sent = max(acked) + 1
    assert kemu.process is not None
    kemu.process.wait(60)  # the cleaner reached the crash point: SIGKILL
    kemu.env = {}
    kemu.start()
    seen = read_all(kemu.bootstrap, topic)
    assert {key: value for _, key, value in seen} == latest
    assert seen[-1][0] == sent - 1
    offsets = [offset for offset, _, _ in seen]
    assert offsets == sorted(set(offsets))
    assert not list((data_dir / f"{topic}-0").glob("*.cleaned"))
    assert not list((data_dir / f"{topic}-0").glob("*.swap"))
    # The cleaner cleans again after the restart. The crash may have come early (how far the
    # producer got before the first cleaning depends on the machine's load), so more versions of
    # the same keys are written first: then a cleaning must halve the log, however few records
    # the log held at the crash.
    more = Producer({"bootstrap.servers": kemu.bootstrap, "linger.ms": 0})
    for version in range(25, 50):
        for key in range(6):
            more.produce(topic, f"v{version}".encode(), f"k{key}".encode())
            latest[f"k{key}".encode()] = f"v{version}".encode()
            assert more.flush(10) == 0  # one record a batch: the segments roll as before
    written = sent + 150
    wait_until(lambda: len(read_all(kemu.bootstrap, topic)) < written / 2, "the next cleaning")
    assert {key: value for _, key, value in read_all(kemu.bootstrap, topic)} == latest


def test_transaction_state_is_compacted_and_transactions_carry_on_after_restart(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    kemu = kemu_factory(
        brokers=1,
        data_dir=data_dir,
        overrides=[
            *FAST_CLEANER,
            "transaction.state.log.num.partitions=1",
            "transaction.state.log.segment.bytes=8192",
        ],
    ).start()
    topic = "txn-target"
    create(kemu.bootstrap, topic, {})
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "transactional.id": "long-lived"})
    producer.init_transactions(30)
    transactions = 150
    for number in range(transactions):
        producer.begin_transaction()
        producer.produce(topic, f"txn-{number}".encode(), b"k")
        producer.commit_transaction(30)
    # several records per transaction (ongoing, prepare, complete): many 8 KiB segments, until
    # the cleaner keeps about one record per transactional id
    wait_until(
        lambda: log_bytes(data_dir, "__transaction_state-0") < 2 * 8192,
        "__transaction_state to be compacted",
    )
    kemu.kill()
    kemu.start()
    again = Producer({"bootstrap.servers": kemu.bootstrap, "transactional.id": "long-lived"})
    again.init_transactions(30)
    again.begin_transaction()
    again.produce(topic, b"after restart", b"k")
    again.commit_transaction(30)
    seen = read_all(kemu.bootstrap, topic, isolation="read_committed")
    assert [value for _, _, value in seen][-1] == b"after restart"
    assert len(seen) == transactions + 1
