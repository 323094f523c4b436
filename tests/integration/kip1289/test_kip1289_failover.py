"""KIP-1289's failover rows (spec §11.1 rows 13-16) with one virtual broker stopped and started.

A 3-broker kemu with ``kemu.kip1289.enable=true`` and a control port; ``kemu.stop_broker(N)`` /
``kemu.start_broker(N)`` (``kemu ctl broker stop N`` / ``start N``). Per row: a record of a
partition whose leader is not its ``__share_group_state`` partition's leader is staged
(TX_PENDING) by a consumer that then closes; one broker stops — the source partition's leader
(rows 13, 14) or the share coordinator, the state partition's leader (rows 15, 16) — so the
partition, or the share coordinator, moves to another broker, which loads the state from the log;
a new consumer gets nothing while the transaction is open; the producer ends it; the broker
starts again and a preferred-leader election gives its leaderships back. After a commit the
record is done (lag 0), never delivered again, before and after the broker's return; after an
abort it is delivered again once, with delivery count 2, and a second transaction commits it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from kemu.client import ShareRecord
from kemu.client.cluster import ClusterClient
from kemu.coordinator.share.keys import coordinator_key
from kemu.coordinator.share.persister import SharePartitionKey
from kemu.testing.inprocess import InProcessKemu
from tests.integration.kip1289.test_kip1289_scenarios import (
    ACKNOWLEDGED,
    AVAILABLE,
    COMPLETE,
    FIND_COORDINATOR_SHARE,
    OVERRIDES,
    TX_PENDING,
    closing,
    consumer_for,
    lag,
    latest_record_state,
    pipeline,
    poll_until,
    producer_for,
    remote_source,
    stage,
    state_of,
    values,
    wait_for_lag,
)

pytestmark = pytest.mark.integration

__all__ = ["closing"]  # the fixture, used by name


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    process = InProcessKemu(
        brokers=3,
        overrides=OVERRIDES,
        with_control=True,
        log_path=tmp_path_factory.mktemp("kip1289-failover") / "kemu.log",
    ).start()
    yield process
    process.stop()


def decode_share_state(kemu: InProcessKemu, node: int) -> list[dict[str, Any]]:
    """``kemu decode-share-state`` through broker ``node`` (a running one)."""
    address = kemu.bootstrap.split(",")[node - 1]
    completed = subprocess.run(
        [sys.executable, "-m", "kemu.cli", "decode-share-state", "--bootstrap", address],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    return [json.loads(line) for line in completed.stdout.splitlines()]


async def failover_row(
    kemu: InProcessKemu, closing: list[Any], name: str, *, stop: str, commit: bool
) -> None:
    group, partition = await remote_source(kemu, name)
    consumer = await consumer_for(kemu, group, name)
    producer = await producer_for(kemu, f"tx-{name}")
    closing.append(producer)
    [record] = await poll_until(consumer, 1)
    producer.begin_transaction()
    await stage(producer, consumer, record)
    await consumer.close()

    cluster = ClusterClient(kemu.bootstrap)
    try:
        before = await cluster.topic(name)
        key = coordinator_key(SharePartitionKey(group, before.topic_id, partition))
        share_coordinator = await cluster.coordinator(FIND_COORDINATOR_SHARE, key)
    finally:
        await cluster.close()
    victim = before.leaders[partition] if stop == "source" else share_coordinator
    answer = kemu.stop_broker(victim)
    assert answer["stopped"] and answer["moved"]
    survivor = next(n for n in (1, 2, 3) if n != victim)

    cluster = ClusterClient(kemu.bootstrap.split(",")[survivor - 1])
    try:
        after = await cluster.topic(name)
        moved_to = await cluster.coordinator(FIND_COORDINATOR_SHARE, key)
    finally:
        await cluster.close()
    if stop == "source":
        assert after.leaders[partition] not in (victim, -1)  # a new leader, loaded from the log
    else:
        assert moved_to != victim  # the share coordinator moved and replayed its partition
    assert state_of(decode_share_state(kemu, survivor), group, record) == TX_PENDING

    successor = await consumer_for(kemu, group, name)
    closing.append(successor)
    assert await successor.poll(1.0) == []  # TX_PENDING is loaded as such: not delivered
    if commit:
        await producer.commit_transaction()
        assert await wait_for_lag(kemu, group, name, 0) == 0
        decoded = decode_share_state(kemu, survivor)
        assert latest_record_state(decoded, group, record) == ACKNOWLEDGED
        assert state_of(decoded, group, record) == COMPLETE
        assert await successor.poll(0.5) == []
    else:
        await producer.abort_transaction()
        [again] = await poll_until(successor, 1)
        assert values([again]) == [(0, b"first", 2)]
        assert latest_record_state(decode_share_state(kemu, survivor), group, record) == AVAILABLE
        assert await lag(kemu, group, name) == 1
        producer.begin_transaction()  # the redelivered record is done in a new transaction
        await stage(producer, successor, again)
        await producer.commit_transaction()
        assert await wait_for_lag(kemu, group, name, 0) == 0

    restarted = kemu.start_broker(victim, elect_preferred=True)
    assert not restarted["stopped"]
    # nothing lost, stuck or delivered again once the leaderships are back
    assert await successor.poll(1.0) == []
    assert await wait_for_lag(kemu, group, name, 0) == 0


async def test_row13_commit_after_source_leader_failover(
    kemu: InProcessKemu, closing: list[Any]
) -> None:
    """Row 13, testTransactionalShareAckCommitAfterSourceLeaderFailoverWithPendingState."""
    await failover_row(kemu, closing, "f13-source-commit", stop="source", commit=True)


async def test_row14_abort_after_source_leader_failover(
    kemu: InProcessKemu, closing: list[Any]
) -> None:
    """Row 14, testTransactionalShareAckAbortAfterSourceLeaderFailoverWithPendingState."""
    await failover_row(kemu, closing, "f14-source-abort", stop="source", commit=False)


async def test_row15_commit_after_share_coordinator_failover(
    kemu: InProcessKemu, closing: list[Any]
) -> None:
    """Row 15, testTransactionalShareAckCommitAfterShareCoordinatorFailoverWithPendingState."""
    await failover_row(kemu, closing, "f15-coordinator-commit", stop="coordinator", commit=True)


async def test_row16_abort_after_share_coordinator_failover(
    kemu: InProcessKemu, closing: list[Any]
) -> None:
    """Row 16, testTransactionalShareAckAbortAfterShareCoordinatorFailoverWithPendingState."""
    await failover_row(kemu, closing, "f16-coordinator-abort", stop="coordinator", commit=False)


async def source_leader(kemu: InProcessKemu, topic: str, partition: int) -> int:
    cluster = ClusterClient(kemu.bootstrap)
    try:
        return (await cluster.topic(topic)).leaders[partition]
    finally:
        await cluster.close()


@pytest.mark.parametrize("when", ["abort", "commit"])
async def test_pipeline_across_a_source_leader_stop(
    kemu: InProcessKemu, closing: list[Any], when: str
) -> None:
    """§11.2 testAbortAfterSourceLeaderShutdown ("abort") and
    testCommitAfterSourceLeaderShutdown ("commit"): three source and sink partitions led by
    three brokers, one transaction per record (the first aborted); the leader of the record
    just staged stops before that transaction ends. Every input is committed once (the aborted
    one delivered again), the sink holds them all; the broker starts again (a preferred-leader
    election) and nothing comes back."""
    name = f"fp-{when}"
    stopped: list[int] = []

    async def down(record: ShareRecord) -> None:
        victim = await source_leader(kemu, name, record.partition)
        kemu.stop_broker(victim)
        stopped.append(victim)

    await pipeline(kemu, closing, name, restart_before=when, down=down)
    [victim] = stopped
    kemu.start_broker(victim, elect_preferred=True)
    late = await consumer_for(kemu, name, name)
    closing.append(late)
    assert await late.poll(1.0) == []
    assert await wait_for_lag(kemu, name, name, 0) == 0
