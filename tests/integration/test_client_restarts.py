"""kemu.client while the cluster is down or restarting (found by the exactly-once crash harness,
bench/eos_crash.py): a client that starts while kemu is still coming up waits for it, and a
broker that vanishes in the middle of a transaction is a KafkaError the application answers
with an abort — never a bare ConnectionClosed/OSError escaping a call.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.client import (
    KafkaError,
    ShareConsumer,
    TransactionalProducer,
)
from kemu.client.consumer import Consumer
from kemu.testing.plugin import KemuProcess

pytestmark = pytest.mark.integration

OVERRIDES = ["kemu.kip1289.enable=true"]


async def test_clients_wait_for_a_cluster_that_is_still_starting(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    kemu = kemu_factory(brokers=3, data_dir=tmp_path / "data", overrides=OVERRIDES).start()
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic("late", 1, 3)])["late"].result(timeout=30)
    kemu.kill()
    consumer = ShareConsumer(kemu.bootstrap, "late-group", acknowledgement_mode="explicit")
    producer = TransactionalProducer(kemu.bootstrap, "late-producer")
    joining = asyncio.ensure_future(consumer.subscribe(["late"]))
    initialising = asyncio.ensure_future(producer.init_transactions())
    await asyncio.sleep(0.5)  # nobody listens: both keep trying
    assert not joining.done() and not initialising.done()
    await asyncio.get_running_loop().run_in_executor(None, kemu.start)
    await asyncio.wait_for(asyncio.gather(joining, initialising), 60)
    assert producer.producer_id >= 0
    assert consumer.share_group_metadata().member_epoch > 0
    await consumer.close()
    await producer.close()


async def test_a_cluster_gone_mid_transaction_is_a_kafka_error(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    kemu = kemu_factory(brokers=3, data_dir=tmp_path / "data", overrides=OVERRIDES).start()
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic("gone", 1, 3)])["gone"].result(timeout=30)
    producer = TransactionalProducer(kemu.bootstrap, "gone-producer", request_timeout=2.0)
    await producer.init_transactions()
    producer.begin_transaction()
    await producer.send("gone", b"aborted", partition=0)
    kemu.kill()
    with pytest.raises(KafkaError):  # not ConnectionClosed: the application can abort
        await producer.commit_transaction()
    await asyncio.get_running_loop().run_in_executor(None, kemu.start)
    producer.request_timeout = 60.0
    await producer.abort_transaction()
    producer.begin_transaction()
    await producer.send("gone", b"committed", partition=0)
    await producer.commit_transaction()
    await producer.close()
    async with Consumer(kemu.bootstrap) as reader:
        await reader.assign_topic("gone")
        values: list[bytes | None] = []
        for _ in range(30):
            values += [record.value for record in await reader.poll(timeout=1.0)]
            if values:
                break
    assert values == [b"committed"]
