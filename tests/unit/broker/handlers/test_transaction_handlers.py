"""The transaction APIs through encoded frames on an in-process 3-node model: InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, WriteTxnMarkers, Fetch
READ_COMMITTED, List/DescribeTransactions, and a coordinator reloaded from
``__transaction_state``."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from typing import Any

import pytest

from kemu.cluster.context import Runtime
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.transaction.service import TransactionService
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch, read_header
from tests.unit.broker.handlers.test_admin_handlers import Broker

INIT, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, MARKERS, TXN_COMMIT = 22, 24, 25, 26, 27, 28
FETCH, DESCRIBE, LIST = 1, 65, 66
TXN = "unit-txn"
NOW = 1_700_000_000_000


@pytest.fixture
def broker() -> Broker:
    b = Broker()
    b.cluster.create_topic("orders", 2, 3)
    return b


def init(broker: Broker, version: int = 5, **fields: Any) -> Any:
    fields.setdefault("transactional_id", TXN)
    fields.setdefault("transaction_timeout", datetime.timedelta(milliseconds=60_000))
    return broker.send(broker.request(INIT, version, **fields))


def add_partitions(broker: Broker, pid: int, epoch: int, *indexes: int, version: int = 3) -> Any:
    topic = broker.nested(ADD_PARTITIONS, version, "AddPartitionsToTxnTopic", name="orders",
                          partitions=indexes)  # fmt: skip
    return broker.send(
        broker.request(
            ADD_PARTITIONS,
            version,
            v3_and_below_transactional_id=TXN,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(topic,),
        )
    )


def end(broker: Broker, pid: int, epoch: int, commit: bool, version: int = 4) -> Any:
    return broker.send(
        broker.request(
            END_TXN,
            version,
            transactional_id=TXN,
            producer_id=pid,
            producer_epoch=epoch,
            committed=commit,
        )
    )


def produce_transactional(broker: Broker, index: int, pid: int, epoch: int, seq: int) -> None:
    batch = build_batch(
        [(None, b"t")] * 2,
        timestamp_ms=NOW,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )
    partition = broker.cluster.topics["orders"].partitions[index]
    assert partition.append([(read_header(batch), batch)], now_ms=NOW).error is ErrorCode.none


def fetch_committed(broker: Broker, index: int) -> Any:
    partition = broker.cluster.topics["orders"].partitions[index]
    fetch_partition = broker.nested(FETCH, 12, "FetchPartition", partition=index, fetch_offset=0,
                                    partition_max_bytes=1 << 20)  # fmt: skip
    topic = broker.nested(FETCH, 12, "FetchTopic", topic="orders", partitions=(fetch_partition,))
    response = broker.send(
        broker.request(
            FETCH,
            12,
            max_wait=datetime.timedelta(0),
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=1,
            session_id=0,
            session_epoch=-1,
            topics=(topic,),
            forgotten_topics_data=(),
            rack_id="",
        ),
        node_id=partition.leader_id,
    )
    return response.responses[0].partitions[0]


def test_abort_writes_markers_and_read_committed_gets_the_aborted_transaction(
    broker: Broker,
) -> None:
    first = init(broker)
    assert first.error_code == ErrorCode.none
    pid, epoch = first.producer_id, first.producer_epoch
    added = add_partitions(broker, pid, epoch, 0, 1)
    assert [r.partition_error_code for r in added.results_by_topic_v3_and_below[0]
            .results_by_partition] == [ErrorCode.none] * 2  # fmt: skip
    produce_transactional(broker, 0, pid, epoch, 0)
    open_data = fetch_committed(broker, 0)
    assert (open_data.high_watermark, open_data.last_stable_offset) == (2, 0)
    assert open_data.records in (b"", None)
    assert end(broker, pid, epoch, False).error_code == ErrorCode.none
    data = fetch_committed(broker, 0)
    assert (data.high_watermark, data.last_stable_offset) == (3, 3)
    assert [(a.producer_id, a.first_offset) for a in data.aborted_transactions] == [(pid, 0)]
    other = broker.cluster.topics["orders"].partitions[1]
    assert other.high_watermark == 1  # the ABORT marker alone


def test_fencing_and_old_version_errors(broker: Broker) -> None:
    first = init(broker)
    second = init(broker)
    assert second.producer_epoch == first.producer_epoch + 1
    stale = add_partitions(broker, first.producer_id, first.producer_epoch, 0, version=1)
    assert stale.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == (
        ErrorCode.invalid_producer_epoch
    )
    fenced = end(broker, first.producer_id, first.producer_epoch, True, version=3)
    assert fenced.error_code == ErrorCode.producer_fenced
    too_long = init(broker, transaction_timeout=datetime.timedelta(minutes=16))
    assert too_long.error_code == ErrorCode.invalid_transaction_timeout
    unknown = add_partitions(broker, second.producer_id, second.producer_epoch, 7)
    assert unknown.results_by_topic_v3_and_below[0].results_by_partition[
        0
    ].partition_error_code == (ErrorCode.unknown_topic_or_partition)


def test_end_txn_v5_bumps_the_epoch(broker: Broker) -> None:
    first = init(broker)
    add_partitions(broker, first.producer_id, first.producer_epoch, 0)
    ended = end(broker, first.producer_id, first.producer_epoch, True, version=5)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (
        ErrorCode.none,
        first.producer_id,
        first.producer_epoch + 1,
    )


def txn_offset_commit(
    broker: Broker, version: int, pid: int, epoch: int, topic_id: Any = None, **fields: Any
) -> Any:
    partition = broker.nested(TXN_COMMIT, version, "TxnOffsetCommitRequestPartition",
                              partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                              committed_metadata="")  # fmt: skip
    if topic_id is None:
        topic_id = broker.cluster.topics["orders"].topic_id
    topic = broker.nested(TXN_COMMIT, version, "TxnOffsetCommitRequestTopic", name="orders",
                          topic_id=topic_id, partitions=(partition,))  # fmt: skip
    fields.setdefault("generation_id", -1)
    fields.setdefault("member_id", "")
    fields.setdefault("group_instance_id", None)
    response = broker.send(
        broker.request(
            TXN_COMMIT,
            version,
            transactional_id=TXN,
            group_id="g",
            producer_id=pid,
            producer_epoch=epoch,
            topics=(topic,),
            **fields,
        )
    )
    return response.topics[0].partitions[0].error_code


def test_txn_offset_commit_checks(broker: Broker) -> None:
    first = init(broker)
    pid, epoch = first.producer_id, first.producer_epoch
    offsets = broker.send(
        broker.request(
            ADD_OFFSETS, 4, transactional_id=TXN, producer_id=pid, producer_epoch=epoch,
            group_id="g",
        )
    )  # fmt: skip
    assert offsets.error_code == ErrorCode.none
    # INVALID_PRODUCER_EPOCH at every version, as Kafka 4.4.0 (never PRODUCER_FENCED)
    for version in (2, 3, 5):
        assert txn_offset_commit(broker, version, pid, epoch + 1) == (
            ErrorCode.invalid_producer_epoch
        )
    assert txn_offset_commit(broker, 3, pid, epoch, generation_id=4) == (
        ErrorCode.illegal_generation
    )
    assert txn_offset_commit(broker, 3, pid, epoch) == ErrorCode.none
    from kemu.coordinator.group.service import group_coordinator

    groups = group_coordinator(broker.runtime)
    assert groups.fetch_offsets("g", [("orders", [0])])[1][0].offset == -1  # not yet

    async def commit() -> Any:  # the group coordinator arms its timers on the running loop
        return end(broker, pid, epoch, True)

    assert asyncio.run(commit()).error_code == ErrorCode.none
    assert groups.fetch_offsets("g", [("orders", [0])])[1][0].offset == 5


def test_txn_offset_commit_v5_joins_the_offsets_partition_without_add_offsets(
    broker: Broker,
) -> None:
    # Transaction version 2 clients (franz-go, Java 4.x) send no AddOffsetsToTxn: a transaction
    # that only commits consumed offsets must still end, and commit them.
    first = init(broker)
    pid, epoch = first.producer_id, first.producer_epoch
    assert txn_offset_commit(broker, 5, pid, epoch) == ErrorCode.none
    from kemu.coordinator.group.service import group_coordinator

    async def commit() -> Any:
        return end(broker, pid, epoch, True, version=5)

    assert asyncio.run(commit()).error_code == ErrorCode.none
    groups = group_coordinator(broker.runtime)
    assert groups.fetch_offsets("g", [("orders", [0])])[1][0].offset == 5


def test_txn_offset_commit_v6_names_topics_by_id(broker: Broker) -> None:
    # KIP-1319: the topic is named by id; an unknown id is UNKNOWN_TOPIC_ID, and v6 reports a
    # generation for an unknown group as GROUP_ID_NOT_FOUND (ILLEGAL_GENERATION before v6)
    first = init(broker)
    pid, epoch = first.producer_id, first.producer_epoch
    assert txn_offset_commit(broker, 6, pid, epoch, topic_id=uuid.uuid4()) == (
        ErrorCode.unknown_topic_id
    )
    assert txn_offset_commit(broker, 6, pid, epoch, generation_id=4) == (
        ErrorCode.group_id_not_found
    )
    assert txn_offset_commit(broker, 5, pid, epoch, generation_id=4) == (
        ErrorCode.illegal_generation
    )
    topic_id = broker.cluster.topics["orders"].topic_id
    partition = broker.nested(TXN_COMMIT, 6, "TxnOffsetCommitRequestPartition",
                              partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                              committed_metadata="")  # fmt: skip
    topic = broker.nested(TXN_COMMIT, 6, "TxnOffsetCommitRequestTopic", topic_id=topic_id,
                          partitions=(partition,))  # fmt: skip
    request = broker.request(TXN_COMMIT, 6, transactional_id=TXN, group_id="g", producer_id=pid,
                             producer_epoch=epoch, topics=(topic,))  # fmt: skip
    response = broker.send(request)
    assert response.topics[0].topic_id == topic_id
    assert response.topics[0].partitions[0].error_code == ErrorCode.none
    from kemu.coordinator.group.service import group_coordinator

    async def commit() -> Any:
        return end(broker, pid, epoch, True, version=5)

    assert asyncio.run(commit()).error_code == ErrorCode.none
    groups = group_coordinator(broker.runtime)
    assert groups.fetch_offsets("g", [("orders", [0])])[1][0].offset == 5


def test_write_txn_markers_for_tools(broker: Broker) -> None:
    partition = broker.cluster.topics["orders"].partitions[0]
    produce_transactional(broker, 0, 77, 0, 0)
    assert partition.last_stable_offset == 0
    topic = broker.nested(MARKERS, 1, "WritableTxnMarkerTopic", name="orders",
                          partition_indexes=(0,))  # fmt: skip
    marker = broker.nested(
        MARKERS,
        1,
        "WritableTxnMarker",
        producer_id=77,
        producer_epoch=0,
        transaction_result=False,
        topics=(topic,),
        coordinator_epoch=0,
    )
    response = broker.send(broker.request(MARKERS, 1, markers=(marker,)), partition.leader_id)
    assert response.markers[0].topics[0].partitions[0].error_code == ErrorCode.none
    assert partition.last_stable_offset == partition.high_watermark == 3
    assert partition.aborted_ranges(0, 3) == [(77, 0, 2)]


def test_write_txn_markers_refuses_an_epoch_the_partition_has_seen_pass(broker: Broker) -> None:
    """Seed 500 of the simulation (3000 steps): kafka-transactions.sh abort read an open
    transaction at epoch 293 with DescribeProducers; its marker came after that transaction had
    ended and the producer's next one (epoch 294) had written, ended that one instead, and the
    coordinator then committed it: a committed record read as aborted. Kafka refuses it."""
    partition = broker.cluster.topics["orders"].partitions[0]
    produce_transactional(broker, 0, 77, 5, 0)
    topic = broker.nested(MARKERS, 1, "WritableTxnMarkerTopic", name="orders",
                          partition_indexes=(0,))  # fmt: skip
    marker = broker.nested(
        MARKERS,
        1,
        "WritableTxnMarker",
        producer_id=77,
        producer_epoch=4,
        transaction_result=False,
        topics=(topic,),
        coordinator_epoch=0,
    )
    response = broker.send(broker.request(MARKERS, 1, markers=(marker,)), partition.leader_id)
    assert (
        response.markers[0].topics[0].partitions[0].error_code == ErrorCode.invalid_producer_epoch
    )
    assert partition.last_stable_offset == 0  # still open, nothing written
    assert partition.high_watermark == 2
    assert partition.aborted_ranges(0, 2) == []


def test_list_and_describe_transactions(broker: Broker) -> None:
    first = init(broker)
    add_partitions(broker, first.producer_id, first.producer_epoch, 1)
    described = broker.send(broker.request(DESCRIBE, 0, transactional_ids=(TXN, "nope")))
    known, unknown = described.transaction_states
    assert (known.transaction_state, known.producer_id) == ("Ongoing", first.producer_id)
    assert [(t.topic, tuple(t.partitions)) for t in known.topics] == [("orders", (1,))]
    assert unknown.error_code == ErrorCode.transactional_id_not_found
    listed = [
        state.transactional_id
        for node in (1, 2, 3)
        for state in broker.send(
            broker.request(
                LIST,
                1,
                state_filters=("Ongoing", "Bogus"),
                producer_id_filters=(),
                duration_filter=-1,
            ),
            node,
        ).transaction_states
    ]
    assert listed == [TXN]  # listed once, by the broker that coordinates it


def test_list_transactions_filters_as_kafka(broker: Broker) -> None:
    """Kafka 4.4.0's listTransactionStates: the duration must be exceeded (the clock stands
    still here: 0 ms since the start lists nothing at 0); the pattern is RE2/J's, matched
    against whole ids; one RE2/J refuses is INVALID_REGULAR_EXPRESSION
    (``txn/test_list_transactions_pattern_kafka.py`` compares them with Kafka's)."""
    first = init(broker)
    add_partitions(broker, first.producer_id, first.producer_epoch, 0)

    def listed(duration: int, pattern: str | None = None) -> tuple[int, list[str]]:
        answers = [
            broker.send(
                broker.request(
                    LIST,
                    2,
                    state_filters=(),
                    producer_id_filters=(),
                    duration_filter=duration,
                    transactional_id_pattern=pattern,
                ),
                node,
            )
            for node in (1, 2, 3)
        ]
        return max(a.error_code for a in answers), [
            state.transactional_id for a in answers for state in a.transaction_states
        ]

    assert listed(-1) == (ErrorCode.none, [TXN])
    assert listed(0) == (ErrorCode.none, [])
    assert listed(-1, "unit-.*") == (ErrorCode.none, [TXN])
    assert listed(-1, "unit") == (ErrorCode.none, [])
    assert listed(-1, "\\pL+-\\pL+") == (ErrorCode.none, [TXN])
    assert listed(-1, "unit(?=-)") == (ErrorCode.invalid_regular_expression, [])


def test_a_reloaded_coordinator_resumes_from_the_transaction_log(broker: Broker) -> None:
    first = init(broker)
    add_partitions(broker, first.producer_id, first.producer_epoch, 0)
    reloaded = TransactionService(Runtime(cluster=broker.cluster, clock_ms=lambda: NOW))
    meta = reloaded.coordinator.transactions[TXN]
    assert (meta.producer_id, meta.producer_epoch, meta.partitions) == (
        first.producer_id,
        first.producer_epoch,
        {("orders", 0)},
    )
    assert reloaded.coordinator.next_deadline_ms() == NOW + 60_000


def test_add_partitions_v4_verifies_and_adds_in_batches(broker: Broker) -> None:
    first = init(broker)
    pid, epoch = first.producer_id, first.producer_epoch

    def transaction(verify_only: bool, *indexes: int) -> Any:
        topic = broker.nested(ADD_PARTITIONS, 5, "AddPartitionsToTxnTopic", name="orders",
                              partitions=indexes)  # fmt: skip
        return broker.nested(
            ADD_PARTITIONS,
            5,
            "AddPartitionsToTxnTransaction",
            transactional_id=TXN,
            producer_id=pid,
            producer_epoch=epoch,
            verify_only=verify_only,
            topics=(topic,),
        )

    def errors(*transactions: Any) -> list[list[ErrorCode]]:
        response = broker.send(broker.request(ADD_PARTITIONS, 5, transactions=transactions))
        return [
            [p.partition_error_code for p in result.topic_results[0].results_by_partition]
            for result in response.results_by_transaction
        ]

    assert errors(transaction(True, 0)) == [[ErrorCode.invalid_txn_state]]
    assert errors(transaction(False, 0), transaction(True, 0, 1)) == [
        [ErrorCode.none],
        [ErrorCode.none, ErrorCode.invalid_txn_state],
    ]


def test_an_ongoing_transaction_keeps_its_offsets_across_a_load(broker: Broker) -> None:
    """TxnOffsetCommit writes the offsets to __consumer_offsets in the producer's transaction,
    as Kafka does: coordinators loaded again from the logs (a restart) find the transaction
    Ongoing and its offsets pending (UNSTABLE_OFFSET_COMMIT to a fetch that requires stable
    offsets), and its commit commits them."""
    first = init(broker)
    pid, epoch = first.producer_id, first.producer_epoch
    add_partitions(broker, pid, epoch, 0)
    produce_transactional(broker, 0, pid, epoch, 0)
    broker.send(
        broker.request(
            ADD_OFFSETS, 4, transactional_id=TXN, producer_id=pid, producer_epoch=epoch,
            group_id="g",
        )
    )  # fmt: skip
    assert txn_offset_commit(broker, 3, pid, epoch) == ErrorCode.none
    partition = broker.cluster.topics["orders"].partitions[0]
    assert partition.last_stable_offset == 0
    runtime = Runtime(cluster=broker.cluster, clock_ms=lambda: NOW)
    reloaded = TransactionService(runtime)
    groups = group_coordinator(runtime)
    meta = reloaded.coordinator.transactions[TXN]
    assert (meta.state.name, meta.producer_epoch) == ("ONGOING", epoch)
    [unstable] = groups.fetch_offsets("g", [("orders", [0])], require_stable=True)[1]
    [last] = groups.fetch_offsets("g", [("orders", [0])])[1]
    assert (unstable.unstable, unstable.offset, last.offset) == (True, -1, -1)
    assert reloaded.end_transaction(TXN, pid, epoch, True, bump_epoch=False).error is (
        ErrorCode.none
    )
    [stable] = groups.fetch_offsets("g", [("orders", [0])], require_stable=True)[1]
    assert (stable.unstable, stable.offset) == (False, 5)
    assert partition.last_stable_offset == partition.high_watermark == 3


def test_describe_producers_shows_the_open_transaction(broker: Broker) -> None:
    first = init(broker)
    pid, epoch = first.producer_id, first.producer_epoch
    add_partitions(broker, pid, epoch, 0)
    produce_transactional(broker, 0, pid, epoch, 0)
    partition = broker.cluster.topics["orders"].partitions[0]
    topic = broker.nested(61, 0, "TopicRequest", name="orders", partition_indexes=(0,))
    answer = broker.send(broker.request(61, 0, topics=(topic,)), partition.leader_id)
    (state,) = answer.topics[0].partitions[0].active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (pid, epoch, 1)
    assert state.current_txn_start_offset == 0
    assert state.last_timestamp == NOW  # the max timestamp of its last batch
    assert state.coordinator_epoch == -1  # no marker yet, as Kafka
    # as Kafka, every broker hosting a replica answers (find-hanging --broker-id N) ...
    follower = 1 + partition.leader_id % 3
    assert follower in partition.replicas
    from_follower = broker.send(broker.request(61, 0, topics=(topic,)), follower)
    assert from_follower.topics[0].partitions[0].active_producers == (state,)
    # ... and a broker that hosts none does not
    broker.cluster.reassign(partition, [partition.leader_id])
    elsewhere = broker.send(broker.request(61, 0, topics=(topic,)), follower)
    assert elsewhere.topics[0].partitions[0].error_code == ErrorCode.not_leader_or_follower


def test_describe_producers_shows_the_marker_coordinator_epoch(broker: Broker) -> None:
    """kemu's coordinator writes its markers with coordinator epoch 0, and DescribeProducers
    reports it as Kafka reports its coordinator's first epoch (was -1, unknown)."""
    first = init(broker)
    pid, epoch = first.producer_id, first.producer_epoch
    add_partitions(broker, pid, epoch, 0)
    produce_transactional(broker, 0, pid, epoch, 0)
    assert end(broker, pid, epoch, True).error_code == ErrorCode.none
    partition = broker.cluster.topics["orders"].partitions[0]
    topic = broker.nested(61, 0, "TopicRequest", name="orders", partition_indexes=(0,))
    answer = broker.send(broker.request(61, 0, topics=(topic,)), partition.leader_id)
    (state,) = answer.topics[0].partitions[0].active_producers
    assert (state.coordinator_epoch, state.current_txn_start_offset) == (0, -1)


def test_marker_listeners_hear_of_every_transaction_end(broker: Broker) -> None:
    from kemu.coordinator.transaction.coordinator import Markers
    from kemu.coordinator.transaction.service import transaction_coordinator

    heard: list[Markers] = []
    service = transaction_coordinator(broker.runtime)
    service.add_marker_listener(heard.append)
    broker.cluster.create_topic("__share_group_state", 3, 3)
    first = init(broker)
    pid, epoch = first.producer_id, first.producer_epoch
    added = service.add_partitions(TXN, pid, epoch, [("__share_group_state", 2)])
    assert added.error is ErrorCode.none
    assert end(broker, pid, epoch, False).error_code == ErrorCode.none
    (markers,) = heard
    assert (markers.producer_id, markers.commit) == (pid, False)
    assert markers.partitions == {("__share_group_state", 2)}
    state = broker.cluster.topics["__share_group_state"].partitions[2]
    assert state.high_watermark == 1  # the ABORT marker


def produce_request(
    broker: Broker, transactional_id: str | None, pid: int, epoch: int, seq: int
) -> Any:
    batch = build_batch(
        [(None, b"p")],
        timestamp_ms=NOW,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )
    data = broker.nested(0, 12, "PartitionProduceData", index=0, records=batch)
    topic = broker.nested(0, 12, "TopicProduceData", name="orders", partition_data=(data,))
    request = broker.request(
        0,
        12,
        transactional_id=transactional_id,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(topic,),
    )
    leader = broker.cluster.topics["orders"].partitions[0].leader_id
    (answer,) = broker.send(request, leader).responses
    return answer.partition_responses[0]


def test_transactional_produce_joins_the_transaction_or_is_refused(broker: Broker) -> None:
    first = init(broker)
    pid, epoch = first.producer_id, first.producer_epoch
    assert produce_request(broker, TXN, pid, epoch, 0).error_code == ErrorCode.none
    from kemu.coordinator.transaction.service import transaction_coordinator

    meta = transaction_coordinator(broker.runtime).coordinator.transactions[TXN]
    assert (meta.state.name, meta.partitions) == ("ONGOING", {("orders", 0)})  # implicit add
    assert produce_request(broker, None, pid, epoch, 1).error_code == (
        ErrorCode.transactional_id_authorization_failed
    )
    init(broker)  # a new producer: the open transaction is aborted, the old epoch fenced
    # Kafka's partition leader turns the coordinator's PRODUCER_FENCED into INVALID_PRODUCER_EPOCH
    fenced = produce_request(broker, TXN, pid, epoch, 1)
    assert fenced.error_code == ErrorCode.invalid_producer_epoch
    partition = broker.cluster.topics["orders"].partitions[0]
    assert partition.last_stable_offset == partition.high_watermark == 2


def test_a_coordinator_marker_the_partition_refuses_cancels_the_markers(broker: Broker) -> None:
    """A tool wrote a marker with a later epoch of the producer; the coordinator's own marker at
    the transaction's epoch is then stale there (INVALID_PRODUCER_EPOCH): as Kafka's coordinator,
    it cancels the transaction's markers (the others already written stay) and never writes the
    COMPLETE record: the transaction stays PrepareCommit
    (tests/unit/coordinator/transaction/test_marker_refused.py)."""
    first = init(broker, version=4)
    pid, epoch = first.producer_id, first.producer_epoch
    add_partitions(broker, pid, epoch, 0, 1)
    produce_transactional(broker, 0, pid, epoch, 0)
    produce_transactional(broker, 1, pid, epoch, 0)
    topic = broker.nested(MARKERS, 1, "WritableTxnMarkerTopic", name="orders",
                          partition_indexes=(0,))  # fmt: skip
    marker = broker.nested(
        MARKERS,
        1,
        "WritableTxnMarker",
        producer_id=pid,
        producer_epoch=epoch + 3,
        transaction_result=False,
        topics=(topic,),
        coordinator_epoch=0,
    )
    first_partition, second = broker.cluster.topics["orders"].partitions
    tool = broker.send(broker.request(MARKERS, 1, markers=(marker,)), first_partition.leader_id)
    assert tool.markers[0].topics[0].partitions[0].error_code == ErrorCode.none
    assert first_partition.high_watermark == 3  # two records and the tool's marker
    assert end(broker, pid, epoch, True).error_code == ErrorCode.none
    assert first_partition.high_watermark == 3  # the coordinator's marker was refused there
    assert second.high_watermark == 3 and second.last_stable_offset == 3  # written here
    described = broker.send(broker.request(DESCRIBE, 0, transactional_ids=(TXN,)))
    assert described.transaction_states[0].transaction_state == "PrepareCommit"
