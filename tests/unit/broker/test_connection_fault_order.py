"""A faulted request keeps its place in its connection's order.

Kafka reads a connection's next request only once the answer before it is out. kemu pipelines,
so a request a fault rule delays (latency, an injected error, a drop after handling) must still
be applied before the requests sent behind it. Before this held, an idempotent producer's
second batch (sequence 13) was appended ahead of its first (sequence 0, "drop after"); the
retried first batch was then out of order, the Java producer bumped its epoch and the second
batch was written twice.
"""

from __future__ import annotations

import asyncio
import datetime
import struct
from typing import Any

from kemu.broker.connection import Connection
from kemu.broker.faults import fault_table
from kemu.broker.handlers import load_handlers
from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.protocol import wire
from kemu.protocol.records import build_batch, read_header
from kemu.storage.log import MemoryLog
from kemu.testing.transport import RecordingTransport

NODE = BrokerNode(1, "127.0.0.1", 19092)
PRODUCER_ID = 7


def make_runtime() -> Runtime:
    load_handlers()
    cluster = Cluster(
        cluster_id="unit",
        nodes={1: NODE},
        config=BrokerConfig(),
        log_factory=lambda topic, index: MemoryLog(),
    )
    cluster.create_topic("t", 1, 1)
    return Runtime(cluster=cluster)


def produce_frame(
    correlation_id: int, base_sequence: int, count: int, producer_id: int = PRODUCER_ID
) -> bytes:
    module = wire.request_module(0, 9)
    batch = build_batch(
        [(None, f"v{base_sequence + i}".encode()) for i in range(count)],
        timestamp_ms=1,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=base_sequence,
    )
    partition = wire.build(module.PartitionProduceData, index=0, records=batch)
    topic = wire.build(module.TopicProduceData, name="t", partition_data=(partition,))
    body = wire.build(
        wire.request_schema(0, 9),
        acks=-1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(topic,),
    )
    return wire.encode_request_frame(body, correlation_id)


def sequences_in_log(runtime: Runtime) -> list[int]:
    partition = runtime.cluster.partition("t", 0)
    assert partition is not None
    log = partition.log
    data = bytes(log.read(0, 1 << 20, upper=log.log_end_offset))
    sequences = []
    position = 0
    while position < len(data):
        header = read_header(data, position)
        sequences.append(header.base_sequence)
        position += 12 + header.batch_length
    return sequences


async def pipelined(
    runtime: Runtime, rule: dict[str, Any]
) -> tuple[Connection, RecordingTransport]:
    """Two Produce requests of one idempotent producer in one chunk, the first one faulted."""
    fault_table(runtime).add_all([rule])
    connection = Connection(NODE, runtime)
    transport = RecordingTransport()
    connection.connection_made(transport)
    connection.data_received(produce_frame(1, 0, 13) + produce_frame(2, 13, 1))
    for _ in range(50):
        await asyncio.sleep(0.01)
        if transport.closed or (transport.writes and not connection._slots):
            break
    return connection, transport


def test_a_delayed_produce_is_applied_before_the_one_behind_it() -> None:
    runtime = make_runtime()
    asyncio.run(
        pipelined(runtime, {"api": "produce", "kind": "latency", "latency_ms": 30, "count": 1})
    )
    assert sequences_in_log(runtime) == [0, 13]


def test_after_a_drop_the_request_behind_it_is_never_applied() -> None:
    runtime = make_runtime()
    _, transport = asyncio.run(
        pipelined(runtime, {"api": "produce", "kind": "drop_after", "count": 1})
    )
    assert transport.closed
    assert sequences_in_log(runtime) == [0]  # the second is resent by the client, in order


def test_an_injected_error_refuses_the_batches_pipelined_behind_it_until_its_retry() -> None:
    """As a broker that is really not the leader: the idempotent batch sent behind the refused
    one gets the same error, and both are appended in order once the client retries."""
    runtime = make_runtime()

    async def scenario() -> RecordingTransport:
        connection, transport = await pipelined(
            runtime, {"api": "produce", "error_code": 6, "count": 1}
        )
        assert sequences_in_log(runtime) == []
        assert error_codes(transport.written) == [6, 6]
        connection.data_received(produce_frame(3, 0, 13) + produce_frame(4, 13, 1))
        await asyncio.sleep(0.05)
        return transport

    transport = asyncio.run(scenario())
    assert sequences_in_log(runtime) == [0, 13]
    assert error_codes(transport.written) == [6, 6, 0, 0]


def test_another_producers_batch_is_not_held_back() -> None:
    runtime = make_runtime()

    async def scenario() -> None:
        fault_table(runtime).add_all([{"api": "produce", "error_code": 6, "count": 1}])
        connection = Connection(NODE, runtime)
        connection.connection_made(RecordingTransport())
        connection.data_received(
            produce_frame(1, 0, 13) + produce_frame(2, 0, 1, producer_id=PRODUCER_ID + 1)
        )
        await asyncio.sleep(0.05)

    asyncio.run(scenario())
    assert sequences_in_log(runtime) == [0]


def error_codes(written: bytes) -> list[int]:
    """The partition error code of each one-partition Produce v9 answer frame in ``written``."""
    codes = []
    position = 0
    while position < len(written):
        (size,) = struct.unpack_from(">i", written, position)
        _, body = wire.decode_response(0, 9, written[position + 4 : position + 4 + size])
        codes.append(int(body.responses[0].partition_responses[0].error_code))
        position += 4 + size
    return codes
