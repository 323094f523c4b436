"""docs/client.md's rebalance-listener block, as written there, against a 3-broker kemu in the
test's process: two auditors, the second joining while the first reads (half the records are
written once the first gave partitions up), see every record once between them: the first
commits in ``on_partitions_revoked`` before its partitions move. The group's offsets end after
them all (``close()`` commits through the callback). Without that commit, records come twice."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from kemu.client import GroupConsumer
from kemu.testing.inprocess import InProcessKemu
from tests import REPO_ROOT
from tests.integration.clients.test_client_group_consumer import create_topic, produce

pytestmark = pytest.mark.integration

FENCE = "```python run-by=tests/integration/clients/test_client_rebalance_doc.py\n"
HALF = 30  # records per half, over 3 partitions


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    process = InProcessKemu(
        brokers=3,
        overrides=["group.consumer.heartbeat.interval.ms=500"],
        log_path=tmp_path_factory.mktemp("kemu-rebalance-doc") / "kemu.log",
    ).start()
    yield process
    process.stop()


async def test_the_documented_rebalance_listener_runs(kemu: InProcessKemu) -> None:
    doc = (REPO_ROOT / "docs" / "client.md").read_text()
    block = doc.split(FENCE)[1].split("```")[0]
    namespace: dict[str, Any] = {}
    exec(compile(block, "docs/client.md", "exec"), namespace)
    audit = namespace["audit"]
    revocations: list[list[tuple[str, int]]] = []
    listener_class = namespace["CommitOnRevoke"]
    original = listener_class.on_partitions_revoked

    async def counted(self: Any, partitions: list[tuple[str, int]]) -> None:
        revocations.append(partitions)
        await original(self, partitions)

    listener_class.on_partitions_revoked = counted
    create_topic(kemu, "ledger", 3)
    values = [b"entry-%d" % i for i in range(2 * HALF)]
    produce(kemu, "ledger", values[:HALF], 3)
    seen: list[bytes] = []
    first = asyncio.get_running_loop().create_task(audit(kemu.bootstrap, seen, 2 * HALF))
    for _ in range(200):
        if seen:
            break
        await asyncio.sleep(0.05)
    second = asyncio.get_running_loop().create_task(audit(kemu.bootstrap, seen, 2 * HALF))
    for _ in range(400):  # the second member joins, and the first gives partitions up
        if revocations:
            break
        await asyncio.sleep(0.05)
    produce(kemu, "ledger", values[HALF:], 3)
    await asyncio.wait_for(asyncio.gather(first, second), 60)
    assert sorted(seen) == sorted(values)  # each once
    assert len(revocations) >= 3  # one as the second member joined, then one per close()
    group = GroupConsumer(kemu.bootstrap, "auditors")
    try:
        committed = await group.committed([("ledger", p) for p in range(3)])
    finally:
        await group.close()
    assert committed == {("ledger", p): 2 * HALF // 3 for p in range(3)}
