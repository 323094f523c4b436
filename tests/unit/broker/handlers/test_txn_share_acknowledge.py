"""TxnShareAcknowledge (KIP-1289) through the wire on an in-process 3-broker kemu: members join
with ShareGroupHeartbeat and acquire with ShareFetch, transactions run through InitProducerId /
EndTxn, and the staged acknowledgements complete on the transaction's markers."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kemu.broker.handlers.api_versions import advertised
from kemu.broker.server import KemuServer, ServerOptions
from kemu.broker.share.manager import share_partitions
from kemu.broker.share.states import AckType, RecordState
from kemu.broker.share.txn_acks import txn_share_acks
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.share.persister import SharePartitionKey
from kemu.coordinator.share.service import share_coordinator
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.testing.plugin import free_port_block
from tests.unit.broker.handlers.test_share_fetch import (
    GROUP,
    Client,
    Harness,
    acquired,
    open_session,
    partition_data,
    share_fetch,
)

pytestmark = pytest.mark.client

TXN_SHARE_ACK, HEARTBEAT, INIT, END_TXN = 95, 76, 22, 26
GAP, ACCEPT, RELEASE, REJECT, RENEW = (int(t) for t in AckType)
TXN = "tx"


async def start(enabled: bool) -> Harness:
    config = BrokerConfig({"kemu.kip1289.enable": "true" if enabled else "false"})
    server = KemuServer(ServerOptions(brokers=3, port=free_port_block(3), config=config))
    now = [1_000_000]
    server.runtime.clock_ms = lambda: now[0]
    await server.start()
    server.cluster.create_topic("t", 3, 1)
    return Harness(server, now)


@pytest.fixture
async def kemu() -> AsyncIterator[Harness]:
    harness = await start(enabled=True)
    try:
        yield harness
    finally:
        for client in harness.clients:
            client.writer.close()
        await harness.server.close()


def request(api_key: int, version: int, **fields: Any) -> Any:
    return wire.build(wire.request_schema(api_key, version), **fields)


async def join(kemu: Harness, member: str) -> int:
    """Join the share group through its coordinator; the member's epoch."""
    for node_id in kemu.server.cluster.nodes:
        client = await kemu.client(node_id)
        response = await client.call(
            request(
                HEARTBEAT,
                1,
                group_id=GROUP,
                member_id=member,
                member_epoch=0,
                subscribed_topic_names=("t",),
            )
        )
        if response.error_code == ErrorCode.none:
            return int(response.member_epoch)
    raise AssertionError("no broker coordinates the group")


async def init_producer(client: Client, transactional_id: str = TXN) -> tuple[int, int]:
    for _ in range(5):
        response = await client.call(
            request(
                INIT,
                5,
                transactional_id=transactional_id,
                transaction_timeout=datetime.timedelta(milliseconds=60_000),
                producer_id=-1,
                producer_epoch=-1,
            )
        )
        # over an ongoing transaction Kafka aborts it and answers CONCURRENT_TRANSACTIONS;
        # clients retry
        if response.error_code != ErrorCode.concurrent_transactions:
            break
    assert response.error_code == ErrorCode.none
    return int(response.producer_id), int(response.producer_epoch)


async def end_txn(client: Client, pid: int, epoch: int, commit: bool) -> Any:
    return await client.call(
        request(
            END_TXN,
            5,
            transactional_id=TXN,
            producer_id=pid,
            producer_epoch=epoch,
            committed=commit,
        )
    )


def txn_ack(
    topic_id: uuid.UUID,
    partitions: dict[int, list[tuple[int, int, list[int]]]],
    pid: int,
    epoch: int,
    *,
    member: str = "m1",
    member_epoch: int,
    transactional_id: str | None = TXN,
    group: str = GROUP,
) -> Any:
    module = wire.request_module(TXN_SHARE_ACK, 0)
    topic = module.TxnShareAcknowledgeTopic(
        topic_id=topic_id,
        partitions=tuple(
            module.TxnShareAcknowledgePartition(
                partition_index=index,
                acknowledgement_batches=tuple(
                    module.TxnShareAcknowledgeBatch(
                        first_offset=first, last_offset=last, acknowledge_types=tuple(types)
                    )
                    for first, last, types in batches
                ),
            )
            for index, batches in partitions.items()
        ),
    )
    return module.TxnShareAcknowledgeRequest(
        transactional_id=transactional_id,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        member_id=member,
        member_epoch=member_epoch,
        topics=(topic,),
    )


def states(kemu: Harness, index: int = 0) -> dict[int, RecordState]:
    actor = share_partitions(kemu.runtime).existing(GROUP, kemu.topic_id("t"), index)
    assert actor is not None and actor.core is not None
    return {o: s for o in range(10) if (s := actor.core.state_of(o)) is not None}


def persisted(kemu: Harness, index: int = 0) -> list[tuple[int, int, int]]:
    """(first, last, delivery state) as the share coordinator holds them."""
    key = SharePartitionKey(GROUP, kemu.topic_id("t"), index)
    result = share_coordinator(kemu.runtime).read_sync(key, kemu.partition("t", index).leader_epoch)
    assert result.state is not None
    return [(b.first_offset, b.last_offset, b.delivery_state) for b in result.state.batches]


async def acquire_three(kemu: Harness) -> tuple[Client, int, int, int]:
    """m1 joined and holds offsets 0-2 of t-0; a producer is initialised."""
    member_epoch = await join(kemu, "m1")
    client = await kemu.leader_client("t", 0)
    epoch = await open_session(kemu, client)
    kemu.produce("t", 0, 3)
    response = await client.call(share_fetch(kemu.topic_id("t"), {0: []}, epoch=epoch))
    assert acquired(response) == [(0, 2, 1)]
    pid, producer_epoch = await init_producer(client)
    return client, member_epoch, pid, producer_epoch


# --- gating -----------------------------------------------------------------------------------


async def test_served_and_advertised_only_when_enabled(kemu: Harness) -> None:
    assert any(key == TXN_SHARE_ACK for key, _, _ in advertised(kemu.runtime))
    off = await start(enabled=False)
    try:
        assert all(key != TXN_SHARE_ACK for key, _, _ in advertised(off.runtime))
        client = await off.client(next(iter(off.server.cluster.nodes)))
        client.writer.write(
            wire.encode_request_frame(txn_ack(uuid.uuid4(), {}, 1, 0, member_epoch=1), 1)
        )
        assert await client.reader.read(4) == b""  # an unknown key: the connection closes
    finally:
        for c in off.clients:
            c.writer.close()
        await off.server.close()


# --- request checks ---------------------------------------------------------------------------


async def test_null_transactional_id_and_member_checks(kemu: Harness) -> None:
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    tid = kemu.topic_id("t")
    acks = {0: [(0, 0, [ACCEPT])]}
    for body, code in [
        (
            txn_ack(tid, acks, pid, epoch, member_epoch=member_epoch, transactional_id=None),
            ErrorCode.invalid_request,
        ),
        (
            txn_ack(tid, acks, pid, epoch, member="", member_epoch=member_epoch),
            ErrorCode.invalid_request,
        ),
        (
            txn_ack(tid, acks, pid, epoch, member="stranger", member_epoch=member_epoch),
            ErrorCode.unknown_member_id,
        ),
        (
            txn_ack(tid, acks, pid, epoch, member_epoch=member_epoch + 1),
            ErrorCode.stale_member_epoch,  # spec Q7: a future epoch too
        ),
        (
            txn_ack(tid, acks, pid, epoch, member_epoch=member_epoch - 1),
            ErrorCode.stale_member_epoch,
        ),
        (
            txn_ack(tid, acks, pid, epoch, member_epoch=member_epoch, group="no-such-group"),
            ErrorCode.group_id_not_found,
        ),
        (txn_ack(tid, acks, pid, epoch + 7, member_epoch=member_epoch), ErrorCode.producer_fenced),
    ]:
        response = await client.call(body)
        assert response.error_code == code
        assert response.responses == ()
    assert set(states(kemu).values()) == {RecordState.ACQUIRED}


async def test_partition_errors(kemu: Harness) -> None:
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    tid = kemu.topic_id("t")
    await join(kemu, "m2")
    ok = await client.call(
        txn_ack(
            tid,
            {0: [(0, 0, [RELEASE])], 1: [(0, 0, [ACCEPT])]},
            pid,
            epoch,
            member_epoch=member_epoch,
        )
    )
    assert ok.error_code == ErrorCode.none
    assert partition_data(ok, 0).error_code == ErrorCode.invalid_request
    # t-1 is led by another broker; t-2 has no share partition on its leader
    assert partition_data(ok, 1).error_code in (
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
    )
    renew = await client.call(
        txn_ack(tid, {0: [(0, 0, [RENEW])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert partition_data(renew, 0).error_code == ErrorCode.invalid_request
    m2_epoch = await join(kemu, "m2")
    other = await client.call(
        txn_ack(tid, {0: [(0, 0, [ACCEPT])]}, pid, epoch, member="m2", member_epoch=m2_epoch)
    )
    assert partition_data(other, 0).error_code == ErrorCode.invalid_record_state
    assert set(states(kemu).values()) == {RecordState.ACQUIRED}


async def test_no_share_partition_is_unknown_topic_or_partition(kemu: Harness) -> None:
    member_epoch = await join(kemu, "m1")
    client = await kemu.leader_client("t", 0)
    pid, epoch = await init_producer(client)
    response = await client.call(
        txn_ack(kemu.topic_id("t"), {0: [(0, 0, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert partition_data(response, 0).error_code == ErrorCode.unknown_topic_or_partition


# --- staging, commit, abort -------------------------------------------------------------------


async def test_commit_applies_staged_accept_and_reject(kemu: Harness) -> None:
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    tid = kemu.topic_id("t")
    response = await client.call(
        txn_ack(tid, {0: [(0, 1, [ACCEPT, REJECT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert response.error_code == ErrorCode.none
    assert partition_data(response, 0).error_code == ErrorCode.none
    assert states(kemu) == {
        0: RecordState.TX_PENDING,
        1: RecordState.TX_PENDING,
        2: RecordState.ACQUIRED,
    }
    pending = int(RecordState.TX_PENDING)
    assert persisted(kemu)[:2] == [(0, 0, pending), (1, 1, pending)]  # ACCEPT, REJECT staged
    # the lock of a staged record does not expire: the transaction governs the hold
    actor = share_partitions(kemu.runtime).existing(GROUP, tid, 0)
    assert actor is not None
    kemu.now[0] += 45_000  # past the 30 s lock, within the 60 s transaction timeout
    await actor._expire()
    assert states(kemu)[0] is RecordState.TX_PENDING and states(kemu)[2] is RecordState.AVAILABLE
    # ... and are not acquired by anyone while pending
    again = await client.call(share_fetch(tid, {0: []}, epoch=2))
    assert acquired(again) == [(2, 2, 2)]
    assert actor.core is not None and actor.core.start == 0  # TX_PENDING holds the start offset
    assert (await end_txn(client, pid, epoch, commit=True)).error_code == ErrorCode.none
    await txn_share_acks(kemu.runtime).drain()
    # 0 ACKNOWLEDGED and 1 ARCHIVED: the start offset moved past both
    assert 0 not in states(kemu) and 1 not in states(kemu)
    key = SharePartitionKey(GROUP, tid, 0)
    state = (
        share_coordinator(kemu.runtime).read_sync(key, kemu.partition("t", 0).leader_epoch).state
    )
    assert state is not None and state.start_offset == 2


async def test_abort_makes_staged_records_available_with_the_same_delivery_count(
    kemu: Harness,
) -> None:
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    tid = kemu.topic_id("t")
    await client.call(txn_ack(tid, {0: [(0, 2, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch))
    assert set(states(kemu).values()) == {RecordState.TX_PENDING}
    assert (await end_txn(client, pid, epoch, commit=False)).error_code == ErrorCode.none
    await txn_share_acks(kemu.runtime).drain()
    assert set(states(kemu).values()) == {RecordState.AVAILABLE}
    assert persisted(kemu) == [(0, 2, int(RecordState.AVAILABLE))]
    again = await client.call(share_fetch(tid, {0: []}, epoch=2))
    assert acquired(again) == [(0, 2, 2)]


async def test_a_new_producer_epoch_aborts_the_staged_acknowledgements(kemu: Harness) -> None:
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    tid = kemu.topic_id("t")
    await client.call(txn_ack(tid, {0: [(0, 0, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch))
    new_pid, new_epoch = await init_producer(client)  # a second instance fences the first
    assert (new_pid, new_epoch) != (pid, epoch)
    await txn_share_acks(kemu.runtime).drain()
    assert states(kemu)[0] is RecordState.AVAILABLE
    late = await client.call(
        txn_ack(tid, {0: [(1, 1, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    )
    assert late.error_code == ErrorCode.producer_fenced
    assert states(kemu)[1] is RecordState.ACQUIRED


async def test_staged_records_survive_the_member_leaving(kemu: Harness) -> None:
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    tid = kemu.topic_id("t")
    await client.call(txn_ack(tid, {0: [(0, 0, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch))
    manager = share_partitions(kemu.runtime)
    manager.departure_grace_s = 0
    await manager.release_member(GROUP, "m1")
    assert states(kemu) == {
        0: RecordState.TX_PENDING,
        1: RecordState.AVAILABLE,
        2: RecordState.AVAILABLE,
    }
    await end_txn(client, pid, epoch, commit=True)
    await txn_share_acks(kemu.runtime).drain()
    assert 0 not in states(kemu)


async def test_a_retried_stage_is_none_after_the_records_are_reloaded(kemu: Harness) -> None:
    """Spec Q5 across a reload (a restart or a leader move): the member of a staged record is not
    persisted, so the same producer id/epoch and type make the retry identical; another type,
    or another producer epoch, is still refused."""
    client, member_epoch, pid, epoch = await acquire_three(kemu)
    tid = kemu.topic_id("t")
    stage = txn_ack(tid, {0: [(0, 1, [ACCEPT])]}, pid, epoch, member_epoch=member_epoch)
    assert partition_data(await client.call(stage), 0).error_code == ErrorCode.none
    actor = share_partitions(kemu.runtime).existing(GROUP, tid, 0)
    assert actor is not None
    await actor.reload()
    before = persisted(kemu)
    retry = await client.call(stage)
    assert retry.error_code == ErrorCode.none
    assert partition_data(retry, 0).error_code == ErrorCode.none
    assert persisted(kemu) == before  # nothing written again
    other_type = txn_ack(tid, {0: [(0, 1, [REJECT])]}, pid, epoch, member_epoch=member_epoch)
    answer = partition_data(await client.call(other_type), 0)
    assert answer.error_code == ErrorCode.invalid_record_state
    assert (await end_txn(client, pid, epoch, commit=True)).error_code == ErrorCode.none
    await txn_share_acks(kemu.runtime).drain()
    assert 0 not in states(kemu) and 1 not in states(kemu)
