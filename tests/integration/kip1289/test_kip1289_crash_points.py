"""KIP-1289 crash safety where the deterministic simulation cannot reach: kemu dies with the
transaction's marker durable in its output partition and not yet in ``__share_group_state``.

kemu SIGKILLs itself (``KEMU_CRASH_AT``, ``kemu/cluster/crash_points.py``) at
``txn.data_marker_written`` and starts again from its data dir. One transaction writes two
output records and stages the ACCEPT of the two input records it read; after the restart the
outcome must be all or nothing, for the output (read_committed) and the input (lag, redelivery)
together. Markers go to a transaction's partitions in name order, so the output topic is named
``Out-...``, which sorts before ``__share_group_state``: the output partition has its marker,
the input records are still TX_PENDING (the situation of the bug where a data-partition-only
marker reset them).

The other persistence steps (``share.enlisted``, ``share.staged``, ``txn.prepared``,
``txn.share_state_marker_written``, ``txn.markers_appended``, ``txn.markers_written``, each
committing and aborting) were cases of this module until they became seeds of the simulation,
which reaches them with share acknowledgements in the transaction and checks every oracle after
the restart: ``tests/unit/testing/test_sim_crash_points.py`` (docs/reliability.md). The
simulation's output topics sort after ``__share_group_state``, so its data markers always come
second, and this case stays here. ``test_kip1289_restart.py`` SIGKILLs the real process at
``txn.prepared`` and ``share.staged``.
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
CRASH_AT = "txn.data_marker_written"  # the transaction ended: recovery finishes it


def output_topic(group: str) -> str:
    """An output topic whose partition gets its marker before the state partition's."""
    name = f"Out-{group}"
    assert sorted([name, SHARE_STATE_TOPIC])[0] == name
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


@pytest.mark.parametrize("commit", [True, False], ids=[f"{CRASH_AT}-commit", f"{CRASH_AT}-abort"])
async def test_a_crash_at_each_persistence_step_is_all_or_nothing(
    kemu_factory: type[KemuProcess], tmp_path: Path, commit: bool
) -> None:
    group = f"txn-data-marker-written-{'commit' if commit else 'abort'}"
    output = output_topic(group)
    kemu = kemu_factory(
        brokers=3, data_dir=tmp_path / "data", overrides=OVERRIDES, env={"KEMU_CRASH_AT": CRASH_AT}
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
    await producer.send_share_acknowledgements_to_transaction(acknowledgements, metadata)
    ending = producer.commit_transaction() if commit else producer.abort_transaction()
    await died_in(kemu, ending)
    await closed(producer, consumer)

    kemu.env = {}
    kemu.start()
    successor = ShareConsumer(kemu.bootstrap, group, acknowledgement_mode="explicit")
    await successor.subscribe([group])
    try:
        if commit:
            # recovery committed both sides: the output is visible, the input done
            assert await committed_values(kemu, output) == [b"derived-first", b"derived-second"]
            assert await wait_for_lag(kemu, group, 0) == 0
            assert await successor.poll(1.0) == []
            return
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
