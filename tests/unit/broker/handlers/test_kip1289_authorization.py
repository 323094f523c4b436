"""KIP-1289's two RPCs under an authorizer (spec §5.3 step 3, §2.7): WRITE on the
TransactionalId, then READ on the group, each refused with Kafka's code and nothing changed;
TxnShareAcknowledge refuses a null TransactionalId or an empty GroupId / MemberId with
INVALID_REQUEST before it asks the authorizer (spec §5.3 steps 2, 3)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kemu.broker.security.acls import AclResourceType, Operation
from kemu.coordinator.group.placement import TRANSACTION, coordinator_partition
from kemu.coordinator.transaction.service import transaction_coordinator
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_acl_handlers import STANDARD, LoopBroker, allow

TXN_SHARE_ACK, ADD_SHARE_ACKS, INIT = 95, 96, 22
TXN_ID, GROUP = "tx", "g"
G, X = AclResourceType.GROUP, AclResourceType.TRANSACTIONAL_ID


@pytest.fixture
def broker() -> Iterator[LoopBroker]:
    b = LoopBroker(
        **{
            "authorizer.class.name": STANDARD,
            "super.users": "User:admin",
            "kemu.kip1289.enable": "true",
        }
    )
    b.cluster.create_topic("t", 1, 1)
    yield b
    b.loop.close()


def coordinator(broker: LoopBroker) -> int:
    return coordinator_partition(broker.cluster, TRANSACTION, TXN_ID).leader_id


def init_producer(broker: LoopBroker) -> tuple[int, int]:
    allow(broker, X, TXN_ID, Operation.WRITE)
    response = broker.send(
        broker.request(
            INIT,
            5,
            transactional_id=TXN_ID,
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        ),
        coordinator(broker),
    )
    assert response.error_code == ErrorCode.none
    return int(response.producer_id), int(response.producer_epoch)


def add_share_acks(broker: LoopBroker, pid: int, epoch: int) -> Any:
    topic = broker.nested(
        ADD_SHARE_ACKS, 0, "AddShareAcknowledgementsToTxnTopic",
        topic_id=broker.cluster.topics["t"].topic_id, partitions=(0,),
    )  # fmt: skip
    request = broker.request(
        ADD_SHARE_ACKS,
        0,
        transactional_id=TXN_ID,
        producer_id=pid,
        producer_epoch=epoch,
        group_id=GROUP,
        topics=(topic,),
    )
    return broker.send(request, coordinator(broker))


def txn_share_ack(
    broker: LoopBroker,
    pid: int,
    epoch: int,
    transactional_id: str | None = TXN_ID,
    group_id: str = GROUP,
    member_id: str = "m1",
) -> Any:
    batch = broker.nested(
        TXN_SHARE_ACK, 0, "TxnShareAcknowledgeBatch",
        first_offset=0, last_offset=0, acknowledge_types=(1,),
    )  # fmt: skip
    partition = broker.nested(
        TXN_SHARE_ACK, 0, "TxnShareAcknowledgePartition",
        partition_index=0, acknowledgement_batches=(batch,),
    )  # fmt: skip
    topic = broker.nested(
        TXN_SHARE_ACK, 0, "TxnShareAcknowledgeTopic",
        topic_id=broker.cluster.topics["t"].topic_id, partitions=(partition,),
    )  # fmt: skip
    request = broker.request(
        TXN_SHARE_ACK,
        0,
        transactional_id=transactional_id,
        group_id=group_id,
        producer_id=pid,
        producer_epoch=epoch,
        member_id=member_id,
        member_epoch=1,
        topics=(topic,),
    )
    return broker.send(request, broker.cluster.topics["t"].partitions[0].leader_id)


def enlisted(broker: LoopBroker) -> set[tuple[str, uuid.UUID, int]]:
    meta = transaction_coordinator(broker.runtime).coordinator.transactions[TXN_ID]
    return set(meta.share_partitions)


def test_add_share_acknowledgements_needs_write_on_the_transactional_id_then_read_on_the_group(
    broker: LoopBroker,
) -> None:
    pid, epoch = init_producer(broker)
    acl_store_reset(broker)
    refused = add_share_acks(broker, pid, epoch)
    assert refused.error_code == ErrorCode.transactional_id_authorization_failed
    allow(broker, X, TXN_ID, Operation.WRITE)
    refused = add_share_acks(broker, pid, epoch)
    assert refused.error_code == ErrorCode.group_authorization_failed
    assert enlisted(broker) == set()  # nothing changed on either refusal
    allow(broker, G, GROUP, Operation.READ)
    # authorized: the group check is next (the group does not exist: spec Q7)
    assert add_share_acks(broker, pid, epoch).error_code == ErrorCode.group_id_not_found
    assert enlisted(broker) == set()


def test_txn_share_acknowledge_needs_write_on_the_transactional_id_then_read_on_the_group(
    broker: LoopBroker,
) -> None:
    pid, epoch = init_producer(broker)
    acl_store_reset(broker)
    refused = txn_share_ack(broker, pid, epoch)
    assert refused.error_code == ErrorCode.transactional_id_authorization_failed
    assert [p.error_code for t in refused.responses for p in t.partitions] in (
        [],
        [ErrorCode.transactional_id_authorization_failed],
    )
    allow(broker, X, TXN_ID, Operation.WRITE)
    refused = txn_share_ack(broker, pid, epoch)
    assert refused.error_code == ErrorCode.group_authorization_failed
    assert enlisted(broker) == set()
    allow(broker, G, GROUP, Operation.READ)
    # authorized: the member check is next (the group does not exist: spec Q7)
    assert txn_share_ack(broker, pid, epoch).error_code == ErrorCode.group_id_not_found


@pytest.mark.parametrize(
    "fields",
    [{"transactional_id": None}, {"group_id": ""}, {"member_id": ""}],
    ids=["null-transactional-id", "empty-group-id", "empty-member-id"],
)
def test_txn_share_acknowledge_refuses_bad_ids_before_asking_the_authorizer(
    broker: LoopBroker, fields: dict[str, Any]
) -> None:
    """Spec §5.3: step 2 (INVALID_REQUEST) comes before step 3 (the ACL checks)."""
    pid, epoch = init_producer(broker)
    acl_store_reset(broker)  # no ACL at all: every check would be refused
    assert txn_share_ack(broker, pid, epoch, **fields).error_code == ErrorCode.invalid_request


def acl_store_reset(broker: LoopBroker) -> None:
    from kemu.broker.security.acls import acl_store

    acl_store(broker.runtime).acls = []
