"""The acceptor side of connection quotas: Kafka's acceptor thread per listener, as a queue.

Kafka's acceptor takes a listener's connections one at a time and may block on each one (its
broker or listener creation rate, or no free slot under ``max.connections``), holding back every
connection behind it. kemu's event loop accepts at once, so each broker's ``ListenerAcceptor``
keeps that order instead: a new connection joins its listener's queue, unread (its ``Connection``
holds its frames), and is taken when Kafka's acceptor would have taken it; the decisions are the
sans-IO ``ConnectionQuotas`` (``kemu/cluster/connection_quotas.py``), on the runtime's clock.
A connection a per-IP ``connection_creation_rate`` throttles is kept unread and closed once its
throttle time has passed; one past ``max.connections.per.ip`` is closed at once. While nothing
is limited, a connection is taken in the call that announces it.

The limits are read at each arrival, so dynamic changes (``kafka-configs --entity-type brokers``,
cluster-wide or for one broker) and AlterClientQuotas on ``ips`` apply to the next connection.
On SSL and SASL_SSL listeners a connection is announced once its TLS handshake is done (Kafka
counts it at TCP accept, before the handshake).
"""

from __future__ import annotations

import socket
from collections import deque
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Protocol

import structlog

from kemu.cluster.client_quotas import client_quotas
from kemu.cluster.connection_quotas import (
    INT_MAX,
    ConnectionLimits,
    ConnectionQuotas,
    IpRates,
    Outcome,
    normalize_ip,
)
from kemu.cluster.services import Service

if TYPE_CHECKING:
    from kemu.cluster.clock import TimerHandle
    from kemu.cluster.context import Runtime
    from kemu.config.definitions import BrokerConfig

log = structlog.get_logger("kemu.acceptor")

DEFAULT_LISTENER = "PLAINTEXT"  # kemu's one listener without ``listeners``


class Arrival(Protocol):
    """A new connection waiting for its listener's acceptor (a ``Connection``)."""

    client_ip: str

    def admitted(self, ticket: Ticket) -> None: ...
    def throttled(self, close_at_ms: int) -> None: ...
    def refused(self) -> None: ...
    def last_active(self) -> float: ...
    def close_least_recently_used(self) -> None: ...


@dataclass(eq=False, slots=True)
class Ticket:
    """A counted connection: released once, when it closes."""

    broker: BrokerAcceptors
    listener: str
    ip: str
    connection: Arrival
    released: bool = False

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        self.broker.released(self)


@dataclass(eq=False)
class ListenerAcceptor:
    broker: BrokerAcceptors
    listener: str
    queue: deque[Arrival] = field(default_factory=deque)
    ready_at_ms: int | None = None  # the head was recorded; taken once the clock is here
    timer: TimerHandle | None = None
    pumping: bool = False
    again: bool = False

    def arrive(self, arrival: Arrival) -> None:
        self.queue.append(arrival)
        self.pump()

    def pump(self) -> None:
        """Take the connections at the head of the queue that Kafka's acceptor would take now."""
        if self.pumping:  # a connection released while this one decides: look again after
            self.again = True
            return
        self.pumping = True
        try:
            self.again = True
            while self.again:
                self.again = False
                self._take_ready()
        finally:
            self.pumping = False

    def _take_ready(self) -> None:
        broker = self.broker
        quotas = broker.refreshed()
        clock = broker.runtime.clock
        while self.queue:
            now = clock.now_ms()
            if self.ready_at_ms is None:
                self.ready_at_ms = now + quotas.record_connection(self.listener, now)
            if now < self.ready_at_ms:
                if self.timer is None:
                    self.timer = clock.call_at(self.ready_at_ms, self._timer_fired)
                return
            if not quotas.slot_available(self.listener):
                return  # until a connection closes (released)
            arrival = self.queue.popleft()
            self.ready_at_ms = None
            ip = arrival.client_ip
            admission = quotas.admit(self.listener, ip, now)
            if admission.outcome is Outcome.ACCEPTED:
                ticket = Ticket(broker, self.listener, ip, arrival)
                broker.open_tickets.setdefault(self.listener, {})[ticket] = None
                arrival.admitted(ticket)
                if quotas.protected(self.listener):
                    broker.close_excess()
            elif admission.outcome is Outcome.THROTTLED:
                log.debug("connection_throttled", ip=ip, throttle_ms=admission.throttle_ms)
                arrival.throttled(now + admission.throttle_ms)
            else:
                maximum = quotas.limits.per_ip_overrides.get(ip, quotas.limits.max_per_ip)
                log.info("connection_refused", ip=ip, max_connections_per_ip=maximum)
                arrival.refused()

    def _timer_fired(self) -> None:
        self.timer = None
        self.pump()


class BrokerAcceptors:
    """One broker's connection quotas and its listeners' acceptors."""

    def __init__(self, runtime: Runtime, node_id: int, listeners: tuple[str, ...]) -> None:
        self.runtime = runtime
        self.node_id = node_id
        config = runtime.cluster.config
        samples = max(int(_setting(config, node_id, "quota.window.num") or 11), 1)
        window_s = max(int(_setting(config, node_id, "quota.window.size.seconds") or 1), 1)
        self.quotas = ConnectionQuotas(
            listeners, IpRates(client_quotas(runtime)), samples, window_s * 1000
        )
        self.acceptors = {name: ListenerAcceptor(self, name) for name in listeners}
        self.open_tickets: dict[str, dict[Ticket, None]] = {}
        self._settings: tuple[str | None, ...] | None = None  # what the limits were read from

    def acceptor(self, listener: str | None) -> ListenerAcceptor:
        name = listener or DEFAULT_LISTENER
        found = self.acceptors.get(name)
        if found is None:  # a listener not announced at start-up (unit tests)
            found = self.acceptors[name] = ListenerAcceptor(self, name)
            self.quotas.add_listener(name)
        return found

    def refreshed(self) -> ConnectionQuotas:
        """The quotas under the current settings (read again only when one changed)."""
        config = self.runtime.cluster.config
        listeners = self.quotas.listeners
        settings = _raw_settings(config, self.node_id, listeners)
        if settings != self._settings:
            self._settings = settings
            self.quotas.limits = connection_limits(config, self.node_id, listeners)
        return self.quotas

    def released(self, ticket: Ticket) -> None:
        self.quotas.release(ticket.listener, ticket.ip)
        self.open_tickets.get(ticket.listener, {}).pop(ticket, None)
        for acceptor in self.acceptors.values():  # Kafka's counts.notifyAll()
            if acceptor.queue:
                acceptor.pump()

    def close_excess(self) -> None:
        """The protected listener took the broker past ``max.connections``: close the least
        recently used connections of the other listeners (Kafka closes one per processor poll)."""
        quotas = self.quotas
        while True:
            candidates = [
                ticket
                for listener, tickets in self.open_tickets.items()
                if quotas.excess(listener)
                for ticket in tickets
            ]
            if not candidates:
                return
            oldest = min(candidates, key=lambda ticket: ticket.connection.last_active())
            oldest.release()
            oldest.connection.close_least_recently_used()


# per node id
CONNECTION_ACCEPTORS: Service[dict[int, BrokerAcceptors]] = Service(
    "connection_acceptors", lambda _: {}
)


def connection_acceptors(runtime: Runtime, node_id: int) -> BrokerAcceptors:
    brokers = runtime.services.get(CONNECTION_ACCEPTORS)
    found = brokers.get(node_id)
    if found is None:
        names = listener_names(runtime.cluster.config)
        found = brokers[node_id] = BrokerAcceptors(runtime, node_id, names)
    return found


def listener_names(config: BrokerConfig) -> tuple[str, ...]:
    """The names in ``listeners`` (as kemu/cluster/listeners.py reads them), else PLAINTEXT."""
    value = config.supplied("listeners") or ""
    names = tuple(
        part.strip().partition("://")[0].upper() for part in value.split(",") if "://" in part
    )
    return names or (DEFAULT_LISTENER,)


def connection_limits(
    config: BrokerConfig, node_id: int, listeners: tuple[str, ...]
) -> ConnectionLimits:
    """The connection settings of broker ``node_id`` (its own dynamic configs first), listener
    values from ``listener.name.<listener>.<config>``, as Kafka's valuesWithPrefixOverride."""
    max_connections = _int(config, node_id, "max.connections")
    creation_rate = _int(config, node_id, "max.connection.creation.rate")
    listener_max: dict[str, int] = {}
    listener_rate: dict[str, int] = {}
    for listener in listeners:
        prefix = f"listener.name.{listener.lower()}."
        value = _setting(config, node_id, prefix + "max.connections")
        if value is not None:
            listener_max[listener] = int(value)
        value = _setting(config, node_id, prefix + "max.connection.creation.rate")
        if value is not None:
            listener_rate[listener] = int(value)
    overrides = _setting(config, node_id, "max.connections.per.ip.overrides") or ""
    inter_broker = config.supplied("inter.broker.listener.name") or (
        config.supplied("security.inter.broker.protocol") or DEFAULT_LISTENER
    )
    return ConnectionLimits(
        max_connections=max_connections,
        listener_max_connections=listener_max,
        max_creation_rate=creation_rate,
        listener_creation_rate=listener_rate,
        max_per_ip=_int(config, node_id, "max.connections.per.ip"),
        per_ip_overrides=parse_overrides(overrides),
        inter_broker_listener=inter_broker.upper(),
    )


BROKER_SETTINGS = (
    "max.connections",
    "max.connection.creation.rate",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "inter.broker.listener.name",
    "security.inter.broker.protocol",
)
LISTENER_SETTINGS = ("max.connections", "max.connection.creation.rate")


def _raw_settings(
    config: BrokerConfig, node_id: int, listeners: tuple[str, ...]
) -> tuple[str | None, ...]:
    """The values the limits come from, as stored (a cheap check that none changed)."""
    node = config.node_dynamic.get(node_id) or {}
    dynamic, static = config.dynamic, config.static
    return tuple([node.get(n, dynamic.get(n, static.get(n))) for n in _setting_names(listeners)])


@cache
def _setting_names(listeners: tuple[str, ...]) -> tuple[str, ...]:
    prefixed = (
        f"listener.name.{listener.lower()}.{name}"
        for listener in listeners
        for name in LISTENER_SETTINGS
    )
    return (*BROKER_SETTINGS, *prefixed)


@cache
def parse_overrides(value: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count,...``, each host resolved to its
    address as Kafka's InetAddress.getByName does (an IPv6 address keeps its colons)."""
    found: dict[str, int] = {}
    for entry in value.split(","):
        host, _, count = entry.strip().rpartition(":")
        host = host.strip().strip("[]")
        if not host or not count.strip().lstrip("-").isdigit():
            continue
        found[_resolve(host)] = int(count)
    return found


def _resolve(host: str) -> str:
    address = normalize_ip(host)
    if address != host or host.replace(".", "").isdigit() or ":" in host:
        return address
    try:
        return normalize_ip(str(socket.getaddrinfo(host, None)[0][4][0]))
    except OSError:
        return host


def _int(config: BrokerConfig, node_id: int, name: str) -> int:
    value = _setting(config, node_id, name)
    return INT_MAX if value is None or value == "" else int(value)


def _setting(config: BrokerConfig, node_id: int, name: str) -> str | None:
    node = config.node_dynamic.get(node_id)
    if node is not None and name in node:
        return node[name]
    return config.get(name)
