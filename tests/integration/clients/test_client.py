"""kemu.client against a 3-broker kemu (in the test's process) with KIP-1289 enabled.

Share consumption with explicit and implicit acknowledgements; the consume-transform-produce
loop with the acknowledgements in the producer's transaction (commit: the output is visible
read_committed and the group's lag is 0; abort: no output and the record comes back with the next
delivery count); a stale member epoch raised as CommitFailedError; a fenced producer as
ProducerFencedError; both KIP-1289 wire forms. Input records are written by confluent-kafka, so
the client's share consumer reads batches it did not write itself.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import dataclasses
import io
import re
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.broker.share.states import RecordState
from kemu.client import (
    ONE_RPC,
    TWO_RPC,
    AcknowledgeType,
    Admin,
    CommitFailedError,
    Consumer,
    IllegalStateError,
    KafkaError,
    ProducerFencedError,
    ShareConsumer,
    ShareRecord,
    TransactionalProducer,
)
from kemu.client.producer import ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN
from kemu.coordinator.share.persister import PersistedBatch, SharePartitionKey
from kemu.coordinator.share.service import share_coordinator
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.testing.inprocess import InProcessKemu
from tests import REPO_ROOT
from tests.integration.clients import rebalance, txn_offsets, txn_timeout

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    process = InProcessKemu(
        brokers=3,
        overrides=[
            "kemu.kip1289.enable=true",
            "share.coordinator.state.topic.num.partitions=3",
            # As Kafka, a share member's partitions come with a heartbeat after its first.
            "group.share.min.heartbeat.interval.ms=500",
            "group.share.heartbeat.interval.ms=500",
        ],
        log_path=tmp_path_factory.mktemp("kemu-client") / "kemu.log",
    ).start()
    yield process
    process.stop()


def create_topics(kemu: InProcessKemu, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 3) for name, partitions in topics])
    for future in futures.values():
        future.result(timeout=15)


def produce(kemu: InProcessKemu, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(15) == 0


async def joined(kemu: InProcessKemu, group: str, topic: str, mode: str) -> ShareConsumer:
    """A member that has its partitions and has opened its share session before anything is
    written (share.auto.offset.reset is latest). As Kafka 4.4, the first heartbeat assigns
    nothing; a later one brings the partitions once their share state is initialized."""
    consumer = ShareConsumer(kemu.bootstrap, group, acknowledgement_mode=mode)
    await consumer.subscribe([topic])
    for _ in range(50):
        assert await consumer.poll(0.3) == []
        if consumer._assignment:  # the test looks inside: the client has no public accessor
            break
    assert consumer._assignment, "no share partitions assigned"
    assert await consumer.poll(0.3) == []  # the session is open on the assigned partitions
    return consumer


async def poll_until(consumer: ShareConsumer, count: int) -> list[ShareRecord]:
    records: list[ShareRecord] = []
    for _ in range(50):
        records += await consumer.poll(0.3)
        if len(records) >= count:
            break
    return records


async def wait_for_lag(kemu: InProcessKemu, group: str, topic: str, expected: int) -> int:
    async with Admin(kemu.bootstrap) as admin:
        for _ in range(100):
            lag = await admin.share_group_lag(group, topic)
            if lag == expected:
                return lag
            await asyncio.sleep(0.1)
        return lag


async def committed_values(kemu: InProcessKemu, topic: str, wait: float = 1.0) -> list[bytes]:
    async with Consumer(kemu.bootstrap) as reader:
        await reader.assign_topic(topic)
        return [r.value or b"" for r in await reader.poll(wait)]


async def test_share_consumption_with_explicit_acknowledgements(kemu: InProcessKemu) -> None:
    create_topics(kemu, ("explicit", 1))
    consumer = await joined(kemu, "explicit", "explicit", "explicit")
    try:
        produce(kemu, "explicit", [b"a", b"b", b"c"])
        records = await poll_until(consumer, 3)
        assert [(r.offset, r.value, r.delivery_count) for r in records] == [
            (0, b"a", 1),
            (1, b"b", 1),
            (2, b"c", 1),
        ]
        with pytest.raises(IllegalStateError):
            await consumer.poll(0)  # explicit mode: the previous poll is not acknowledged
        consumer.acknowledge(records[0], AcknowledgeType.ACCEPT)
        consumer.acknowledge(records[1], AcknowledgeType.RELEASE)
        consumer.acknowledge(records[2], AcknowledgeType.REJECT)
        results = await consumer.commit()
        assert list(results.values()) == [None]
        again = await poll_until(consumer, 1)
        assert [(r.offset, r.value, r.delivery_count) for r in again] == [(1, b"b", 2)]
        consumer.acknowledge(again[0])  # ACCEPT, piggy-backed on the next fetch
        assert await consumer.poll(0.3) == []
        assert await wait_for_lag(kemu, "explicit", "explicit", 0) == 0
    finally:
        await consumer.close()


async def test_implicit_mode_accepts_what_the_previous_poll_returned(kemu: InProcessKemu) -> None:
    create_topics(kemu, ("implicit", 1))
    consumer = await joined(kemu, "implicit", "implicit", "implicit")
    try:
        produce(kemu, "implicit", [b"x", b"y"])
        assert [r.value for r in await poll_until(consumer, 2)] == [b"x", b"y"]
        await consumer.commit()
        assert await wait_for_lag(kemu, "implicit", "implicit", 0) == 0
    finally:
        await consumer.close()
    # A new member gets nothing: the records were accepted, not released by the close.
    later = await joined(kemu, "implicit", "implicit", "implicit")
    try:
        assert await later.poll(0.5) == []
    finally:
        await later.close()


async def consume_transform_produce(
    kemu: InProcessKemu, name: str, *, commit: bool, form: str = ONE_RPC
) -> tuple[ShareConsumer, TransactionalProducer]:
    if form == TWO_RPC and wire.known_versions(ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN) is None:
        pytest.skip("this checkout has no AddShareAcknowledgementsToTxn schema yet")
    create_topics(kemu, (name, 1), (f"{name}-out", 3))
    consumer = await joined(kemu, name, name, "explicit")
    produce(kemu, name, [b"first"])
    producer = TransactionalProducer(kemu.bootstrap, f"tx-{name}", share_acknowledgement_form=form)
    await producer.init_transactions()
    [record] = await poll_until(consumer, 1)
    assert (record.offset, record.delivery_count) == (0, 1)
    producer.begin_transaction()
    await producer.send(f"{name}-out", b"derived-" + (record.value or b""), key=record.key)
    consumer.acknowledge(record, AcknowledgeType.ACCEPT)
    acknowledgements = consumer.acknowledgements_for_transaction()
    assert not acknowledgements.is_empty()
    assert consumer.acknowledgements_for_transaction().is_empty()  # drained
    await producer.send_share_acknowledgements_to_transaction(
        acknowledgements, consumer.share_group_metadata()
    )
    if commit:
        await producer.commit_transaction()
    else:
        await producer.abort_transaction()
    return consumer, producer


async def assert_committed_once(kemu: Any, name: str, consumer: Any) -> None:
    """The pipeline's one output is committed, its record acknowledged (lag 0), and nothing
    comes back to the consumer."""
    assert await committed_values(kemu, f"{name}-out") == [b"derived-first"]
    assert await wait_for_lag(kemu, name, name, 0) == 0
    assert await consumer.poll(0.5) == []


@pytest.mark.parametrize("form", [ONE_RPC, TWO_RPC])
async def test_commit_makes_output_visible_and_completes_the_records(
    kemu: InProcessKemu, form: str
) -> None:
    name = f"ctp-commit-{form}"
    consumer, producer = await consume_transform_produce(kemu, name, commit=True, form=form)
    try:
        await assert_committed_once(kemu, name, consumer)
    finally:
        await consumer.close()
        await producer.close()


@pytest.mark.parametrize("form", [ONE_RPC, TWO_RPC])
async def test_abort_hides_output_and_redelivers_the_record(kemu: InProcessKemu, form: str) -> None:
    name = f"ctp-abort-{form}"
    consumer, producer = await consume_transform_produce(kemu, name, commit=False, form=form)
    try:
        [again] = await poll_until(consumer, 1)
        assert (again.offset, again.value, again.delivery_count) == (0, b"first", 2)
        assert await committed_values(kemu, f"{name}-out", wait=0.5) == []
        assert await wait_for_lag(kemu, name, name, 1) == 1
        # The next transaction carries it through.
        producer.begin_transaction()
        await producer.send(f"{name}-out", b"derived-first")
        consumer.acknowledge(again)
        await producer.send_share_acknowledgements_to_transaction(
            consumer.acknowledgements_for_transaction(), consumer.share_group_metadata()
        )
        await producer.commit_transaction()
        assert await committed_values(kemu, f"{name}-out") == [b"derived-first"]
        assert await wait_for_lag(kemu, name, name, 0) == 0
    finally:
        await consumer.close()
        await producer.close()


async def test_a_refused_stage_write_is_retried_and_the_record_stays_the_members(
    kemu: InProcessKemu,
) -> None:
    """KIP-1289 §7: the share coordinator refuses the stage's state write once. The leader
    takes the stage back (the record is still ACQUIRED by this member) and answers
    COORDINATOR_NOT_AVAILABLE for the partition; the client sends it again, as the draft
    client does, the retry stages it and the commit completes it, never redelivered."""
    name = "ctp-refused-stage"
    create_topics(kemu, (name, 1), (f"{name}-out", 3))
    consumer = await joined(kemu, name, name, "explicit")
    produce(kemu, name, [b"first"])
    producer = TransactionalProducer(kemu.bootstrap, f"tx-{name}")
    coordinator = share_coordinator(kemu.runtime)
    write_state = coordinator.write_state
    refused: list[tuple[PersistedBatch, ...]] = []

    async def refuse_the_first_stage(key: SharePartitionKey, **fields: Any) -> ErrorCode:
        batches: tuple[PersistedBatch, ...] = fields["batches"]
        if not refused and any(b.delivery_state == RecordState.TX_PENDING for b in batches):
            refused.append(batches)
            return ErrorCode.coordinator_not_available
        return await write_state(key, **fields)

    try:
        await producer.init_transactions()
        [record] = await poll_until(consumer, 1)
        producer.begin_transaction()
        await producer.send(f"{name}-out", b"derived-first")
        consumer.acknowledge(record, AcknowledgeType.ACCEPT)
        kemu.call(lambda: setattr(coordinator, "write_state", refuse_the_first_stage))
        try:
            await producer.send_share_acknowledgements_to_transaction(
                consumer.acknowledgements_for_transaction(), consumer.share_group_metadata()
            )
        finally:
            kemu.call(lambda: delattr(coordinator, "write_state"))
        assert len(refused) == 1
        await producer.commit_transaction()
        await assert_committed_once(kemu, name, consumer)
    finally:
        await consumer.close()
        await producer.close()


@pytest.mark.parametrize("shift", [+1, -2])
async def test_a_fenced_member_epoch_is_a_commit_failure(kemu: InProcessKemu, shift: int) -> None:
    name = f"fenced-member-{'future' if shift > 0 else 'stale'}"
    create_topics(kemu, (name, 1))
    consumer = await joined(kemu, name, name, "explicit")
    producer = TransactionalProducer(kemu.bootstrap, f"tx-{name}")
    try:
        produce(kemu, name, [b"first"])
        await producer.init_transactions()
        [record] = await poll_until(consumer, 1)
        consumer.acknowledge(record)
        metadata = consumer.share_group_metadata()
        wrong = dataclasses.replace(metadata, member_epoch=max(-1, metadata.member_epoch + shift))
        producer.begin_transaction()
        with pytest.raises(CommitFailedError):
            await producer.send_share_acknowledgements_to_transaction(
                consumer.acknowledgements_for_transaction(), wrong
            )
        await producer.abort_transaction()
        assert await wait_for_lag(kemu, name, name, 1) == 1
    finally:
        await consumer.close()
        await producer.close()


async def test_a_fenced_producer_is_told_so(kemu: InProcessKemu) -> None:
    create_topics(kemu, ("fenced-producer", 1))
    zombie = TransactionalProducer(kemu.bootstrap, "tx-fenced-producer")
    successor = TransactionalProducer(kemu.bootstrap, "tx-fenced-producer")
    try:
        await zombie.init_transactions()
        zombie.begin_transaction()
        await zombie.send("fenced-producer", b"zombie")
        await successor.init_transactions()  # bumps the epoch and aborts the zombie's transaction
        with pytest.raises(KafkaError) as refused:  # abortable, as for Java's producer
            await zombie.send("fenced-producer", b"again")
        assert refused.value.error == ErrorCode.invalid_producer_epoch
        with pytest.raises(ProducerFencedError):  # the abort's EndTxn tells it is a zombie
            await zombie.abort_transaction()
        with pytest.raises(ProducerFencedError):
            await zombie.commit_transaction()
        successor.begin_transaction()
        await successor.send("fenced-producer", b"successor")
        await successor.commit_transaction()
        assert await committed_values(kemu, "fenced-producer") == [b"successor"]
    finally:
        await zombie.close()
        await successor.close()


async def test_a_timed_out_transaction_is_abortable(kemu: InProcessKemu) -> None:
    """txn_timeout.py's scenario: a timed-out transaction is abortable, as for Java's producer."""
    create_topics(kemu, (txn_timeout.TOPIC, 1))
    await txn_timeout.a_timed_out_transaction_is_abortable(
        kemu.bootstrap, lambda topic: committed_values(kemu, topic)
    )


async def test_acknowledgements_across_polls_and_partitions_in_one_transaction(
    kemu: InProcessKemu,
) -> None:
    name = "multi"
    create_topics(kemu, (name, 6), (f"{name}-out", 3))
    consumer = await joined(kemu, name, name, "explicit")
    producer = TransactionalProducer(kemu.bootstrap, f"tx-{name}")
    try:
        for partition in range(6):
            produce(kemu, name, [f"{partition}-a".encode(), f"{partition}-b".encode()], partition)
        await producer.init_transactions()
        producer.begin_transaction()
        seen: list[bytes] = []
        for _ in range(50):
            records = await consumer.poll(0.3)
            for record in records:
                seen.append(record.value or b"")
                await producer.send(f"{name}-out", record.value, key=record.value)
                consumer.acknowledge(record)
            await producer.send_share_acknowledgements_to_transaction(
                consumer.acknowledgements_for_transaction(), consumer.share_group_metadata()
            )
            if len(seen) >= 12:
                break
        await producer.commit_transaction()
        assert len(seen) == 12
        assert sorted(await committed_values(kemu, f"{name}-out")) == sorted(seen)
        assert await wait_for_lag(kemu, name, name, 0) == 0
    finally:
        await consumer.close()
        await producer.close()


async def test_the_documented_pipeline_runs(kemu: InProcessKemu) -> None:
    """docs/client.md's share -> transform -> transactional produce loop, as written there."""
    doc = (REPO_ROOT / "docs" / "client.md").read_text()
    # the page's python blocks (fenced run-by=this file; tests/integration/tools/test_doc_blocks.py)
    source, check_source = re.findall(
        r"^```python run-by=\S*/test_client.py\n(.*?)^```", doc, re.S | re.M
    )
    namespace: dict[str, Any] = {"__name__": "documented_pipeline"}
    exec(compile(source, "docs/client.md", "exec"), namespace)
    create_topics(kemu, ("doc-input", 3), ("doc-output", 3))
    consumer = await joined(kemu, "doc", "doc-input", "explicit")
    await consumer.close()  # the group's share partitions now start before the input
    writer = Producer({"bootstrap.servers": kemu.bootstrap})
    for index in range(30):
        writer.produce("doc-input", value=f"value-{index}".encode(), key=str(index).encode())
    assert writer.flush(15) == 0
    await asyncio.wait_for(
        namespace["run_pipeline"](kemu.bootstrap, "doc-input", "doc-output", "doc", 30), 60
    )
    output = await committed_values(kemu, "doc-output")
    assert sorted(output) == sorted(f"VALUE-{index}".encode() for index in range(30))
    assert await wait_for_lag(kemu, "doc", "doc-input", 0) == 0
    # the page's check() snippet, with the page's topic and group names made this test's
    for page, here in (
        ('"output"', '"doc-output"'),
        ('"upper"', '"doc"'),
        ('"input"', '"doc-input"'),
    ):
        assert page in check_source, page
        check_source = check_source.replace(page, here)
    exec(compile(check_source, "docs/client.md", "exec"), namespace)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        await namespace["check"](kemu.bootstrap)
    values, lag = printed.getvalue().splitlines()
    shown = ast.literal_eval(values)  # one poll: what the leaders answered at once
    assert shown and set(shown) <= set(output) and lag == "0"


@pytest.fixture(scope="module")
def kemu_moved_keys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    """KIP-1289's RPCs at other api keys, and TxnShareAcknowledge requiring the two-RPC form."""
    process = InProcessKemu(
        brokers=3,
        overrides=[
            "kemu.kip1289.enable=true",
            "kemu.kip1289.txn.share.ack.api.key=97",
            "kemu.kip1289.add.api.key=98",
            "kemu.kip1289.enlist=explicit",
        ],
        log_path=tmp_path_factory.mktemp("kemu-client-keys") / "kemu.log",
    ).start()
    yield process
    process.stop()


async def test_moved_api_keys_and_explicit_enlistment(kemu_moved_keys: InProcessKemu) -> None:
    kemu = kemu_moved_keys
    create_topics(kemu, ("keys", 1))
    consumer = await joined(kemu, "keys", "keys", "explicit")
    keys = {"txn_share_acknowledge_api_key": 97, "add_share_acknowledgements_api_key": 98}
    one_rpc = TransactionalProducer(kemu.bootstrap, "tx-keys-1", **keys)
    two_rpc = TransactionalProducer(
        kemu.bootstrap, "tx-keys-2", share_acknowledgement_form=TWO_RPC, **keys
    )
    try:
        produce(kemu, "keys", [b"first"])
        [record] = await poll_until(consumer, 1)
        consumer.acknowledge(record)
        acknowledgements = consumer.acknowledgements_for_transaction()
        # Without AddShareAcknowledgementsToTxn first, explicit enlistment refuses the staging.
        await one_rpc.init_transactions()
        one_rpc.begin_transaction()
        with pytest.raises(KafkaError) as refused:
            await one_rpc.send_share_acknowledgements_to_transaction(
                acknowledgements, consumer.share_group_metadata()
            )
        assert refused.value.error == ErrorCode.invalid_txn_state
        await one_rpc.abort_transaction()
        await two_rpc.init_transactions()
        two_rpc.begin_transaction()
        await two_rpc.send_share_acknowledgements_to_transaction(
            acknowledgements, consumer.share_group_metadata()
        )
        await two_rpc.commit_transaction()  # a transaction of share acknowledgements alone
        assert await wait_for_lag(kemu, "keys", "keys", 0) == 0
    finally:
        await consumer.close()
        await one_rpc.close()
        await two_rpc.close()


async def test_a_restarted_instance_aborts_the_crashed_attempt(kemu: InProcessKemu) -> None:
    """The Flink-style recovery: an instance dies with output and acknowledgements staged in
    its transaction; its successor's init_transactions() aborts them, so the output never shows
    and the record comes back to the group."""
    name = "restart"
    create_topics(kemu, (name, 1), (f"{name}-out", 1))
    crashed = await joined(kemu, name, name, "explicit")
    produce(kemu, name, [b"first"])
    attempt = TransactionalProducer(kemu.bootstrap, f"tx-{name}")
    await attempt.init_transactions()
    [record] = await poll_until(crashed, 1)
    attempt.begin_transaction()
    await attempt.send(f"{name}-out", b"derived-first")
    crashed.acknowledge(record)
    await attempt.send_share_acknowledgements_to_transaction(
        crashed.acknowledgements_for_transaction(), crashed.share_group_metadata()
    )
    # The instance dies here: its connections drop, nothing is committed or aborted.
    await attempt.cluster.close()
    assert crashed._heartbeat_task is not None
    crashed._heartbeat_task.cancel()
    await crashed.cluster.close()
    restarted = TransactionalProducer(kemu.bootstrap, f"tx-{name}")
    consumer = ShareConsumer(kemu.bootstrap, name, acknowledgement_mode="explicit")
    try:
        await restarted.init_transactions()
        await consumer.subscribe([name])
        [again] = await poll_until(consumer, 1)
        assert (again.offset, again.value, again.delivery_count) == (0, b"first", 2)
        assert await committed_values(kemu, f"{name}-out", wait=0.5) == []
        restarted.begin_transaction()
        await restarted.send(f"{name}-out", b"derived-first")
        consumer.acknowledge(again)
        await restarted.send_share_acknowledgements_to_transaction(
            consumer.acknowledgements_for_transaction(), consumer.share_group_metadata()
        )
        await restarted.commit_transaction()
        assert await committed_values(kemu, f"{name}-out") == [b"derived-first"]
        assert await wait_for_lag(kemu, name, name, 0) == 0
    finally:
        await consumer.close()
        await restarted.close()


async def test_offsets_commit_with_the_transaction(kemu: InProcessKemu) -> None:
    """txn_offsets.py's scenario: the group's offsets in the producer's transaction."""
    create_topics(kemu, (txn_offsets.SOURCE, 1), (txn_offsets.SINK, 1))
    produce(kemu, txn_offsets.SOURCE, [f"in-{i}".encode() for i in range(txn_offsets.COUNT)])
    await txn_offsets.offsets_commit_with_the_transaction(
        kemu.bootstrap, lambda topic: committed_values(kemu, topic)
    )


async def test_revocation_waits_for_the_rebalance_listener(kemu: InProcessKemu) -> None:
    """rebalance.py's scenario: a member's listener runs before its partition moves."""
    create_topics(kemu, (rebalance.TOPIC, 2))
    await rebalance.revocation_waits_for_the_listener(kemu.bootstrap)
