"""KIP-1289 on a 3-broker kemu (in the test's process) with ``kemu.kip1289.enable=true``.

No released client sends TxnShareAcknowledge, so a small blocking wire client plays both sides
of the draft Java flow: the share consumer (ShareGroupHeartbeat to join, ShareFetch to acquire,
each routed to the group coordinator / partition leader) and the transactional producer
(InitProducerId / EndTxn at the transaction coordinator, TxnShareAcknowledge at the source
partition's leader). Records are written by confluent-kafka. Checked (spec §11.1, §11.5):
commit ACCEPT -> never redelivered, lag 0, persisted start offset past it; abort -> redelivered with
the same value, lag 1, persisted AVAILABLE; TX_PENDING (persisted state 5, read back with
``kemu decode-share-state``) is not delivered to another member; a new producer epoch aborts
the staged acknowledgements and fences the old producer.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.testing.inprocess import InProcessKemu
from kemu.testing.wire_client import WireClient as BlockingWireClient

pytestmark = pytest.mark.integration

METADATA, FIND_COORDINATOR, INIT, END_TXN = 3, 10, 22, 26
HEARTBEAT, SHARE_FETCH, DESCRIBE_OFFSETS, TXN_SHARE_ACK = 76, 78, 90, 95
GROUP_KEY, TXN_KEY = 0, 1
ACCEPT = 1
AVAILABLE, TX_PENDING = 0, 5


class WireClient(BlockingWireClient):
    """Blocking kio-framed requests, one socket per broker (kemu/testing/wire_client.py)."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap, client_id="kip1289-test")

    def leader(self, topic: str) -> tuple[uuid.UUID, int]:
        wanted = self.nested(METADATA, 12, "MetadataRequestTopic", name=topic, topic_id=None)
        response = self.call(1, METADATA, 12, topics=(wanted,), allow_auto_topic_creation=False)
        [found] = response.topics
        assert found.error_code == ErrorCode.none
        [partition] = found.partitions
        return uuid.UUID(str(found.topic_id)), int(partition.leader_id)

    def coordinator(self, key_type: int, key: str) -> int:
        response = self.call(1, FIND_COORDINATOR, 6, key_type=key_type, coordinator_keys=(key,))
        [found] = response.coordinators
        assert found.error_code == ErrorCode.none, found
        return int(found.node_id)


class ShareMember:
    """One share-group member on partition 0 of a topic, acknowledging only in transactions."""

    def __init__(self, client: WireClient, group: str, topic: str, member_id: str) -> None:
        self.client, self.group, self.topic, self.member_id = client, group, topic, member_id
        self.topic_id, self.leader = client.leader(topic)
        coordinator = client.coordinator(GROUP_KEY, group)
        joined = client.call(
            coordinator,
            HEARTBEAT,
            1,
            group_id=group,
            member_id=member_id,
            member_epoch=0,
            subscribed_topic_names=(topic,),
        )
        assert joined.error_code == ErrorCode.none, joined
        self.member_epoch = int(joined.member_epoch)
        self.session_epoch = 0

    def fetch(self, wait_ms: int = 0) -> list[tuple[int, int, int]]:
        """Acquire: [(first, last, delivery count)]."""
        partition = self.client.nested(SHARE_FETCH, 2, "FetchPartition", partition_index=0)
        topic = self.client.nested(
            SHARE_FETCH, 2, "FetchTopic", topic_id=self.topic_id, partitions=(partition,)
        )
        response = self.client.call(
            self.leader,
            SHARE_FETCH,
            2,
            group_id=self.group,
            member_id=self.member_id,
            share_session_epoch=self.session_epoch,
            max_wait=datetime.timedelta(milliseconds=wait_ms),
            min_bytes=1,
            max_bytes=2**31 - 1,
            max_records=500,
            batch_size=500,
            topics=(topic,),
        )
        assert response.error_code == ErrorCode.none, response
        self.session_epoch += 1
        acquired = []
        for t in response.responses:
            for p in t.partitions:
                assert p.error_code == ErrorCode.none, p
                acquired += [
                    (a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records
                ]
        return acquired

    def fetch_until(self, count: int) -> list[tuple[int, int, int]]:
        deadline = time.monotonic() + 15
        got: list[tuple[int, int, int]] = []
        while sum(b - a + 1 for a, b, _ in got) < count and time.monotonic() < deadline:
            got += self.fetch(wait_ms=500)
        return got

    def lag(self) -> int:
        coordinator = self.client.coordinator(GROUP_KEY, self.group)
        topic = self.client.nested(
            DESCRIBE_OFFSETS,
            1,
            "DescribeShareGroupOffsetsRequestTopic",
            topic_name=self.topic,
            partitions=(0,),
        )
        group = self.client.nested(
            DESCRIBE_OFFSETS,
            1,
            "DescribeShareGroupOffsetsRequestGroup",
            group_id=self.group,
            topics=(topic,),
        )
        response = self.client.call(coordinator, DESCRIBE_OFFSETS, 1, groups=(group,))
        [[partition]] = [t.partitions for g in response.groups for t in g.topics]
        return int(partition.lag)


class TransactionalProducer:
    def __init__(self, client: WireClient, transactional_id: str) -> None:
        self.client, self.transactional_id = client, transactional_id
        self.coordinator = client.coordinator(TXN_KEY, transactional_id)
        self.producer_id, self.producer_epoch = -1, -1

    def init(self, timeout_ms: int = 60_000) -> None:
        for _ in range(10):
            response = self.client.call(
                self.coordinator,
                INIT,
                5,
                transactional_id=self.transactional_id,
                transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
                producer_id=-1,
                producer_epoch=-1,
            )
            # over an ongoing transaction Kafka aborts it and answers CONCURRENT_TRANSACTIONS
            # (the retry bumps the epoch again), so clients retry
            if response.error_code != ErrorCode.concurrent_transactions:
                break
            time.sleep(0.05)
        assert response.error_code == ErrorCode.none, response
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch

    def send_share_acks(
        self, member: ShareMember, first: int, last: int, types: tuple[int, ...] = (ACCEPT,)
    ) -> Any:
        module = wire.request_module(TXN_SHARE_ACK, 0)
        batch = module.TxnShareAcknowledgeBatch(
            first_offset=first, last_offset=last, acknowledge_types=types
        )
        partition = module.TxnShareAcknowledgePartition(
            partition_index=0, acknowledgement_batches=(batch,)
        )
        topic = module.TxnShareAcknowledgeTopic(topic_id=member.topic_id, partitions=(partition,))
        return self.client.call(
            member.leader,
            TXN_SHARE_ACK,
            0,
            transactional_id=self.transactional_id,
            group_id=member.group,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            topics=(topic,),
        )

    def end(self, commit: bool) -> None:
        response = self.client.call(
            self.coordinator,
            END_TXN,
            5,
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            committed=commit,
        )
        assert response.error_code == ErrorCode.none, response


@pytest.fixture
def kemu(kemu_inprocess_factory: type[InProcessKemu]) -> InProcessKemu:
    return kemu_inprocess_factory(
        brokers=3,
        overrides=["kemu.kip1289.enable=true", "share.coordinator.state.topic.num.partitions=3"],
    ).start()


def setup(kemu: InProcessKemu, name: str) -> tuple[WireClient, ShareMember, ShareMember]:
    """Topic ``name`` (1 partition, RF 3), two members of group ``name`` who opened share
    sessions before "first" was written (share.auto.offset.reset=latest)."""
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(name, 1, 3)])[name].result(timeout=15)
    client = WireClient(kemu.bootstrap)
    members = ShareMember(client, name, name, "m1"), ShareMember(client, name, name, "m2")
    for member in members:
        assert member.fetch() == []
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    producer.produce(name, value=b"first", partition=0)
    assert producer.flush(15) == 0
    return client, *members


def decode_share_state(kemu: InProcessKemu) -> list[dict[str, Any]]:
    completed = subprocess.run(
        [sys.executable, "-m", "kemu.cli", "decode-share-state", "--bootstrap", kemu.first_broker],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    return [json.loads(line) for line in completed.stdout.splitlines()]


def start_offset(kemu: InProcessKemu, group: str) -> int:
    """The persisted share-partition start offset of ``group``'s partition."""
    [state] = [
        e["state"] for e in decode_share_state(kemu) if e.get("state", {}).get("groupId") == group
    ]
    return int(state["startOffset"])


def delivery_states(kemu: InProcessKemu, group: str) -> list[int]:
    """Delivery state of offset 0 in every ``__share_group_state`` record of ``group``."""
    found = []
    for entry in decode_share_state(kemu):
        key, value = entry.get("key") or {}, entry.get("value") or {}
        if (key.get("data") or {}).get("groupId") != group:
            continue
        for batch in (value.get("data") or {}).get("stateBatches", ()):
            if batch["firstOffset"] <= 0 <= batch["lastOffset"]:
                found.append(batch["deliveryState"])
    return found


def wait_for_lag(member: ShareMember, expected: int) -> None:
    deadline = time.monotonic() + 15
    while member.lag() != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    assert member.lag() == expected


def test_commit_accept_is_never_redelivered(kemu: InProcessKemu) -> None:
    client, m1, m2 = setup(kemu, "commit")
    try:
        assert m1.fetch_until(1) == [(0, 0, 1)]
        txn = TransactionalProducer(client, "tx-commit")
        txn.init()
        staged = txn.send_share_acks(m1, 0, 0)
        assert staged.error_code == ErrorCode.none
        assert [p.error_code for t in staged.responses for p in t.partitions] == [ErrorCode.none]
        assert delivery_states(kemu, "commit")[-1] == TX_PENDING
        assert m2.fetch(wait_ms=300) == []  # pending: nobody gets it
        assert m1.lag() == 1
        txn.end(commit=True)
        wait_for_lag(m1, 0)
        assert m2.fetch(wait_ms=300) == [] and m1.fetch(wait_ms=300) == []
        # complete: the start offset moved past it (kemu writes no ACKNOWLEDGED batch below it)
        assert start_offset(kemu, "commit") == 1
    finally:
        client.close()


def test_abort_redelivers_the_same_record(kemu: InProcessKemu) -> None:
    client, m1, m2 = setup(kemu, "abort")
    try:
        assert m1.fetch_until(1) == [(0, 0, 1)]
        txn = TransactionalProducer(client, "tx-abort")
        txn.init()
        assert txn.send_share_acks(m1, 0, 0).error_code == ErrorCode.none
        assert delivery_states(kemu, "abort")[-1] == TX_PENDING
        txn.end(commit=False)
        assert m2.fetch_until(1) == [(0, 0, 2)]  # same offset, next delivery
        assert m2.lag() == 1
        assert delivery_states(kemu, "abort")[-1] == AVAILABLE
    finally:
        client.close()


def test_a_new_producer_epoch_aborts_staged_acks_and_fences_the_old(kemu: InProcessKemu) -> None:
    client, m1, m2 = setup(kemu, "fenced")
    try:
        assert m1.fetch_until(1) == [(0, 0, 1)]
        zombie = TransactionalProducer(client, "tx-fenced")
        zombie.init()
        assert zombie.send_share_acks(m1, 0, 0).error_code == ErrorCode.none
        successor = TransactionalProducer(client, "tx-fenced")
        successor.init()  # bumps the epoch: the zombie's transaction is aborted
        assert m2.fetch_until(1) == [(0, 0, 2)]
        assert zombie.send_share_acks(m2, 0, 0).error_code == ErrorCode.producer_fenced
        assert successor.send_share_acks(m2, 0, 0).error_code == ErrorCode.none
        successor.end(commit=True)
        wait_for_lag(m2, 0)
    finally:
        client.close()
