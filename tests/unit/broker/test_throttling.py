"""Client quotas on the wire (kemu/broker/throttling.py and the connection's mute), on a virtual
clock: a Produce over its client's byte rate is answered with ThrottleTimeMs, and the connection
reads nothing more from that client until the clock has moved past the throttle time; a Fetch over
the consumer byte rate is answered empty; no quota, no throttle.
"""

from __future__ import annotations

import asyncio
import datetime
import struct
from typing import Any

import pytest

from kemu.broker.connection import Connection
from kemu.broker.handlers import load_handlers
from kemu.cluster.client_quotas import CLIENT_ID, USER, QuotaOp, client_quotas, make_entity
from kemu.cluster.clock import VirtualClock
from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.protocol import wire
from kemu.storage.log import MemoryLog
from tests.unit.batch_builders import timed_batch

NODE = BrokerNode(1, "127.0.0.1", 19092)
PRODUCE, FETCH = 0, 1


class Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.reading = True

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 50000) if name == "peername" else None

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def writelines(self, frames: list[bytes]) -> None:
        self.writes.append(b"".join(frames))

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def answers(self) -> list[bytes]:
        data, frames = b"".join(self.writes), []
        while data:
            size = struct.unpack_from(">i", data)[0]
            frames.append(data[4 : 4 + size])
            data = data[4 + size :]
        return frames


def setup(clock: VirtualClock) -> tuple[Runtime, Connection, Transport]:
    load_handlers()
    cluster = Cluster(
        cluster_id="unit",
        nodes={1: NODE},
        config=BrokerConfig(),
        log_factory=lambda topic, index: MemoryLog(),
    )
    cluster.create_topic("t", 1, 1)
    runtime = Runtime(cluster=cluster, clock=clock)
    connection = Connection(NODE, runtime)
    transport = Transport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    return runtime, connection, transport


def set_quota(runtime: Runtime, key: str, value: float, **entity: str | None) -> None:
    pairs = [(USER if kind == "user" else CLIENT_ID, name) for kind, name in entity.items()]
    client_quotas(runtime).alter(make_entity(pairs), [QuotaOp(key, value, False)])


def produce_frame(correlation_id: int, size: int, acks: int = 1) -> bytes:
    schema = wire.request_schema(PRODUCE, 9)
    module = wire.request_module(PRODUCE, 9)
    records = timed_batch([0], 0, value=b"v" * size)
    body = wire.build(
        schema,
        acks=acks,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            wire.build(
                module.TopicProduceData,
                name="t",
                partition_data=(wire.build(module.PartitionProduceData, index=0, records=records),),
            ),
        ),
    )
    return wire.encode_request_frame(body, correlation_id, client_id="app")


def fetch_frame(correlation_id: int, max_bytes: int = 50 << 20) -> bytes:
    schema = wire.request_schema(FETCH, 12)
    module = wire.request_module(FETCH, 12)
    body = wire.build(
        schema,
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=max_bytes,
        session_id=0,
        session_epoch=-1,
        topics=(
            wire.build(
                module.FetchTopic,
                topic="t",
                partitions=(
                    wire.build(
                        module.FetchPartition,
                        partition=0,
                        fetch_offset=0,
                        partition_max_bytes=50 << 20,
                        current_leader_epoch=-1,
                    ),
                ),
            ),
        ),
    )
    return wire.encode_request_frame(body, correlation_id, client_id="app")


def decode(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    return wire.decode_response(api_key, version, frame)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def throttle_ms(body: Any) -> int:
    return int(body.throttle_time.total_seconds() * 1000)


@pytest.mark.asyncio
async def test_produce_over_quota_is_throttled_and_muted_until_the_clock_passes() -> None:
    clock = VirtualClock(start_ms=1_000_000)
    runtime, connection, transport = setup(clock)
    set_quota(runtime, "producer_byte_rate", 1000.0, **{"client-id": "app"})
    # 20 KB against 1,000 B/s: over the 10 s minimum window that is 2x the quota
    connection.data_received(produce_frame(1, 20_000) + produce_frame(2, 100))
    await settle()
    answers = transport.answers()
    assert len(answers) == 1  # the second request waits, unread, while the client is muted
    _, first = decode(PRODUCE, 9, answers[0])
    throttle = throttle_ms(first)
    assert throttle > 5_000
    assert not transport.reading
    clock.advance(throttle - 1)
    await settle()
    assert len(transport.answers()) == 1
    clock.advance(1)
    await settle()
    answers = transport.answers()
    assert len(answers) == 2  # read once unmuted (and throttled again: still over the quota)
    assert decode(PRODUCE, 9, answers[1])[1].responses[0].partition_responses[0].error_code == 0
    assert runtime.cluster.topics["t"].partitions[0].high_watermark == 2  # nothing lost


@pytest.mark.asyncio
async def test_acks_zero_produce_mutes_without_an_answer() -> None:
    clock = VirtualClock(start_ms=0)
    runtime, connection, transport = setup(clock)
    set_quota(runtime, "producer_byte_rate", 100.0, user=None)
    connection.data_received(produce_frame(1, 5_000, acks=0))
    await settle()
    assert transport.answers() == []
    assert not transport.reading
    clock.advance(60_000)
    assert transport.reading


@pytest.mark.asyncio
async def test_fetch_over_quota_is_answered_empty_and_fetched_again_later() -> None:
    clock = VirtualClock(start_ms=0)
    runtime, connection, transport = setup(clock)
    connection.data_received(produce_frame(1, 30_000))
    await settle()
    set_quota(runtime, "consumer_byte_rate", 1000.0, **{"client-id": "app"})
    connection.data_received(fetch_frame(2))
    await settle()
    # MaxBytes was capped to one quota window (10 x 1,000 B): the first batch still comes
    # (KIP-74), is over the quota, so the answer is empty and the bytes are not counted
    _, fetched = decode(FETCH, 12, transport.answers()[1])
    assert throttle_ms(fetched) > 0
    assert fetched.responses == ()
    clock.advance(throttle_ms(fetched))
    await settle()
    assert transport.reading


@pytest.mark.asyncio
async def test_no_quota_no_throttle() -> None:
    clock = VirtualClock(start_ms=0)
    runtime, connection, transport = setup(clock)
    set_quota(runtime, "producer_byte_rate", 1000.0, **{"client-id": "someone-else"})
    connection.data_received(produce_frame(1, 50_000) + produce_frame(2, 50_000))
    await settle()
    answers = transport.answers()
    assert [throttle_ms(decode(PRODUCE, 9, frame)[1]) for frame in answers] == [0, 0]
    assert transport.reading


@pytest.mark.asyncio
async def test_request_percentage_throttles_every_api() -> None:
    """A tiny request quota: handler time alone goes over it, ApiVersions included."""
    clock = VirtualClock(start_ms=0)
    runtime, connection, transport = setup(clock)
    set_quota(runtime, "request_percentage", 1e-9, **{"client-id": "app"})
    body = wire.build(
        wire.request_schema(18, 3), client_software_name="unit", client_software_version="1"
    )
    connection.data_received(wire.encode_request_frame(body, 7, client_id="app"))
    await settle()
    _, answer = decode(18, 3, transport.answers()[0])
    assert 0 < throttle_ms(answer) <= 1000  # capped at one quota.window.size.seconds


def test_a_throttled_share_fetch_is_answered_empty_with_no_lock_timeout() -> None:
    """ShareFetch counts on consumer_byte_rate like Fetch (Kafka 4.4's throttleResponse)."""
    from kemu.broker.throttling import _emptied

    module = wire.response_module(78, 1)
    body = wire.build(
        wire.response_schema(78, 1),
        acquisition_lock_timeout=30_000,
        responses=(wire.build(module.ShareFetchableTopicResponse),),
    )
    emptied = _emptied(body)
    assert emptied.responses == ()
    assert int(emptied.acquisition_lock_timeout) == 0


def test_share_fetch_max_bytes_capped_to_one_quota_window() -> None:
    from kemu.broker.throttling import cap_fetch_bytes
    from kemu.cluster.context import RequestContext
    from kemu.cluster.quota_enforcement import client_throttles

    runtime, _, _ = setup(VirtualClock(start_ms=0))
    set_quota(runtime, "consumer_byte_rate", 500.0, user=None)
    body = wire.build(wire.request_schema(78, 1), group_id="g", max_bytes=1 << 20)
    frame = wire.encode_request_frame(body, 3, client_id="share-app")
    request = wire.decode_request(frame[4:], 78)
    context = RequestContext(NODE, runtime, request.header)
    capped = cap_fetch_bytes(client_throttles(runtime), context, request)
    assert capped.body.max_bytes == 5_000  # 500 B/s x (11 - 1) windows of 1 s


@pytest.mark.asyncio
async def test_a_request_pipelined_behind_a_throttled_coroutine_handler_waits_for_the_mute() -> (
    None
):
    """Fetch is a coroutine handler: its throttle is known only once it finishes. The Produce the
    client had already sent behind it is not handled until the throttle time has passed, as on
    Kafka, which reads a connection's next request only after answering the one before it."""
    clock = VirtualClock(start_ms=0)
    runtime, connection, transport = setup(clock)
    set_quota(runtime, "request_percentage", 1e-9, **{"client-id": "app"})
    connection.data_received(fetch_frame(1) + produce_frame(2, 100))
    for _ in range(20):
        await settle()
    answers = transport.answers()
    assert len(answers) == 1  # the Fetch only
    throttle = throttle_ms(decode(FETCH, 12, answers[0])[1])
    assert throttle > 0
    assert not transport.reading
    assert runtime.cluster.topics["t"].partitions[0].high_watermark == 0  # not applied yet
    clock.advance(throttle)
    for _ in range(20):
        await settle()
    answers = transport.answers()
    assert len(answers) == 2
    produced = decode(PRODUCE, 9, answers[1])[1]
    assert produced.responses[0].partition_responses[0].error_code == 0
    assert runtime.cluster.topics["t"].partitions[0].high_watermark == 1


@pytest.mark.asyncio
async def test_pipelined_coroutine_requests_are_answered_in_order_without_quota_for_them() -> None:
    """Held one at a time under quotas, requests of a client without a quota still all get
    their answers, in order, unthrottled."""
    clock = VirtualClock(start_ms=0)
    runtime, connection, transport = setup(clock)
    set_quota(runtime, "request_percentage", 1e-9, **{"client-id": "someone-else"})
    connection.data_received(
        fetch_frame(1) + fetch_frame(2) + produce_frame(3, 100) + fetch_frame(4)
    )
    for _ in range(40):
        await settle()
    answers = transport.answers()
    assert [struct.unpack_from(">i", frame)[0] for frame in answers] == [1, 2, 3, 4]
    assert transport.reading
