"""A share partition retired (``SharePartitionActor.retire``) while an operation is suspended in
a persister call: the operation installs no core in the retired actor, hands out nothing,
raises nothing, logs nothing, and answers NOT_LEADER_OR_FOLLOWER (a lock expiry, with no one
to answer, stops quietly and writes no dead letter from the dropped copy).

The share coordinator's persister never suspends today; the stand-in here does, on the call
the test holds, and the test retires the actor while it waits.
"""

from __future__ import annotations

import asyncio
from typing import Any

from structlog.testing import capture_logs

from kemu.broker.share.actor import FetchOutcome, SharePartitionActor
from kemu.broker.share.partition import AckBatch, AcquireMode, SharePartitionConfig
from kemu.broker.share.settings import ShareSettings
from kemu.broker.share.states import AckType, RecordState
from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.cluster.partition import Partition
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.share.persister import (
    InMemorySharePersister,
    PersistedBatch,
    ReadResult,
    SharePartitionKey,
)
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch, split_batches
from kemu.storage.log import MemoryLog

NOW = 1_000_000
LOCK_MS = 100
NLOF = ErrorCode.not_leader_or_follower
SETTINGS = ShareSettings(
    partition=SharePartitionConfig(
        record_lock_duration_ms=LOCK_MS, delivery_count_limit=1, dlq_enabled=True
    ),
    auto_offset_reset="earliest",
    dlq_topic="dlq",
)


class SuspendingPersister(InMemorySharePersister):
    """Holds the next ``read_state`` or ``write_state`` (as ``hold`` says) until ``go``."""

    def __init__(self) -> None:
        super().__init__()
        self.hold: str | None = None
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def _suspend(self, call: str) -> None:
        if self.hold == call:
            self.hold = None
            self.entered.set()
            await self.go.wait()

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ReadResult:
        await self._suspend("read")
        return await super().read_state(key, leader_epoch)

    async def write_state(
        self,
        key: SharePartitionKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: tuple[PersistedBatch, ...],
    ) -> ErrorCode:
        await self._suspend("write")
        return await super().write_state(
            key,
            state_epoch=state_epoch,
            leader_epoch=leader_epoch,
            start_offset=start_offset,
            delivery_complete_count=delivery_complete_count,
            batches=batches,
        )


class Setup:
    def __init__(self) -> None:
        self.now = [NOW]
        nodes = {1: BrokerNode(1, "127.0.0.1", 19390)}
        self.cluster = Cluster(
            cluster_id="retire-race",
            nodes=nodes,
            config=BrokerConfig(),
            log_factory=lambda topic, index: MemoryLog(),
        )
        topic = self.cluster.create_topic("t", 1, 1)
        self.partition: Partition = topic.partitions[0]
        raw = build_batch([(None, b"r%d" % i) for i in range(3)], timestamp_ms=NOW)
        self.partition.append(split_batches(raw), now_ms=NOW)
        self.persister = SuspendingPersister()
        self.key = SharePartitionKey("g", topic.topic_id, 0)
        runtime = Runtime(cluster=self.cluster, clock_ms=lambda: self.now[0])
        self.actor = SharePartitionActor(self.key, runtime, lambda: self.persister)

    async def acquire(self) -> FetchOutcome:
        return await self.actor.acquire(
            self.partition,
            "m1",
            SETTINGS,
            max_records=10,
            batch_size=10,
            mode=AcquireMode.BATCH_OPTIMIZED,
            max_bytes=1 << 20,
            min_one=True,
        )

    async def retire_during(self, call: str, operation: Any) -> Any:
        """Run ``operation`` with the persister's next ``call`` held; retire meanwhile."""
        self.persister.hold = call
        task = asyncio.ensure_future(operation)
        await self.persister.entered.wait()
        self.actor.retire()
        self.persister.go.set()
        try:
            return await task
        finally:
            await self.actor.stop()


def loud(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["log_level"] in ("warning", "error", "critical")]


async def test_an_acquire_retired_while_reading_the_state_installs_nothing() -> None:
    setup = Setup()
    with capture_logs() as logs:
        outcome = await setup.retire_during("read", setup.acquire())
    assert outcome == FetchOutcome(NLOF)
    assert setup.actor.core is None
    assert setup.persister.writes == []  # the retired actor wrote nothing
    assert loud(logs) == []


async def test_an_acquire_retired_while_the_load_writes_hands_out_nothing() -> None:
    setup = Setup()
    with capture_logs() as logs:
        outcome = await setup.retire_during("write", setup.acquire())
    assert outcome == FetchOutcome(NLOF)
    assert setup.actor.core is None
    assert loud(logs) == []


async def test_an_acknowledgement_retired_while_the_load_writes_answers_not_leader() -> None:
    setup = Setup()
    batches = [AckBatch(0, 2, (AckType.ACCEPT,))]
    with capture_logs() as logs:
        answer = await setup.retire_during(
            "write", setup.actor.acknowledge(setup.partition, "m1", batches, SETTINGS)
        )
    assert answer == (NLOF, None)
    assert setup.actor.core is None
    assert loud(logs) == []


async def test_a_stage_retired_while_the_load_writes_answers_not_leader() -> None:
    setup = Setup()
    batches = [AckBatch(0, 2, (AckType.ACCEPT,))]
    with capture_logs() as logs:
        answer = await setup.retire_during(
            "write", setup.actor.stage(setup.partition, "m1", 7, 0, batches, SETTINGS)
        )
    assert answer == (NLOF, None)
    assert setup.actor.core is None
    assert len(setup.persister.writes) == 1  # the load's, nothing staged
    assert loud(logs) == []


async def test_a_lock_expiry_retired_while_writing_stops_quietly() -> None:
    setup = Setup()
    assert (await setup.acquire()).count == 3
    setup.now[0] += LOCK_MS  # the locks expire at the delivery limit: ARCHIVING, dead letters
    with capture_logs() as logs:
        await setup.retire_during("write", setup.actor._expire())
    assert setup.actor.core is None
    assert loud(logs) == []  # no share_lock_expiry_failed
    # the ARCHIVING state is durable for the next leader to dead-letter; the dropped copy wrote
    # no dead letter and did not archive them
    states = {batch.delivery_state for batch in setup.persister.states[setup.key].batches}
    assert states == {RecordState.ARCHIVING}
    assert "dlq" not in setup.cluster.topics
