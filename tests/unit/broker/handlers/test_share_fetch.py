"""ShareFetch and ShareAcknowledge through the wire: kio requests encoded as frames, sent to an
in-process 3-broker kemu over TCP, answers decoded. The runtime's clock is virtual; lock
expiry is driven by advancing it and running the actor's expiry."""

from __future__ import annotations

import asyncio
import datetime
import itertools
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kemu.broker.server import KemuServer, ServerOptions
from kemu.broker.share.manager import share_partitions
from kemu.broker.share.states import AckType, RecordState
from kemu.cluster.partition import Partition
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.share.service import share_persister
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch, read_header, split_batches
from kemu.testing.plugin import free_port_block

pytestmark = pytest.mark.client

SHARE_FETCH, SHARE_ACK = 78, 79
GAP, ACCEPT, RELEASE, REJECT, RENEW = (int(t) for t in AckType)
GROUP = "g"


@dataclass
class Harness:
    server: KemuServer
    now: list[int]
    clients: list[Client] = field(default_factory=list)

    @property
    def runtime(self) -> Any:
        return self.server.runtime

    def partition(self, topic: str, index: int) -> Partition:
        found = self.server.cluster.partition(topic, index)
        assert found is not None
        return found

    def produce(self, topic: str, index: int, *counts: int) -> None:
        for count in counts:
            raw = build_batch([(None, b"r%d" % i) for i in range(count)], timestamp_ms=self.now[0])
            self.partition(topic, index).append(split_batches(raw), now_ms=self.now[0])

    async def client(self, node_id: int) -> Client:
        node = self.server.cluster.nodes[node_id]
        reader, writer = await asyncio.open_connection(node.host, node.port)
        client = Client(reader, writer)
        self.clients.append(client)
        return client

    async def leader_client(self, topic: str, index: int) -> Client:
        return await self.client(self.partition(topic, index).leader_id)

    def topic_id(self, topic: str) -> uuid.UUID:
        return self.server.cluster.topics[topic].topic_id


@dataclass
class Client:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def call(self, body: Any) -> Any:
        correlation_id = next(self.ids)
        self.writer.write(wire.encode_request_frame(body, correlation_id))
        await self.writer.drain()
        size = wire.SIZE.unpack(await self.reader.readexactly(4))[0]
        payload = await self.reader.readexactly(size)
        got, response = wire.decode_response(body.__api_key__, body.__version__, payload)
        assert got == correlation_id
        return response


@pytest.fixture
async def kemu() -> AsyncIterator[Harness]:
    port = free_port_block(3)
    config = BrokerConfig(
        {"group.share.max.share.sessions": "3", "group.share.partition.max.record.locks": "100"}
    )
    server = KemuServer(ServerOptions(brokers=3, port=port, config=config))
    now = [1_000_000]
    server.runtime.clock_ms = lambda: now[0]
    await server.start()
    server.cluster.create_topic("t", 3, 1)
    harness = Harness(server, now)
    try:
        yield harness
    finally:
        for client in harness.clients:
            client.writer.close()
        await server.close()


def request_module(api_key: int, version: int) -> Any:
    return sys.modules[wire.request_schema(api_key, version).__module__]


Acknowledgements = dict[int, list[tuple[int, int, list[int]]]]  # index -> (first, last, types)


def acknowledged_partitions(
    partition_class: Any, module: Any, partitions: Acknowledgements
) -> tuple[Any, ...]:
    """A ShareFetch or ShareAcknowledge request's partitions with their acknowledgements."""
    return tuple(
        wire.build(
            partition_class,
            partition_index=index,
            acknowledgement_batches=tuple(
                wire.build(
                    module.AcknowledgementBatch,
                    first_offset=first,
                    last_offset=last,
                    acknowledge_types=tuple(types),
                )
                for first, last, types in acks
            ),
        )
        for index, acks in partitions.items()
    )


def share_fetch(
    topic_id: uuid.UUID,
    partitions: Acknowledgements,
    *,
    epoch: int,
    member: str = "m1",
    version: int = 2,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_records: int = 500,
    batch_size: int = 500,
    max_bytes: int = 2**31 - 1,
    mode: int = 0,
    renew: bool = False,
    forgotten: list[int] | None = None,
    group: str = GROUP,
) -> Any:
    module = request_module(SHARE_FETCH, version)
    topics = (
        (
            wire.build(
                module.FetchTopic,
                topic_id=topic_id,
                partitions=acknowledged_partitions(module.FetchPartition, module, partitions),
            ),
        )
        if partitions
        else ()
    )
    return wire.build(
        wire.request_schema(SHARE_FETCH, version),
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        max_records=max_records,
        batch_size=batch_size,
        share_acquire_mode=mode,
        is_renew_ack=renew,
        topics=topics,
        forgotten_topics_data=(
            (wire.build(module.ForgottenTopic, topic_id=topic_id, partitions=tuple(forgotten)),)
            if forgotten
            else ()
        ),
    )


def share_ack(
    topic_id: uuid.UUID,
    partitions: Acknowledgements,
    *,
    epoch: int,
    member: str = "m1",
    version: int = 2,
    renew: bool = False,
) -> Any:
    module = request_module(SHARE_ACK, version)
    return wire.build(
        wire.request_schema(SHARE_ACK, version),
        group_id=GROUP,
        member_id=member,
        share_session_epoch=epoch,
        is_renew_ack=renew,
        topics=(
            wire.build(
                module.AcknowledgeTopic,
                topic_id=topic_id,
                partitions=acknowledged_partitions(module.AcknowledgePartition, module, partitions),
            ),
        ),
    )


def partition_data(response: Any, index: int) -> Any:
    for topic in response.responses:
        for data in topic.partitions:
            if data.partition_index == index:
                return data
    raise AssertionError(f"partition {index} not in the response")


def batch_bases(records: bytes) -> list[int]:
    bases, position = [], 0
    while position < len(records):
        header = read_header(records, position)
        bases.append(header.base_offset)
        position += header.size
    return bases


def acquired(response: Any, index: int = 0) -> list[tuple[int, int, int]]:
    data = partition_data(response, index)
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in data.acquired_records]


async def open_session(kemu: Harness, client: Client, member: str = "m1", index: int = 0) -> int:
    """Open a share session on partition ``index`` (loads the share partition at the log end,
    share.auto.offset.reset=latest); return the next epoch."""
    response = await client.call(
        share_fetch(kemu.topic_id("t"), {index: []}, epoch=0, member=member)
    )
    assert response.error_code == ErrorCode.none
    return 1


async def members(kemu: Harness, *member_ids: str) -> list[Client]:
    """A client per member (``"m1"``, ``"m2"``) of partition t-0's leader, each with a share
    session open on it (``open_session``: next epoch 1)."""
    clients = [await kemu.leader_client("t", 0) for _ in member_ids]
    for client, member in zip(clients, member_ids, strict=True):
        await open_session(kemu, client, member)
    return clients


# --- ShareFetch -------------------------------------------------------------------------------


async def test_fetch_acquires_whole_batches_with_delivery_counts(kemu: Harness) -> None:
    client = await kemu.leader_client("t", 0)
    epoch = await open_session(kemu, client)
    kemu.produce("t", 0, 3, 2)
    response = await client.call(share_fetch(kemu.topic_id("t"), {0: []}, epoch=epoch))
    assert response.error_code == ErrorCode.none
    assert response.acquisition_lock_timeout.total_seconds() == 30
    data = partition_data(response, 0)
    assert data.error_code == ErrorCode.none
    assert acquired(response) == [(0, 4, 1)]
    assert batch_bases(data.records) == [0, 3]


async def test_acknowledgements_in_a_fetch_apply_before_it_fetches(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client)
    kemu.produce("t", 0, 2)
    assert acquired(await client.call(share_fetch(tid, {0: []}, epoch=1))) == [(0, 1, 1)]
    kemu.produce("t", 0, 2)
    response = await client.call(share_fetch(tid, {0: [(0, 1, [ACCEPT])]}, epoch=2))
    data = partition_data(response, 0)
    assert data.acknowledge_error_code == ErrorCode.none
    assert acquired(response) == [(2, 3, 1)]
    manager = share_partitions(kemu.runtime)
    actor = manager.existing(GROUP, tid, 0)
    assert actor is not None and actor.core is not None and actor.core.start == 2
    persisted = await share_persister(kemu.runtime).read_state(actor.key, 0)
    assert persisted.state.start_offset == 2


async def test_a_second_member_never_gets_records_the_first_holds(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    first, second = await members(kemu, "m1", "m2")
    kemu.produce("t", 0, 4, 4)
    one = await first.call(share_fetch(tid, {0: []}, epoch=1, max_records=4))
    two = await second.call(share_fetch(tid, {0: []}, epoch=1, member="m2", max_records=4))
    assert acquired(one) == [(0, 3, 1)]
    assert acquired(two) == [(4, 7, 1)]


async def test_record_limit_mode_and_batch_size(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client)
    kemu.produce("t", 0, 10)
    limited = await client.call(share_fetch(tid, {0: []}, epoch=1, max_records=3, mode=1))
    assert acquired(limited) == [(0, 2, 1)]
    kemu.produce("t", 0, 2, 2, 2)
    batched = await client.call(share_fetch(tid, {0: []}, epoch=2, batch_size=2))
    assert acquired(batched) == [(3, 9, 1), (10, 11, 1), (12, 13, 1), (14, 15, 1)]


async def test_initial_fetch_with_acknowledgements_is_an_invalid_request(kemu: Harness) -> None:
    client = await kemu.leader_client("t", 0)
    response = await client.call(share_fetch(kemu.topic_id("t"), {0: [(0, 0, [ACCEPT])]}, epoch=0))
    assert response.error_code == ErrorCode.invalid_request


async def test_session_errors(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    missing = await client.call(share_fetch(tid, {0: []}, epoch=1))
    assert missing.error_code == ErrorCode.share_session_not_found
    await open_session(kemu, client)
    wrong = await client.call(share_fetch(tid, {0: []}, epoch=5))
    assert wrong.error_code == ErrorCode.invalid_share_session_epoch
    assert (await client.call(share_fetch(tid, {0: []}, epoch=1))).error_code == ErrorCode.none


async def test_share_session_limit(kemu: Harness) -> None:
    client = await kemu.leader_client("t", 0)
    for member in ("m1", "m2", "m3"):
        await open_session(kemu, client, member)
    response = await client.call(share_fetch(kemu.topic_id("t"), {0: []}, epoch=0, member="m4"))
    assert response.error_code == ErrorCode.share_session_limit_reached


async def test_partitions_led_elsewhere_point_to_their_leader(kemu: Harness) -> None:
    partition = kemu.partition("t", 0)
    other = next(n for n in kemu.server.cluster.nodes if n != partition.leader_id)
    client = await kemu.client(other)
    response = await client.call(share_fetch(kemu.topic_id("t"), {0: []}, epoch=0))
    data = partition_data(response, 0)
    assert data.error_code == ErrorCode.not_leader_or_follower
    assert data.current_leader.leader_id == partition.leader_id
    assert [n.node_id for n in response.node_endpoints] == [partition.leader_id]


async def test_unknown_topic_id(kemu: Harness) -> None:
    client = await kemu.leader_client("t", 0)
    response = await client.call(share_fetch(uuid.uuid4(), {0: []}, epoch=0))
    assert partition_data(response, 0).error_code == ErrorCode.unknown_topic_id


async def test_long_poll_is_woken_by_new_records(kemu: Harness) -> None:
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client)
    waiting = asyncio.create_task(
        client.call(share_fetch(kemu.topic_id("t"), {0: []}, epoch=1, max_wait_ms=60_000))
    )
    await asyncio.sleep(0.05)
    assert not waiting.done()
    kemu.produce("t", 0, 2)
    response = await asyncio.wait_for(waiting, 30)
    assert acquired(response) == [(0, 1, 1)]


async def test_long_poll_is_woken_by_a_release(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    holder, waiter = await members(kemu, "m1", "m2")
    kemu.produce("t", 0, 3)
    assert acquired(await holder.call(share_fetch(tid, {0: []}, epoch=1))) == [(0, 2, 1)]
    waiting = asyncio.create_task(
        waiter.call(share_fetch(tid, {0: []}, epoch=1, member="m2", max_wait_ms=60_000))
    )
    await asyncio.sleep(0.05)
    assert not waiting.done()
    released = await holder.call(share_ack(tid, {0: [(0, 2, [RELEASE])]}, epoch=2))
    assert partition_data(released, 0).error_code == ErrorCode.none
    assert acquired(await asyncio.wait_for(waiting, 30)) == [(0, 2, 2)]


async def test_long_poll_is_woken_when_acknowledgements_make_room(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    holder, waiter = await members(kemu, "m1", "m2")
    kemu.produce("t", 0, 100, 100)
    assert acquired(await holder.call(share_fetch(tid, {0: []}, epoch=1))) == [(0, 99, 1)]
    waiting = asyncio.create_task(
        waiter.call(share_fetch(tid, {0: []}, epoch=1, member="m2", max_wait_ms=60_000))
    )
    await asyncio.sleep(0.05)
    assert not waiting.done()  # 100 records in flight: the limit
    await holder.call(share_ack(tid, {0: [(0, 99, [ACCEPT])]}, epoch=2))
    assert acquired(await asyncio.wait_for(waiting, 30)) == [(100, 199, 1)]


async def test_lock_expiry_makes_records_available_to_others(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    first, second = await members(kemu, "m1", "m2")
    kemu.produce("t", 0, 2)
    await first.call(share_fetch(tid, {0: []}, epoch=1))
    actor = share_partitions(kemu.runtime).existing(GROUP, tid, 0)
    assert actor is not None and actor.core is not None
    assert actor.core.next_deadline() == kemu.now[0] + 30_000
    kemu.now[0] += 30_000
    await actor._expire()
    response = await second.call(share_fetch(tid, {0: []}, epoch=1, member="m2"))
    assert acquired(response) == [(0, 1, 2)]
    late = await first.call(share_ack(tid, {0: [(0, 1, [ACCEPT])]}, epoch=2))
    assert partition_data(late, 0).error_code == ErrorCode.invalid_record_state


async def test_closing_the_session_releases_the_members_records(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    first, second = await members(kemu, "m1", "m2")
    kemu.produce("t", 0, 4)
    await first.call(share_fetch(tid, {0: []}, epoch=1))
    closing = await first.call(share_fetch(tid, {0: [(0, 1, [ACCEPT])]}, epoch=-1))
    assert closing.error_code == ErrorCode.none
    assert partition_data(closing, 0).acknowledge_error_code == ErrorCode.none
    # 2-3 are released with their delivery counted (Kafka 4.4.0: DeliveryCountOps.NO_OP)
    assert acquired(await second.call(share_fetch(tid, {0: []}, epoch=1, member="m2"))) == [
        (2, 3, 2)
    ]
    gone = await first.call(share_fetch(tid, {0: []}, epoch=2))
    assert gone.error_code == ErrorCode.share_session_not_found


async def test_group_coordinator_release_of_a_departed_member(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client, "m1")
    kemu.produce("t", 0, 2)
    await client.call(share_fetch(tid, {0: []}, epoch=1))
    manager = share_partitions(kemu.runtime)
    manager.departure_grace_s = 0  # no grace: sessions go at once
    await manager.release_member(GROUP, "m1")
    assert (await client.call(share_fetch(tid, {0: []}, epoch=2))).error_code == (
        ErrorCode.share_session_not_found
    )
    fresh = await client.call(share_fetch(tid, {0: []}, epoch=0, member="m2"))
    assert acquired(fresh) == [(0, 1, 2)]  # released with the delivery counted


async def test_a_leaving_members_final_acknowledgements_still_apply(kemu: Harness) -> None:
    """librdkafka's leave heartbeat can overtake its closing ShareAcknowledge."""
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client)
    kemu.produce("t", 0, 4)
    await client.call(share_fetch(tid, {0: []}, epoch=1))
    manager = share_partitions(kemu.runtime)
    await manager.release_member(GROUP, "m1")  # the member left; its session is still open
    closing = await client.call(share_ack(tid, {0: [(0, 1, [ACCEPT])]}, epoch=-1))
    assert partition_data(closing, 0).error_code == ErrorCode.none
    actor = manager.existing(GROUP, tid, 0)
    assert actor is not None and actor.core is not None
    assert actor.core.start == 2 and actor.core.owner_of(2) is None


async def test_a_crashed_members_records_are_released_after_the_grace(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client)
    kemu.produce("t", 0, 2)
    await client.call(share_fetch(tid, {0: []}, epoch=1))
    manager = share_partitions(kemu.runtime)
    manager.departure_grace_s = 0.01
    await manager.release_member(GROUP, "m1")
    actor = manager.existing(GROUP, tid, 0)
    assert actor is not None and actor.core is not None
    for _ in range(500):
        if actor.core.owner_of(0) is None:
            break
        await asyncio.sleep(0.01)
    assert actor.core.owner_of(0) is None
    assert not manager.sessions.of_member(GROUP, "m1")


async def test_forget_group_reloads_the_durable_state(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    first, second = await members(kemu, "m1", "m2")
    kemu.produce("t", 0, 2, 2)
    await first.call(share_fetch(tid, {0: []}, epoch=1, max_records=2))
    manager = share_partitions(kemu.runtime)
    old = manager.existing(GROUP, tid, 0)
    manager.forget_group(GROUP, {tid})
    assert old is not None and old.retired and manager.existing(GROUP, tid, 0) is None
    # the acquisition was persisted (AVAILABLE, delivered once): a reload offers it again
    response = await second.call(share_fetch(tid, {0: []}, epoch=1, member="m2"))
    assert acquired(response) == [(0, 1, 2), (2, 3, 1)]


async def test_a_fenced_write_reloads_and_the_fetch_still_succeeds(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client)
    kemu.produce("t", 0, 2, 2)
    await client.call(share_fetch(tid, {0: []}, epoch=1, max_records=2))
    actor = share_partitions(kemu.runtime).existing(GROUP, tid, 0)
    assert actor is not None
    persister = share_persister(kemu.runtime)
    assert await persister.initialize(actor.key, 7, 0) == ErrorCode.none  # an admin reset
    response = await client.call(share_fetch(tid, {0: []}, epoch=2))
    assert partition_data(response, 0).error_code == ErrorCode.none
    assert acquired(response) == [(0, 3, 1)]
    assert actor.core is not None and actor.core.state_epoch == 7


async def test_forgotten_partitions_leave_the_session(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    leader = kemu.partition("t", 0).leader_id
    same_leader = [i for i in range(3) if kemu.partition("t", i).leader_id == leader]
    client = await kemu.client(leader)
    kemu.produce("t", 0, 1)
    response = await client.call(share_fetch(tid, {0: []}, epoch=0))
    assert [p.partition_index for t in response.responses for p in t.partitions] == same_leader[:1]
    response = await client.call(share_fetch(tid, {}, epoch=1, forgotten=[0]))
    assert response.responses == ()


async def test_max_records_is_shared_by_the_sessions_partitions(kemu: Harness) -> None:
    kemu.server.cluster.create_topic("two", 2, 1, assignments=[[1], [1]])
    two = kemu.topic_id("two")
    client = await kemu.client(1)
    await client.call(share_fetch(two, {0: [], 1: []}, epoch=0))
    kemu.produce("two", 0, 3)
    kemu.produce("two", 1, 3)
    response = await client.call(share_fetch(two, {}, epoch=1, max_records=3))
    listed = [p.partition_index for t in response.responses for p in t.partitions]
    total = sum(last - first + 1 for i in listed for first, last, _ in acquired(response, i))
    assert total == 3
    # An incremental answer leaves out a partition with nothing to say (Kafka's
    # ShareSessionContext): here the one MaxRecords left nothing for.
    assert len(listed) == 1


async def test_incremental_answers_list_only_partitions_with_something_to_say(
    kemu: Harness,
) -> None:
    """Kafka's CachedSharePartition.maybeUpdateResponseData (conformance-diff: ShareFetch at
    session epoch 4 answered no partition on Kafka): the opening answer lists every partition;
    later ones a partition with records, with an error (also the next answer), with an
    acknowledgement result, or added since the session opened and not yet answered."""
    kemu.server.cluster.create_topic("two", 2, 1, assignments=[[1], [1]])
    two = kemu.topic_id("two")
    client = await kemu.client(1)

    def listed(response: Any) -> list[int]:
        return sorted(p.partition_index for t in response.responses for p in t.partitions)

    assert listed(await client.call(share_fetch(two, {0: []}, epoch=0))) == [0]
    assert listed(await client.call(share_fetch(two, {}, epoch=1))) == []
    added = await client.call(share_fetch(two, {1: []}, epoch=2))
    assert listed(added) == [1]  # joined the session: answered once
    assert listed(await client.call(share_fetch(two, {}, epoch=3))) == []
    kemu.produce("two", 0, 2)
    fetched = await client.call(share_fetch(two, {}, epoch=4))
    assert listed(fetched) == [0] and acquired(fetched, 0) == [(0, 1, 1)]
    acked = await client.call(share_fetch(two, {0: [(0, 1, [ACCEPT])]}, epoch=5))
    assert listed(acked) == [0]
    assert partition_data(acked, 0).acknowledge_error_code == ErrorCode.none


async def test_renew_ack_in_a_fetch_renews_and_fetches_nothing(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client)
    kemu.produce("t", 0, 2)
    await client.call(share_fetch(tid, {0: []}, epoch=1))
    kemu.produce("t", 0, 2)
    kemu.now[0] += 10_000
    response = await client.call(
        share_fetch(tid, {0: [(0, 1, [RENEW])]}, epoch=2, renew=True, max_records=0)
    )
    data = partition_data(response, 0)
    assert data.acknowledge_error_code == ErrorCode.none
    assert data.acquired_records == ()
    actor = share_partitions(kemu.runtime).existing(GROUP, tid, 0)
    assert actor is not None and actor.core is not None
    assert actor.core.next_deadline() == 1_000_000 + 30_000  # the old lock entry, now stale
    kemu.now[0] += 25_000
    await actor._expire()
    assert actor.core.owner_of(0) == "m1"  # renewed at +10s: held until +40s


# --- ShareAcknowledge -------------------------------------------------------------------------


async def test_acknowledge_session_rules(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    missing = await client.call(share_ack(tid, {0: [(0, 0, [ACCEPT])]}, epoch=1))
    assert missing.error_code == ErrorCode.share_session_not_found
    await open_session(kemu, client)
    initial = await client.call(share_ack(tid, {0: [(0, 0, [ACCEPT])]}, epoch=0))
    assert initial.error_code == ErrorCode.invalid_share_session_epoch
    wrong = await client.call(share_ack(tid, {0: [(0, 0, [ACCEPT])]}, epoch=3))
    assert wrong.error_code == ErrorCode.invalid_share_session_epoch


async def test_acknowledge_errors_are_per_partition_and_all_or_nothing(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    first, second = await members(kemu, "m1", "m2")
    kemu.produce("t", 0, 2, 2)
    await first.call(share_fetch(tid, {0: []}, epoch=1, max_records=2))
    await second.call(share_fetch(tid, {0: []}, epoch=1, member="m2", max_records=2))
    other = await first.call(share_ack(tid, {0: [(0, 1, [ACCEPT]), (2, 3, [ACCEPT])]}, epoch=2))
    assert partition_data(other, 0).error_code == ErrorCode.invalid_record_state
    mismatch = await first.call(share_ack(tid, {0: [(0, 1, [ACCEPT, ACCEPT, ACCEPT])]}, epoch=3))
    assert partition_data(mismatch, 0).error_code == ErrorCode.invalid_request
    fine = await first.call(share_ack(tid, {0: [(0, 1, [ACCEPT, REJECT])]}, epoch=4))
    assert partition_data(fine, 0).error_code == ErrorCode.none


async def test_renew_needs_version_2(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client)
    kemu.produce("t", 0, 1)
    await client.call(share_fetch(tid, {0: []}, epoch=1))
    old = await client.call(share_ack(tid, {0: [(0, 0, [RENEW])]}, epoch=2, version=1))
    assert partition_data(old, 0).error_code == ErrorCode.invalid_request
    new = await client.call(share_ack(tid, {0: [(0, 0, [RENEW])]}, epoch=3, renew=True))
    assert partition_data(new, 0).error_code == ErrorCode.none
    assert new.acquisition_lock_timeout.total_seconds() == 30


async def test_closing_acknowledge_releases_and_ends_the_session(kemu: Harness) -> None:
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client)
    kemu.produce("t", 0, 3)
    await client.call(share_fetch(tid, {0: []}, epoch=1))
    closing = await client.call(share_ack(tid, {0: [(0, 0, [ACCEPT])]}, epoch=-1))
    assert partition_data(closing, 0).error_code == ErrorCode.none
    actor = share_partitions(kemu.runtime).existing(GROUP, tid, 0)
    assert actor is not None and actor.core is not None
    assert actor.core.spans() == [(1, 2, RecordState.AVAILABLE, 1, None)]
    again = await client.call(share_ack(tid, {0: [(1, 1, [ACCEPT])]}, epoch=-1))
    assert again.error_code == ErrorCode.share_session_not_found


# --- connections ------------------------------------------------------------------------------


async def _released(kemu: Harness, offset: int) -> bool:
    actor = share_partitions(kemu.runtime).existing(GROUP, kemu.topic_id("t"), 0)
    assert actor is not None and actor.core is not None
    for _ in range(500):
        if actor.core.owner_of(offset) is None:
            return True
        await asyncio.sleep(0.01)
    return False


async def test_closing_the_connection_that_opened_a_session_releases_its_records(
    kemu: Harness,
) -> None:
    """A consumer that died: its records go back at once, their delivery counted, rather
    than when their locks expire (Kafka's ConnectionDisconnectListener)."""
    tid = kemu.topic_id("t")
    dying = await kemu.leader_client("t", 0)
    await open_session(kemu, dying)
    kemu.produce("t", 0, 3)
    assert acquired(await dying.call(share_fetch(tid, {0: []}, epoch=1))) == [(0, 2, 1)]
    dying.writer.close()
    assert await _released(kemu, 0)
    assert not share_partitions(kemu.runtime).sessions.of_member(GROUP, "m1")
    other = await kemu.leader_client("t", 0)
    fresh = await other.call(share_fetch(tid, {0: []}, epoch=0, member="m2"))
    assert acquired(fresh) == [(0, 2, 2)]


async def test_a_session_reopened_on_a_new_connection_survives_the_old_one(
    kemu: Harness,
) -> None:
    tid = kemu.topic_id("t")
    old = await kemu.leader_client("t", 0)
    await open_session(kemu, old)
    new = await kemu.leader_client("t", 0)
    await open_session(kemu, new)  # the client reconnected and started over
    kemu.produce("t", 0, 2)
    assert acquired(await new.call(share_fetch(tid, {0: []}, epoch=1))) == [(0, 1, 1)]
    old.writer.close()
    await asyncio.sleep(0.05)
    actor = share_partitions(kemu.runtime).existing(GROUP, tid, 0)
    assert actor is not None and actor.core is not None and actor.core.owner_of(0) == "m1"
    again = await new.call(share_fetch(tid, {0: [(0, 1, [ACCEPT])]}, epoch=2))
    assert partition_data(again, 0).acknowledge_error_code == ErrorCode.none


async def test_max_bytes_zero_fetches_nothing(kemu: Harness) -> None:
    """ShareFetch with MaxBytes 0 fetches nothing, as Kafka 4.4.0: its PartitionMaxBytesStrategy
    throws on it and each partition held gets UNKNOWN_SERVER_ERROR (found comparing with Kafka,
    issue 15)."""
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client)
    kemu.produce("t", 0, 3)
    response = await client.call(share_fetch(tid, {0: []}, epoch=1, max_bytes=0))
    assert response.error_code == ErrorCode.none
    data = partition_data(response, 0)
    assert data.error_code == ErrorCode.unknown_server_error
    assert data.error_message == "Requested max bytes must be greater than 0"
    assert not data.records and acquired(response) == []
    # nothing was acquired: a fetch with room gets every record
    assert acquired(await client.call(share_fetch(tid, {0: []}, epoch=2))) == [(0, 2, 1)]


async def test_max_bytes_zero_still_applies_acknowledgements(kemu: Harness) -> None:
    """The acknowledgements a MaxBytes 0 ShareFetch carries are applied (issue 15)."""
    tid = kemu.topic_id("t")
    client = await kemu.leader_client("t", 0)
    await open_session(kemu, client)
    kemu.produce("t", 0, 2)
    assert acquired(await client.call(share_fetch(tid, {0: []}, epoch=1))) == [(0, 1, 1)]
    kemu.produce("t", 0, 2)
    response = await client.call(share_fetch(tid, {0: [(0, 1, [ACCEPT])]}, epoch=2, max_bytes=0))
    data = partition_data(response, 0)
    assert data.acknowledge_error_code == ErrorCode.none
    assert data.error_code == ErrorCode.unknown_server_error
    assert acquired(response) == []
