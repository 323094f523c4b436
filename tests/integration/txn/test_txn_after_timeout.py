"""What a producer hears after the coordinator aborted its transaction on timeout (transaction
version 2: the abort bumps the producer epoch), request by request on the wire, on kemu and on
a real Kafka 4.4.0 (bench's jars; skipped without them). Each request carries the epoch the
producer still holds. Kafka 4.4.0 answers (recorded 2026-12-06, the same on kemu):

- Produce v12 enlisting its partition: INVALID_PRODUCER_EPOCH (the Java producer aborts after
  it and goes on: ``test_txn_endings_java.py::test_send_after_timeout_abort_is_abortable``);
- AddPartitionsToTxn v3, AddOffsetsToTxn v4: PRODUCER_FENCED;
- TxnOffsetCommit v3 and v5: INVALID_PRODUCER_EPOCH (the Java producer makes it fatal);
- EndTxn v5 commit: INVALID_TXN_STATE, abort: NONE (the abort already happened).

KIP-1289's TxnShareAcknowledge and AddShareAcknowledgementsToTxn (kemu only) answer what the
coordinator's own enlistment RPCs answer: the draft PR registers the share-state partitions
through the transaction coordinator's AddPartitionsToTxn path, and AddShareAcknowledgementsToTxn
is AddOffsetsToTxn's counterpart (PRODUCER_FENCED either way).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.testing.kafka import SHARE_GROUPS
from kemu.testing.wire_client import WireClient
from tests.integration.txn.wire_parity import (
    Server,
    add_partition,
    client_with_topic,
    coordinator_ready,
    init_producer_id,
    produce,
    serve,
    until_ready,
)

pytestmark = [pytest.mark.integration, pytest.mark.parity]

METADATA, OFFSET_FETCH, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 3, 9, 25, 26, 28
DESCRIBE_TXNS = 65
SHARE_HEARTBEAT, TXN_SHARE_ACK, ADD_SHARE_ACKS = 76, 95, 96
TOPIC = "after-timeout"
NO_LEADER_YET = (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition)
TIMEOUT_MS = 1000

# Kafka 4.4.0's answers to the producer holding the epoch the timeout abort bumped.
KAFKA_ANSWERS = {
    "produce": ErrorCode.invalid_producer_epoch,
    "add_partitions": ErrorCode.producer_fenced,
    "add_offsets": ErrorCode.producer_fenced,
    "txn_offset_commit_v3": ErrorCode.invalid_producer_epoch,
    "txn_offset_commit_v5": ErrorCode.invalid_producer_epoch,
    "end_txn_commit": ErrorCode.invalid_txn_state,
    "end_txn_abort": ErrorCode.none,
}


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with serve(
        request,
        tmp_path_factory,
        name="txn-after-timeout",
        kemu_overrides=SHARE_GROUPS.kemu_overrides(**{"kemu.kip1289.enable": "true"}),
    ) as started:
        yield started


@dataclass
class TimedOut:
    """A producer whose transaction the coordinator aborted on timeout; it still holds its
    first epoch."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


class Producer:
    """A transactional producer on the wire; the single broker (node 1) coordinates all."""

    def __init__(self, client: WireClient) -> None:
        self.client = client

    def coordinator_ready(self, key_type: int, key: str) -> None:
        coordinator_ready(self.client, key_type, key)

    def init(self, transactional_id: str) -> tuple[int, int]:
        return init_producer_id(
            self.client, transactional_id, datetime.timedelta(milliseconds=TIMEOUT_MS)
        )

    def produce(self, txn: TimedOut, sequence: int) -> ErrorCode:
        """Produce v12 (transaction version 2): the partition joins the transaction with it."""
        result = produce(
            self.client,
            TOPIC,
            txn.producer_id,
            txn.producer_epoch,
            sequence,
            version=12,
            transactional_id=txn.transactional_id,
            transactional=True,
        )
        return ErrorCode(result.error_code)

    def state(self, transactional_id: str) -> tuple[str, int]:
        answer = self.client.call(1, DESCRIBE_TXNS, 0, transactional_ids=(transactional_id,))
        [found] = answer.transaction_states
        return str(found.transaction_state), int(found.producer_epoch)

    def timed_out(self, names: list[str]) -> dict[str, TimedOut]:
        """One transaction per name, each with a record, left to time out; returned once the
        coordinator has aborted them all and bumped their epochs."""
        run = uuid.uuid4().hex[:8]
        txns = {}
        for name in names:
            transactional_id = f"tx-{name}-{run}"
            producer_id, epoch = self.init(transactional_id)
            txns[name] = TimedOut(transactional_id, producer_id, epoch)
            # a topic Kafka has just created may have no leader yet: the first produce waits
            first = until_ready(
                lambda txn=txns[name]: self.produce(txn, 0),
                lambda error: error not in NO_LEADER_YET,
            )
            assert first == ErrorCode.none
        for txn in txns.values():
            until_ready(
                lambda txn=txn: self.state(txn.transactional_id),
                lambda s: s[0] == "CompleteAbort",
            )
            assert self.state(txn.transactional_id) == ("CompleteAbort", txn.producer_epoch + 1)
        return txns

    def add_partitions(self, txn: TimedOut) -> ErrorCode:
        return add_partition(
            self.client, TOPIC, txn.transactional_id, txn.producer_id, txn.producer_epoch
        )

    def add_offsets(self, txn: TimedOut) -> ErrorCode:
        answer = self.client.call(
            1,
            ADD_OFFSETS,
            4,
            transactional_id=txn.transactional_id,
            producer_id=txn.producer_id,
            producer_epoch=txn.producer_epoch,
            group_id=f"g-{txn.transactional_id}",
        )
        return ErrorCode(answer.error_code)

    def txn_offset_commit(self, txn: TimedOut, version: int) -> ErrorCode:
        group = f"g-{txn.transactional_id}"
        self.coordinator_ready(0, group)
        fetch = wire.request_module(OFFSET_FETCH, 8)
        until_ready(  # the group coordinator has loaded its partition
            lambda: self.client.call(
                1,
                OFFSET_FETCH,
                8,
                groups=(wire.build(fetch.OffsetFetchRequestGroup, group_id=group, topics=None),),
                require_stable=False,
            ),
            lambda r: r.groups[0].error_code == ErrorCode.none,
        )
        module = wire.request_module(TXN_OFFSET_COMMIT, version)
        partition = module.TxnOffsetCommitRequestPartition(
            partition_index=0,
            committed_offset=1,
            committed_leader_epoch=-1,
            committed_metadata="",
        )
        answer = self.client.call(
            1,
            TXN_OFFSET_COMMIT,
            version,
            transactional_id=txn.transactional_id,
            group_id=group,
            producer_id=txn.producer_id,
            producer_epoch=txn.producer_epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=(module.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=(partition,)),),
        )
        return ErrorCode(answer.topics[0].partitions[0].error_code)

    def end(self, txn: TimedOut, commit: bool) -> ErrorCode:
        answer = self.client.call(
            1,
            END_TXN,
            5,
            transactional_id=txn.transactional_id,
            producer_id=txn.producer_id,
            producer_epoch=txn.producer_epoch,
            committed=commit,
        )
        return ErrorCode(answer.error_code)


@pytest.fixture(scope="module")
def producer(server: Server) -> Iterator[Producer]:
    with client_with_topic(server, TOPIC, "txn-after-timeout") as client:
        yield Producer(client)


def test_answers_after_a_timeout_abort_are_kafkas(producer: Producer) -> None:
    txns = producer.timed_out(list(KAFKA_ANSWERS))
    answers = {
        "produce": producer.produce(txns["produce"], 1),
        "add_partitions": producer.add_partitions(txns["add_partitions"]),
        "add_offsets": producer.add_offsets(txns["add_offsets"]),
        "txn_offset_commit_v3": producer.txn_offset_commit(txns["txn_offset_commit_v3"], 3),
        "txn_offset_commit_v5": producer.txn_offset_commit(txns["txn_offset_commit_v5"], 5),
        "end_txn_commit": producer.end(txns["end_txn_commit"], commit=True),
        "end_txn_abort": producer.end(txns["end_txn_abort"], commit=False),
    }
    assert answers == KAFKA_ANSWERS


@pytest.mark.parametrize("server", ["kemu"], indirect=True)  # Kafka serves no KIP-1289 RPC
def test_share_acknowledgements_after_a_timeout_abort_answer_as_the_coordinator(
    server: Server, producer: Producer
) -> None:
    """KIP-1289 (kemu only): both RPCs from the timed-out producer answer what Kafka's
    AddPartitionsToTxn and AddOffsetsToTxn answer, and change nothing (the member's record stays
    acquired, nothing is enlisted)."""
    client = producer.client
    group = f"share-{uuid.uuid4().hex[:8]}"
    producer.coordinator_ready(0, group)
    joined = client.call(
        1,
        SHARE_HEARTBEAT,
        1,
        group_id=group,
        member_id="m1",
        member_epoch=0,
        subscribed_topic_names=(TOPIC,),
    )
    assert joined.error_code == ErrorCode.none, joined
    wanted = client.nested(METADATA, 12, "MetadataRequestTopic", name=TOPIC, topic_id=None)
    found = client.call(1, METADATA, 12, topics=(wanted,), allow_auto_topic_creation=False)
    topic_id = uuid.UUID(str(found.topics[0].topic_id))
    txns = producer.timed_out(["txn_share_ack", "add_share_acks"])

    ack = wire.request_module(TXN_SHARE_ACK, 0)
    batch = ack.TxnShareAcknowledgeBatch(first_offset=0, last_offset=0, acknowledge_types=(1,))
    partition = ack.TxnShareAcknowledgePartition(
        partition_index=0, acknowledgement_batches=(batch,)
    )
    staged = txns["txn_share_ack"]
    answer = client.call(
        1,
        TXN_SHARE_ACK,
        0,
        transactional_id=staged.transactional_id,
        group_id=group,
        producer_id=staged.producer_id,
        producer_epoch=staged.producer_epoch,
        member_id="m1",
        member_epoch=int(joined.member_epoch),
        topics=(ack.TxnShareAcknowledgeTopic(topic_id=topic_id, partitions=(partition,)),),
    )
    assert (answer.error_code, answer.responses) == (KAFKA_ANSWERS["add_partitions"], ())

    add = wire.request_module(ADD_SHARE_ACKS, 0)
    enlisted = txns["add_share_acks"]
    answer = client.call(
        1,
        ADD_SHARE_ACKS,
        0,
        transactional_id=enlisted.transactional_id,
        producer_id=enlisted.producer_id,
        producer_epoch=enlisted.producer_epoch,
        group_id=group,
        topics=(add.AddShareAcknowledgementsToTxnTopic(topic_id=topic_id, partitions=(0,)),),
    )
    assert answer.error_code == KAFKA_ANSWERS["add_offsets"], answer
    assert answer.error_message
    for txn in txns.values():
        assert producer.state(txn.transactional_id) == ("CompleteAbort", txn.producer_epoch + 1)
