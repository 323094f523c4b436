"""The error codes of KIP-1289's two RPCs that the other tests do not reach (spec §2.7, §5.3,
§9): the transaction coordinator's answers through each handler, and a TxnShareAcknowledge
partition the broker does not know, which must not join the transaction."""

from __future__ import annotations

import struct
import uuid
from collections.abc import AsyncIterator

import pytest

from kemu.broker.share.manager import share_partitions
from kemu.broker.share.states import RecordState
from kemu.broker.share.txn_acks import txn_share_acks
from kemu.coordinator.share.service import share_coordinator
from kemu.coordinator.transaction.coordinator import TxnState
from kemu.coordinator.transaction.service import TransactionService, transaction_coordinator
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_add_share_acknowledgements_to_txn import (
    ENABLED,
    add_request,
    coordinator_node,
    start,
    stop,
    transaction,
)
from tests.unit.broker.handlers.test_share_fetch import (
    GROUP,
    Harness,
    acquired,
    partition_data,
    share_fetch,
)
from tests.unit.broker.handlers.test_txn_share_acknowledge import (
    ACCEPT,
    acquire_three,
    end_txn,
    persisted,
    states,
    txn_ack,
)


@pytest.fixture
async def kemu() -> AsyncIterator[Harness]:
    harness = await start(ENABLED)
    try:
        yield harness
    finally:
        await stop(harness)


def completing(kemu: Harness) -> None:
    """The transaction as between its PREPARE_COMMIT and its COMPLETE_COMMIT."""
    transaction(kemu).state = TxnState.PREPARE_COMMIT


def refuse_transaction_log_writes(kemu: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    service = transaction_coordinator(kemu.runtime)
    assert isinstance(service, TransactionService)
    monkeypatch.setattr(service, "_write", lambda records, now: ErrorCode.coordinator_not_available)


# --- AddShareAcknowledgementsToTxn ------------------------------------------------------------


async def test_add_during_a_completing_transaction_is_concurrent_transactions(
    kemu: Harness,
) -> None:
    _, _, pid, epoch = await acquire_three(kemu)
    coordinator = await kemu.client(coordinator_node(kemu))
    tid = kemu.topic_id("t")
    assert (await coordinator.call(add_request({tid: (0,)}, pid, epoch))).error_code == 0
    completing(kemu)
    response = await coordinator.call(add_request({tid: (1,)}, pid, epoch))
    assert response.error_code == ErrorCode.concurrent_transactions
    assert response.error_message == "The transaction is completing; retry"
    assert transaction(kemu).share_partitions == {(GROUP, tid, 0)}  # 1 not enlisted


async def test_add_when_the_transaction_log_cannot_be_written_is_coordinator_not_available(
    kemu: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, pid, epoch = await acquire_three(kemu)
    coordinator = await kemu.client(coordinator_node(kemu))
    refuse_transaction_log_writes(kemu, monkeypatch)
    response = await coordinator.call(add_request({kemu.topic_id("t"): (0,)}, pid, epoch))
    assert response.error_code == ErrorCode.coordinator_not_available
    assert response.error_message == "The transaction log cannot be written"


# --- TxnShareAcknowledge: the transaction coordinator's answers, whole request ----------------


async def test_stage_with_a_producer_id_not_the_transactional_ids_is_invalid_mapping(
    kemu: Harness,
) -> None:
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    response = await client.call(
        txn_ack(
            kemu.topic_id("t"), {0: [(0, 0, [ACCEPT])]}, pid + 1, epoch, member_epoch=member_epoch
        )
    )
    assert response.error_code == ErrorCode.invalid_producer_id_mapping
    assert response.responses == ()
    assert set(states(kemu).values()) == {RecordState.ACQUIRED}


async def test_stage_during_a_completing_transaction_is_concurrent_transactions(
    kemu: Harness,
) -> None:
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    tid = kemu.topic_id("t")
    first = await client.call(
        txn_ack(tid, {0: [(0, 0, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert partition_data(first, 0).error_code == ErrorCode.none
    completing(kemu)
    response = await client.call(
        txn_ack(tid, {0: [(1, 1, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert response.error_code == ErrorCode.concurrent_transactions
    assert states(kemu)[1] is RecordState.ACQUIRED  # nothing staged


async def test_stage_when_the_transaction_log_cannot_be_written_stages_nothing(
    kemu: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    refuse_transaction_log_writes(kemu, monkeypatch)
    response = await client.call(
        txn_ack(kemu.topic_id("t"), {0: [(0, 0, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert response.error_code == ErrorCode.coordinator_not_available
    assert set(states(kemu).values()) == {RecordState.ACQUIRED}


# --- TxnShareAcknowledge: partitions the broker does not know ----------------------------------


async def test_an_unknown_topic_id_or_partition_is_refused_and_never_enlisted(
    kemu: Harness,
) -> None:
    """Spec §5.3 steps 4-6: the state partitions of the request's share partitions join the
    transaction; a topic id or partition that does not exist is no share partition, so it gets
    UNKNOWN_TOPIC_OR_PARTITION (an unknown topic id too: the draft client retries that code,
    where UNKNOWN_TOPIC_ID would be fatal) and the transaction is not told about it. The zero
    id (which kio decodes as None) is one such id."""
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    for unknown in (uuid.uuid4(), uuid.UUID(int=0)):
        response = await client.call(
            txn_ack(unknown, {0: [(0, 0, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
        )
        assert response.error_code == ErrorCode.none
        assert partition_data(response, 0).error_code == ErrorCode.unknown_topic_or_partition
        assert partition_data(response, 0).error_message == "Unknown topic id"
    response = await client.call(
        txn_ack(kemu.topic_id("t"), {7: [(0, 0, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert partition_data(response, 7).error_code == ErrorCode.unknown_topic_or_partition
    meta = transaction(kemu)
    assert meta.share_partitions == set() and meta.partitions == set()
    assert meta.state is not TxnState.ONGOING  # nothing started a transaction


# --- the share coordinator refuses the stage's write (spec §7) ---------------------------------


async def test_a_refused_stage_write_reverts_to_acquired_and_a_retry_stages(
    kemu: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spec §5.3 step 8, §7: "Stage persisted write fails — revert to ACQUIRED; partition error
    returned". The share coordinator cannot take the write (COORDINATOR_NOT_AVAILABLE, as
    Kafka's SharePartition maps it): the records are the member's again, ACQUIRED under the
    lock they had, same delivery count, nothing TX_PENDING durably or in memory; the client's
    retry once the coordinator is back stages them and the commit applies them."""
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    tid = kemu.topic_id("t")
    actor = share_partitions(kemu.runtime).existing(GROUP, tid, 0)
    assert actor is not None and actor.core is not None
    lock = actor.core.next_deadline()
    persister = share_coordinator(kemu.runtime)

    async def refused(*args: object, **kwargs: object) -> ErrorCode:
        return ErrorCode.coordinator_not_available

    monkeypatch.setattr(persister, "write_state", refused)
    response = await client.call(
        txn_ack(tid, {0: [(0, 2, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert response.error_code == ErrorCode.none
    assert partition_data(response, 0).error_code == ErrorCode.coordinator_not_available
    monkeypatch.undo()
    core = actor.core
    assert core is not None  # kept: the stage was taken back, not the acquisitions dropped
    assert core.spans() == [(0, 2, RecordState.ACQUIRED, 1, "m1")]
    assert core.next_deadline() == lock and core.pending_transactions() == set()
    core.check_invariants()
    assert all(b[2] != int(RecordState.TX_PENDING) for b in persisted(kemu))
    again = await client.call(share_fetch(tid, {0: []}, epoch=2))
    assert all(not topic.partitions for topic in again.responses)  # m1's: not handed out again
    staged = await client.call(
        txn_ack(tid, {0: [(0, 2, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert partition_data(staged, 0).error_code == ErrorCode.none
    assert set(states(kemu).values()) == {RecordState.TX_PENDING}
    assert persisted(kemu) == [(0, 2, int(RecordState.TX_PENDING))]
    assert (await end_txn(client, pid, epoch, commit=True)).error_code == ErrorCode.none
    await txn_share_acks(kemu.runtime).drain()
    assert states(kemu) == {} and core.start == 3  # ACKNOWLEDGED: the start moved past them


@pytest.mark.parametrize("refusal", [ErrorCode.fenced_state_epoch, ErrorCode.fenced_leader_epoch])
async def test_a_fenced_stage_write_drops_the_state_and_reloads_it(
    kemu: Harness, monkeypatch: pytest.MonkeyPatch, refusal: ErrorCode
) -> None:
    """A stage write fenced by the share coordinator says this leader's view of the state is
    no longer the durable one (an admin rewrote it, or leadership moved): nothing is taken
    back in memory; the state is dropped and reloaded on next use, where the acquisitions are
    not kept, so the records are delivered again with their count + 1."""
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    tid = kemu.topic_id("t")
    persister = share_coordinator(kemu.runtime)

    async def fenced(*args: object, **kwargs: object) -> ErrorCode:
        return refusal

    monkeypatch.setattr(persister, "write_state", fenced)
    response = await client.call(
        txn_ack(tid, {0: [(0, 2, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert partition_data(response, 0).error_code == ErrorCode.not_leader_or_follower
    monkeypatch.undo()
    assert all(b[2] != int(RecordState.TX_PENDING) for b in persisted(kemu))
    actor = share_partitions(kemu.runtime).existing(GROUP, tid, 0)
    assert actor is not None and actor.core is None  # reloaded on next use
    again = await client.call(share_fetch(tid, {0: []}, epoch=2))
    assert acquired(again) == [(0, 2, 2)]
    staged = await client.call(
        txn_ack(tid, {0: [(0, 2, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert partition_data(staged, 0).error_code == ErrorCode.none
    assert set(states(kemu).values()) == {RecordState.TX_PENDING}


# --- versions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, -1])
async def test_a_version_other_than_0_closes_the_connection(kemu: Harness, version: int) -> None:
    """Both RPCs are v0 only (spec §2.7, §4.1): another version cannot be parsed, and the
    broker closes the connection as Kafka does for a request it cannot parse."""
    for body in (
        add_request({kemu.topic_id("t"): (0,)}, 1, 0),
        txn_ack(kemu.topic_id("t"), {0: [(0, 0, [ACCEPT])]}, 1, 0, member_epoch=1),
    ):
        client = await kemu.client(coordinator_node(kemu))
        frame = bytearray(wire.encode_request_frame(body, 1))
        struct.pack_into(">h", frame, 6, version)
        client.writer.write(bytes(frame))
        assert await client.reader.read(4) == b""
