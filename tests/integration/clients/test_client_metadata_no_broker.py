"""kemu.client against a Metadata answer that names no broker, as a fault rule on Metadata gives
one: the client keeps the brokers it knew and retries (Java's client ignores such an answer),
where ``Admin.set_group_configs`` once raised ``RuntimeError('coroutine raised StopIteration')``
(the long simulation's seed 75 on ``c17640d``, step 5042, docs/reliability.md)."""

from __future__ import annotations

import asyncio

import pytest

from kemu.client import Admin
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration


def test_admin_sets_group_configs_through_metadata_answers_naming_no_broker(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(brokers=1, with_control=True).start()

    async def main() -> None:
        async with Admin(kemu.bootstrap) as admin:
            kemu.control.add_fault(api="metadata", error="NOT_COORDINATOR", count=5)
            admin.cluster.nodes.clear()  # as after an earlier such answer
            await admin.set_group_configs("g", {"share.auto.offset.reset": "earliest"})
            assert admin.cluster.nodes

    asyncio.run(main())
