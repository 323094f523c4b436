"""kemu.client while the cluster is down or restarting (found by the exactly-once crash harness,
bench/eos_crash.py): a client that starts while kemu is still coming up waits for it, and a
broker that vanishes in the middle of a transaction is a KafkaError the application answers
with an abort — never a bare ConnectionClosed/OSError escaping a call.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kemu.client import (
    AcknowledgeType,
    KafkaError,
    ShareConsumer,
    ShareRecord,
    TransactionalProducer,
)
from kemu.client.consumer import Consumer
from kemu.protocol.errors import ErrorCode
from kemu.testing.plugin import KemuProcess

pytestmark = [pytest.mark.integration, pytest.mark.process]

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


async def test_staging_after_a_restart_fails_at_once_and_the_records_come_back(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    """kemu restarted between poll and staging has no share partition (nor the member's
    acquisitions) until the next ShareFetch: the staging is refused with UNKNOWN_TOPIC_OR_PARTITION
    after one metadata refresh, not retried until the request timeout (which, as long as the
    transaction timeout, ended in PRODUCER_FENCED); the abort and the next poll redo the work."""
    kemu = kemu_factory(brokers=1, data_dir=tmp_path / "data", overrides=OVERRIDES).start()
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    for future in admin.create_topics([NewTopic("in", 1, 1), NewTopic("out", 1, 1)]).values():
        future.result(timeout=30)
    earliest = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, "restarted", incremental_configs=[earliest])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    feeder = Producer({"bootstrap.servers": kemu.bootstrap, "log_level": 0})
    for i in range(5):
        feeder.produce("in", key=b"%d" % i, value=b"v")
    assert feeder.flush(30) == 0
    consumer = ShareConsumer(kemu.bootstrap, "restarted", acknowledgement_mode="explicit")
    producer = TransactionalProducer(kemu.bootstrap, "restarted-producer")
    await consumer.subscribe(["in"])
    await producer.init_transactions()

    async def poll_all() -> list[ShareRecord]:
        for _ in range(60):
            batch = await consumer.poll(timeout=1.0)
            if batch:
                return batch
        raise AssertionError("no records")

    batch = await poll_all()
    producer.begin_transaction()
    await producer.send_many("out", [(r.key, r.value) for r in batch])
    kemu.kill()
    await asyncio.get_running_loop().run_in_executor(None, kemu.start)
    for record in batch:
        consumer.acknowledge(record, AcknowledgeType.ACCEPT)
    with pytest.raises(KafkaError) as refused:
        await producer.send_share_acknowledgements_to_transaction(
            consumer.acknowledgements_for_transaction(), consumer.share_group_metadata()
        )
    assert refused.value.error == ErrorCode.unknown_topic_or_partition  # not request_timed_out
    await producer.abort_transaction()
    again = await poll_all()
    assert {r.key for r in again} == {r.key for r in batch}
    producer.begin_transaction()
    await producer.send_many("out", [(r.key, r.value) for r in again])
    for record in again:
        consumer.acknowledge(record, AcknowledgeType.ACCEPT)
    await producer.send_share_acknowledgements_to_transaction(
        consumer.acknowledgements_for_transaction(), consumer.share_group_metadata()
    )
    await producer.commit_transaction()
    await consumer.close()
    await producer.close()
