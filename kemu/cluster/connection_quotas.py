"""Connection quotas: what Kafka 4.4's ConnectionQuotas (``SocketServer.scala``) decides, sans IO.

One ``ConnectionQuotas`` per broker, fed by its acceptors (``kemu/broker/acceptor.py``) with the
time as an argument. A new connection goes through Kafka's steps, in Kafka's order:

1. *Wait for a slot* (``record_connection``, then ``slot_available``): the connection is recorded
   on the broker-wide rate (``max.connection.creation.rate``) and on its listener's
   (``listener.name.<l>.max.connection.creation.rate``, else the broker-wide value); over either,
   the acceptor of that listener waits the throttle time — ``(observed - quota) / quota x window``
   capped at one ``quota.window.size.seconds`` — before taking this connection and any behind it.
   It also waits while the listener holds ``listener.name.<l>.max.connections`` (else
   ``max.connections``) or the broker ``max.connections`` connections, until one closes.
2. *Per-IP rate* (``admit``): with a ``connection_creation_rate`` quota for the client's IP (or
   the default IP entity), the connection is recorded on that IP's rate; over it, the connection
   is taken back from the IP, listener and broker rates and is *throttled*: never read, closed
   once the throttle time has passed, not counted.
3. *Count*: the connection counts for its IP, its listener and the broker; if its IP already had
   ``max.connections.per.ip`` connections (or its ``max.connections.per.ip.overrides`` entry), it
   is *refused*: closed at once (the rates keep it).

The inter-broker listener (``inter.broker.listener.name``, default PLAINTEXT) of a broker with
more than one listener is *protected*: it is not charged on the broker-wide rate and not held back
by the broker's ``max.connections``; connections it takes beyond that limit make the broker close
the least recently used connections of its other listeners (``excess``).

Rates are Kafka's ``Rate`` over ``quota.window.num`` samples of ``quota.window.size.seconds``
(``WindowedRate``). A per-IP rate nothing was recorded on for an hour is dropped, as Kafka expires
its sensor; the broker and listener rates are kept.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from kemu.cluster.client_quotas import IP, ClientQuotas
from kemu.cluster.quota_enforcement import SensorExpiry, WindowedRate, throttle_time_ms

INT_MAX = 2**31 - 1  # Kafka's defaults for every connection limit (Int.MaxValue: none)
CONNECTION_CREATION_RATE = "connection_creation_rate"


def normalize_ip(address: str) -> str:
    """An address as one key whatever its spelling (``::ffff:127.0.0.1`` is 127.0.0.1, as Java's
    InetAddress reads it)."""
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    return str(parsed)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """A broker's connection settings, listener values already resolved with their prefix."""

    max_connections: int = INT_MAX  # max.connections (broker-wide)
    listener_max_connections: Mapping[str, int] = field(default_factory=dict)
    max_creation_rate: int = INT_MAX  # max.connection.creation.rate (broker-wide)
    listener_creation_rate: Mapping[str, int] = field(default_factory=dict)
    max_per_ip: int = INT_MAX  # max.connections.per.ip
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)  # normalized IP -> max
    inter_broker_listener: str = "PLAINTEXT"


class Outcome(Enum):
    ACCEPTED = "accepted"
    THROTTLED = "throttled"  # per-IP rate: kept unread, closed after the throttle time
    REFUSED = "refused"  # max.connections.per.ip: closed at once


@dataclass(frozen=True, slots=True)
class Admission:
    outcome: Outcome
    throttle_ms: int = 0


ACCEPTED = Admission(Outcome.ACCEPTED)
REFUSED = Admission(Outcome.REFUSED)


class IpRates:
    """``connection_creation_rate`` per IP from the stored client quotas (the IP entity, else the
    default IP entity, else none), re-indexed when they change."""

    def __init__(self, store: ClientQuotas) -> None:
        self.store = store
        self._version = -1
        self._by_ip: dict[str, int] = {}
        self._default = INT_MAX

    def rate_for(self, ip: str) -> int:
        if self._version != self.store.version:
            self._index()
        return self._by_ip.get(ip, self._default)

    def _index(self) -> None:
        self._version = self.store.version
        self._by_ip = {}
        self._default = INT_MAX
        for entity, values in self.store.quotas.items():
            if len(entity) != 1 or entity[0][0] != IP or CONNECTION_CREATION_RATE not in values:
                continue
            rate = int(values[CONNECTION_CREATION_RATE])  # Kafka keeps it as an Int
            name = entity[0][1]
            if name is None:
                self._default = rate
            else:
                self._by_ip[normalize_ip(name)] = rate


class ConnectionQuotas:
    """One broker's connection counts and creation rates (Kafka's ConnectionQuotas)."""

    def __init__(
        self,
        listeners: tuple[str, ...],
        ip_rates: IpRates,
        samples: int = 11,
        window_ms: int = 1000,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self.listeners = listeners
        self.ip_rates = ip_rates
        self.samples = samples
        self.window_ms = window_ms
        self.limits = limits or ConnectionLimits()
        self.max_throttle_ms = window_ms  # QuotaConfig's quota.window.size.seconds
        self.counts: dict[str, int] = {}  # per IP
        self.listener_counts: dict[str, int] = dict.fromkeys(listeners, 0)
        self.total = 0
        self.broker_rate = WindowedRate(samples, window_ms)
        self.listener_rates = {name: WindowedRate(samples, window_ms) for name in listeners}
        self.ip_rate_sensors: dict[str, WindowedRate] = {}
        self.ip_expiry = SensorExpiry()

    def add_listener(self, listener: str) -> None:
        if listener not in self.listener_counts:
            self.listeners += (listener,)
            self.listener_counts[listener] = 0
            self.listener_rates[listener] = WindowedRate(self.samples, self.window_ms)

    # --- step 1: the acceptor's wait ----------------------------------------------------------

    def record_connection(self, listener: str, now_ms: int) -> int:
        """Record one connection on the broker (unless protected) and listener rates; the time
        the acceptor must wait before taking it, the longer of the two throttles."""
        limits = self.limits
        throttle = 0
        if not self.protected(listener):
            throttle = self._record(self.broker_rate, limits.max_creation_rate, now_ms)
        rate = self.listener_rates[listener]
        bound = limits.listener_creation_rate.get(listener, limits.max_creation_rate)
        return max(throttle, self._record(rate, bound, now_ms))

    def slot_available(self, listener: str) -> bool:
        limits = self.limits
        listener_max = limits.listener_max_connections.get(listener, limits.max_connections)
        if self.listener_counts[listener] >= listener_max:
            return False
        if self.protected(listener):
            return True
        return self.total < limits.max_connections

    # --- steps 2 and 3: the per-IP rate, then the counts ---------------------------------------

    def admit(self, listener: str, ip: str, now_ms: int) -> Admission:
        """After the wait: throttled by the IP's rate, or counted (and refused past its max)."""
        bound = self.ip_rates.rate_for(ip)
        if bound != INT_MAX:
            self.ip_expiry.sweep(self.ip_rate_sensors, now_ms)
            sensor = self.ip_rate_sensors.get(ip)
            if sensor is None:
                sensor = self.ip_rate_sensors[ip] = WindowedRate(
                    self.samples, self.window_ms, now_ms
                )
            throttle = self._record(sensor, bound, now_ms)
            if throttle > 0:
                # Not accepted: taken back from every rate it was recorded on.
                sensor.record(-1.0, now_ms)
                if not self.protected(listener):
                    self.broker_rate.record(-1.0, now_ms)
                self.listener_rates[listener].record(-1.0, now_ms)
                return Admission(Outcome.THROTTLED, throttle)
        before = self.counts.get(ip, 0)
        self.counts[ip] = before + 1
        self.total += 1
        self.listener_counts[listener] += 1
        limits = self.limits
        if before >= limits.per_ip_overrides.get(ip, limits.max_per_ip):
            self.release(listener, ip)
            return REFUSED
        return ACCEPTED

    def release(self, listener: str, ip: str) -> None:
        """A counted connection closed."""
        count = self.counts.get(ip, 0)
        if count <= 1:
            self.counts.pop(ip, None)
        else:
            self.counts[ip] = count - 1
        self.total = max(0, self.total - 1)
        self.listener_counts[listener] = max(0, self.listener_counts[listener] - 1)

    def excess(self, listener: str) -> bool:
        """More connections than ``max.connections`` (taken by the protected listener): one of
        ``listener``'s should close (Kafka's maxConnectionsExceeded)."""
        return self.total > self.limits.max_connections and not self.protected(listener)

    def protected(self, listener: str) -> bool:
        return listener == self.limits.inter_broker_listener and len(self.listeners) > 1

    def count(self, ip: str) -> int:
        return self.counts.get(ip, 0)

    def _record(self, rate: WindowedRate, bound: int, now_ms: int) -> int:
        rate.record(1.0, now_ms)
        return throttle_time_ms(rate, bound, now_ms, self.max_throttle_ms)
