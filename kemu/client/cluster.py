"""What every client role shares: bootstrap, per-broker connections, metadata (topic ids and
partition leaders), coordinator discovery and the retry policy for errors that heal by waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kemu.client.backoff import (
    Backoff,
    ExponentialBackoff,
    MetadataBackoff,
    ReconnectBackoff,
    client_rng,
)
from kemu.client.connection import BrokerConnection, BrokerFeatures, ConnectionClosed
from kemu.client.errors import COORDINATOR_MOVED, KafkaError
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode

METADATA, FIND_COORDINATOR = 3, 10
GROUP_COORDINATOR, TRANSACTION_COORDINATOR = 0, 1

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    """A partition named both ways: share-group APIs speak topic ids, produce speaks names."""

    topic_id: uuid.UUID
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    def __hash__(self) -> int:
        # Without the id: uuid.UUID hashes in Python code, and this is a key of every
        # acknowledgement; equal partitions still compare all three fields.
        return hash((self.topic, self.partition))


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    leaders: dict[int, int] = field(default_factory=dict)  # partition -> leader node id


class RetriableError(Exception):
    """Raised inside a retried operation to ask for another attempt after a backoff."""


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    addresses = []
    for entry in bootstrap.split(","):
        host, _, port = entry.strip().rpartition(":")
        addresses.append((host or "localhost", int(port)))
    return addresses


# Metadata errors for a topic that no waiting will bring (answered at once, not retried).
TOPIC_CANNOT_EXIST = {
    ErrorCode.invalid_topic_exception: (
        "topic {name!r} cannot exist: the broker refuses the name (at most 249 characters of "
        "ASCII letters, digits, '.', '_' and '-')"
    ),
    ErrorCode.topic_authorization_failed: "not authorized to describe or create topic {name!r}",
}
# How long UNKNOWN_TOPIC_OR_PARTITION is waited out (a topic just created elsewhere, whose
# metadata has not reached every broker yet) before it is reported.
UNKNOWN_TOPIC_GRACE_S = 2.0


class ClusterClient:
    """Connections to the brokers of one cluster, made on first use and remade after a failure,
    each broker address waiting out its reconnect backoff (``backoff.Backoff``) before another
    attempt; metadata requests one at a time, spaced by the retry backoff."""

    def __init__(
        self,
        bootstrap: str,
        client_id: str = "kemu-client",
        *,
        allow_auto_topic_creation: bool = False,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        # Metadata's AllowAutoTopicCreation, as the Java producer and consumer send it (their
        # default: true); a broker with auto.create.topics.enable=false still refuses.
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.backoff = backoff if backoff is not None else Backoff()
        self.rng = client_rng(rng)
        self.retry_backoff = ExponentialBackoff(
            self.backoff.retry_backoff_ms, self.backoff.retry_backoff_max_ms, self.rng
        )
        self.reconnect = ReconnectBackoff(
            ExponentialBackoff(
                self.backoff.reconnect_backoff_ms, self.backoff.reconnect_backoff_max_ms, self.rng
            )
        )
        self.metadata_backoff = MetadataBackoff(self.retry_backoff)
        self.topic_errors: dict[str, ErrorCode] = {}
        self.nodes: dict[int, tuple[str, int]] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        self._connections: dict[int, BrokerConnection] = {}
        # A connection made to ask for metadata (to a bootstrap server, or any known broker):
        # the broker at its address takes it over as its own connection when first asked for.
        self._bootstrap_connection: BrokerConnection | None = None
        self._coordinators: dict[tuple[int, str], int] = {}
        self._connecting: dict[int | None, asyncio.Lock] = {}  # None: any broker
        # per lock: failed rounds so far and the last one's error, which the callers that
        # waited for it share (they do not try again at once themselves)
        self._connect_failures: dict[int | None, tuple[int, str]] = {}
        self._metadata_request: tuple[frozenset[str], asyncio.Future[None]] | None = None

    # --- connections ---------------------------------------------------------------------------

    async def start(self, timeout: float = 30.0) -> None:
        """Connect to a bootstrap server and learn the brokers, retrying while none answers (a
        cluster restarting) for up to ``timeout`` seconds."""
        await self.retry(lambda: self.refresh_metadata(()), timeout=timeout)

    async def _any_connection(self) -> BrokerConnection:
        """A connection to any broker, for requests any of them answers (Metadata,
        FindCoordinator). Without one: the bootstrap servers, then the other known brokers, each
        tried once its reconnect backoff has passed (Java's ``leastLoadedNode``)."""
        for connection in self._connections.values():
            if connection.connected:
                return connection
        if self._bootstrap_connection is not None and self._bootstrap_connection.connected:
            return self._bootstrap_connection
        async with self._connect_turn(None):
            if self._bootstrap_connection is not None and self._bootstrap_connection.connected:
                return self._bootstrap_connection
            addresses = list(dict.fromkeys([*self.bootstrap, *self.nodes.values()]))
            now = asyncio.get_running_loop().time()
            waits = {address: self.reconnect.delay(address, now) for address in addresses}
            soonest = min(waits.values())
            if soonest > 0:  # every address is backing off: the first free one, once it is
                await asyncio.sleep(soonest)
            errors = []
            for address in addresses:
                if waits[address] > soonest:
                    continue
                try:
                    connection = await self._connect(address)
                except ConnectionClosed as exc:
                    errors.append(str(exc))
                    continue
                self._bootstrap_connection = connection
                return connection
            raise self._failed_round(None, f"no broker answered: {errors}")

    async def connection(self, node_id: int) -> BrokerConnection:
        existing = self._connections.get(node_id)
        if existing is not None and existing.connected:
            return existing
        async with self._connect_turn(node_id):
            existing = self._connections.get(node_id)
            if existing is not None:
                if existing.connected:
                    return existing
                self.connection_lost(node_id, existing)
            if node_id not in self.nodes:
                await self.refresh_metadata(())
            if node_id not in self.nodes:
                raise RetriableError(f"broker {node_id} is not in the cluster metadata")
            address = self.nodes[node_id]
            spare = self._bootstrap_connection
            if spare is not None and spare.connected and (spare.host, spare.port) == address:
                self._bootstrap_connection = None
                self._connections[node_id] = spare
                return spare
            delay = self.reconnect.delay(address, asyncio.get_running_loop().time())
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                connection = await self._connect(address)
            except ConnectionClosed as exc:
                self._forget_node(node_id)
                # the broker is restarting, or moved
                raise self._failed_round(node_id, str(exc)) from exc
            self._connections[node_id] = connection
            return connection

    @contextlib.asynccontextmanager
    async def _connect_turn(self, key: int | None) -> AsyncIterator[None]:
        """One connection attempt to ``key`` (a broker id, None: any broker) at a time; a
        caller that waited for a turn in which the attempt failed fails with it."""
        lock = self._connecting.setdefault(key, asyncio.Lock())
        failed_before = self._connect_failures.get(key, (0, ""))[0]
        async with lock:
            failed, error = self._connect_failures.get(key, (0, ""))
            if failed != failed_before:
                raise RetriableError(error) if key is not None else ConnectionClosed(error)
            yield

    def _failed_round(self, key: int | None, error: str) -> Exception:
        failed, _ = self._connect_failures.get(key, (0, ""))
        self._connect_failures[key] = (failed + 1, error)
        return RetriableError(error) if key is not None else ConnectionClosed(error)

    async def _connect(self, address: tuple[str, int]) -> BrokerConnection:
        """A new connection whose ApiVersions was answered; a failure starts (or lengthens) the
        address's reconnect backoff."""
        connection = BrokerConnection(*address, self.client_id)
        try:
            await connection.connect()
        except (ConnectionClosed, KafkaError) as exc:
            connection.close()
            self.reconnect.failed(address, asyncio.get_running_loop().time())
            raise ConnectionClosed(str(exc)) from exc
        self.reconnect.connected(address)
        return connection

    async def features(self) -> BrokerFeatures:
        return (await self._any_connection()).features

    async def version(self, api_key: int, wanted: int, node_id: int | None = None) -> int:
        """The version to send ``api_key`` at: the highest both sides speak, at most ``wanted``."""
        connection = (
            await self._any_connection() if node_id is None else await self.connection(node_id)
        )
        found = connection.features.highest(api_key, wanted)
        if found is None:
            raise KafkaError(
                ErrorCode.unsupported_version,
                f"the broker does not serve {wire.api_name(api_key)} (key {api_key})",
            )
        return found

    async def call(
        self,
        node_id: int,
        api_key: int,
        version: int,
        *,
        wire_key: int | None = None,
        **fields: Any,
    ) -> Any:
        """One request to one broker; a broken connection becomes a RetriableError."""
        try:
            connection = await self.connection(node_id)
        except (ConnectionClosed, OSError) as exc:  # no broker answered for the metadata
            raise RetriableError(str(exc)) from exc
        try:
            return await connection.call(api_key, version, wire_key=wire_key, **fields)
        except (ConnectionClosed, OSError) as exc:
            self.connection_lost(node_id, connection)
            raise RetriableError(str(exc)) from exc

    def connection_lost(self, node_id: int, connection: BrokerConnection) -> None:
        """A request on ``connection`` (from ``connection(node_id)``) found it broken: the next
        connection to its broker waits out the reconnect backoff, as Java's client does after a
        disconnect."""
        if self._connections.get(node_id) is connection:
            self._connections.pop(node_id, None)
            connection.close()
            self.reconnect.failed(
                (connection.host, connection.port), asyncio.get_running_loop().time()
            )

    def request_class(self, api_key: int, version: int, name: str) -> Any:
        """A nested request class (a topic or partition entry) of one message version."""
        return getattr(wire.request_module(api_key, version), name)

    def nested(self, api_key: int, version: int, name: str, /, **fields: Any) -> Any:
        return wire.build(self.request_class(api_key, version, name), **fields)

    async def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        if self._bootstrap_connection is not None:
            self._bootstrap_connection.close()
        self._connections.clear()

    # --- metadata ------------------------------------------------------------------------------

    async def refresh_metadata(self, topics: Iterable[str]) -> None:
        """Brokers, and topic ids and leaders of ``topics`` (an unknown topic is left out).

        As Java's ``Metadata``: one request at a time (a caller whose topics the request under
        way asks for waits for its answer), and a request waits ``retry_backoff_ms`` after the
        one before, exponentially longer after failures; asking for a topic not known yet
        waits only after a failure."""
        names = frozenset(topics)
        loop = asyncio.get_running_loop()
        waited = False
        while True:
            under_way = self._metadata_request
            if under_way is not None:
                if names <= under_way[0]:
                    # shielded: a caller cancelled does not cancel the request others wait for
                    await asyncio.shield(under_way[1])
                    return
                await asyncio.wait([under_way[1]])  # its outcome is its callers'; then ours
                continue
            new_topics = any(name not in self.topics for name in names)
            delay = self.metadata_backoff.delay(loop.time(), new_topics=new_topics)
            if waited or delay <= 0:
                break
            await asyncio.sleep(delay)
            waited = True
        request = loop.create_task(self._request_metadata(sorted(names)))
        self._metadata_request = (names, request)
        request.add_done_callback(self._metadata_answered)
        await asyncio.shield(request)

    def _metadata_answered(self, request: asyncio.Future[None]) -> None:
        if self._metadata_request is not None and self._metadata_request[1] is request:
            self._metadata_request = None
        now = asyncio.get_running_loop().time()
        if request.cancelled() or request.exception() is not None:
            self.metadata_backoff.failed(now)
        else:
            self.metadata_backoff.succeeded(now)

    async def _request_metadata(self, names: list[str]) -> None:
        connection = await self._any_connection()
        version = connection.features.highest(METADATA, 12)
        if version is None or version < 10:
            raise KafkaError(ErrorCode.unsupported_version, "Metadata v10+ (topic ids) is needed")
        wanted = tuple(
            self.nested(METADATA, version, "MetadataRequestTopic", name=n) for n in names
        )
        try:
            response = await connection.call(
                METADATA,
                version,
                topics=wanted,
                allow_auto_topic_creation=self.allow_auto_topic_creation,
            )
        except (ConnectionClosed, OSError) as exc:
            raise RetriableError(str(exc)) from exc
        if response.brokers:
            # an answer naming no broker (an injected fault can give one) is not a cluster of
            # none: Java's client ignores it too, keeping the brokers it knew
            self.nodes = {int(b.node_id): (str(b.host), int(b.port)) for b in response.brokers}
        for topic in response.topics:
            if topic.name is not None:
                if topic.error_code != ErrorCode.none:
                    self.topic_errors[str(topic.name)] = topic.error_code
                else:
                    self.topic_errors.pop(str(topic.name), None)
            if topic.error_code != ErrorCode.none or topic.name is None:
                continue
            info = TopicInfo(str(topic.name), uuid.UUID(str(topic.topic_id)))
            for partition in topic.partitions:
                info.leaders[int(partition.partition_index)] = int(partition.leader_id)
            self.topics[info.name] = info
            self.topic_names[info.topic_id] = info.name

    async def topic(self, name: str, *, timeout: float = 30.0) -> TopicInfo:
        """Metadata of one topic (created by the broker on first use when this client allows
        it), waiting for it to have leaders. A topic that cannot exist fails fast with a
        KafkaError saying why: a name the broker refuses, no authorization, or no such topic
        past UNKNOWN_TOPIC_GRACE_S (the broker, or this client, does not create topics)."""
        known = self.topics.get(name)
        if known is not None and known.leaders and min(known.leaders.values()) >= 0:
            return known  # what the first attempt would return, without a wait
        loop = asyncio.get_running_loop()
        unknown_since: float | None = None

        async def attempt() -> TopicInfo:
            nonlocal unknown_since
            info = self.topics.get(name)
            if info is None or any(leader < 0 for leader in info.leaders.values()):
                await self.refresh_metadata([name, *self.topics])
                info = self.topics.get(name)
            if info is None:
                error = self.topic_errors.get(name)
                if error is not None and error != ErrorCode.unknown_topic_or_partition:
                    if error in TOPIC_CANNOT_EXIST:
                        raise KafkaError(error, TOPIC_CANNOT_EXIST[error].format(name=name))
                elif error is not None:
                    unknown_since = loop.time() if unknown_since is None else unknown_since
                    if loop.time() - unknown_since >= UNKNOWN_TOPIC_GRACE_S:
                        raise KafkaError(error, self._unknown_topic_message(name))
            if info is None or not info.leaders or min(info.leaders.values()) < 0:
                raise RetriableError(f"topic {name} has no metadata yet")
            return info

        return await self.retry(attempt, timeout=timeout)

    def _unknown_topic_message(self, name: str) -> str:
        if self.allow_auto_topic_creation:
            return (
                f"topic {name!r} does not exist and the broker does not create topics on first "
                "use (auto.create.topics.enable=false): create it first"
            )
        return (
            f"topic {name!r} does not exist and this client does not ask for it to be created "
            "(allow_auto_topic_creation=False): create it first"
        )

    async def leader(self, name: str, partition: int) -> int:
        info = await self.topic(name)
        if partition not in info.leaders:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{name}-{partition}")
        return info.leaders[partition]

    async def forget_leaders(self) -> None:
        """Leadership moved: reread every known topic."""
        await self.refresh_metadata(list(self.topics))

    def learn_nodes(self, endpoints: Iterable[Any]) -> None:
        """Endpoints a response carries for brokers named as new leaders (NodeEndpoints)."""
        for endpoint in endpoints:
            self.nodes[int(endpoint.node_id)] = (str(endpoint.host), int(endpoint.port))

    # --- coordinators --------------------------------------------------------------------------

    async def coordinator(self, key_type: int, key: str, *, timeout: float = 30.0) -> int:
        cached = self._coordinators.get((key_type, key))
        if cached is not None:
            return cached

        async def attempt() -> int:
            connection = await self._any_connection()
            version = connection.features.highest(FIND_COORDINATOR, 6)
            if version is None or version < 4:
                raise KafkaError(ErrorCode.unsupported_version, "FindCoordinator v4+ is needed")
            try:
                response = await connection.call(
                    FIND_COORDINATOR, version, key_type=key_type, coordinator_keys=(key,)
                )
            except (ConnectionClosed, OSError) as exc:
                raise RetriableError(str(exc)) from exc
            [found] = response.coordinators
            if found.error_code in COORDINATOR_MOVED:
                raise RetriableError(f"no coordinator for {key} yet: {found.error_code.name}")
            if found.error_code != ErrorCode.none:
                raise KafkaError(found.error_code, found.error_message)
            self.nodes[int(found.node_id)] = (str(found.host), int(found.port))
            return int(found.node_id)

        node_id = await self.retry(attempt, timeout=timeout)
        self._coordinators[(key_type, key)] = node_id
        return node_id

    def _forget_node(self, node_id: int) -> None:
        """A broker refused a connection (it stopped): what it led or coordinated is looked
        up again, as Kafka's clients refresh their metadata on a disconnect."""
        for key, node in list(self._coordinators.items()):
            if node == node_id:
                del self._coordinators[key]
        for name, info in list(self.topics.items()):
            if node_id in info.leaders.values():
                del self.topics[name]

    def forget_coordinator(self, key_type: int, key: str) -> None:
        self._coordinators.pop((key_type, key), None)

    # --- retries -------------------------------------------------------------------------------

    async def retry(self, attempt: Callable[[], Awaitable[T]], *, timeout: float = 30.0) -> T:
        """Run ``attempt`` until it returns, backing off exponentially (``retry_backoff_ms`` up
        to ``retry_backoff_max_ms``, jittered) while it raises RetriableError or
        ConnectionClosed (no broker reachable: a cluster restarting); the last one becomes a
        KafkaError(REQUEST_TIMED_OUT)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        failures = 0
        while True:
            try:
                return await attempt()
            except (RetriableError, ConnectionClosed) as exc:
                backoff = self.retry_backoff.seconds(failures)
                failures += 1
                if loop.time() + backoff > deadline:
                    raise KafkaError(ErrorCode.request_timed_out, f"gave up: {exc}") from exc
                await asyncio.sleep(backoff)
