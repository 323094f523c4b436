"""kemu.client creates topics as the Java producer and consumer do: their Metadata requests allow
auto-creation (``allow_auto_topic_creation=True`` by default), so a send to a new topic creates it
with the broker's ``num.partitions``; ``allow_auto_topic_creation=False`` turns that off. A topic
that cannot exist fails at once with a message saying why, instead of retrying until a timeout
("has no metadata yet" after about 30 s, as it used to)."""

from __future__ import annotations

import pytest

from kemu.client import Consumer, KafkaError, TransactionalProducer
from kemu.protocol.errors import ErrorCode
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration


async def send_one(bootstrap: str, topic: str, **options: bool) -> None:
    async with TransactionalProducer(bootstrap, f"tx-{topic}", **options) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send(topic, b"first")
        await producer.commit_transaction()


async def test_a_send_to_a_new_topic_creates_it(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(brokers=1, overrides=["num.partitions=2"]).start()
    await send_one(kemu.bootstrap, "created-on-send")
    async with Consumer(kemu.bootstrap) as reader:
        await reader.assign_topic("created-on-send")
        assert sorted(p for _, p in reader.positions) == [0, 1]  # the broker's num.partitions
        assert [r.value for r in await reader.poll(timeout=5.0)] == [b"first"]


async def test_what_cannot_exist_fails_fast_and_says_why(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(brokers=1).start()
    with pytest.raises(KafkaError) as refused:
        await send_one(kemu.bootstrap, "not-asked-for", allow_auto_topic_creation=False)
    assert refused.value.error == ErrorCode.unknown_topic_or_partition  # not REQUEST_TIMED_OUT
    assert "allow_auto_topic_creation=False" in refused.value.message
    assert "create it first" in refused.value.message

    with pytest.raises(KafkaError) as refused:
        await send_one(kemu.bootstrap, "bad name!")
    assert refused.value.error == ErrorCode.invalid_topic_exception
    assert "cannot exist" in refused.value.message


async def test_a_broker_that_does_not_create_topics_is_named(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(brokers=1, overrides=["auto.create.topics.enable=false"]).start()
    with pytest.raises(KafkaError) as refused:
        await send_one(kemu.bootstrap, "never-created")
    assert refused.value.error == ErrorCode.unknown_topic_or_partition
    assert "auto.create.topics.enable=false" in refused.value.message


async def test_a_share_group_set_to_earliest_reads_what_is_there(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    from kemu.client import Admin, ShareConsumer

    kemu = kemu_inprocess_factory(brokers=1).start()
    await send_one(kemu.bootstrap, "backlog")  # before the group exists
    async with Admin(kemu.bootstrap) as admin:
        await admin.set_group_configs("readers", {"share.auto.offset.reset": "earliest"})
        with pytest.raises(KafkaError) as refused:
            await admin.set_group_configs("readers", {"share.auto.offset.reset": "soonest"})
        assert refused.value.error == ErrorCode.invalid_config
    consumer = ShareConsumer(kemu.bootstrap, "readers")
    await consumer.subscribe(["backlog"])
    seen: list[bytes | None] = []
    for _ in range(40):
        seen += [record.value for record in await consumer.poll(timeout=0.5)]
        if seen:
            break
    await consumer.close()
    assert seen == [b"first"]
