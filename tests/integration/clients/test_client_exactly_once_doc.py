"""docs/client.md's exactly-once block (GroupConsumer and TransactionalProducer with the group's
offsets in the transaction), as written there, against a 3-broker kemu in the test's process:
every order shipped once, and the group's committed offsets are after them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from kemu.client import Consumer, GroupConsumer
from kemu.testing.inprocess import InProcessKemu
from tests import REPO_ROOT
from tests.integration.clients.test_client_group_consumer import create_topic, produce

pytestmark = pytest.mark.integration

FENCE = "```python run-by=tests/integration/clients/test_client_exactly_once_doc.py\n"


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    process = InProcessKemu(
        brokers=3, log_path=tmp_path_factory.mktemp("kemu-exactly-once") / "kemu.log"
    ).start()
    yield process
    process.stop()


async def test_the_documented_exactly_once_loop_runs(kemu: InProcessKemu) -> None:
    doc = (REPO_ROOT / "docs" / "client.md").read_text()
    block = doc.split(FENCE)[1].split("```")[0]
    namespace: dict[str, Any] = {}
    exec(compile(block, "docs/client.md", "exec"), namespace)
    create_topic(kemu, "orders", 3)
    create_topic(kemu, "shipments", 1)
    produce(kemu, "orders", [b"order-%d" % i for i in range(12)], 3)
    await asyncio.wait_for(namespace["ship"](kemu.bootstrap, 12), 60)
    async with Consumer(kemu.bootstrap) as reader:  # read_committed
        await reader.assign_topic("shipments")
        shipped = [record.value for record in await reader.poll(2.0)]
    assert sorted(shipped) == sorted(b"ORDER-%d" % i for i in range(12))
    group = GroupConsumer(kemu.bootstrap, "shippers")
    try:
        committed = await group.committed([("orders", p) for p in range(3)])
    finally:
        await group.close()
    assert committed == {("orders", p): 4 for p in range(3)}
