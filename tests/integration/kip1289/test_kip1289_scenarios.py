"""KIP-1289's acceptance scenarios (spec §11.1, §11.2, §11.5), one test per row, through the wire.

kemu is started by the CLI as a user starts it: 3 brokers, ``kemu.kip1289.enable=true``,
``share.coordinator.state.topic.num.partitions=3``. Every share group gets
``share.auto.offset.reset=earliest`` through IncrementalAlterConfigs (confluent-kafka's admin
client), as Kafka's ITs set it. The reference client ``kemu.client`` plays the draft PR's Java
API: ``ShareConsumer`` in explicit mode (``acknowledge`` / ``acknowledgements_for_transaction`` /
``share_group_metadata``) and ``TransactionalProducer``
(``send_share_acknowledgements_to_transaction``); confluent-kafka writes the input records.
Checked as the spec's tables check them: lag (DescribeShareGroupOffsets v1 via
``Admin.share_group_lag``), redelivery with deliveryCount + 1, read_committed output, the
persisted delivery state of an offset (``kemu decode-share-state --bootstrap``).

Rows that do not disturb one another share one kemu (distinct topics and groups). Rows with
another broker configuration, or that restart kemu, get their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

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

from kemu.client import (
    AcknowledgeType,
    Admin,
    CommitFailedError,
    Consumer,
    KafkaError,
    ProducerFencedError,
    ShareAcknowledgementBatch,
    ShareAcknowledgements,
    ShareConsumer,
    ShareGroupMetadata,
    ShareRecord,
    TopicIdPartition,
    TransactionalProducer,
)
from kemu.client.cluster import ClusterClient
from kemu.config.definitions import BROKER_CONFIGS
from kemu.coordinator.share.keys import coordinator_key, kafka_uuid, partition_for
from kemu.coordinator.share.persister import SharePartitionKey
from kemu.protocol.errors import ErrorCode
from kemu.testing.inprocess import InProcessKemu
from kemu.testing.plugin import KemuProcess

pytestmark = pytest.mark.integration

STATE_PARTITIONS = 3
OVERRIDES = [
    "kemu.kip1289.enable=true",
    f"share.coordinator.state.topic.num.partitions={STATE_PARTITIONS}",
    # lets one group ask for a 1 s acquisition lock (the §11.5 lock-expiry row)
    "group.share.min.record.lock.duration.ms=1000",
]
AVAILABLE, ACKNOWLEDGED, ARCHIVED, TX_PENDING = 0, 2, 4, 5
COMPLETE = "below the start offset"  # done: kemu moved the start offset past it
TXN_SHARE_ACKNOWLEDGE, ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN, END_TXN = 95, 96, 26
FIND_COORDINATOR_SHARE = 2


# --- kemus --------------------------------------------------------------------------------------


def start(tmp_path_factory: pytest.TempPathFactory, name: str, *extra: str) -> InProcessKemu:
    return InProcessKemu(
        brokers=3,
        overrides=[*OVERRIDES, *extra],
        log_path=tmp_path_factory.mktemp(name) / "kemu.log",
    ).start()


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    process = start(tmp_path_factory, "kip1289-scenarios")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def durable_kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuProcess]:
    """A kemu with ``--data-dir``, restarted by the failover rows: a process, since they SIGKILL
    it (the tests that use it are in the process tier)."""
    base = tmp_path_factory.mktemp("kip1289-scenarios-durable")
    process = KemuProcess(
        brokers=3, data_dir=base / "data", overrides=OVERRIDES, log_path=base / "kemu.log"
    ).start()
    yield process
    process.stop()


# --- helpers ------------------------------------------------------------------------------------


def create_topic(
    kemu: KemuProcess | InProcessKemu,
    topic: str,
    partitions: int = 1,
    configs: dict[str, str] | None = None,
) -> None:
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    new = NewTopic(topic, partitions, 3, config=configs or {})
    admin.create_topics([new])[topic].result(timeout=15)


def set_group_configs(kemu: KemuProcess | InProcessKemu, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    entries = {"share.auto.offset.reset": "earliest", **configs}
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in entries.items()
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)


def setup(
    kemu: KemuProcess | InProcessKemu,
    name: str,
    partitions: int = 1,
    output: bool = False,
    group_configs: dict[str, str] | None = None,
) -> None:
    """Topic ``name`` (and ``name-out``), group ``name`` reading from the earliest offset."""
    create_topic(kemu, name, partitions)
    if output:
        create_topic(kemu, f"{name}-out", partitions)
    set_group_configs(kemu, name, **(group_configs or {}))


def produce(
    kemu: KemuProcess | InProcessKemu, topic: str, values: list[bytes], partition: int = 0
) -> None:
    """One batch per record, so a share fetch may acquire exactly one."""
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for value in values:
        producer.produce(topic, value=value, partition=partition)
        assert producer.flush(15) == 0


async def consumer_for(
    kemu: KemuProcess | InProcessKemu, group: str, *topics: str, **options: Any
) -> ShareConsumer:
    consumer = ShareConsumer(kemu.bootstrap, group, acknowledgement_mode="explicit", **options)
    await consumer.subscribe(list(topics) or [group])
    return consumer


async def consumer_and_producer(
    kemu: KemuProcess | InProcessKemu,
    closing: list[Any],
    name: str,
    *,
    output: bool = False,
    group_configs: dict[str, str] | None = None,
    inputs: list[bytes] | None = None,
    **producer_options: Any,
) -> tuple[ShareConsumer, TransactionalProducer]:
    """``setup`` of ``name``, ``inputs`` (``b"first"``) produced to partition 0, then an
    explicit-mode consumer of group ``name`` and the transactional producer ``tx-<name>``, both
    closed at the test's end."""
    setup(kemu, name, output=output, group_configs=group_configs)
    produce(kemu, name, inputs or [b"first"])
    consumer = await consumer_for(kemu, name)
    producer = await producer_for(kemu, f"tx-{name}", **producer_options)
    closing += [consumer, producer]
    return consumer, producer


async def epochs_agree(*members: ShareConsumer, timeout: float = 30.0) -> None:
    """Until every member holds the same member epoch: all have heard of the last join."""
    deadline = asyncio.get_running_loop().time() + timeout
    while len({member.member_epoch for member in members}) > 1:
        assert asyncio.get_running_loop().time() < deadline, "member epochs never agreed"
        await asyncio.sleep(0.05)


async def producer_for(
    kemu: KemuProcess | InProcessKemu, transactional_id: str, **options: Any
) -> TransactionalProducer:
    producer = TransactionalProducer(kemu.bootstrap, transactional_id, **options)
    await producer.init_transactions()
    return producer


async def poll_until(consumer: ShareConsumer, count: int, rounds: int = 60) -> list[ShareRecord]:
    records: list[ShareRecord] = []
    for _ in range(rounds):
        records += await consumer.poll(0.3)
        if len(records) >= count:
            break
    return records


async def lag(kemu: KemuProcess | InProcessKemu, group: str, topic: str) -> int:
    async with Admin(kemu.bootstrap) as admin:
        return await admin.share_group_lag(group, topic)


async def wait_for_lag(
    kemu: KemuProcess | InProcessKemu, group: str, topic: str, expected: int
) -> int:
    """The group's lag on ``topic`` once it is ``expected`` (or the last one seen, after ~10 s);
    resolution after EndTxn is asynchronous at a remote share coordinator."""
    async with Admin(kemu.bootstrap) as admin:
        for _ in range(100):
            found = await admin.share_group_lag(group, topic)
            if found == expected:
                return found
            await asyncio.sleep(0.1)
        return found


async def partition_lags(
    kemu: KemuProcess | InProcessKemu, group: str, topic: str
) -> dict[int, int]:
    async with Admin(kemu.bootstrap) as admin:
        offsets = await admin.share_group_offsets(group, topic)
    return {partition: found.lag for partition, found in offsets.items()}


async def committed_values(
    kemu: KemuProcess | InProcessKemu, topic: str, wait: float = 1.0
) -> list[bytes]:
    async with Consumer(kemu.bootstrap) as reader:  # read_committed
        await reader.assign_topic(topic)
        return [r.value or b"" for r in await reader.poll(wait)]


async def stage(
    producer: TransactionalProducer,
    consumer: ShareConsumer,
    *records: ShareRecord,
    kind: AcknowledgeType = AcknowledgeType.ACCEPT,
) -> ShareAcknowledgements:
    """ACCEPT (or ``kind``) ``records`` and carry the acknowledgements in the producer's open
    transaction."""
    for record in records:
        consumer.acknowledge(record, kind)
    acknowledgements = consumer.acknowledgements_for_transaction()
    await producer.send_share_acknowledgements_to_transaction(
        acknowledgements, consumer.share_group_metadata()
    )
    return acknowledgements


def decode_share_state(kemu: KemuProcess | InProcessKemu) -> list[dict[str, Any]]:
    completed = subprocess.run(
        [sys.executable, "-m", "kemu.cli", "decode-share-state", "--bootstrap", kemu.first_broker],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    return [json.loads(line) for line in completed.stdout.splitlines()]


Decoded = list[dict[str, Any]]


def share_state(decoded: Decoded, group: str, record: ShareRecord) -> dict[str, Any]:
    """The persisted state of ``record``'s share partition for ``group``."""
    wanted = (group, kafka_uuid(record.topic_id), record.partition)
    [state] = [
        e["state"]
        for e in decoded
        if "state" in e
        and (e["state"]["groupId"], e["state"]["topicId"], e["state"]["partition"]) == wanted
    ]
    found: dict[str, Any] = state
    return found


def state_of(decoded: Decoded, group: str, record: ShareRecord) -> int | str | None:
    """state(o) of the spec: the persisted delivery state of ``record``'s offset, COMPLETE once
    the persisted start offset moved past it, None when no batch holds it."""
    state = share_state(decoded, group, record)
    if record.offset < state["startOffset"]:
        return COMPLETE
    for batch in state["stateBatches"]:
        if batch["firstOffset"] <= record.offset <= batch["lastOffset"]:
            return int(batch["deliveryState"])
    return None


def latest_record_state(decoded: Decoded, group: str, record: ShareRecord) -> int | None:
    """The delivery state of ``record``'s offset in the latest ``__share_group_state`` record
    naming it (what Kafka's ``verifyLatestShareStateDeliveryState`` reads)."""
    found = None
    wanted = (group, kafka_uuid(record.topic_id), record.partition)
    for entry in decoded:
        data = (entry.get("key") or {}).get("data") or {}
        if (data.get("groupId"), data.get("topicId"), data.get("partition")) != wanted:
            continue
        for batch in ((entry.get("value") or {}).get("data") or {}).get("stateBatches", ()):
            if batch["firstOffset"] <= record.offset <= batch["lastOffset"]:
                found = int(batch["deliveryState"])
    return found


def values(records: list[ShareRecord]) -> list[tuple[int, bytes | None, int]]:
    return [(r.offset, r.value, r.delivery_count) for r in records]


@pytest.fixture
async def closing() -> AsyncIterator[list[Any]]:
    """Clients a test opened, closed at its end whatever happened."""
    opened: list[Any] = []
    yield opened
    for client in reversed(opened):
        with contextlib.suppress(Exception):  # closing must not hide the test's own failure
            await client.close()


# --- §11.1 ShareConsumerTransactionTest ----------------------------------------------------------


async def test_row1_commit_accept(kemu: InProcessKemu, closing: list[Any]) -> None:
    """Row 1, testTransactionalShareAckCommitAccept."""
    name = "s1-commit-accept"
    consumer, producer = await consumer_and_producer(kemu, closing, name)
    [record] = await poll_until(consumer, 1)
    assert values([record]) == [(0, b"first", 1)]
    consumer.acknowledge(record, AcknowledgeType.ACCEPT)
    acknowledgements = consumer.acknowledgements_for_transaction()
    assert not acknowledgements.is_empty()
    assert list(acknowledgements.acknowledgements) == [record.topic_id_partition]
    producer.begin_transaction()
    await producer.send_share_acknowledgements_to_transaction(
        acknowledgements, consumer.share_group_metadata()
    )
    await producer.commit_transaction()
    assert await wait_for_lag(kemu, name, name, 0) == 0
    assert await consumer.poll(0.5) == []
    assert share_state(decode_share_state(kemu), name, record)  # the state topic holds it


async def test_row2_commit_with_output_record_in_same_transaction(
    kemu: InProcessKemu, closing: list[Any]
) -> None:
    """Row 2, testTransactionalShareAckCommitWithOutputRecordInSameTransaction."""
    name = "s2-commit-output"
    consumer, producer = await consumer_and_producer(kemu, closing, name, output=True)
    [record] = await poll_until(consumer, 1)
    producer.begin_transaction()
    sent = await producer.send(f"{name}-out", b"derived-first", partition=0)
    await stage(producer, consumer, record)
    await producer.commit_transaction()
    async with Consumer(kemu.bootstrap) as reader:
        await reader.assign([(f"{name}-out", 0)])
        output = await reader.poll(1.0)
    assert [(r.offset, r.value) for r in output] == [(sent.offset, b"derived-first")]
    assert sent.offset == 0
    assert await wait_for_lag(kemu, name, name, 0) == 0
    assert await consumer.poll(0.5) == []


@pytest.mark.parametrize("which", ["future", "stale"])
async def test_row3_rejects_fenced_member_epochs(
    kemu: InProcessKemu, closing: list[Any], which: str
) -> None:
    """Row 3 (and 3'), testTransactionalShareAckRejectsFencedMemberEpochs: the member's epoch
    + 1 ("future") and - 2 ("stale", 0 mapped to -1) are refused (STALE_MEMBER_EPOCH), raised as
    CommitFailedError; the producer aborts and the record is still to be done (lag 1)."""
    name = f"s3-fenced-member-{which}"
    consumer, producer = await consumer_and_producer(kemu, closing, name)
    [record] = await poll_until(consumer, 1)
    consumer.acknowledge(record, AcknowledgeType.ACCEPT)
    metadata = consumer.share_group_metadata()
    epoch = metadata.member_epoch + 1 if which == "future" else metadata.member_epoch - 2
    wrong = dataclasses.replace(metadata, member_epoch=-1 if epoch == 0 else epoch)
    producer.begin_transaction()
    with pytest.raises(CommitFailedError) as refused:
        await producer.send_share_acknowledgements_to_transaction(
            consumer.acknowledgements_for_transaction(), wrong
        )
    assert refused.value.error == ErrorCode.stale_member_epoch  # spec Q7
    await producer.abort_transaction()
    assert await wait_for_lag(kemu, name, name, 1) == 1
    assert state_of(decode_share_state(kemu), name, record) != TX_PENDING  # nothing was staged


async def test_row4_commit_across_multiple_polls(kemu: InProcessKemu, closing: list[Any]) -> None:
    """Row 4, testTransactionalShareAckCommitAcrossMultiplePolls."""
    name = "s4-multiple-polls"
    consumer, producer = await consumer_and_producer(kemu, closing, name)
    producer.begin_transaction()
    [first] = await poll_until(consumer, 1)
    tp = first.topic_id_partition
    acks = await stage(producer, consumer, first)
    assert acks.acknowledgements == {tp: [ShareAcknowledgementBatch(0, 0, (1,))]}
    produce(kemu, name, [b"second"])
    [second] = await poll_until(consumer, 1)
    assert values([second]) == [(1, b"second", 1)]
    acks = await stage(producer, consumer, second)
    assert acks.acknowledgements == {tp: [ShareAcknowledgementBatch(1, 1, (1,))]}
    await producer.commit_transaction()
    assert await wait_for_lag(kemu, name, name, 0) == 0
    assert await consumer.poll(0.5) == []


async def test_row5_abort_accept(kemu: InProcessKemu, closing: list[Any]) -> None:
    """Row 5, testTransactionalShareAckAbortAccept: lag stays 1, offset 0 comes back."""
    name = "s5-abort-accept"
    consumer, producer = await consumer_and_producer(kemu, closing, name)
    [record] = await poll_until(consumer, 1)
    producer.begin_transaction()
    await stage(producer, consumer, record)
    await producer.abort_transaction()
    assert values(await poll_until(consumer, 1)) == [(0, b"first", 2)]
    assert await lag(kemu, name, name) == 1


async def test_row6_abort_with_output_record_in_same_transaction(
    kemu: InProcessKemu, closing: list[Any]
) -> None:
    """Row 6, testTransactionalShareAckAbortWithOutputRecordInSameTransaction."""
    name = "s6-abort-output"
    consumer, producer = await consumer_and_producer(kemu, closing, name, output=True)
    [record] = await poll_until(consumer, 1)
    producer.begin_transaction()
    await producer.send(f"{name}-out", b"derived-first", partition=0)
    await stage(producer, consumer, record)
    await producer.abort_transaction()
    assert await committed_values(kemu, f"{name}-out", wait=0.5) == []
    assert values(await poll_until(consumer, 1)) == [(0, b"first", 2)]
    assert await lag(kemu, name, name) == 1


async def test_row7_commit_reject(kemu: InProcessKemu, closing: list[Any]) -> None:
    """Row 7, testTransactionalShareAckCommitReject."""
    name = "s7-commit-reject"
    consumer, producer = await consumer_and_producer(kemu, closing, name)
    [record] = await poll_until(consumer, 1)
    producer.begin_transaction()
    await stage(producer, consumer, record, kind=AcknowledgeType.REJECT)
    await producer.commit_transaction()
    assert await wait_for_lag(kemu, name, name, 0) == 0
    assert await consumer.poll(0.5) == []


DLQ_BUILT = "errors.deadletterqueue.topic.name.prefix" in BROKER_CONFIGS


@pytest.mark.skipif(
    not DLQ_BUILT,
    reason="share-group DLQ (KIP-1191) not in kemu yet: the broker config "
    "errors.deadletterqueue.topic.name.prefix is unknown to kemu",
)
async def test_row8_commit_reject_with_dlq_enabled(kemu: InProcessKemu, closing: list[Any]) -> None:
    """Row 8, testTransactionalShareAckCommitRejectWithDlqEnabled: a committed REJECT goes to
    the group's DLQ topic once (ARCHIVING, then ARCHIVED); TX_PENDING until the commit."""
    name = "s8-reject-dlq"
    dlq = f"dlq.{name}"
    create_topic(kemu, name)
    create_topic(kemu, dlq, configs={"errors.deadletterqueue.group.enable": "true"})
    set_group_configs(kemu, name, **{"errors.deadletterqueue.topic.name": dlq})
    produce(kemu, name, [b"first"])
    consumer = await consumer_for(kemu, name)
    producer = await producer_for(kemu, f"tx-{name}")
    closing += [consumer, producer]
    [record] = await poll_until(consumer, 1)
    producer.begin_transaction()
    await stage(producer, consumer, record, kind=AcknowledgeType.REJECT)
    assert latest_record_state(decode_share_state(kemu), name, record) == TX_PENDING
    await producer.commit_transaction()
    assert await consumer.poll(0.5) == []
    assert await wait_for_lag(kemu, name, name, 0) == 0
    for _ in range(50):
        dead = await committed_values(kemu, dlq, wait=0.3)
        if dead:
            break
    assert len(dead) == 1
    assert state_of(decode_share_state(kemu), name, record) in (ARCHIVED, COMPLETE)


async def test_row9_commit_subset_accept(kemu: InProcessKemu, closing: list[Any]) -> None:
    """Row 9, testTransactionalShareAckCommitSubsetAccept: only [1, 1] ACCEPT is committed;
    offsets 0 and 2 stay in flight (lag 2)."""
    name = "s9-subset-accept"
    consumer, producer = await consumer_and_producer(kemu, closing, name, inputs=[b"a", b"b", b"c"])
    records = await poll_until(consumer, 3)
    assert [r.offset for r in records] == [0, 1, 2]
    subset = ShareAcknowledgements(
        {records[1].topic_id_partition: [ShareAcknowledgementBatch(1, 1, (1,))]}
    )
    producer.begin_transaction()
    await producer.send_share_acknowledgements_to_transaction(
        subset, consumer.share_group_metadata()
    )
    await producer.commit_transaction()
    assert await wait_for_lag(kemu, name, name, 2) == 2
    # offset 0 is in flight below it, so the committed outcome is kept as a state
    assert state_of(decode_share_state(kemu), name, records[1]) == ACKNOWLEDGED


def spanning_group(topic_id: Any, partitions: int, prefix: str) -> str:
    """A group whose share partitions of the topic hash to every ``__share_group_state``
    partition (the spec's IT picks source partitions; with kemu's random topic ids the group
    name is the free choice)."""
    for attempt in range(1000):
        group = f"{prefix}-{attempt}"
        covered = {
            partition_for(SharePartitionKey(group, topic_id, p), STATE_PARTITIONS)
            for p in range(partitions)
        }
        if covered == set(range(STATE_PARTITIONS)):
            return group
    raise AssertionError("no group spans every state partition")


async def test_row10_commit_across_multiple_share_state_partitions(
    kemu: InProcessKemu, closing: list[Any]
) -> None:
    """Row 10, testTransactionalShareAckCommitAcrossMultipleShareStatePartitions: one record per
    partition of a 12-partition topic whose share partitions cover every state partition (0..2),
    all ACCEPTed in one TxnShareAcknowledge round and committed: lag 0 on every partition."""
    topic = "s10-state-partitions"
    create_topic(kemu, topic, 12)
    async with Admin(kemu.bootstrap) as admin:
        topic_id = (await admin.cluster.topic(topic)).topic_id
    group = spanning_group(topic_id, 12, "s10")
    set_group_configs(kemu, group)
    for partition in range(12):
        produce(kemu, topic, [f"p{partition}".encode()], partition)
    consumer = await consumer_for(kemu, group, topic)
    producer = await producer_for(kemu, f"tx-{group}")
    closing += [consumer, producer]
    # Explicit mode: each poll's records are acknowledged before the next poll, and taken for
    # the transaction at once (else the next ShareFetch would carry them).
    records: list[ShareRecord] = []
    taken: dict[TopicIdPartition, list[ShareAcknowledgementBatch]] = {}
    for _ in range(60):
        polled = await consumer.poll(0.3)
        for record in polled:
            consumer.acknowledge(record, AcknowledgeType.ACCEPT)
        for tp, batches in consumer.acknowledgements_for_transaction().acknowledgements.items():
            taken.setdefault(tp, []).extend(batches)
        records += polled
        if len(records) >= 12:
            break
    assert sorted(r.partition for r in records) == list(range(12))
    assert len(taken) == 12
    producer.begin_transaction()
    await producer.send_share_acknowledgements_to_transaction(  # one call with all of them
        ShareAcknowledgements(taken), consumer.share_group_metadata()
    )
    await producer.commit_transaction()
    assert await wait_for_lag(kemu, group, topic, 0) == 0
    assert await partition_lags(kemu, group, topic) == {p: 0 for p in range(12)}
    assert await consumer.poll(0.5) == []
    states = [e["state"] for e in decode_share_state(kemu) if "state" in e]
    ours = [s for s in states if s["groupId"] == group]
    assert {s["statePartition"] for s in ours} == set(range(STATE_PARTITIONS))
    assert all(s["startOffset"] == 1 for s in ours)


async def remote_partition(kemu: KemuProcess | InProcessKemu, topic: str) -> tuple[str, int]:
    """A group and a partition of ``topic`` whose leader is not the leader of its share-state
    partition (the share coordinator FindCoordinator names for ``group:topicId:partition``)."""
    cluster = ClusterClient(kemu.bootstrap)
    try:
        info = await cluster.topic(topic)
        for attempt in range(20):
            group = topic if attempt == 0 else f"{topic}-{attempt}"
            for partition, leader in sorted(info.leaders.items()):
                key = coordinator_key(SharePartitionKey(group, info.topic_id, partition))
                if await cluster.coordinator(FIND_COORDINATOR_SHARE, key) != leader:
                    return group, partition
    finally:
        await cluster.close()
    raise AssertionError("every partition's share coordinator is its leader")


async def remote_source(kemu: KemuProcess | InProcessKemu, name: str) -> tuple[str, int]:
    """Topic ``name`` of 3 partitions, a group and partition of it whose share coordinator is
    remote (``remote_partition``), the group reading from the earliest offset, and ``b"first"``
    at offset 0 of the partition."""
    create_topic(kemu, name, 3)
    group, partition = await remote_partition(kemu, name)
    set_group_configs(kemu, group)
    produce(kemu, name, [b"first"], partition)
    return group, partition


async def remote_coordinator_scenario(
    kemu: KemuProcess | InProcessKemu, closing: list[Any], name: str, commit: bool
) -> tuple[str, ShareConsumer, ShareRecord]:
    group, partition = await remote_source(kemu, name)
    consumer = await consumer_for(kemu, group, name)
    producer = await producer_for(kemu, f"tx-{name}")
    closing += [consumer, producer]
    [record] = await poll_until(consumer, 1)
    assert (record.partition, record.offset) == (partition, 0)
    producer.begin_transaction()
    await stage(producer, consumer, record)
    decoded = decode_share_state(kemu)
    assert state_of(decoded, group, record) == TX_PENDING
    assert latest_record_state(decoded, group, record) == TX_PENDING
    assert await consumer.poll(0.5) == []
    if commit:
        await producer.commit_transaction()
    else:
        await producer.abort_transaction()
    return group, consumer, record


async def test_row11_commit_accept_with_remote_share_coordinator(
    kemu: InProcessKemu, closing: list[Any]
) -> None:
    """Row 11, testTransactionalShareAckCommitAcceptWithRemoteShareCoordinator: the source
    partition's leader is not its share-state partition's leader. After the commit the latest
    record naming offset 0 says ACKNOWLEDGED, and the start offset moved past it."""
    name = "s11-remote-commit"
    group, consumer, record = await remote_coordinator_scenario(kemu, closing, name, commit=True)
    assert await wait_for_lag(kemu, group, name, 0) == 0
    decoded = decode_share_state(kemu)
    assert latest_record_state(decoded, group, record) == ACKNOWLEDGED
    assert state_of(decoded, group, record) == COMPLETE
    assert await consumer.poll(0.5) == []


async def test_row12_abort_accept_with_remote_share_coordinator(
    kemu: InProcessKemu, closing: list[Any]
) -> None:
    """Row 12, testTransactionalShareAckAbortAcceptWithRemoteShareCoordinator."""
    name = "s12-remote-abort"
    group, consumer, record = await remote_coordinator_scenario(kemu, closing, name, commit=False)
    assert latest_record_state(decode_share_state(kemu), group, record) == AVAILABLE
    assert await lag(kemu, group, name) == 1
    assert values(await poll_until(consumer, 1)) == [(0, b"first", 2)]


async def failover_scenario(
    kemu: KemuProcess, closing: list[Any], name: str, *, commit: bool, how: str
) -> None:
    """Stage offset 0 (TX_PENDING), close the consumer, take kemu down (``how``: SIGKILL or a
    clean stop) and start it again from its data dir; a new consumer gets nothing while the
    transaction is open; the surviving producer ends it."""
    group, _ = await remote_source(kemu, name)
    consumer = await consumer_for(kemu, group, name)
    producer = await producer_for(kemu, f"tx-{name}")
    closing.append(producer)
    [record] = await poll_until(consumer, 1)
    producer.begin_transaction()
    await stage(producer, consumer, record)
    await consumer.close()
    if how == "sigkill":
        kemu.kill()
    else:
        kemu.stop()
    kemu.start()
    assert state_of(decode_share_state(kemu), group, record) == TX_PENDING
    successor = await consumer_for(kemu, group, name)
    closing.append(successor)
    assert await successor.poll(1.0) == []  # pending: not delivered
    if commit:
        await producer.commit_transaction()
        assert await wait_for_lag(kemu, group, name, 0) == 0
        decoded = decode_share_state(kemu)
        assert latest_record_state(decoded, group, record) == ACKNOWLEDGED
        assert state_of(decoded, group, record) == COMPLETE
        assert await successor.poll(0.5) == []
    else:
        await producer.abort_transaction()
        assert values(await poll_until(successor, 1)) == [(0, b"first", 2)]
        assert latest_record_state(decode_share_state(kemu), group, record) == AVAILABLE
        assert await lag(kemu, group, name) == 1


@pytest.mark.process  # durable_kemu: SIGKILLed or stopped, started again
async def test_row13_commit_after_source_leader_failover_with_pending_state(
    durable_kemu: KemuProcess, closing: list[Any]
) -> None:
    """Row 13, testTransactionalShareAckCommitAfterSourceLeaderFailoverWithPendingState.

    The whole-process variant (one broker stopped alone: ``test_kip1289_failover.py``): the
    whole kemu is SIGKILLed and started again from its data dir: the source partition's
    leader (and every other broker) comes back with only what it had made durable, the
    TX_PENDING state, and must learn the outcome from the transaction's markers. The producer
    survives (its producer id and epoch, its transaction open in ``__transaction_state``)."""
    await failover_scenario(
        durable_kemu, closing, "s13-source-failover-commit", commit=True, how="sigkill"
    )


@pytest.mark.process  # durable_kemu: SIGKILLed or stopped, started again
async def test_row14_abort_after_source_leader_failover_with_pending_state(
    durable_kemu: KemuProcess, closing: list[Any]
) -> None:
    """Row 14, testTransactionalShareAckAbortAfterSourceLeaderFailoverWithPendingState; kemu is
    SIGKILLed and restarted as in row 13 (what differs is said there)."""
    await failover_scenario(
        durable_kemu, closing, "s14-source-failover-abort", commit=False, how="sigkill"
    )


@pytest.mark.process  # durable_kemu: SIGKILLed or stopped, started again
async def test_row15_commit_after_share_coordinator_failover_with_pending_state(
    durable_kemu: KemuProcess, closing: list[Any]
) -> None:
    """Row 15, testTransactionalShareAckCommitAfterShareCoordinatorFailoverWithPendingState.

    The whole-process variant (one broker stopped alone: ``test_kip1289_failover.py``). Kafka's
    IT shuts the broker down cleanly, so here the whole kemu is stopped cleanly (SIGTERM) and
    started again from its data dir; the share coordinator replays its state partitions,
    TX_PENDING included, and resolves it from the transaction's markers. The source
    partition's leader is not the state partition's leader, as in row 11."""
    await failover_scenario(
        durable_kemu, closing, "s15-coordinator-failover-commit", commit=True, how="clean"
    )


@pytest.mark.process  # durable_kemu: SIGKILLed or stopped, started again
async def test_row16_abort_after_share_coordinator_failover_with_pending_state(
    durable_kemu: KemuProcess, closing: list[Any]
) -> None:
    """Row 16, testTransactionalShareAckAbortAfterShareCoordinatorFailoverWithPendingState;
    a clean stop and restart as in row 15 (what differs is said there)."""
    await failover_scenario(
        durable_kemu, closing, "s16-coordinator-failover-abort", commit=False, how="clean"
    )


# --- §11.2 ShareGroupTransactionIntegrationTest --------------------------------------------------


def restart(kemu: KemuProcess) -> None:
    """SIGKILL kemu and start it again from its data dir (every broker goes down at once)."""
    kemu.kill()
    kemu.start()


async def pipeline(
    kemu: KemuProcess | InProcessKemu,
    closing: list[Any],
    name: str,
    restart_before: str | None = None,
    down: Callable[[ShareRecord], Awaitable[None]] | None = None,
) -> None:
    """Source and sink with 3 partitions led by 3 different brokers, 2 records per source
    partition, a consumer polling one record at a time. Per record: begin, send its value to the
    same sink partition, ACCEPT, stage; the first transaction aborts, every later one commits.
    ``restart_before``: "abort" takes kemu down after the first stage and before its abort,
    "commit" after the next stage and before the first commit (the consumer is closed before and
    a new one polls after, as Kafka's failover ITs do); ``down``, when given, does that instead
    of a restart of the whole kemu (it gets the record just staged)."""
    create_topic(kemu, name, 3)
    create_topic(kemu, f"{name}-out", 3)
    set_group_configs(kemu, name)
    async with Admin(kemu.bootstrap) as admin:
        for topic in (name, f"{name}-out"):
            assert len(set((await admin.cluster.topic(topic)).leaders.values())) == 3
    inputs = {(p, i): f"{name}-{p}-{i}".encode() for p in range(3) for i in range(2)}
    for p in range(3):
        produce(kemu, name, [inputs[(p, 0)], inputs[(p, 1)]], p)
    consumer = await consumer_for(kemu, name, max_poll_records=1)
    producer = await producer_for(kemu, f"tx-{name}")
    closing += [consumer, producer]
    committed: list[ShareRecord] = []
    aborted: ShareRecord | None = None
    transactions = 0
    for _ in range(200):
        if len(committed) == 6:
            break
        for record in await consumer.poll(0.3):
            transactions += 1
            producer.begin_transaction()
            await producer.send(f"{name}-out", record.value, partition=record.partition)
            await stage(producer, consumer, record)
            if (restart_before, transactions) in (("abort", 1), ("commit", 2)):
                await consumer.close()
                if down is None:
                    restart(kemu)
                else:
                    await down(record)
                consumer = await consumer_for(kemu, name, max_poll_records=1)
                closing.append(consumer)
            if transactions == 1:
                await producer.abort_transaction()
                aborted = record
            else:
                await producer.commit_transaction()
                committed.append(record)
    done = sorted((r.partition, r.offset) for r in committed)
    assert done == sorted(set(done)) and len(done) == 6  # 6 distinct inputs, each once
    assert sorted(r.value or b"" for r in committed) == sorted(inputs.values())
    assert aborted is not None
    [again] = [
        r for r in committed if (r.partition, r.offset) == (aborted.partition, aborted.offset)
    ]
    # the aborted input came back, then committed: delivered at least twice. Where a consumer
    # is closed mid-run, its fetch ahead (as Java's) may have taken the record once more before
    # the close released it; the machine's load decides, so 3 is as right as 2.
    assert again.delivery_count >= 2
    assert sorted(await committed_values(kemu, f"{name}-out")) == sorted(inputs.values())
    assert await wait_for_lag(kemu, name, name, 0) == 0


async def test_commit_and_abort_across_three_source_leaders(
    kemu: InProcessKemu, closing: list[Any]
) -> None:
    """§11.2 testCommitAndAbortAcrossThreeSourceLeaders."""
    await pipeline(kemu, closing, "p1-three-leaders")


@pytest.mark.process  # durable_kemu: SIGKILLed or stopped, started again
async def test_abort_after_source_leader_shutdown(
    durable_kemu: KemuProcess, closing: list[Any]
) -> None:
    """§11.2 testAbortAfterSourceLeaderShutdown, the whole-process variant: kemu is SIGKILLed
    and restarted from its data dir between the first stage and its abort (one broker stopped
    alone: ``test_kip1289_failover.py``)."""
    await pipeline(durable_kemu, closing, "p2-shutdown-abort", restart_before="abort")


@pytest.mark.process  # durable_kemu: SIGKILLed or stopped, started again
async def test_commit_after_source_leader_shutdown(
    durable_kemu: KemuProcess, closing: list[Any]
) -> None:
    """§11.2 testCommitAfterSourceLeaderShutdown; the whole kemu is SIGKILLed and restarted
    between the stage of the first transaction after the abort and its commit (see above)."""
    await pipeline(durable_kemu, closing, "p3-shutdown-commit", restart_before="commit")


# --- §11.5 emulator additions and §12 decisions -------------------------------------------------


async def test_lock_expiry_does_not_touch_tx_pending(
    kemu: InProcessKemu, closing: list[Any]
) -> None:
    """§11.5: with a 1 s acquisition lock, a staged record outlives several lock durations
    without coming back; the commit completes it (lag 0)."""
    name = "e-lock-expiry"
    consumer, producer = await consumer_and_producer(
        kemu, closing, name, group_configs={"share.record.lock.duration.ms": "1000"}
    )
    for _ in range(5):  # a loaded machine may let the 1 s lock run out before the stage
        [record] = await poll_until(consumer, 1)
        producer.begin_transaction()
        try:
            await stage(producer, consumer, record)
            break
        except KafkaError as error:
            assert error.error == ErrorCode.invalid_record_state, error
            await producer.abort_transaction()
    else:
        raise AssertionError("never staged within the lock")
    await asyncio.sleep(3)
    assert await consumer.poll(0) == []
    assert await consumer.poll(0.5) == []
    await producer.commit_transaction()
    assert await wait_for_lag(kemu, name, name, 0) == 0


async def test_transaction_timeout_aborts_tx_pending(
    kemu: InProcessKemu, closing: list[Any]
) -> None:
    """§11.5: a transaction of 2 s never ended: the coordinator aborts it and the staged record
    is delivered again (lag 1)."""
    name = "e-txn-timeout"
    consumer, producer = await consumer_and_producer(
        kemu, closing, name, output=True, transaction_timeout_ms=2000
    )
    [record] = await poll_until(consumer, 1)
    producer.begin_transaction()
    await producer.send(f"{name}-out", b"derived-first", partition=0)
    await stage(producer, consumer, record)
    assert values(await poll_until(consumer, 1, rounds=100)) == [(0, b"first", 2)]
    assert await lag(kemu, name, name) == 1
    assert await committed_values(kemu, f"{name}-out", wait=0.5) == []


async def test_zombie_producer_is_fenced(kemu: InProcessKemu, closing: list[Any]) -> None:
    """§11.5: a second producer with the same transactional id aborts the first one's staged
    acknowledgements (the record comes back); the first one's TxnShareAcknowledge and EndTxn
    are PRODUCER_FENCED."""
    name = "e-zombie"
    consumer, zombie = await consumer_and_producer(kemu, closing, name)
    [record] = await poll_until(consumer, 1)
    zombie.begin_transaction()
    await stage(zombie, consumer, record)
    zombie_id, zombie_epoch = zombie.producer_id, zombie.producer_epoch
    successor = await producer_for(kemu, f"tx-{name}")
    closing.append(successor)
    [again] = await poll_until(consumer, 1)
    assert values([again]) == [(0, b"first", 2)]
    consumer.acknowledge(again, AcknowledgeType.ACCEPT)
    acknowledgements = consumer.acknowledgements_for_transaction()
    with pytest.raises(ProducerFencedError):  # over the wire: the zombie still thinks it is in
        await zombie.send_share_acknowledgements_to_transaction(
            acknowledgements, consumer.share_group_metadata()
        )
    coordinator = await zombie.cluster.coordinator(1, f"tx-{name}")
    ended = await zombie.cluster.call(
        coordinator,
        END_TXN,
        5,
        transactional_id=f"tx-{name}",
        producer_id=zombie_id,
        producer_epoch=zombie_epoch,
        committed=True,
    )
    assert ended.error_code == ErrorCode.producer_fenced
    assert state_of(decode_share_state(kemu), name, again) != TX_PENDING  # nothing staged
    successor.begin_transaction()
    await successor.send_share_acknowledgements_to_transaction(
        acknowledgements, consumer.share_group_metadata()
    )
    await successor.commit_transaction()
    assert await wait_for_lag(kemu, name, name, 0) == 0


async def test_wrong_member_is_invalid_record_state(
    kemu: InProcessKemu, closing: list[Any]
) -> None:
    """§11.5: member B stages a record member A acquired: INVALID_RECORD_STATE, nothing staged
    (A then carries it through its own transaction)."""
    name = "e-wrong-member"
    setup(kemu, name)
    produce(kemu, name, [b"first"])
    owner = await consumer_for(kemu, name)
    other = await consumer_for(kemu, name)
    producer = await producer_for(kemu, f"tx-{name}")
    closing += [owner, other, producer]
    [record] = await poll_until(owner, 1)
    # other's join bumped the group epoch; owner moves to it on its next heartbeat. Staging with
    # owner's epoch before that answer arrives is STALE_MEMBER_EPOCH (seen on a loaded machine).
    await epochs_agree(owner, other)
    owner.acknowledge(record, AcknowledgeType.ACCEPT)
    acknowledgements = owner.acknowledgements_for_transaction()
    producer.begin_transaction()
    with pytest.raises(KafkaError) as refused:
        await producer.send_share_acknowledgements_to_transaction(
            acknowledgements, other.share_group_metadata()
        )
    assert refused.value.error == ErrorCode.invalid_record_state
    await producer.abort_transaction()
    assert state_of(decode_share_state(kemu), name, record) != TX_PENDING
    producer.begin_transaction()
    await producer.send_share_acknowledgements_to_transaction(
        acknowledgements, owner.share_group_metadata()
    )
    await producer.commit_transaction()
    assert await wait_for_lag(kemu, name, name, 0) == 0
    assert await other.poll(0.5) == []


@pytest.mark.parametrize("kind", [AcknowledgeType.RELEASE, AcknowledgeType.RENEW])
async def test_release_or_renew_is_invalid_request(
    kemu: InProcessKemu, closing: list[Any], kind: AcknowledgeType
) -> None:
    """§11.5: RELEASE (2) or RENEW (4) in TxnShareAcknowledge: INVALID_REQUEST, nothing staged
    (the record is still the member's to acknowledge)."""
    name = f"e-{kind.name.lower()}"
    consumer, producer = await consumer_and_producer(kemu, closing, name)
    [record] = await poll_until(consumer, 1)
    hand_built = ShareAcknowledgements(
        {record.topic_id_partition: [ShareAcknowledgementBatch(0, 0, (int(kind),))]}
    )
    producer.begin_transaction()
    with pytest.raises(KafkaError) as refused:
        await producer.send_share_acknowledgements_to_transaction(
            hand_built, consumer.share_group_metadata()
        )
    assert refused.value.error == ErrorCode.invalid_request
    await producer.abort_transaction()
    producer.begin_transaction()
    await stage(producer, consumer, record)
    await producer.commit_transaction()
    assert await wait_for_lag(kemu, name, name, 0) == 0


async def test_feature_off_the_keys_are_absent(kemu_inprocess: InProcessKemu) -> None:
    """§11.5: without ``kemu.kip1289.enable`` ApiVersions lists neither key 95 nor 96 and
    finalizes share.version below 3; the reference client refuses to send them."""
    cluster = ClusterClient(kemu_inprocess.bootstrap)
    try:
        await cluster.start()
        for node in (1, 2, 3):
            features = (await cluster.connection(node)).features
            assert TXN_SHARE_ACKNOWLEDGE not in features.versions
            assert ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN not in features.versions
            assert features.finalized.get("share.version", 0) < 3
    finally:
        await cluster.close()
    create_topic(kemu_inprocess, "off")
    producer = await producer_for(kemu_inprocess, "tx-off")
    try:
        topic_id = uuid.uuid4()
        acks = ShareAcknowledgements(
            {TopicIdPartition(topic_id, "off", 0): [ShareAcknowledgementBatch(0, 0, (1,))]}
        )
        producer.begin_transaction()
        with pytest.raises(KafkaError) as refused:
            await producer.send_share_acknowledgements_to_transaction(
                acks, ShareGroupMetadata("off", "member", 1)
            )
        assert refused.value.error == ErrorCode.unsupported_version
    finally:
        await producer.close()


async def test_identical_restage_is_none(kemu: InProcessKemu, closing: list[Any]) -> None:
    """Spec Q5: the same acknowledgements staged again by the same producer id/epoch and member
    (a client retrying after a lost answer) are NONE and change nothing; the commit completes."""
    name = "e-restage"
    consumer, producer = await consumer_and_producer(kemu, closing, name)
    [record] = await poll_until(consumer, 1)
    producer.begin_transaction()
    acknowledgements = await stage(producer, consumer, record)
    before = share_state(decode_share_state(kemu), name, record)
    await producer.send_share_acknowledgements_to_transaction(
        acknowledgements, consumer.share_group_metadata()
    )
    after = share_state(decode_share_state(kemu), name, record)
    assert after["stateBatches"] == before["stateBatches"]
    assert before["stateBatches"][0]["deliveryState"] == TX_PENDING
    await producer.commit_transaction()
    assert await wait_for_lag(kemu, name, name, 0) == 0


async def abort_twice(
    kemu: KemuProcess | InProcessKemu, closing: list[Any], name: str
) -> ShareConsumer:
    """Group ``share.delivery.count.limit=2``: deliveries 1 and 2 are both staged and aborted."""
    consumer, producer = await consumer_and_producer(
        kemu, closing, name, group_configs={"share.delivery.count.limit": "2"}
    )
    for delivery in (1, 2):
        [record] = await poll_until(consumer, 1)
        assert values([record]) == [(0, b"first", delivery)]
        producer.begin_transaction()
        await stage(producer, consumer, record)
        await producer.abort_transaction()
    return consumer


async def test_abort_at_the_delivery_limit_archives(
    kemu: InProcessKemu, closing: list[Any]
) -> None:
    """Spec Q6 (``kemu.kip1289.abort.respects.delivery.limit=true``, the default): the abort of
    the last allowed delivery archives the record, as a RELEASE would."""
    name = "e-limit-archives"
    consumer = await abort_twice(kemu, closing, name)
    assert await consumer.poll(1.0) == []
    assert await wait_for_lag(kemu, name, name, 0) == 0
    [state] = [
        e["state"]
        for e in decode_share_state(kemu)
        if "state" in e and e["state"]["groupId"] == name
    ]
    batches = {(b["firstOffset"], b["deliveryState"]) for b in state["stateBatches"]}
    assert state["startOffset"] == 1 or (0, ARCHIVED) in batches


@pytest.fixture(scope="module")
def pr_kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuProcess]:
    """The draft PR's abort: AVAILABLE whatever the delivery count."""
    process = start(
        tmp_path_factory, "kip1289-pr-abort", "kemu.kip1289.abort.respects.delivery.limit=false"
    )
    yield process
    process.stop()


async def test_abort_at_the_delivery_limit_redelivers_with_the_pr_flag(
    pr_kemu: KemuProcess | InProcessKemu, closing: list[Any]
) -> None:
    """Spec Q6 with ``kemu.kip1289.abort.respects.delivery.limit=false``: the record comes back
    a third time, past the limit, as the draft PR makes it."""
    name = "e-limit-redelivers"
    consumer = await abort_twice(pr_kemu, closing, name)
    assert values(await poll_until(consumer, 1)) == [(0, b"first", 3)]
    assert await lag(pr_kemu, name, name) == 1
