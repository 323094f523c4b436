"""Classic consumer groups and committed offsets with real Python clients on a 3-broker kemu.

- confluent-kafka: three ``Consumer``s with ``subscribe()`` share a 6-partition topic; every
  record is read exactly once across the group, offsets are committed, and a consumer that
  restarts resumes from the committed offsets. Admin lists, describes and deletes the group,
  and alters offsets (a generation -1 commit). cooperative-sticky and static membership over
  the classic protocol, and ``group.protocol=consumer`` (KIP-848).
- kafka-python: ``KafkaConsumer`` subscribe + commit in a group of two.
- aiokafka: ``AIOKafkaConsumer`` subscribe + commit in a group of two.
- SIGKILL: committed offsets and the group survive a kill -9 of kemu (data dir), read back
  from ``__consumer_offsets``.

kemu runs with ``group.initial.rebalance.delay.ms`` small so that first joins are quick.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.testing.inprocess import InProcessKemu
from kemu.testing.plugin import KemuProcess

pytestmark = pytest.mark.integration

PARTITIONS = 6
RECORDS = 600
TIMEOUT_S = 60.0
OVERRIDES = [
    "group.initial.rebalance.delay.ms=200",
    # KIP-848 groups reconcile one heartbeat at a time: beat often so the tests are quick.
    "group.consumer.heartbeat.interval.ms=500",
    "group.consumer.min.heartbeat.interval.ms=500",
]


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    log_path = tmp_path_factory.mktemp("consumer-groups") / "kemu.log"
    process = InProcessKemu(brokers=3, log_path=log_path, overrides=OVERRIDES).start()
    yield process
    process.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(30)


def produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(first, first + count):
        producer.produce(topic, key=str(i).encode(), value=str(i).encode())
    assert producer.flush(30) == 0


def confluent_consumer(bootstrap: str, group: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **extra,
        }
    )


def drain(
    consumers: list[Consumer], expected: int, done: Callable[[], bool] | None = None
) -> Counter[str]:
    """Poll every consumer round-robin, committing each record, until ``expected`` arrived."""
    seen: Counter[str] = Counter()
    deadline = time.monotonic() + TIMEOUT_S
    while sum(seen.values()) < expected and time.monotonic() < deadline:
        for consumer in consumers:
            message = consumer.poll(0.1)
            if message is None:
                continue
            assert message.error() is None, message.error()
            seen[message.value().decode()] += 1
            try:
                consumer.commit(message, asynchronous=False)
            except KafkaException as error:
                # A commit that meets a rebalance completing is refused, as Kafka refuses it
                # (REBALANCE_IN_PROGRESS); the next record's commit covers this one.
                if error.args[0].code() != KafkaError.REBALANCE_IN_PROGRESS:
                    raise
    return seen


def committed(consumer: Consumer, topic: str) -> dict[int, int]:
    partitions = [TopicPartition(topic, index) for index in range(PARTITIONS)]
    return {tp.partition: tp.offset for tp in consumer.committed(partitions, timeout=10)}


def end_offsets(consumer: Consumer, topic: str) -> dict[int, int]:
    return {
        index: consumer.get_watermark_offsets(TopicPartition(topic, index), timeout=10)[1]
        for index in range(PARTITIONS)
    }


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


# --- confluent-kafka -----------------------------------------------------------------------------


def test_confluent_group_of_three_reads_everything_once_and_resumes(kemu: InProcessKemu) -> None:
    topic, group = unique("cg"), unique("cg-group")
    create_topic(kemu.bootstrap, topic)
    produce(kemu.bootstrap, topic, 0, RECORDS)
    consumers = [confluent_consumer(kemu.bootstrap, group) for _ in range(3)]
    for consumer in consumers:
        consumer.subscribe([topic])
    seen = drain(consumers, RECORDS)
    assert sum(seen.values()) == RECORDS
    assert set(seen) == {str(i) for i in range(RECORDS)}
    assert max(seen.values()) == 1  # exactly once across the group

    # Every consumer owns two of the six partitions once the group has settled.
    wait_for(
        lambda: all(c.poll(0.05) is None and len(c.assignment()) == 2 for c in consumers),
        "a balanced assignment",
    )
    owned = sorted(tp.partition for c in consumers for tp in c.assignment())
    assert owned == list(range(PARTITIONS))
    assert committed(consumers[0], topic) == end_offsets(consumers[0], topic)

    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    listed = admin.list_consumer_groups().result(30)
    assert group in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert str(described.state).endswith("STABLE")
    assert len(described.members) == 3
    assert described.partition_assignor in ("range", "roundrobin")

    # Everybody leaves; a newcomer reads only what was produced since.
    for consumer in consumers:
        consumer.close()
    produce(kemu.bootstrap, topic, RECORDS, 60)
    successor = confluent_consumer(kemu.bootstrap, group)
    successor.subscribe([topic])
    try:
        resumed = drain([successor], 60)
        assert set(resumed) == {str(i) for i in range(RECORDS, RECORDS + 60)}
        assert max(resumed.values()) == 1
        assert successor.poll(1.0) is None
    finally:
        successor.close()


def test_confluent_consumer_restart_resumes_from_committed_offsets(kemu: InProcessKemu) -> None:
    topic, group = unique("restart"), unique("restart-group")
    create_topic(kemu.bootstrap, topic)
    produce(kemu.bootstrap, topic, 0, 100)
    first = confluent_consumer(kemu.bootstrap, group)
    first.subscribe([topic])
    seen = drain([first], 40)
    first.close()
    assert sum(seen.values()) >= 40
    second = confluent_consumer(kemu.bootstrap, group)
    second.subscribe([topic])
    try:
        rest = drain([second], 100 - sum(seen.values()))
        assert not set(rest) & set(seen)  # nothing committed is read again
        assert set(rest) | set(seen) == {str(i) for i in range(100)}
    finally:
        second.close()


def test_confluent_admin_offsets_and_delete(kemu: InProcessKemu) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions

    topic, group = unique("admin-offsets"), unique("admin-group")
    create_topic(kemu.bootstrap, topic)
    produce(kemu.bootstrap, topic, 0, 30)
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    # An admin commit (generation -1) creates the group empty.
    target = [TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 4)]
    altered = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, target)])
    altered[group].result(30)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    offsets = {tp.partition: tp.offset for tp in listed[group].result(30).topic_partitions}
    assert offsets == {0: 3, 1: 4}
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert str(described.state).endswith("EMPTY")

    consumer = confluent_consumer(kemu.bootstrap, group)
    consumer.assign([TopicPartition(topic, 0)])
    try:
        message = consumer.poll(10)
        assert message is not None and message.offset() == 3  # starts at the committed offset
    finally:
        consumer.close()

    admin.delete_consumer_groups([group])[group].result(30)
    with pytest.raises(KafkaException):
        admin.delete_consumer_groups([group])[group].result(30)  # GROUP_ID_NOT_FOUND


def test_confluent_cooperative_sticky_rebalance(kemu: InProcessKemu) -> None:
    """Incremental rebalancing over the classic protocol: several joins per rebalance."""
    topic, group = unique("coop"), unique("coop-group")
    create_topic(kemu.bootstrap, topic)
    produce(kemu.bootstrap, topic, 0, 300)
    settings = {"partition.assignment.strategy": "cooperative-sticky"}
    first = confluent_consumer(kemu.bootstrap, group, **settings)
    first.subscribe([topic])
    second = confluent_consumer(kemu.bootstrap, group, **settings)
    try:
        before = drain([first], 100)
        second.subscribe([topic])
        after = drain([first, second], 200)
        # A commit refused by the rebalance (REBALANCE_IN_PROGRESS, as Kafka refuses it) leaves
        # its record to the partition's next owner when the partition moves before another
        # commit covers it: delivered again, at least once. Read on until every record came.
        for _ in range(5):
            left = 300 - len(set(before) | set(after))
            if not left:
                break
            after += drain([first, second], left)
        assert not set(before) & set(after)
        assert set(before) | set(after) == {str(i) for i in range(300)}
        wait_for(
            lambda: all(c.poll(0.05) is None and len(c.assignment()) == 3 for c in (first, second)),
            "three partitions each",
        )
    finally:
        first.close()
        second.close()


def test_confluent_static_member_restart(kemu: InProcessKemu) -> None:
    """A static member (group.instance.id) that restarts takes its place back and resumes."""
    topic, group = unique("static"), unique("static-group")
    create_topic(kemu.bootstrap, topic)
    produce(kemu.bootstrap, topic, 0, 100)
    first = confluent_consumer(kemu.bootstrap, group, **{"group.instance.id": "instance-1"})
    first.subscribe([topic])
    seen = drain([first], 30)
    first.close()  # a static member leaves no LeaveGroup behind
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert [m.group_instance_id for m in described.members] == ["instance-1"]
    again = confluent_consumer(kemu.bootstrap, group, **{"group.instance.id": "instance-1"})
    again.subscribe([topic])
    try:
        rest = drain([again], 100 - sum(seen.values()))
        assert not set(rest) & set(seen)
        assert set(rest) | set(seen) == {str(i) for i in range(100)}
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert [m.group_instance_id for m in described.members] == ["instance-1"]
    finally:
        again.close()


def test_confluent_kip848_consumer_protocol(kemu: InProcessKemu) -> None:
    """librdkafka with group.protocol=consumer: ConsumerGroupHeartbeat, server-side assignor."""
    topic, group = unique("kip848"), unique("kip848-group")
    create_topic(kemu.bootstrap, topic)
    produce(kemu.bootstrap, topic, 0, 300)

    def member() -> Consumer:
        made = Consumer(
            {
                "bootstrap.servers": kemu.bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        made.subscribe([topic])
        return made

    first = member()
    second = None
    try:
        before = drain([first], 100)
        second = member()
        after = drain([first, second], 200)
        assert not set(before) & set(after)
        assert set(before) | set(after) == {str(i) for i in range(300)}
        pair = (first, second)
        wait_for(
            lambda: all(c.poll(0.05) is None and len(c.assignment()) == 3 for c in pair),
            "the uniform assignor to give each member three partitions",
        )
        assert committed(first, topic) == end_offsets(first, topic)
        admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert len(described.members) == 2
    finally:
        first.close()
        if second is not None:
            second.close()


# --- kafka-python --------------------------------------------------------------------------------


def test_kafka_python_group_subscribe_and_commit(kemu: InProcessKemu) -> None:
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as KafkaTopicPartition

    topic, group = unique("kp"), unique("kp-group")
    create_topic(kemu.bootstrap, topic)
    produce(kemu.bootstrap, topic, 0, 200)

    def consumer() -> Any:
        made = KafkaConsumer(
            bootstrap_servers=kemu.bootstrap.split(","),
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            consumer_timeout_ms=500,
        )
        made.subscribe([topic])
        return made

    consumers = [consumer(), consumer()]
    seen: Counter[str] = Counter()
    seen_lock = threading.Lock()
    stop = threading.Event()
    failures: list[BaseException] = []

    def poll_and_commit(member: Any) -> None:
        # Each consumer polls in its own thread, with a long poll: kafka-python 3.0.12 drops a
        # JoinGroup/SyncGroup answer that arrives after poll() gave up and joins again, and the
        # leader's new JoinGroup starts another rebalance. Two consumers polled in turn with short
        # polls can rebalance over and over (seen for 20 s and more on a loaded machine).
        try:
            while not stop.is_set():
                batches = member.poll(timeout_ms=1000)
                with seen_lock:
                    for records in batches.values():
                        for record in records:
                            seen[record.value.decode()] += 1
                if batches:
                    member.commit()
        except BaseException as error:  # reported by the test's thread
            failures.append(error)
            raise

    pollers = [threading.Thread(target=poll_and_commit, args=(m,)) for m in consumers]
    for poller in pollers:
        poller.start()
    try:
        wait_for(
            lambda: (
                bool(failures)
                or (sum(seen.values()) >= 200 and all(len(m.assignment()) == 3 for m in consumers))
            ),
            "both kafka-python consumers to read everything and own three partitions",
        )
        stop.set()
        for poller in pollers:
            poller.join()
        assert not failures
        assert set(seen) == {str(i) for i in range(200)} and max(seen.values()) == 1
        partitions = [KafkaTopicPartition(topic, i) for i in range(PARTITIONS)]
        ends = consumers[0].end_offsets(partitions)
        assert {tp: consumers[0].committed(tp) for tp in partitions} == ends
    finally:
        stop.set()
        for poller in pollers:
            poller.join()
        for member in consumers:
            member.close()


# --- aiokafka ------------------------------------------------------------------------------------


def test_aiokafka_group_subscribe_and_commit(kemu: InProcessKemu) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    topic, group = unique("aio"), unique("aio-group")
    create_topic(kemu.bootstrap, topic)
    produce(kemu.bootstrap, topic, 0, 200)

    async def run() -> tuple[Counter[str], dict[int, int | None], dict[int, int]]:
        consumers = [
            AIOKafkaConsumer(
                topic,
                bootstrap_servers=kemu.bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=500,
            )
            for _ in range(2)
        ]
        for member in consumers:
            await member.start()
        seen: Counter[str] = Counter()
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while sum(seen.values()) < 200 and time.monotonic() < deadline:
                for member in consumers:
                    batches = await member.getmany(timeout_ms=200)
                    for records in batches.values():
                        for record in records:
                            seen[record.value.decode()] += 1
                    if batches:
                        await member.commit()
            partitions = [AioTopicPartition(topic, i) for i in range(PARTITIONS)]
            ends = await consumers[0].end_offsets(partitions)
            done = {tp.partition: await consumers[0].committed(tp) for tp in partitions}
            return seen, done, {tp.partition: offset for tp, offset in ends.items()}
        finally:
            for member in consumers:
                await member.stop()

    seen, done, ends = asyncio.run(run())
    assert set(seen) == {str(i) for i in range(200)} and max(seen.values()) == 1
    assert done == ends


# --- SIGKILL -------------------------------------------------------------------------------------


@pytest.mark.process  # SIGKILL: kemu as a real process
def test_committed_offsets_survive_sigkill(kemu_factory: type[KemuProcess], tmp_path: Path) -> None:
    server = kemu_factory(brokers=3, data_dir=tmp_path / "data", overrides=OVERRIDES).start()
    topic, group = unique("durable"), unique("durable-group")
    create_topic(server.bootstrap, topic)
    produce(server.bootstrap, topic, 0, 120)
    consumer = confluent_consumer(server.bootstrap, group)
    consumer.subscribe([topic])
    seen = drain([consumer], 120)
    assert sum(seen.values()) == 120
    before = committed(consumer, topic)
    assert sum(before.values()) == 120
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    simple_group = unique("simple")
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(simple_group, [TopicPartition(topic, 2, 7)])]
    )[simple_group].result(30)

    server.kill()  # the consumer is left hanging; kemu gets no chance to flush
    consumer.close()
    server.start()

    checker = confluent_consumer(server.bootstrap, group)
    try:
        assert committed(checker, topic) == before
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(simple_group)])
        offsets = {
            tp.partition: tp.offset for tp in listed[simple_group].result(30).topic_partitions
        }
        assert offsets == {2: 7}
        groups = {g.group_id for g in admin.list_consumer_groups().result(30).valid}
        assert {group, simple_group} <= groups
        # A consumer of the group resumes where the group left off.
        produce(server.bootstrap, topic, 120, 12)
        checker.subscribe([topic])
        resumed = drain([checker], 12)
        assert set(resumed) == {str(i) for i in range(120, 132)}
    finally:
        checker.close()


@pytest.mark.process  # SIGKILL: kemu as a real process
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_running_member_carries_on_after_sigkill(
    kemu_factory: type[KemuProcess], tmp_path: Path, protocol: str
) -> None:
    """A member that keeps running while kemu is SIGKILLed and restarted goes on from its
    committed offsets: a classic group comes back Stable from its GroupMetadata record, a
    KIP-848 group from its consumer-group records (same member id and generation/epoch)."""
    server = kemu_factory(brokers=3, data_dir=tmp_path / "data", overrides=OVERRIDES).start()
    topic, group = unique(f"kill-{protocol}"), unique(f"kill-{protocol}-group")
    create_topic(server.bootstrap, topic)
    produce(server.bootstrap, topic, 0, 100)
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    try:
        before = drain([consumer], 100)
        assert sum(before.values()) == 100
        server.kill()
        server.start()  # same ports: the consumer reconnects by itself
        produce(server.bootstrap, topic, 100, 50)
        after = drain([consumer], 50)
        assert set(after) == {str(i) for i in range(100, 150)}
        assert max(after.values()) == 1
    finally:
        consumer.close()
