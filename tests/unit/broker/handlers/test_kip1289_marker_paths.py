"""KIP-1289: which transaction markers resolve TX_PENDING records (spec §5.4, §11.3
KafkaApisTest ``testWriteTxnMarkersDoesNotApplyShareMarkerForNonShareStatePartition``).

A marker resolves a share partition's staged records only where it lands in that share
partition's ``__share_group_state`` partition: the transaction coordinator's own markers always
do (the staging enlisted it), and so does a WriteTxnMarkers that a tool sends for it. A marker
written to other partitions only — a data partition of the transaction — resolves nothing, at
the share coordinator or at a loaded share-partition leader.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kemu.broker.share.acknowledgement import AckBatch
from kemu.broker.share.manager import share_partitions
from kemu.broker.share.states import RecordState
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
    acquire_three,
    persisted,
    states,
    txn_ack,
)

WRITE_TXN_MARKERS = 27
TX_PENDING = int(RecordState.TX_PENDING)


@pytest.fixture
async def kemu() -> AsyncIterator[Harness]:
    harness = await start(ENABLED)
    try:
        yield harness
    finally:
        await stop(harness)


async def write_marker(
    kemu: Harness, topic: str, index: int, producer_id: int, epoch: int, commit: bool
) -> Any:
    """WriteTxnMarkers for one partition, to its leader, as kafka-transactions.sh sends it."""
    module = wire.request_module(WRITE_TXN_MARKERS, 1)
    marker = module.WritableTxnMarker(
        producer_id=producer_id,
        producer_epoch=epoch,
        transaction_result=commit,
        topics=(module.WritableTxnMarkerTopic(name=topic, partition_indexes=(index,)),),
        coordinator_epoch=0,
    )
    leader = kemu.server.cluster.topics[topic].partitions[index].leader_id
    client = await kemu.client(leader)
    response = await client.call(module.WriteTxnMarkersRequest(markers=(marker,)))
    assert response.markers[0].topics[0].partitions[0].error_code == ErrorCode.none
    await txn_share_acks(kemu.runtime).drain()
    return response


async def staged_two(kemu: Harness) -> tuple[int, int]:
    """Offsets 0-1 of t-0 TX_PENDING under the producer; its producer id and epoch."""
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    response = await client.call(
        txn_ack(kemu.topic_id("t"), {0: [(0, 1, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert partition_data(response, 0).error_code == ErrorCode.none
    return pid, epoch


def state_partition(kemu: Harness) -> int:
    key = SharePartitionKey(GROUP, kemu.topic_id("t"), 0)
    return share_coordinator(kemu.runtime).partition_for(key)


async def test_a_marker_in_a_data_partition_only_resolves_nothing(kemu: Harness) -> None:
    pid, epoch = await staged_two(kemu)
    await write_marker(kemu, "t", 1, pid, epoch + 1, commit=False)
    assert states(kemu)[0] is RecordState.TX_PENDING and states(kemu)[1] is RecordState.TX_PENDING
    assert pending_offsets(kemu) == {0, 1}  # durably too


def pending_offsets(kemu: Harness) -> set[int]:
    return {
        offset
        for first, last, state in persisted(kemu)
        if state == TX_PENDING
        for offset in range(first, last + 1)
    }


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
async def test_a_marker_written_by_a_tool_to_the_state_partition_resolves(
    kemu: Harness, commit: bool
) -> None:
    pid, epoch = await staged_two(kemu)
    await write_marker(kemu, SHARE_STATE_TOPIC, state_partition(kemu), pid, epoch + 1, commit)
    if commit:
        assert 0 not in states(kemu) and 1 not in states(kemu)  # acknowledged, past the start
        key = SharePartitionKey(GROUP, kemu.topic_id("t"), 0)
        leader_epoch = kemu.partition("t", 0).leader_epoch
        state = share_coordinator(kemu.runtime).read_sync(key, leader_epoch).state
        assert state is not None and state.start_offset == 2
    else:
        assert states(kemu)[0] is RecordState.AVAILABLE and states(kemu)[1] is RecordState.AVAILABLE
        assert pending_offsets(kemu) == set()


async def test_a_marker_resolves_only_what_was_staged_when_it_was_written(kemu: Harness) -> None:
    """Under transaction version 2 the markers carry the epoch EndTxn bumped to, the epoch the
    producer's next transaction stages with, and the loaded leaders apply them after they are
    written, one at a time. What that next transaction stages in between is not the marker's:
    it resolves what was staged when it was written (spec Q4)."""
    pid, epoch = await staged_two(kemu)
    actor = share_partitions(kemu.runtime).existing(GROUP, kemu.topic_id("t"), 0)
    assert actor is not None and actor.core is not None
    state_partitions = frozenset({(SHARE_STATE_TOPIC, state_partition(kemu))})
    acks = txn_share_acks(kemu.runtime)
    acks.on_markers(Markers("tx", pid, epoch + 1, True, state_partitions, 2))
    # before the leader applies it, the next transaction (at the bumped epoch) stages offset 2
    staged = actor.core.stage("m1", pid, epoch + 1, [AckBatch(2, 2, (ACCEPT,))], 0)
    assert staged.error is ErrorCode.none
    await acks.drain()
    assert 0 not in states(kemu) and 1 not in states(kemu)  # committed: the start moved past
    assert states(kemu)[2] is RecordState.TX_PENDING
