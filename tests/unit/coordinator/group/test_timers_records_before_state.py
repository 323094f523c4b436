"""Records first for what the group coordinator's timer does (session expiry, a streams group's
initial rebalance delay, a classic group emptied by an expired member, share-state
initialization once the persister answers): when the ``__consumer_offsets`` append fails the
group stays exactly as it was, and the timer fires again 500 ms later (Kafka's coordinator
runtime reschedules a failed timer write with that backoff) until the write goes through. Time
is a virtual clock: nothing here waits."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kemu.cluster.clock import VirtualClock
from kemu.cluster.context import Runtime
from kemu.coordinator.group.classic.group import JoinRequest, SyncRequest
from kemu.coordinator.group.classic.model import ClassicGroup
from kemu.coordinator.group.consumer.group import ConsumerGroup
from kemu.coordinator.group.ports import SHARE_LEADERS
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.share.group import ShareGroup
from kemu.coordinator.group.streams.model import StreamsGroup, StreamsHeartbeat
from kemu.coordinator.group.timers import RETRY_BACKOFF_MS
from kemu.coordinator.share.service import SHARE_PERSISTER
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_group_handlers import Broker
from tests.unit.coordinator.group.consumer.test_consumer_group import consumer_beat
from tests.unit.coordinator.group.streams.test_streams_group import COUNT
from tests.unit.coordinator.group.test_records_before_state import durable, failing_appends

NOW = 1_700_000_000_000


class VirtualBroker(Broker):
    """The unit broker on a virtual clock that the test advances (timers fire as it does)."""

    clock: VirtualClock

    def _runtime(self) -> Runtime:
        if not hasattr(self, "clock"):
            self.clock = VirtualClock(start_ms=NOW)
        runtime = Runtime(cluster=self.cluster, clock=self.clock)
        runtime.services.provide(SHARE_PERSISTER, self.persister)
        return runtime

    async def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        for _ in range(3):  # timers already due run on the loop, and their tasks after them
            await asyncio.sleep(0)
        await group_coordinator(self.runtime).background_done()


async def test_a_kip848_session_expiry_that_fails_is_retried_and_changes_nothing() -> None:
    broker = VirtualBroker(**{"group.consumer.session.timeout.ms": "45000"})
    broker.cluster.create_topic("t", 3, 1)
    member = str(uuid.uuid4())
    assert (await consumer_beat(broker, 1, member_id=member)).error_code == ErrorCode.none
    before = durable(broker, "kip848")
    with failing_appends(broker) as failed:
        await broker.advance(45_000)
        assert failed and durable(broker, "kip848") == before
        tries = len(failed)
        await broker.advance(RETRY_BACKOFF_MS)
        assert len(failed) == tries + 1 and durable(broker, "kip848") == before
    await broker.advance(RETRY_BACKOFF_MS)
    group = group_coordinator(broker.runtime).registry.get("kip848")
    assert isinstance(group, ConsumerGroup) and not group.members
    after = durable(broker, "kip848")
    broker.restart()
    assert durable(broker, "kip848") == after


async def test_a_share_session_expiry_releases_nothing_until_it_is_written() -> None:
    broker = VirtualBroker()
    broker.cluster.create_topic("t", 3, 1)
    released: list[tuple[str, str]] = []

    class Leaders:
        async def release_member(self, group_id: str, member_id: str) -> None:
            released.append((group_id, member_id))

        def forget_group(self, group_id: str, topic_ids: Any) -> None:
            pass

    broker.runtime.services.provide(SHARE_LEADERS, Leaders())
    await broker.join("shares", "m1")
    before = durable(broker, "shares")
    timeout = 45_000
    with failing_appends(broker) as failed:
        await broker.advance(timeout)
        await broker.advance(RETRY_BACKOFF_MS)
        assert len(failed) >= 2 and durable(broker, "shares") == before and not released
    await broker.advance(RETRY_BACKOFF_MS)
    group = group_coordinator(broker.runtime).registry.get("shares")
    assert isinstance(group, ShareGroup) and not group.members
    assert released == [("shares", "m1")]
    after = durable(broker, "shares")
    broker.restart()
    assert durable(broker, "shares") == after


async def test_a_streams_initial_delay_whose_target_fails_is_computed_later() -> None:
    broker = VirtualBroker(**{"group.streams.initial.rebalance.delay.ms": "3000"})
    for name in ("in", "app-words-repartition", "app-counts-changelog"):
        broker.cluster.create_topic(name, 2, 1)
    service = group_coordinator(broker.runtime)
    fields: dict[str, Any] = {"topology": COUNT, "rebalance_timeout_ms": 30_000}
    service.streams_heartbeat(StreamsHeartbeat("app", "a", 0, process_id="a", **fields))
    before = durable(broker, "app")
    group = service.registry.get("app")
    assert isinstance(group, StreamsGroup) and group.assignment_epoch < group.group_epoch
    with failing_appends(broker) as failed:
        await broker.advance(3_000)
        assert failed and durable(broker, "app") == before
    await broker.advance(RETRY_BACKOFF_MS)
    group = service.registry.get("app")
    assert isinstance(group, StreamsGroup) and group.assignment_epoch == group.group_epoch
    assert group.target["a"].active
    after = durable(broker, "app")
    broker.restart()
    assert durable(broker, "app") == after


async def test_a_classic_group_emptied_by_a_timer_is_empty_only_once_written() -> None:
    broker = VirtualBroker(**{"group.initial.rebalance.delay.ms": "0"})
    broker.cluster.create_topic("t", 3, 1)
    service = group_coordinator(broker.runtime)
    join = JoinRequest("g", "", "consumer", (("range", b""),), 10_000, 30_000, "i-1")
    joining = asyncio.ensure_future(service.join_group(join))
    await broker.advance(0)
    joined = await joining
    assert joined.error == ErrorCode.none
    synced = await service.sync_group(
        SyncRequest("g", joined.member_id, joined.generation_id, "i-1", assignments=())
    )
    assert synced.error == ErrorCode.none
    with failing_appends(broker) as failed:
        await broker.advance(10_000)  # the static member's session runs out: the group empties
        await broker.advance(RETRY_BACKOFF_MS)
        assert len(failed) >= 2
        group = service.registry.get("g")
        assert isinstance(group, ClassicGroup) and list(group.members) == [joined.member_id]
        assert group.state == "Stable"
    await broker.advance(RETRY_BACKOFF_MS)
    group = service.registry.get("g")
    assert isinstance(group, ClassicGroup) and group.state == "Empty" and not group.members
    broker.restart()
    group = group_coordinator(broker.runtime).registry.get("g")
    assert isinstance(group, ClassicGroup) and group.state == "Empty"
    assert group.generation_id == 2


async def test_share_state_initialized_but_not_written_is_written_later() -> None:
    broker = VirtualBroker(**{"kemu.group.share.initialize.before.answer": "false"})
    broker.cluster.create_topic("t", 3, 1)
    service = group_coordinator(broker.runtime)
    topic_id = broker.cluster.topics["t"].topic_id
    with failing_appends(broker) as failed:
        joined = await broker.heartbeat("shares", "m1", 0, ("t",))
    assert joined.error_code == ErrorCode.not_coordinator
    # The persister answers once the test lets it: the group's write of it then fails.
    answer = asyncio.Event()
    initialize = broker.persister.initialize

    async def held(*args: Any) -> ErrorCode:
        await answer.wait()
        return await initialize(*args)

    broker.persister.initialize = held  # type: ignore[method-assign]
    # Initialized in the background (the harness's heartbeat would wait for it).
    joined = await broker.send(
        broker.request(
            76, 1, group_id="shares", member_id="m1", member_epoch=0, subscribed_topic_names=("t",)
        )
    )
    assert joined.error_code == ErrorCode.none
    group = service.registry.get("shares")
    assert isinstance(group, ShareGroup) and group.initializing == {topic_id: {0, 1, 2}}
    before = durable(broker, "shares")
    with failing_appends(broker) as failed:
        answer.set()
        await service.background_done()
        assert failed and durable(broker, "shares") == before
        await broker.advance(RETRY_BACKOFF_MS)
        assert durable(broker, "shares") == before
    await broker.advance(RETRY_BACKOFF_MS)
    group = service.registry.get("shares")
    assert isinstance(group, ShareGroup) and group.initialized == {topic_id: {0, 1, 2}}
    assert not group.initializing
    after = durable(broker, "shares")
    broker.restart()
    assert durable(broker, "shares") == after
