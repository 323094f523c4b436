"""A share-group record whose last delivery was in flight when kemu was SIGKILLed (KIP-1191):
kemu persists an acquisition with its delivery count, so the restarted kemu finds the record
at ``share.delivery.count.limit`` and dead-letters it, as a lock expiring would have, instead
of delivering it once more. Found by the deterministic simulation (docs/reliability.md).

Kafka 4.4.0 differs here (``test_share_dlq_restart_kafka.py`` runs the same scenario on it): it
does not persist an acquisition, so its restart delivers the record again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from kemu.client import AcknowledgeType
from kemu.testing.plugin import KemuProcess
from tests.integration.share.test_share_dlq import (
    EXCEEDED,
    create_topic,
    dlq_group,
    joined,
    lag_reaches_zero,
    produce,
    read_dlq,
)

pytestmark = [pytest.mark.integration]


def prepare(bootstrap: str) -> None:
    """Topic ``lost`` holding one record, group ``lost-group`` (delivery limit 2, DLQ
    ``dlq.lost``)."""
    create_topic(bootstrap, "lost", 1)
    create_topic(bootstrap, "dlq.lost", 1, **{"errors.deadletterqueue.group.enable": "true"})
    dlq_group(bootstrap, "lost-group", "dlq.lost")  # share.delivery.count.limit 2
    produce(bootstrap, "lost", 1, 1)


async def die_holding_the_last_delivery(bootstrap: str, kill: Callable[[], None]) -> list[int]:
    """RELEASE the first delivery, then ``kill`` the broker while the second (last) is held,
    never acknowledged. The delivery counts seen."""
    consumer = await joined(bootstrap, "lost-group", "lost")
    counts: list[int] = []
    try:
        for _ in range(100):
            records = await consumer.poll(0.5)
            counts += [record.delivery_count for record in records]
            if counts[-1:] == [2]:
                kill()
                return counts
            for record in records:
                consumer.acknowledge(record, AcknowledgeType.RELEASE)
            if records:
                await consumer.commit()
        return counts
    finally:
        with contextlib.suppress(Exception):  # the broker is gone
            await asyncio.wait_for(consumer.close(), 2)


async def deliveries_after_the_restart(bootstrap: str, polls: int) -> list[int]:
    """The delivery counts of what a new consumer gets (and ACCEPTs) within ``polls`` polls,
    stopping at the first records."""
    consumer = await joined(bootstrap, "lost-group", "lost")
    try:
        for _ in range(polls):  # the first fetch loads the share partition
            records = await consumer.poll(0.5)
            for record in records:
                consumer.acknowledge(record, AcknowledgeType.ACCEPT)
            if records:
                await consumer.commit()
                return [record.delivery_count for record in records]
        return []
    finally:
        await consumer.close()


def test_a_last_delivery_lost_with_a_sigkill_is_dead_lettered_not_delivered_again(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    kemu = kemu_factory(brokers=1, data_dir=tmp_path / "data").start()
    prepare(kemu.bootstrap)
    assert asyncio.run(die_holding_the_last_delivery(kemu.bootstrap, kemu.kill)) == [1, 2]
    kemu.start()
    bootstrap = kemu.bootstrap

    # without the fix: delivery 3
    assert asyncio.run(deliveries_after_the_restart(bootstrap, polls=10)) == []
    [record] = read_dlq(bootstrap, "dlq.lost", 1)
    assert (record.key, record.value) == (b"k0-0", b"v0-0")
    assert record.header("__dlq.errors.delivery.count") == "2"
    assert record.header("__dlq.errors.message") == EXCEEDED
    assert asyncio.run(lag_reaches_zero(bootstrap, "lost-group", "lost")) == 0
