"""Connection quotas, sans IO (kemu/cluster/connection_quotas.py): Kafka 4.4's ConnectionQuotas
steps — the broker and listener creation rates the acceptor waits for, the slots of
``max.connections``, the per-IP ``connection_creation_rate`` that throttles (and takes the
connection back from every rate), ``max.connections.per.ip`` and its overrides, the protected
inter-broker listener, and per-IP rates expiring after an hour.
"""

from __future__ import annotations

from kemu.cluster.client_quotas import IP, ClientQuotas, QuotaOp, make_entity
from kemu.cluster.connection_quotas import (
    INT_MAX,
    ConnectionLimits,
    ConnectionQuotas,
    IpRates,
    Outcome,
    normalize_ip,
)

T0 = 1_700_000_000_000
HOST = "10.0.0.7"


def quotas(
    limits: ConnectionLimits | None = None,
    *,
    listeners: tuple[str, ...] = ("PLAINTEXT",),
    store: ClientQuotas | None = None,
    samples: int = 2,
) -> ConnectionQuotas:
    return ConnectionQuotas(listeners, IpRates(store or ClientQuotas()), samples, 1000, limits)


def ip_quota(store: ClientQuotas, ip: str | None, rate: float) -> None:
    store.alter(make_entity([(IP, ip)]), [QuotaOp("connection_creation_rate", rate, False)])


def test_unlimited_connections_are_taken_at_once() -> None:
    connections = quotas()
    for _ in range(1000):
        assert connections.record_connection("PLAINTEXT", T0) == 0
        assert connections.slot_available("PLAINTEXT")
        assert connections.admit("PLAINTEXT", HOST, T0).outcome is Outcome.ACCEPTED
    assert connections.count(HOST) == 1000 and connections.total == 1000


def test_broker_creation_rate_makes_the_acceptor_wait() -> None:
    """Over max.connection.creation.rate the wait is (observed - quota) / quota x window: with
    2 samples of 1 s, a third connection in the same instant observes 3/s against 2/s."""
    connections = quotas(ConnectionLimits(max_creation_rate=2))
    waits = [connections.record_connection("PLAINTEXT", T0) for _ in range(3)]
    assert waits == [0, 0, 500]


def test_the_wait_is_capped_at_one_quota_window() -> None:
    connections = quotas(ConnectionLimits(max_creation_rate=1))
    waits = [connections.record_connection("PLAINTEXT", T0) for _ in range(6)]
    assert waits[0] == 0 and waits[-1] == 1000  # (6 - 1) / 1 x 1 s, capped at 1 s


def test_listener_rate_falls_back_to_the_broker_value_and_the_longer_wait_wins() -> None:
    limits = ConnectionLimits(max_creation_rate=100, listener_creation_rate={"EXTERNAL": 1})
    connections = quotas(limits, listeners=("PLAINTEXT", "EXTERNAL"))
    assert [connections.record_connection("EXTERNAL", T0) for _ in range(2)] == [0, 1000]
    assert [connections.record_connection("PLAINTEXT", T0) for _ in range(2)] == [0, 0]


def test_max_connections_holds_the_acceptor_until_one_closes() -> None:
    connections = quotas(ConnectionLimits(max_connections=2))
    for _ in range(2):
        assert connections.admit("PLAINTEXT", HOST, T0).outcome is Outcome.ACCEPTED
    assert not connections.slot_available("PLAINTEXT")
    connections.release("PLAINTEXT", HOST)
    assert connections.slot_available("PLAINTEXT")


def test_listener_max_connections() -> None:
    limits = ConnectionLimits(listener_max_connections={"EXTERNAL": 1})
    connections = quotas(limits, listeners=("PLAINTEXT", "EXTERNAL"))
    connections.admit("EXTERNAL", HOST, T0)
    assert not connections.slot_available("EXTERNAL")
    assert connections.slot_available("PLAINTEXT")


def test_ip_rate_throttles_and_takes_the_connection_back_from_every_rate() -> None:
    store = ClientQuotas()
    ip_quota(store, None, 2)  # the default IP entity
    connections = quotas(ConnectionLimits(max_creation_rate=3), store=store)
    outcomes = []
    for _ in range(4):
        assert connections.record_connection("PLAINTEXT", T0) == 0  # never over 3: taken back
        outcomes.append(connections.admit("PLAINTEXT", HOST, T0))
    assert [a.outcome for a in outcomes] == [Outcome.ACCEPTED] * 2 + [Outcome.THROTTLED] * 2
    assert [a.throttle_ms for a in outcomes[2:]] == [500, 500]  # 3/s against 2/s, x 1 s
    assert connections.count(HOST) == 2  # a throttled connection is not counted
    assert connections.broker_rate.measure(T0) == 2.0
    assert connections.listener_rates["PLAINTEXT"].measure(T0) == 2.0


def test_a_named_ip_quota_wins_over_the_default_and_other_ips_are_free() -> None:
    store = ClientQuotas()
    ip_quota(store, None, 1)
    ip_quota(store, "10.0.0.7", 5)
    connections = quotas(store=store)
    taken = [connections.admit("PLAINTEXT", HOST, T0).outcome for _ in range(6)]
    assert taken.count(Outcome.ACCEPTED) == 5
    other = [connections.admit("PLAINTEXT", "10.0.0.8", T0).outcome for _ in range(2)]
    assert other == [Outcome.ACCEPTED, Outcome.THROTTLED]
    store.alter(make_entity([(IP, None)]), [QuotaOp("connection_creation_rate", 0, True)])
    assert connections.admit("PLAINTEXT", "10.0.0.9", T0).outcome is Outcome.ACCEPTED


def test_max_connections_per_ip_refuses_and_overrides_raise_it() -> None:
    limits = ConnectionLimits(max_per_ip=2, per_ip_overrides={"10.0.0.8": 3})
    connections = quotas(limits)
    mine = [connections.admit("PLAINTEXT", HOST, T0).outcome for _ in range(3)]
    assert mine == [Outcome.ACCEPTED, Outcome.ACCEPTED, Outcome.REFUSED]
    assert connections.count(HOST) == 2 and connections.total == 2
    theirs = [connections.admit("PLAINTEXT", "10.0.0.8", T0).outcome for _ in range(4)]
    assert theirs.count(Outcome.ACCEPTED) == 3
    connections.release("PLAINTEXT", HOST)
    assert connections.admit("PLAINTEXT", HOST, T0).outcome is Outcome.ACCEPTED


def test_the_inter_broker_listener_is_protected() -> None:
    """Not charged on the broker rate nor held by the broker's max.connections; past it, the
    other listeners are in excess (their least recently used connections close)."""
    limits = ConnectionLimits(max_connections=1, max_creation_rate=1)
    connections = quotas(limits, listeners=("PLAINTEXT", "EXTERNAL"))
    connections.admit("EXTERNAL", HOST, T0)
    assert not connections.slot_available("EXTERNAL")
    assert connections.slot_available("PLAINTEXT")
    assert [connections.record_connection("PLAINTEXT", T0) for _ in range(2)] == [0, 1000]
    connections.admit("PLAINTEXT", HOST, T0)
    assert connections.excess("EXTERNAL") and not connections.excess("PLAINTEXT")
    alone = quotas(limits)  # one listener: nothing is protected
    assert not alone.protected("PLAINTEXT")


def test_idle_ip_rates_expire_after_an_hour() -> None:
    store = ClientQuotas()
    ip_quota(store, None, 10)
    connections = quotas(store=store)
    for index in range(50):
        connections.admit("PLAINTEXT", f"10.1.0.{index}", T0)
    assert len(connections.ip_rate_sensors) == 50
    connections.admit("PLAINTEXT", HOST, T0 + 3_600_000)
    assert len(connections.ip_rate_sensors) == 51  # an hour exactly: not yet
    connections.admit("PLAINTEXT", HOST, T0 + 3_630_001)
    assert list(connections.ip_rate_sensors) == [HOST]


def test_addresses_are_keyed_as_java_reads_them() -> None:
    assert normalize_ip("::ffff:127.0.0.1") == "127.0.0.1"
    assert normalize_ip("0:0:0:0:0:0:0:1") == "::1"
    assert normalize_ip("127.0.0.1") == "127.0.0.1"
    assert INT_MAX == 2**31 - 1
