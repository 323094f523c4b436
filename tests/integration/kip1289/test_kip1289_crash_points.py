"""KIP-1289 crash safety at every persistence step of a transactional share acknowledgement.

kemu SIGKILLs itself (``KEMU_CRASH_AT``, ``kemu/cluster/crash_points.py``) at each step where
the durable state of TX_PENDING records and of their transaction can disagree, then starts again
from its data dir. One transaction writes two output records and stages the ACCEPT of the two
input records it read; after the restart the outcome must be all or nothing, for the output
(read_committed) and the input (lag, redelivery) together:

| point | durable when kemu dies |
|---|---|
| ``share.enlisted`` | the state partition enlisted in the transaction, nothing staged |
| ``share.staged`` | the records TX_PENDING; the producer has no answer |
| ``txn.prepared`` | PREPARE_COMMIT/ABORT, no marker |
| ``txn.share_state_marker_written`` | the marker in ``__share_group_state`` only (no |
| | ShareUpdate states its outcome; the output partition has no marker) |
| ``txn.data_marker_written`` | the marker in the output partition only (the records are |
| | still TX_PENDING in ``__share_group_state``) |
| ``txn.markers_appended`` | every marker, nothing applied (no ShareUpdate for them) |
| ``txn.markers_written`` | every marker and the ShareUpdates of their outcome, no COMPLETE |

Markers go to a transaction's partitions in name order, so the output topic's name decides which
of the two marker points comes first: ``out-...`` sorts after ``__share_group_state``,
``Out-...`` before it.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
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
    Consumer,
    ShareConsumer,
    ShareRecord,
    TransactionalProducer,
)
from kemu.testing.plugin import KemuProcess

pytestmark = [pytest.mark.integration, pytest.mark.process]

OVERRIDES = ["kemu.kip1289.enable=true", "share.coordinator.state.topic.num.partitions=3"]
SHARE_STATE_TOPIC = "__share_group_state"
# where the transaction ended (or was prepared) before the crash: recovery finishes it
ENDED = [
    "txn.prepared",
    "txn.share_state_marker_written",
    "txn.data_marker_written",
    "txn.markers_appended",
    "txn.markers_written",
]
ONGOING = ["share.enlisted", "share.staged"]  # the transaction was still open


def output_topic(crash_at: str, group: str) -> str:
    """An output topic whose partition gets its marker before the state partition's exactly
    for ``txn.data_marker_written``."""
    name = f"{'Out' if crash_at == 'txn.data_marker_written' else 'out'}-{group}"
    data_first = crash_at == "txn.data_marker_written"
    assert (sorted([name, SHARE_STATE_TOPIC])[0] == name) == data_first
    return name


def prepare(kemu: KemuProcess, group: str, output: str) -> None:
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    for topic in (group, output):
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=15)
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for value in (b"first", b"second"):
        producer.produce(group, value=value, partition=0)
    assert producer.flush(15) == 0


async def poll_until(consumer: ShareConsumer, count: int) -> list[ShareRecord]:
    records: list[ShareRecord] = []
    for _ in range(60):
        records += await consumer.poll(0.3)
        if len(records) >= count:
            break
    return records


async def closed(*clients: Any) -> None:
    """Close clients of a kemu that died; they may not get an answer."""
    for client in clients:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.close(), 5)


async def committed_values(kemu: KemuProcess, topic: str) -> list[bytes]:
    async with Consumer(kemu.bootstrap) as reader:  # read_committed
        await reader.assign([(topic, 0)])
        return [r.value or b"" for r in await reader.poll(1.0)]


async def wait_for_lag(kemu: KemuProcess, group: str, expected: int) -> int:
    async with Admin(kemu.bootstrap) as admin:
        for _ in range(100):
            found = await admin.share_group_lag(group, group)
            if found == expected:
                break
            await asyncio.sleep(0.1)
        return found


async def died_in(kemu: KemuProcess, operation: Any) -> None:
    """Run ``operation`` (a coroutine) until kemu has SIGKILLed itself at its crash point."""
    task = asyncio.ensure_future(operation)
    assert kemu.process is not None
    code = await asyncio.to_thread(kemu.process.wait, 30)
    assert code == -9, code  # SIGKILL, from the crash point
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


CASES = [
    *(
        pytest.param(point, commit, id=f"{point}-{'commit' if commit else 'abort'}")
        for point in ENDED
        for commit in (True, False)
    ),
    *(pytest.param(point, False, id=point) for point in ONGOING),
]


@pytest.mark.parametrize(("crash_at", "commit"), CASES)
async def test_a_crash_at_each_persistence_step_is_all_or_nothing(
    kemu_factory: type[KemuProcess], tmp_path: Path, crash_at: str, commit: bool
) -> None:
    group = f"{crash_at.replace('.', '-').replace('_', '-')}-{'commit' if commit else 'abort'}"
    output = output_topic(crash_at, group)
    kemu = kemu_factory(
        brokers=3, data_dir=tmp_path / "data", overrides=OVERRIDES, env={"KEMU_CRASH_AT": crash_at}
    ).start()
    prepare(kemu, group, output)
    consumer = ShareConsumer(kemu.bootstrap, group, acknowledgement_mode="explicit")
    await consumer.subscribe([group])
    producer = TransactionalProducer(kemu.bootstrap, f"tx-{group}")
    await producer.init_transactions()
    records = await poll_until(consumer, 2)
    assert [(r.offset, r.delivery_count) for r in records] == [(0, 1), (1, 1)]
    producer.begin_transaction()
    for record in records:
        await producer.send(output, b"derived-" + (record.value or b""), partition=0)
        consumer.acknowledge(record, AcknowledgeType.ACCEPT)
    acknowledgements = consumer.acknowledgements_for_transaction()
    metadata = consumer.share_group_metadata()
    if crash_at in ONGOING:
        await died_in(
            kemu, producer.send_share_acknowledgements_to_transaction(acknowledgements, metadata)
        )
    else:
        await producer.send_share_acknowledgements_to_transaction(acknowledgements, metadata)
        ending = producer.commit_transaction() if commit else producer.abort_transaction()
        await died_in(kemu, ending)
    await closed(producer, consumer)

    kemu.env = {}
    kemu.start()
    successor = ShareConsumer(kemu.bootstrap, group, acknowledgement_mode="explicit")
    await successor.subscribe([group])
    try:
        if crash_at in ENDED and commit:
            # recovery committed both sides: the output is visible, the input done
            assert await committed_values(kemu, output) == [b"derived-first", b"derived-second"]
            assert await wait_for_lag(kemu, group, 0) == 0
            assert await successor.poll(1.0) == []
            return
        if crash_at in ONGOING:
            # the transaction is still open: a new producer of the transactional id aborts it
            # (the staged records, if any, go back to AVAILABLE with their delivery count)
            fencing = TransactionalProducer(kemu.bootstrap, f"tx-{group}")
            await fencing.init_transactions()
            await fencing.close()
        # aborted: no output, both records delivered again
        assert await committed_values(kemu, output) == []
        again = await poll_until(successor, 2)
        assert [(r.offset, r.value) for r in again] == [(0, b"first"), (1, b"second")]
        assert [r.delivery_count for r in again] == [2, 2]
        assert await wait_for_lag(kemu, group, 2) == 2
        # nothing is left pending: the next transaction acknowledges them for good
        producer = TransactionalProducer(kemu.bootstrap, f"tx-{group}")
        await producer.init_transactions()
        producer.begin_transaction()
        for record in again:
            successor.acknowledge(record, AcknowledgeType.ACCEPT)
        await producer.send_share_acknowledgements_to_transaction(
            successor.acknowledgements_for_transaction(), successor.share_group_metadata()
        )
        await producer.commit_transaction()
        await producer.close()
        assert await wait_for_lag(kemu, group, 0) == 0
        assert await successor.poll(0.5) == []
    finally:
        await closed(successor)
