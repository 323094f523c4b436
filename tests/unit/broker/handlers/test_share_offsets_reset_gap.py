"""An operator's share-group offsets reset (AlterShareGroupOffsets, DeleteShareGroupOffsets)
while the share-partition leader still caches the old state: what the old copy was about to do
(apply a transaction's marker to its TX_PENDING records, take a departed member's last
acknowledgement, expire a lock) must not write over the reset, nor fail loudly.

The reset writes the new state through the share coordinator, then has the leaders forget
their cached copy (``forget_share_state``). Work already queued on the old leader runs after
that: here the leader's mailbox is held while the marker, the acknowledgement and the lock
expiry are queued and the reset is answered, then let go. The old copy then does nothing:
the reset is what the share coordinator holds, nothing is logged as a warning, and the next
use loads the reset state in the new leader. (Were the old copy kept, the first of them would
write it at the old state epoch, fenced after an Alter but taken as a write to a missing key
after a Delete, with a warning; the next would reload the state into the replaced leader, a
second copy beside the new one, which after a Delete initialized the deleted state again.)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from structlog.testing import capture_logs

from kemu.broker.share.acknowledgement import AckBatch
from kemu.broker.share.actor import SharePartitionActor
from kemu.broker.share.manager import share_partitions
from kemu.broker.share.settings import share_settings
from kemu.broker.share.txn_acks import txn_share_acks
from kemu.coordinator.share.persister import SharePartitionKey
from kemu.coordinator.share.service import SHARE_STATE_TOPIC, share_coordinator
from kemu.coordinator.transaction.coordinator import Markers
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_add_share_acknowledgements_to_txn import ENABLED, start, stop
from tests.unit.broker.handlers.test_share_fetch import GROUP, Harness, partition_data
from tests.unit.broker.handlers.test_txn_share_acknowledge import (
    ACCEPT,
    HEARTBEAT,
    acquire_three,
    request,
    txn_ack,
)

pytestmark = pytest.mark.client

ALTER_OFFSETS, DELETE_OFFSETS = 91, 92
RESET_TO = 1


@pytest.fixture
async def kemu() -> AsyncIterator[Harness]:
    harness = await start(ENABLED)
    try:
        yield harness
    finally:
        await stop(harness)


def key(kemu: Harness) -> SharePartitionKey:
    return SharePartitionKey(GROUP, kemu.topic_id("t"), 0)


def leader(kemu: Harness) -> SharePartitionActor | None:
    return share_partitions(kemu.runtime).existing(GROUP, kemu.topic_id("t"), 0)


async def call_coordinator(kemu: Harness, body: Any) -> Any:
    """``body`` answered by the group's coordinator (the others answer NOT_COORDINATOR)."""
    for node_id in kemu.server.cluster.nodes:
        response = await (await kemu.client(node_id)).call(body)
        if response.error_code != ErrorCode.not_coordinator:
            return response
    raise AssertionError("no broker coordinates the group")


async def leave(kemu: Harness, member: str) -> None:
    body = request(HEARTBEAT, 1, group_id=GROUP, member_id=member, member_epoch=-1)
    assert (await call_coordinator(kemu, body)).error_code == ErrorCode.none


def reset_request(kemu: Harness, how: str) -> Any:
    if how == "alter":
        module = wire.request_module(ALTER_OFFSETS, 0)
        partition = module.AlterShareGroupOffsetsRequestPartition(
            partition_index=0, start_offset=RESET_TO
        )
        topic = module.AlterShareGroupOffsetsRequestTopic(topic_name="t", partitions=(partition,))
        return module.AlterShareGroupOffsetsRequest(group_id=GROUP, topics=(topic,))
    module = wire.request_module(DELETE_OFFSETS, 0)
    entry = module.DeleteShareGroupOffsetsRequestTopic(topic_name="t")
    return module.DeleteShareGroupOffsetsRequest(group_id=GROUP, topics=(entry,))


def reset_answered_none(how: str, response: Any) -> bool:
    if response.error_code != ErrorCode.none:
        return False
    if how == "alter":
        [topic] = response.responses
        return [p.error_code for p in topic.partitions] == [ErrorCode.none]
    return [t.error_code for t in response.responses] == [ErrorCode.none]


def stored(kemu: Harness) -> Any:
    """The share coordinator's state of t-0 (None: there is none)."""
    coordinator = share_coordinator(kemu.runtime)
    return coordinator.shard(coordinator.partition_for(key(kemu))).states.get(key(kemu))


async def staged_and_departed(kemu: Harness) -> tuple[SharePartitionActor, int, int]:
    """m1 staged offset 0 in a transaction, holds 1-2 and left the group (its records stay
    held for the departure grace, as a departing member may still acknowledge them); the
    leader, the producer id and epoch."""
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    staged = await client.call(
        txn_ack(kemu.topic_id("t"), {0: [(0, 0, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert partition_data(staged, 0).error_code == ErrorCode.none
    await leave(kemu, "m1")
    actor = leader(kemu)
    assert actor is not None and actor.core is not None
    assert actor.core.pending_transactions()
    return actor, pid, epoch


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
@pytest.mark.parametrize("how", ["alter", "delete"])
async def test_the_old_copy_does_nothing_after_a_reset(
    kemu: Harness, how: str, commit: bool
) -> None:
    old, pid, epoch = await staged_and_departed(kemu)
    old_core = old.core
    assert old_core is not None
    settings = share_settings(kemu.runtime, GROUP)
    state_partition = share_coordinator(kemu.runtime).partition_for(key(kemu))
    with capture_logs() as logs:
        await old._mailbox.acquire()  # an operation of the old leader is under way
        # queued behind it: the transaction's marker, m1's last acknowledgement, a lock expiry
        markers = Markers(
            "tx", pid, epoch + 1, commit, frozenset({(SHARE_STATE_TOPIC, state_partition)}), 2
        )
        txn_share_acks(kemu.runtime).on_markers(markers)
        acknowledged = asyncio.create_task(
            old.acknowledge(kemu.partition("t", 0), "m1", [AckBatch(1, 1, (ACCEPT,))], settings)
        )
        kemu.now[0] += settings.partition.record_lock_duration_ms + 1
        expiry = asyncio.create_task(old._expire())
        await asyncio.sleep(0)  # all three wait for the mailbox
        reset = await call_coordinator(kemu, reset_request(kemu, how))
        assert reset_answered_none(how, reset), reset
        after_reset = stored(kemu)
        old._mailbox.release()
        await txn_share_acks(kemu.runtime).drain()
        acknowledgement = await acknowledged
        await expiry
    # the reset is what the share coordinator holds
    assert stored(kemu) == after_reset
    if how == "alter":
        assert after_reset is not None
        assert (after_reset.start_offset, after_reset.batches) == (RESET_TO, ())
    else:
        assert after_reset is None
    # the old copy was dropped, not written, and nothing was logged about it
    assert old.core is None
    assert acknowledgement[0] == ErrorCode.not_leader_or_follower  # the member may retry
    assert [e for e in logs if e["log_level"] in ("warning", "error", "critical")] == []
    # the next use loads the reset state, in a new leader
    fresh = share_partitions(kemu.runtime).actor(GROUP, kemu.topic_id("t"), 0)
    assert fresh is not old
    assert await fresh.resume(kemu.partition("t", 0), settings) == ErrorCode.none
    assert fresh.core is not None
    assert not fresh.core.pending_transactions()
    # deleted: from share.auto.offset.reset, latest by default
    start = RESET_TO if how == "alter" else kemu.partition("t", 0).high_watermark
    assert fresh.core.next_fetch_offset() == start
