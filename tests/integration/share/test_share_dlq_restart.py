"""A share-group record whose last delivery was in flight when kemu was SIGKILLed (KIP-1191):
kemu persists an acquisition with its delivery count, so the restarted kemu finds the record
at ``share.delivery.count.limit`` and dead-letters it, as a lock expiring would have, instead
of delivering it once more. Found by the deterministic simulation (docs/reliability.md)."""

from __future__ import annotations

import asyncio
import contextlib
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


def test_a_last_delivery_lost_with_a_sigkill_is_dead_lettered_not_delivered_again(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    kemu = kemu_factory(brokers=1, data_dir=tmp_path / "data").start()
    bootstrap = kemu.bootstrap
    create_topic(bootstrap, "lost", 1)
    create_topic(bootstrap, "dlq.lost", 1, **{"errors.deadletterqueue.group.enable": "true"})
    dlq_group(bootstrap, "lost-group", "dlq.lost")  # share.delivery.count.limit 2
    produce(bootstrap, "lost", 1, 1)

    async def die_holding_the_last_delivery() -> list[int]:
        consumer = await joined(bootstrap, "lost-group", "lost")
        counts: list[int] = []
        try:
            for _ in range(100):
                records = await consumer.poll(0.5)
                counts += [record.delivery_count for record in records]
                if counts[-1:] == [2]:
                    kemu.kill()  # the second (last) delivery held, never acknowledged
                    return counts
                for record in records:
                    consumer.acknowledge(record, AcknowledgeType.RELEASE)
                if records:
                    await consumer.commit()
            return counts
        finally:
            with contextlib.suppress(Exception):  # the broker is gone
                await asyncio.wait_for(consumer.close(), 5)

    assert asyncio.run(die_holding_the_last_delivery()) == [1, 2]
    kemu.start()
    bootstrap = kemu.bootstrap

    async def deliveries_after_the_restart() -> list[int]:
        consumer = await joined(bootstrap, "lost-group", "lost")
        try:
            counts: list[int] = []
            for _ in range(10):  # the first fetch loads the share partition
                records = await consumer.poll(0.5)
                counts += [record.delivery_count for record in records]
                for record in records:  # (without the fix: delivery 3)
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT)
                if records:
                    await consumer.commit()
            return counts
        finally:
            await consumer.close()

    assert asyncio.run(deliveries_after_the_restart()) == []
    [record] = read_dlq(bootstrap, "dlq.lost", 1)
    assert (record.key, record.value) == (b"k0-0", b"v0-0")
    assert record.header("__dlq.errors.delivery.count") == "2"
    assert record.header("__dlq.errors.message") == EXCEEDED
    assert asyncio.run(lag_reaches_zero(bootstrap, "lost-group", "lost")) == 0
