"""kemu.client waits after failures as Kafka's clients do: per broker address an exponential
reconnect backoff (reconnect.backoff.ms 50 -> reconnect.backoff.max.ms 1000), one connection
attempt at a time, one metadata request at a time spaced by retry.backoff.ms (exponentially
after failures, KIP-580), all jittered from the client's own seeded random. No broker: the
connection and the sleeps are stand-ins, which record what was asked of them."""

from __future__ import annotations

import asyncio
import random
import uuid
from types import SimpleNamespace

import pytest

from kemu.client import Backoff, ShareConsumer
from kemu.client.backoff import ExponentialBackoff
from kemu.client.cluster import ClusterClient, RetriableError
from kemu.client.connection import BrokerConnection, ConnectionClosed

ADDRESS = ("127.0.0.1", 9092)
real_sleep = asyncio.sleep


class Recorder:
    """Stand-ins for a broker that refuses (or, once ``up``, accepts) connections, and for
    asyncio.sleep, which returns at once and keeps the seconds asked for."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.up = False
        self.connects: list[tuple[str, int]] = []
        self.sleeps: list[float] = []
        self.metadata_requests = 0
        recorder = self

        async def connect(connection: BrokerConnection, timeout: float = 10.0) -> None:
            recorder.connects.append((connection.host, connection.port))
            await real_sleep(0)
            if not recorder.up:
                raise ConnectionClosed("refused")
            connection._writer = SimpleNamespace()  # type: ignore[assignment]

        async def sleep(seconds: float) -> None:
            recorder.sleeps.append(seconds)
            await real_sleep(0)

        monkeypatch.setattr(BrokerConnection, "connect", connect)
        monkeypatch.setattr(asyncio, "sleep", sleep)


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return Recorder(monkeypatch)


def client(seed: int = 1) -> ClusterClient:
    cluster = ClusterClient(f"{ADDRESS[0]}:{ADDRESS[1]}", rng=random.Random(seed))
    cluster.nodes[1] = ADDRESS
    return cluster


def test_the_backoff_doubles_with_jitter_up_to_its_maximum() -> None:
    backoff = ExponentialBackoff(50, 1000, random.Random(3))
    waits = [backoff.seconds(failures) for failures in range(8)]
    for wait, base in zip(waits, (0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0), strict=True):
        assert base * 0.8 <= wait <= min(base * 1.2, 1.0)
    assert waits[5:] != [1.0, 1.0, 1.0]  # jittered below the maximum too
    again = ExponentialBackoff(50, 1000, random.Random(3))
    assert [again.seconds(failures) for failures in range(8)] == waits  # seeded: the same
    assert ExponentialBackoff(100, 100, random.Random(3)).seconds(5) == 0.1  # no range: fixed


def test_settings_keep_kafkas_defaults_and_refuse_negative_values() -> None:
    assert Backoff() == Backoff(
        retry_backoff_ms=100,
        retry_backoff_max_ms=1000,
        reconnect_backoff_ms=50,
        reconnect_backoff_max_ms=1000,
    )
    with pytest.raises(ValueError, match="reconnect_backoff_ms"):
        Backoff(reconnect_backoff_ms=-1)
    consumer = ShareConsumer("127.0.0.1:1", "g", backoff=Backoff(retry_backoff_ms=20))
    assert consumer.cluster.retry_backoff.initial_ms == 20


async def test_reconnecting_waits_longer_after_each_failure_and_resets_once_connected(
    broker: Recorder,
) -> None:
    cluster = client()
    for _ in range(7):
        with pytest.raises(RetriableError):
            await cluster.connection(1)
    assert len(broker.connects) == 7  # one attempt each, and none at once after a failure
    for wait, base in zip(broker.sleeps, (0.05, 0.1, 0.2, 0.4, 0.8, 1.0), strict=True):
        assert base * 0.8 - 0.01 <= wait <= min(base * 1.2, 1.0)
    broker.up = True
    connection = await cluster.connection(1)
    assert await cluster.connection(1) is connection and len(broker.connects) == 8
    broker.sleeps.clear()
    cluster.connection_lost(1, connection)  # it broke: the next waits the base backoff
    await cluster.connection(1)
    assert len(broker.sleeps) == 1 and 0.04 - 0.01 <= broker.sleeps[0] <= 0.06


async def test_callers_waiting_for_one_failed_attempt_fail_with_it(broker: Recorder) -> None:
    cluster = client()
    outcomes = await asyncio.gather(
        *(cluster.connection(1) for _ in range(5)), return_exceptions=True
    )
    assert all(isinstance(outcome, RetriableError) for outcome in outcomes)
    assert len(broker.connects) == 1


async def test_the_metadata_connection_becomes_the_brokers_own(
    broker: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker.up = True
    cluster = client()
    spare = await cluster._any_connection()
    assert await cluster.connection(1) is spare
    assert len(broker.connects) == 1


class MetadataBroker:
    """Answers (or fails) ``_request_metadata`` in place of the wire, counting the requests."""

    def __init__(self) -> None:
        self.requests: list[list[str]] = []
        self.failing = False
        self.release = asyncio.Event()

    async def __call__(self, names: list[str]) -> None:
        self.requests.append(names)
        await self.release.wait()
        if self.failing:
            raise ConnectionClosed("no broker answered")


async def test_metadata_goes_one_request_at_a_time_spaced_by_the_retry_backoff(
    broker: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = client()
    metadata = MetadataBroker()
    monkeypatch.setattr(cluster, "_request_metadata", metadata)
    cluster.topics["a"] = SimpleNamespace()  # type: ignore[assignment]
    waiting = [asyncio.ensure_future(cluster.refresh_metadata(["a"])) for _ in range(4)]
    waiting.append(asyncio.ensure_future(cluster.refresh_metadata(())))
    await real_sleep(0)
    metadata.release.set()
    await asyncio.gather(*waiting)
    assert metadata.requests == [["a"]]  # one request answered all five
    assert broker.sleeps == []
    await cluster.refresh_metadata(["a"])  # right after an answer: waits retry.backoff.ms
    assert len(broker.sleeps) == 1 and 0.08 - 0.01 <= broker.sleeps[0] <= 0.12
    broker.sleeps.clear()
    await cluster.refresh_metadata(["new"])  # a topic not known yet: at once
    assert broker.sleeps == [] and metadata.requests[-1] == ["new"]
    metadata.failing = True
    for _ in range(3):
        with pytest.raises(ConnectionClosed):
            await cluster.refresh_metadata(["other"])
    # after failures even a new topic waits, twice as long after each (100, then 200 ms)
    assert len(broker.sleeps) == 2
    for wait, base in zip(broker.sleeps, (0.1, 0.2), strict=True):
        assert base * 0.8 - 0.01 <= wait <= base * 1.2


async def test_retried_calls_back_off_exponentially(broker: Recorder) -> None:
    cluster = client()
    attempts = 0

    async def attempt() -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 6:
            raise RetriableError("not yet")
        return "done"

    assert await cluster.retry(attempt) == "done"
    for wait, base in zip(broker.sleeps, (0.1, 0.2, 0.4, 0.8, 1.0), strict=True):
        assert base * 0.8 <= wait <= min(base * 1.2, 1.0)


def test_a_client_draws_its_jitter_from_uuid4_unless_given_a_random(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deterministic simulation seeds uuid.uuid4: its clients then wait the same each run."""
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=42))
    backoffs = [ClusterClient("127.0.0.1:1").reconnect.backoff for _ in range(2)]
    draws = [[backoff.seconds(n) for n in range(5)] for backoff in backoffs]
    assert draws[0] == draws[1]
    given = ClusterClient("127.0.0.1:1", rng=random.Random(7)).retry_backoff
    assert given.seconds(3) == ExponentialBackoff(100, 1000, random.Random(7)).seconds(3)
