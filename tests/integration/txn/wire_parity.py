"""Hand-built producer requests for the modules that send the same requests to a kemu process and
to a real Kafka 4.4.0 (bench's jars) and compare the answers (``test_sequence_parity_kafka.py``,
``test_txn_after_timeout.py``): the server of each side, and the requests both modules send, to a
single broker (node 1) that coordinates everything."""

from __future__ import annotations

import datetime
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch
from kemu.testing.kafka import SHARE_GROUPS, KafkaServer
from kemu.testing.plugin import KemuProcess
from kemu.testing.wire_client import WireClient, build, read_exactly, split_address

# Server is re-exported: the parity modules import it from here
from tests.integration.parity import Server as Server

PRODUCE, LIST_OFFSETS, FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS = 0, 2, 10, 22, 24
END_TXN, WRITE_TXN_MARKERS = 26, 27
NO_LEADER_YET = (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition)
ATTEMPTS = 300  # of a request a starting coordinator refuses, 0.1 s apart
WINDOW = 200  # InitProducerIds a connection of bump_epochs writes ahead of their answers


@contextmanager
def serve(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    *,
    name: str,
    kemu_overrides: list[str],
) -> Iterator[Server]:
    """For a module's ``server`` fixture (``params=["kemu", "kafka"]``): a one-broker kemu process
    with Kafka's timers and ``kemu_overrides``, or the session's Kafka 4.4.0 with
    ``SHARE_GROUPS``."""
    if request.param == "kemu":
        workdir = tmp_path_factory.mktemp(name)
        kemu = KemuProcess(
            brokers=1, log_path=workdir / "kemu.log", timing="kafka", overrides=kemu_overrides
        ).start()
        try:
            yield Server("kemu", kemu.bootstrap)
        finally:
            kemu.stop()
        return
    kafka: KafkaServer = request.getfixturevalue("kafka_server")(SHARE_GROUPS)
    yield Server("kafka", kafka.bootstrap)


@contextmanager
def client_with_topic(
    server: Server, topic: str, client_id: str, partitions: int = 1
) -> Iterator[WireClient]:
    """A wire client to ``server``, once ``topic`` is there; closed after."""
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    client = WireClient(server.bootstrap, client_id=client_id)
    try:
        yield client
    finally:
        client.close()


def until_ready(call: Callable[[], Any], ready: Callable[[Any], bool]) -> Any:
    """``call()`` again while a starting coordinator refuses it (Kafka loads its internal
    topics on first use)."""
    for _ in range(ATTEMPTS):
        answer = call()
        if ready(answer):
            return answer
        time.sleep(0.1)
    raise AssertionError(f"never ready: {answer}")


def coordinator_ready(client: WireClient, key_type: int, key: str) -> None:
    """Wait until FindCoordinator finds ``key``'s coordinator (key type 0 a group, 1 a
    transactional id)."""
    until_ready(
        lambda: client.call(1, FIND_COORDINATOR, 4, key_type=key_type, coordinator_keys=(key,)),
        lambda r: r.coordinators[0].error_code == ErrorCode.none,
    )


def init_producer_id(
    client: WireClient, transactional_id: str | None, timeout: datetime.timedelta
) -> tuple[int, int]:
    """A new producer id and its epoch (InitProducerId v5), transactional with a
    ``transactional_id`` (once its coordinator is found), idempotent without."""
    if transactional_id is not None:
        coordinator_ready(client, 1, transactional_id)
    answer = until_ready(
        lambda: client.call(
            1,
            INIT_PRODUCER_ID,
            5,
            transactional_id=transactional_id,
            transaction_timeout=timeout,
            producer_id=-1,
            producer_epoch=-1,
        ),
        lambda r: r.error_code == ErrorCode.none,
    )
    return int(answer.producer_id), int(answer.producer_epoch)


def produce(
    client: WireClient,
    topic: str,
    producer_id: int,
    epoch: int,
    sequence: int,
    *,
    version: int,
    count: int = 1,
    transactional_id: str | None = None,
    transactional: bool = False,
) -> Any:
    """A batch of ``count`` records to partition 0 of ``topic``; the partition's response."""
    batch = build_batch(
        [(None, b"v")] * count,
        timestamp_ms=int(time.time() * 1000),
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        transactional=transactional,
    )
    module = wire.request_module(PRODUCE, version)
    data = module.TopicProduceData(
        name=topic, partition_data=(module.PartitionProduceData(index=0, records=batch),)
    )
    answer = client.call(
        1,
        PRODUCE,
        version,
        transactional_id=transactional_id,
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(data,),
    )
    return answer.responses[0].partition_responses[0]


def add_partition(
    client: WireClient, topic: str, transactional_id: str, producer_id: int, epoch: int
) -> ErrorCode:
    """AddPartitionsToTxn v3 (the client's own, below transaction version 2) of partition 0."""
    module = wire.request_module(ADD_PARTITIONS, 3)
    answer = client.call(
        1,
        ADD_PARTITIONS,
        3,
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(module.AddPartitionsToTxnTopic(name=topic, partitions=(0,)),),
    )
    [result] = answer.results_by_topic_v3_and_below
    return ErrorCode(result.results_by_partition[0].partition_error_code)


def produce_enlisting(
    client: WireClient, topic: str, transactional_id: str, producer_id: int, epoch: int
) -> ErrorCode:
    """One transactional record (sequence 0) to partition 0 of ``topic`` with Produce v12 (the
    partition joins the transaction), once the new topic has a leader."""
    return ErrorCode(
        until_ready(
            lambda: ErrorCode(
                produce(
                    client,
                    topic,
                    producer_id,
                    epoch,
                    0,
                    version=12,
                    transactional_id=transactional_id,
                    transactional=True,
                ).error_code
            ),
            lambda found: found not in NO_LEADER_YET,
        )
    )


def write_marker(
    client: WireClient, topic: str, producer_id: int, epoch: int, *, commit: bool
) -> ErrorCode:
    """WriteTxnMarkers v1, as a tool sends it (``kafka-transactions.sh abort``): a marker of
    ``producer_id`` at ``epoch`` in partition 0 of ``topic``; that partition's error."""
    named = wire.build(
        wire.request_module(WRITE_TXN_MARKERS, 1).WritableTxnMarkerTopic,
        name=topic,
        partition_indexes=(0,),
    )
    marker = wire.build(
        wire.request_module(WRITE_TXN_MARKERS, 1).WritableTxnMarker,
        producer_id=producer_id,
        producer_epoch=epoch,
        transaction_result=commit,
        topics=(named,),
        coordinator_epoch=0,
    )
    answer = client.call(1, WRITE_TXN_MARKERS, 1, markers=(marker,))
    return ErrorCode(answer.markers[0].topics[0].partitions[0].error_code)


def end_txn(
    client: WireClient, transactional_id: str, producer_id: int, epoch: int, *, commit: bool
) -> tuple[ErrorCode, int]:
    """EndTxn v5 (transaction version 2): its error and the epoch it answers."""
    answer = client.call(
        1,
        END_TXN,
        5,
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        committed=commit,
    )
    return ErrorCode(answer.error_code), int(answer.producer_epoch)


def end_and_stable_offsets(client: WireClient, topic: str) -> tuple[int, int]:
    """Partition 0's end offset and last stable offset (ListOffsets v8, latest)."""
    module = wire.request_module(LIST_OFFSETS, 8)
    latest = module.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)
    found = []
    for isolation in (0, 1):  # read_uncommitted, read_committed
        answer = client.call(
            1,
            LIST_OFFSETS,
            8,
            replica_id=-1,
            isolation_level=isolation,
            topics=(module.ListOffsetsTopic(name=topic, partitions=(latest,)),),
        )
        found.append(int(answer.topics[0].partitions[0].offset))
    return found[0], found[1]


class _Bumping:
    """One transactional id of ``bump_epochs``: its connection, the epoch its last request will
    hold and the one its last answer gave, and the sizes of the windows still unanswered."""

    def __init__(self, address: str, transactional_id: str, timeout: datetime.timedelta) -> None:
        self.sock = socket.create_connection(split_address(address), timeout=30)
        self.request = build(
            INIT_PRODUCER_ID,
            5,
            transactional_id=transactional_id,
            transaction_timeout=timeout,
            producer_id=-1,
            producer_epoch=-1,
        )
        self.producer_id = -1
        self.requested = self.answered = 0
        self.correlation = 0
        self.windows: deque[int] = deque()

    def write_window(self, epoch: int) -> None:
        """Up to ``WINDOW`` more requests, no further than ``epoch``, in one write."""
        count = min(WINDOW, epoch - self.requested)
        if count <= 0:
            return
        frames = [
            wire.encode_request_frame(self.request, self.correlation + offset, "bump-epochs")
            for offset in range(count)
        ]
        self.sock.sendall(b"".join(frames))
        self.correlation += count
        self.requested += count
        self.windows.append(count)

    def read_window(self) -> None:
        """The answers of the oldest window: each the next epoch of the same producer id."""
        for _ in range(self.windows.popleft()):
            (size,) = struct.unpack(">i", read_exactly(self.sock, 4))
            _, answer = wire.decode_response(INIT_PRODUCER_ID, 5, read_exactly(self.sock, size))
            assert answer.error_code == ErrorCode.none, answer
            assert answer.producer_id == self.producer_id, answer
            assert answer.producer_epoch == self.answered + 1, answer
            self.answered += 1


def bump_epochs(
    client: WireClient, address: str, epochs: dict[str, int], timeout: datetime.timedelta
) -> dict[str, int]:
    """A new producer id for each transactional id of ``epochs`` (``init_producer_id``), then
    InitProducerId without one, each bumping the epoch, until it holds its epoch in ``epochs``;
    the producer id of each. Tens of thousands of them take a while one after another, so the ids
    go at once, each on its own connection to ``address`` with up to two windows of requests
    written ahead of their answers: a broker answers a connection's requests in order, and each
    answer is checked to be the epoch after the previous one, so every request still bumps the
    epoch the one before it left, as it would have alone."""
    bumping = {
        transactional_id: _Bumping(address, transactional_id, timeout)
        for transactional_id in epochs
    }
    try:
        for transactional_id, one in bumping.items():
            one.producer_id, epoch = init_producer_id(client, transactional_id, timeout)
            one.requested = one.answered = epoch
        for transactional_id, one in bumping.items():
            one.write_window(epochs[transactional_id])
            one.write_window(epochs[transactional_id])
        while any(one.windows for one in bumping.values()):
            for transactional_id, one in bumping.items():
                if one.windows:
                    one.read_window()
                    one.write_window(epochs[transactional_id])
        assert all(one.answered == epochs[name] for name, one in bumping.items())
        return {transactional_id: one.producer_id for transactional_id, one in bumping.items()}
    finally:
        for one in bumping.values():
            one.sock.close()
