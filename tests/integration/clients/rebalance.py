"""One scenario run by test_client.py against kemu and by test_client_kafka.py against a real
Kafka 4.4.0: ``GroupConsumer``'s ``RebalanceListener`` as Java's consumer runs it under the
consumer group protocol (KIP-848)."""

from __future__ import annotations

import asyncio
from typing import Any

from kemu.client import ConsumerRecord, GroupConsumer, IdempotentProducer, RebalanceListener

TOPIC, GROUP = "rebalance-in", "rebalance-group"
PER_PARTITION = 4  # records written to each of TOPIC's 2 partitions by the scenario
Partition = tuple[str, int]


class Recording(RebalanceListener):
    """Records every callback; on revocation, commits the member's positions (what it
    processed) and then waits for ``release``, so a test can look at the group meanwhile."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.consumer: GroupConsumer | None = None
        self.calls: list[tuple[str, list[Partition]]] = []
        self.revoking = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()
        self.committed: dict[Partition, int] = {}

    async def on_partitions_revoked(self, partitions: list[Partition]) -> None:
        self.calls.append(("revoked", partitions))
        assert self.consumer is not None
        self.committed = await self.consumer.commit()
        self.revoking.set()
        await self.release.wait()

    async def on_partitions_assigned(self, partitions: list[Partition]) -> None:
        self.calls.append(("assigned", partitions))


async def poll_until(consumer: GroupConsumer, count: int) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    for _ in range(120):
        records += await consumer.poll(0.25)
        if len(records) >= count:
            break
    return records


async def poll_through_revocation(consumer: GroupConsumer, listener: Recording) -> list[Any]:
    """Poll until a poll in which the listener was told of a revocation has returned."""
    records: list[Any] = []
    for _ in range(240):
        records += await consumer.poll(0.25)
        if any(kind == "revoked" for kind, _ in listener.calls):
            break
    return records


async def assigned(consumer: GroupConsumer, listener: Recording, rounds: int = 120) -> bool:
    """Poll until the listener was told of an assignment with partitions in it."""
    for _ in range(rounds):
        if any(kind == "assigned" and parts for kind, parts in listener.calls):
            return True
        assert await consumer.poll(0.25) == []
    return False


async def revocation_waits_for_the_listener(bootstrap: str) -> None:
    """A member owning both partitions is told, in its ``poll()``, to give one up to a member
    joining. Until its ``on_partitions_revoked`` returns, the partition stays its own: it
    commits what it read, and the new member is assigned nothing. Then the new member's
    ``on_partitions_assigned`` gets the partition, which it reads from that commit, so nothing
    comes twice. ``close()`` runs ``on_partitions_revoked`` with what the member still owns."""
    async with IdempotentProducer(bootstrap) as producer:
        for partition in (0, 1):
            values = [f"p{partition}-{i}".encode() for i in range(PER_PARTITION)]
            await producer.send_many(TOPIC, [(None, v) for v in values], partition=partition)
    first_listener, second_listener = Recording("first"), Recording("second")
    first = GroupConsumer(bootstrap, GROUP, auto_offset_reset="earliest", listener=first_listener)
    second = GroupConsumer(bootstrap, GROUP, auto_offset_reset="earliest", listener=second_listener)
    first_listener.consumer, second_listener.consumer = first, second
    try:
        await first.subscribe([TOPIC])
        records = await poll_until(first, 2 * PER_PARTITION)
        assert len(records) == 2 * PER_PARTITION
        both = [(TOPIC, 0), (TOPIC, 1)]
        # (Kafka may answer the first heartbeat with no partitions: an empty reconciliation)
        assert [call for call in first_listener.calls if call[1]] == [("assigned", both)]
        first_listener.calls.clear()

        first_listener.release.clear()
        await second.subscribe([TOPIC])
        through = poll_through_revocation(first, first_listener)
        revoking = asyncio.get_running_loop().create_task(through)
        await asyncio.wait_for(first_listener.revoking.wait(), 60)
        [(kind, moving)] = first_listener.calls
        assert kind == "revoked" and len(moving) == 1
        assert first_listener.committed == {tp: PER_PARTITION for tp in both}
        # the partition is still the first member's: the second is assigned nothing yet
        assert not await assigned(second, second_listener, rounds=8)
        assert first.assignment() == set(both)

        first_listener.release.set()
        assert await revoking == []  # nothing more to read, after the callback returned
        assert first.assignment() == set(both) - set(moving)
        assert await assigned(second, second_listener)
        assert second_listener.calls[-1] == ("assigned", moving)
        assert second.assignment() == set(moving)
        assert second.position(*moving[0]) == PER_PARTITION  # the commit made in the callback
        assert await second.poll(0.5) == []
    finally:
        first_listener.release.set()
        await second.close()
        await first.close()
    assert second_listener.calls[-1] == ("revoked", moving)
