"""KIP-1289 decisions (spec §12), and a §11.3 case, that no other integration test reaches,
through the wire.

Q8, gaps: the source topic is written by a transactional producer, so every record is
followed by a COMMIT marker, and a share fetch (read_uncommitted) hands the markers' offsets out
too. The member holds no record there: it acknowledges them as gaps (type 0), here in a producer
transaction with the records (the acknowledgements are built by hand, as §11.1 row 9 builds
them: ``kemu.client``'s consumer acknowledges the gaps it finds itself). The gaps are
staged TX_PENDING with the records: a commit archives them with the records acknowledged (the
start offset moves past all of it, lag 0), an abort makes them available again with the
records, which are delivered again.

Q10, several members in one transaction: two members of a group each hold a record; one
producer transaction carries both members' acknowledgements (each TxnShareAcknowledge names its
own member and epoch); the commit completes both records, the abort gives both back.

§11.3 (KafkaApisTest ``testWriteTxnMarkersDoesNotApplyShareMarkerForNonShareStatePartition``):
a marker a tool writes to a data partition of the transaction does not resolve the share
acknowledgements staged in it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.client import (
    AcknowledgeType,
    ShareAcknowledgementBatch,
    ShareAcknowledgements,
    ShareGroupMetadata,
    TopicIdPartition,
    TransactionalProducer,
)
from kemu.testing.inprocess import InProcessKemu
from tests.integration.kip1289.test_kip1289 import ShareMember, WireClient
from tests.integration.kip1289.test_kip1289 import setup as setup_two_members
from tests.integration.kip1289.test_kip1289 import wait_for_lag as wait_for_member_lag
from tests.integration.kip1289.test_kip1289_scenarios import (
    OVERRIDES,
    decode_share_state,
    setup,
)

pytestmark = pytest.mark.integration

DESCRIBE_TRANSACTIONS, WRITE_TXN_MARKERS = 65, 27


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKemu]:
    process = InProcessKemu(
        brokers=3,
        overrides=OVERRIDES,
        log_path=tmp_path_factory.mktemp("kip1289-decided") / "kemu.log",
    ).start()
    yield process
    process.stop()


def produce_transactionally(kemu: InProcessKemu, topic: str, values: list[bytes]) -> None:
    """One transaction per record: record, COMMIT marker, record, COMMIT marker, ..."""
    producer = Producer(
        {"bootstrap.servers": kemu.bootstrap, "transactional.id": f"source-{uuid.uuid4()}"}
    )
    producer.init_transactions(15)
    for value in values:
        producer.begin_transaction()
        producer.produce(topic, value=value, partition=0)
        producer.commit_transaction(15)


async def staged_with_gaps(kemu: InProcessKemu, name: str, commit: bool) -> ShareMember:
    """A member acquires offsets 0-3 (records at 0 and 2, COMMIT markers at 1 and 3); one
    producer transaction stages ACCEPT, gap, ACCEPT, gap; then it ends."""
    setup(kemu, name)
    produce_transactionally(kemu, name, [b"first", b"second"])
    member = ShareMember(WireClient(kemu.bootstrap), name, name, "m1")
    acquired = {o: n for first, last, n in member.fetch_until(4) for o in range(first, last + 1)}
    assert acquired == {0: 1, 1: 1, 2: 1, 3: 1}  # the markers' offsets are handed out too
    tp = TopicIdPartition(member.topic_id, name, 0)
    accept, gap = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.GAP)
    acknowledgements = ShareAcknowledgements(
        {tp: [ShareAcknowledgementBatch(0, 3, (accept, gap, accept, gap))]}
    )
    producer = TransactionalProducer(kemu.bootstrap, f"tx-{name}")
    try:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send_share_acknowledgements_to_transaction(
            acknowledgements, ShareGroupMetadata(name, member.member_id, member.member_epoch)
        )
        assert pending_offsets(kemu, name) == {0, 1, 2, 3}  # gaps staged with the records
        if commit:
            await producer.commit_transaction()
        else:
            await producer.abort_transaction()
    finally:
        await producer.close()
    return member


def group_state(kemu: InProcessKemu, group: str) -> dict[str, Any]:
    [state] = [
        e["state"] for e in decode_share_state(kemu) if e.get("state", {}).get("groupId") == group
    ]
    found: dict[str, Any] = state
    return found


def pending_offsets(kemu: InProcessKemu, group: str) -> set[int]:
    return {
        offset
        for batch in group_state(kemu, group)["stateBatches"]
        if batch["deliveryState"] == 5
        for offset in range(batch["firstOffset"], batch["lastOffset"] + 1)
    }


async def test_committed_gaps_are_archived_with_the_records(kemu: InProcessKemu) -> None:
    member = await staged_with_gaps(kemu, "gaps-commit", commit=True)
    try:
        wait_for_member_lag(member, 0)
        assert member.fetch(wait_ms=300) == []
        # records acknowledged, gaps archived: all complete, the start offset past them
        assert group_state(kemu, "gaps-commit")["startOffset"] == 4
    finally:
        member.client.close()


async def test_aborted_gaps_are_available_again_with_the_records(kemu: InProcessKemu) -> None:
    member = await staged_with_gaps(kemu, "gaps-abort", commit=False)
    try:
        again = {o: n for first, last, n in member.fetch_until(4) for o in range(first, last + 1)}
        assert again == {0: 2, 1: 2, 2: 2, 3: 2}  # records and gaps back, delivered again
        assert member.lag() == 4
    finally:
        member.client.close()


# --- Q10 --------------------------------------------------------------------------------------


async def one_transaction_for_two_members(
    kemu: InProcessKemu, name: str, commit: bool
) -> tuple[ShareMember, ShareMember]:
    """m1 holds offset 0, m2 offset 1; one transaction stages both, then ends."""
    _, m1, m2 = setup_two_members(kemu, name)
    assert m1.fetch_until(1) == [(0, 0, 1)]
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    producer.produce(name, value=b"second", partition=0)
    assert producer.flush(15) == 0
    assert m2.fetch_until(1) == [(1, 1, 1)]
    transactional = TransactionalProducer(kemu.bootstrap, f"tx-{name}")
    try:
        await transactional.init_transactions()
        transactional.begin_transaction()
        for member, offset in ((m1, 0), (m2, 1)):
            acknowledgements = ShareAcknowledgements(
                {
                    TopicIdPartition(member.topic_id, name, 0): [
                        ShareAcknowledgementBatch(offset, offset, (int(AcknowledgeType.ACCEPT),))
                    ]
                }
            )
            metadata = ShareGroupMetadata(name, member.member_id, member.member_epoch)
            await transactional.send_share_acknowledgements_to_transaction(
                acknowledgements, metadata
            )
        assert m1.lag() == 2  # both TX_PENDING: not delivered yet
        if commit:
            await transactional.commit_transaction()
        else:
            await transactional.abort_transaction()
    finally:
        await transactional.close()
    return m1, m2


async def test_one_transaction_commits_two_members_acknowledgements(kemu: InProcessKemu) -> None:
    m1, m2 = await one_transaction_for_two_members(kemu, "two-members-commit", commit=True)
    try:
        wait_for_member_lag(m1, 0)
        assert m1.fetch(wait_ms=300) == [] and m2.fetch(wait_ms=300) == []
    finally:
        m1.client.close()


async def test_one_transaction_aborts_two_members_acknowledgements(kemu: InProcessKemu) -> None:
    m1, _ = await one_transaction_for_two_members(kemu, "two-members-abort", commit=False)
    try:
        again = {o: n for first, last, n in m1.fetch_until(2) for o in range(first, last + 1)}
        assert again == {0: 2, 1: 2}  # both back, each delivered a second time
        assert m1.lag() == 2
    finally:
        m1.client.close()


# --- §11.3 KafkaApisTest: a marker outside the state partition ---------------------------------


async def test_a_tool_aborting_a_data_partition_leaves_staged_acknowledgements_alone(
    kemu: InProcessKemu,
) -> None:
    """``kafka-transactions.sh abort`` (Admin.abortTransaction) writes an ABORT marker, with
    WriteTxnMarkers, to the one data partition it names. The share acknowledgements staged in
    the same transaction live in ``__share_group_state``, which that marker did not reach: they
    stay TX_PENDING (not delivered again) and the transaction's own commit completes them."""
    name, output = "tool-abort", "tool-abort-out"
    client, m1, m2 = setup_two_members(kemu, name)
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(output, 1, 3)])[output].result(timeout=15)
    try:
        assert m1.fetch_until(1) == [(0, 0, 1)]
        transactional = TransactionalProducer(kemu.bootstrap, f"tx-{name}")
        try:
            await transactional.init_transactions()
            transactional.begin_transaction()
            await transactional.send(output, b"output", partition=0)
            tp = TopicIdPartition(m1.topic_id, name, 0)
            await transactional.send_share_acknowledgements_to_transaction(
                ShareAcknowledgements({tp: [ShareAcknowledgementBatch(0, 0, (1,))]}),
                ShareGroupMetadata(name, m1.member_id, m1.member_epoch),
            )
            described = client.call(
                client.coordinator(1, f"tx-{name}"),
                DESCRIBE_TRANSACTIONS,
                0,
                transactional_ids=(f"tx-{name}",),
            )
            [state] = described.transaction_states
            topic = client.nested(
                WRITE_TXN_MARKERS, 1, "WritableTxnMarkerTopic", name=output, partition_indexes=(0,)
            )
            marker = client.nested(
                WRITE_TXN_MARKERS,
                1,
                "WritableTxnMarker",
                producer_id=state.producer_id,
                producer_epoch=state.producer_epoch,
                transaction_result=False,
                topics=(topic,),
                coordinator_epoch=0,
            )
            written = client.call(client.leader(output)[1], WRITE_TXN_MARKERS, 1, markers=(marker,))
            assert written.markers[0].topics[0].partitions[0].error_code == 0
            assert m2.fetch(wait_ms=500) == []  # still TX_PENDING: not delivered again
            assert m1.lag() == 1
            await transactional.commit_transaction()
        finally:
            await transactional.close()
        wait_for_member_lag(m1, 0)  # the transaction's own marker completed it
        assert m2.fetch(wait_ms=500) == []
    finally:
        client.close()
