"""Connection quotas on connections (kemu/broker/acceptors.py and the Connection's admission), on
a virtual clock: a connection over the creation rate waits unread in its listener's queue and is
taken (its pipelined ApiVersions answered) when Kafka's acceptor would take it; one over its IP's
``connection_creation_rate`` is never read and is closed after its throttle time; one past
``max.connections.per.ip`` is closed at once; ``max.connections`` holds new connections until
one closes.
"""

from __future__ import annotations

import asyncio

import pytest

from kemu.broker.acceptors import (
    Ticket,
    connection_acceptors,
    connection_limits,
    parse_overrides,
)
from kemu.broker.connection import Connection
from kemu.broker.handlers import load_handlers
from kemu.cluster.client_quotas import IP, QuotaOp, client_quotas, make_entity
from kemu.cluster.clock import VirtualClock
from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.protocol import wire
from kemu.storage.log import MemoryLog
from kemu.testing.transport import RecordingTransport

NODE = BrokerNode(1, "127.0.0.1", 19092)


def runtime_with(config: dict[str, str]) -> tuple[Runtime, VirtualClock]:
    load_handlers()
    clock = VirtualClock(start_ms=1_000_000)
    cluster = Cluster(
        cluster_id="unit",
        nodes={1: NODE},
        config=BrokerConfig({"quota.window.num": "2", **config}),
        log_factory=lambda topic, index: MemoryLog(),
    )
    return Runtime(cluster=cluster, clock=clock), clock


def connect(runtime: Runtime, host: str = "127.0.0.1") -> tuple[Connection, RecordingTransport]:
    connection = Connection(NODE, runtime)
    transport = RecordingTransport(peer=(host, 50000))
    connection.connection_made(transport)
    # Every client starts with an ApiVersions, sent as soon as TCP connects.
    body = wire.build(
        wire.request_schema(18, 3), client_software_name="unit", client_software_version="1"
    )
    connection.data_received(wire.encode_request_frame(body, 1, client_id="c"))
    return connection, transport


def close(connection: Connection, transport: RecordingTransport) -> None:
    transport.closed = True
    connection.connection_lost(None)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_over_the_creation_rate_connections_wait_in_order_then_are_served() -> None:
    runtime, clock = runtime_with({"max.connection.creation.rate": "2"})
    made = [connect(runtime) for _ in range(4)]
    await settle()
    answered = [bool(transport.writes) for _, transport in made]
    assert answered == [True, True, False, False]  # 3/s against 2/s: the acceptor waits
    assert not made[2][1].reading
    clock.advance(499)
    await settle()
    assert not made[2][1].writes
    clock.advance(1)  # (3 - 2) / 2 x 1 s
    await settle()
    assert made[2][1].writes and not made[3][1].writes  # the next one waits again
    clock.advance(1_000)
    await settle()
    assert all(transport.writes for _, transport in made)
    assert connection_acceptors(runtime, 1).quotas.total == 4


@pytest.mark.asyncio
async def test_over_the_ip_rate_a_connection_is_never_read_and_closed_after_the_throttle() -> None:
    runtime, clock = runtime_with({})
    client_quotas(runtime).alter(
        make_entity([(IP, "127.0.0.1")]), [QuotaOp("connection_creation_rate", 2, False)]
    )
    made = [connect(runtime) for _ in range(3)]
    other = connect(runtime, "127.0.0.2")  # another IP: no quota
    await settle()
    assert [bool(transport.writes) for _, transport in made] == [True, True, False]
    assert other[1].writes
    throttled = made[2][1]
    assert not throttled.reading and not throttled.closed
    clock.advance(499)
    assert not throttled.closed
    clock.advance(1)  # (3 - 2) / 2 x 1 s
    assert throttled.closed and not throttled.writes
    assert connection_acceptors(runtime, 1).quotas.count("127.0.0.1") == 2


@pytest.mark.asyncio
async def test_past_max_connections_per_ip_a_connection_is_closed_at_once() -> None:
    runtime, _ = runtime_with(
        {"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "localhost:2"}
    )
    first = connect(runtime, "127.0.0.2")
    second = connect(runtime, "127.0.0.2")
    await settle()
    assert first[1].writes and second[1].closed and not second[1].writes
    close(*first)
    third = connect(runtime, "127.0.0.2")
    await settle()
    assert third[1].writes
    local = [connect(runtime, "127.0.0.1") for _ in range(3)]  # localhost's override: 2
    assert [t.closed for _, t in local] == [False, False, True]


@pytest.mark.asyncio
async def test_max_connections_holds_new_connections_until_one_closes() -> None:
    runtime, _ = runtime_with({"max.connections": "2"})
    made = [connect(runtime) for _ in range(3)]
    await settle()
    assert [bool(t.writes) for _, t in made] == [True, True, False]
    assert not made[2][1].closed
    close(*made[0])
    await settle()
    assert made[2][1].writes
    assert connection_acceptors(runtime, 1).quotas.total == 2


@pytest.mark.asyncio
async def test_a_connection_gone_while_queued_is_counted_then_released() -> None:
    runtime, clock = runtime_with({"max.connection.creation.rate": "1"})
    kept = connect(runtime)
    gone = connect(runtime)
    close(*gone)
    clock.advance(1_000)
    await settle()
    quotas = connection_acceptors(runtime, 1).quotas
    assert quotas.total == 1 and kept[1].writes


@pytest.mark.asyncio
async def test_dynamic_per_broker_config_applies_to_the_next_connection() -> None:
    runtime, _ = runtime_with({})
    connect(runtime)
    runtime.cluster.config.node_dynamic[1] = {"max.connections.per.ip": "1"}
    refused = connect(runtime)
    assert refused[1].closed


def test_limits_read_listener_prefixes_and_overrides() -> None:
    config = BrokerConfig(
        {
            "max.connections": "50",
            "listener.name.external.max.connections": "5",
            "listener.name.external.max.connection.creation.rate": "3",
            "max.connections.per.ip.overrides": "10.0.0.1:4, ::1:7,bad",
            "inter.broker.listener.name": "INTERNAL",
        }
    )
    limits = connection_limits(config, 1, ("INTERNAL", "EXTERNAL"))
    assert limits.max_connections == 50
    assert limits.listener_max_connections == {"EXTERNAL": 5}
    assert limits.listener_creation_rate == {"EXTERNAL": 3}
    assert limits.max_creation_rate == 2**31 - 1
    assert limits.per_ip_overrides == {"10.0.0.1": 4, "::1": 7}
    assert limits.inter_broker_listener == "INTERNAL"
    assert parse_overrides("") == {}


class FakeArrival:
    def __init__(self, ip: str, active: float) -> None:
        self.client_ip = ip
        self.active = active
        self.ticket: Ticket | None = None
        self.closed = False

    def admitted(self, ticket: Ticket) -> None:
        self.ticket = ticket

    def throttled(self, close_at_ms: int) -> None:
        raise AssertionError("not throttled here")

    def refused(self) -> None:
        self.closed = True

    def last_active(self) -> float:
        return self.active

    def close_least_recently_used(self) -> None:
        self.closed = True


def test_the_protected_listener_closes_the_least_recently_used_connections_of_others() -> None:
    """Kafka's inter-broker listener takes connections past max.connections; the broker then
    closes the least recently used connections of its other listeners."""
    runtime, _ = runtime_with({"listeners": "PLAINTEXT://:0,EXTERNAL://:0", "max.connections": "2"})
    broker = connection_acceptors(runtime, 1)
    older, newer = FakeArrival("10.0.0.1", 1.0), FakeArrival("10.0.0.2", 2.0)
    for arrival in (older, newer):
        broker.acceptor("EXTERNAL").arrive(arrival)
    held = FakeArrival("10.0.0.3", 3.0)
    broker.acceptor("EXTERNAL").arrive(held)
    assert held.ticket is None  # the broker is full for EXTERNAL
    internal = FakeArrival("10.0.0.4", 4.0)
    broker.acceptor("PLAINTEXT").arrive(internal)  # protected: taken all the same
    assert internal.ticket is not None
    assert older.closed and not newer.closed  # 3 > 2: the least recently used one closes
    assert broker.quotas.total == 2
    assert held.ticket is None  # still full: it waits for the next close
    newer.ticket.release()  # type: ignore[union-attr]
    assert held.ticket is not None


def test_negative_limits_are_refused_with_kafkas_message() -> None:
    """SocketServerConfigs defines the four with atLeast(0): a bad value ends start-up."""
    from kemu.config.definitions import InvalidConfig

    for name in ("max.connections", "max.connection.creation.rate", "max.connections.per.ip"):
        with pytest.raises(InvalidConfig, match=f"{name}: Value must be at least 0"):
            BrokerConfig.load(None, [f"{name}=-1"])
    assert BrokerConfig.load(None, ["max.connections=0"]).get("max.connections") == "0"
