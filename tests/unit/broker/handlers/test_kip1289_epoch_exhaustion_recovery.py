"""KIP-1289 share acknowledgements staged by a producer at its last epoch (32766), whose EndTxn
v5 exhausts the epoch, when kemu dies at ``txn.prepared`` (the PREPARE record durable, no marker
written) and the transaction coordinator loads ``__transaction_state`` again.

An in-process 3-broker kemu (members join with ShareGroupHeartbeat, acquire with ShareFetch,
stage with TxnShareAcknowledge); the transaction also wrote a record to a data partition. The
crash is the simulation's hook at the crash point; the load is ``reload_partition``, the same
replay and ``recover`` a start-up runs. The recovered markers carry the producer id that staged
the records at epoch 32767, so the TX_PENDING records resolve and the data partition's last
stable offset moves past the transaction; the new producer id takes over at epoch 0.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from kemu.broker.share.states import RecordState
from kemu.broker.share.txn_acks import txn_share_acks
from kemu.cluster.crash_points import set_crash_hook
from kemu.coordinator.group.hashing import partition_for
from kemu.coordinator.transaction.coordinator import MAX_EPOCH, TxnState
from kemu.coordinator.transaction.service import TOPIC as TRANSACTION_STATE
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch, read_header
from tests.unit.broker.handlers.test_share_fetch import Harness
from tests.unit.broker.handlers.test_txn_share_acknowledge import (
    ACCEPT,
    TXN,
    acquire_three,
    persisted,
    start,
    states,
    txn_ack,
)

TX_PENDING = int(RecordState.TX_PENDING)
LAST_USABLE = MAX_EPOCH - 1
OUTPUT = ("out", 0)


class Crash(Exception):
    """kemu died here (what SIGKILL would do: nothing after it runs)."""


@pytest.fixture
async def kemu() -> AsyncIterator[Harness]:
    harness = await start(enabled=True)
    harness.server.cluster.create_topic(OUTPUT[0], 1, 1)
    try:
        yield harness
    finally:
        for client in harness.clients:
            client.writer.close()
        await harness.server.close()


@pytest.fixture
def crash_at_prepared() -> Iterator[None]:
    def hook(name: str) -> None:
        if name == "txn.prepared":
            raise Crash(name)

    set_crash_hook(hook)
    try:
        yield
    finally:
        set_crash_hook(None)


def pending(kemu: Harness) -> set[int]:
    """The offsets of t-0 the share coordinator holds TX_PENDING."""
    return {
        offset
        for first, last, state in persisted(kemu)
        if state == TX_PENDING
        for offset in range(first, last + 1)
    }


def produce_in_transaction(kemu: Harness, producer_id: int, epoch: int) -> None:
    service = transaction_coordinator(kemu.runtime)
    assert service.on_transactional_produce(TXN, producer_id, epoch, OUTPUT) is ErrorCode.none
    batch = build_batch(
        [(None, b"output")],
        timestamp_ms=kemu.now[0],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=0,
        transactional=True,
    )
    appended = kemu.partition(*OUTPUT).append([(read_header(batch), batch)], now_ms=kemu.now[0])
    assert appended.error is ErrorCode.none


async def test_a_crash_at_prepared_after_epoch_exhaustion_resolves_on_load(
    kemu: Harness, crash_at_prepared: None
) -> None:
    client, member_epoch, pid, _ = await acquire_three(kemu)
    service = transaction_coordinator(kemu.runtime)
    # the producer has used every epoch but the last (as 32766 InitProducerIds would leave it)
    service.coordinator.transactions[TXN].producer_epoch = LAST_USABLE
    produce_in_transaction(kemu, pid, LAST_USABLE)
    staged = await client.call(
        txn_ack(
            kemu.topic_id("t"), {0: [(0, 1, [ACCEPT])]}, pid, LAST_USABLE, member_epoch=member_epoch
        )
    )
    assert staged.error_code == ErrorCode.none
    assert pending(kemu) == {0, 1}
    output = kemu.partition(*OUTPUT)
    assert output.last_stable_offset == 0 < output.high_watermark

    with pytest.raises(Crash):
        service.end_transaction(TXN, pid, LAST_USABLE, True, bump_epoch=True)
    # the PREPARE_COMMIT record is durable, no marker is written
    assert service.coordinator.transactions[TXN].state is TxnState.PREPARE_COMMIT
    assert output.last_stable_offset == 0
    assert pending(kemu) == {0, 1}

    index = partition_for(TXN, len(kemu.server.cluster.topics[TRANSACTION_STATE].partitions))
    assert service.reload_partition(index) == 1
    await txn_share_acks(kemu.runtime).drain()

    assert output.last_stable_offset == output.high_watermark  # the commit marker of pid
    assert output.transactions.ongoing == {}
    assert pending(kemu) == set()
    assert RecordState.TX_PENDING not in states(kemu).values()
    assert 0 not in states(kemu) and 1 not in states(kemu)  # ACKNOWLEDGED: the start moved on
    meta = service.coordinator.transactions[TXN]
    assert meta.state is TxnState.COMPLETE_COMMIT
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (pid + 1, 0, pid)
    # the new producer id goes on
    assert service.add_partitions(TXN, pid + 1, 0, [OUTPUT]).error is ErrorCode.none
