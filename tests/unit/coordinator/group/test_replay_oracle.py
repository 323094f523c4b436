"""The replay oracle: for seeded random runs of KIP-848, share and streams heartbeats, leaves,
topics growing, session expiry on a virtual clock and appends that fail, the group the coordinator
holds in memory is, after every step, the group a fresh coordinator rebuilds by replaying every
``__consumer_offsets`` record written so far (and what the coordinator believes the log holds
is what the log holds). Records first, then state: nothing in memory that the log lacks."""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from typing import Any

import pytest

from kemu.cluster.clock import VirtualClock
from kemu.cluster.context import Runtime
from kemu.coordinator.group.consumer import persistence as consumer_persistence
from kemu.coordinator.group.consumer.group import ConsumerGroup, ConsumerHeartbeat
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.service import GroupCoordinatorService, group_coordinator
from kemu.coordinator.group.share import records as share_records
from kemu.coordinator.group.share.group import ShareGroup, ShareHeartbeat
from kemu.coordinator.group.streams import records as streams_records
from kemu.coordinator.group.streams.model import StreamsGroup, StreamsHeartbeat
from kemu.coordinator.share.service import SHARE_PERSISTER
from tests.unit.coordinator.group.streams.test_streams_group import COUNT
from tests.unit.coordinator.group.test_records_before_state import failing_appends
from tests.unit.coordinator.group.test_timers_records_before_state import VirtualBroker

MEMBERS = [str(uuid.UUID(int=i + 1)) for i in range(4)]


def replayed(broker: VirtualBroker) -> GroupCoordinatorService:
    """A coordinator over the same logs, built from the records alone (its clock stands still
    at 0, so none of its timers fires)."""
    runtime = Runtime(cluster=broker.cluster, clock=VirtualClock(start_ms=0))
    runtime.services.provide(SHARE_PERSISTER, broker.persister)
    return GroupCoordinatorService(runtime)


def check(broker: VirtualBroker) -> None:
    live = group_coordinator(broker.runtime)
    fresh = replayed(broker)
    for group_id in ("kip848", "shares", "app"):
        mine, theirs = live.registry.get(group_id), fresh.registry.get(group_id)
        if isinstance(mine, ConsumerGroup) or isinstance(theirs, ConsumerGroup):
            assert isinstance(mine, ConsumerGroup) and isinstance(theirs, ConsumerGroup)
            assert consumer_persistence.image_of(mine) == consumer_persistence.image_of(theirs)
            assert live._consumer_log.images[group_id] == fresh._consumer_log.images[group_id]
            assert mine.metadata_hash == theirs.metadata_hash
        elif isinstance(mine, ShareGroup) or isinstance(theirs, ShareGroup):
            assert isinstance(mine, ShareGroup) and isinstance(theirs, ShareGroup)
            ours = share_records.image_of(mine, live._topic_name)
            rebuilt = share_records.image_of(theirs, fresh._topic_name)
            # Partitions being initialized are not kept across a load (asked for again).
            assert (
                ours.state_partitions is None
                or rebuilt.state_partitions is None
                or (ours.state_partitions.initialized == rebuilt.state_partitions.initialized)
            )
            assert durable_part(ours) == durable_part(rebuilt), group_id
        elif isinstance(mine, StreamsGroup) or isinstance(theirs, StreamsGroup):
            assert isinstance(mine, StreamsGroup) and isinstance(theirs, StreamsGroup)
            assert streams_records.image_of(mine) == streams_records.image_of(theirs)
            assert live.streams.log.images[group_id] == fresh.streams.log.images[group_id]
        else:
            assert mine is None and theirs is None


def durable_part(image: share_records.ShareImage) -> object:
    """A share group's image but for the partitions being initialized."""
    return (
        image.epoch,
        image.metadata_hash,
        image.assignment_epoch,
        image.assignment_timestamp_ms,
        image.members,
        image.targets,
        image.current,
    )


async def step(broker: VirtualBroker, rng: random.Random) -> None:
    service = group_coordinator(broker.runtime)
    action = rng.choice(["consumer", "consumer", "share", "share", "streams", "streams"])
    action = rng.choice([action, action, action, "advance", "grow"])
    member = rng.choice(MEMBERS)
    if action == "advance":
        await broker.advance(rng.choice([1_000, 10_000, 30_000, 46_000]))
        return
    if action == "grow":
        topic = broker.cluster.topics["t"]
        if len(topic.partitions) < 8:
            broker.cluster.add_partitions("t", len(topic.partitions) + 1)
        return
    kind = rng.choice(["beat", "beat", "beat", "leave"])
    fail = rng.random() < 0.15
    with failing_appends(broker) if fail else contextlib.nullcontext():
        try:
            if action == "streams":
                found = service.registry.get("app")
                known = found.members.get(member) if isinstance(found, StreamsGroup) else None
                if known is None:
                    fields: dict[str, Any] = {"topology": COUNT, "rebalance_timeout_ms": 30_000}
                    streams = StreamsHeartbeat("app", member, 0, process_id=member, **fields)
                elif kind == "leave":
                    streams = StreamsHeartbeat("app", member, -1)
                else:
                    streams = StreamsHeartbeat("app", member, known.member_epoch)
                service.streams_heartbeat(streams)
            elif action == "consumer":
                group = service.registry.get("kip848")
                current = group.members.get(member) if isinstance(group, ConsumerGroup) else None
                if current is None:
                    request = ConsumerHeartbeat(
                        "kip848",
                        member,
                        0,
                        rebalance_timeout_ms=30_000,
                        subscribed_topic_names=("t",),
                        owned=frozenset(),
                    )
                elif kind == "leave":
                    request = ConsumerHeartbeat("kip848", member, -1)
                else:
                    request = ConsumerHeartbeat(
                        "kip848", member, current.member_epoch, owned=current.assigned
                    )
                service.consumer_heartbeat(request)
            else:
                group = service.registry.get("shares")
                held = group.members.get(member) if isinstance(group, ShareGroup) else None
                if held is None:
                    share = ShareHeartbeat("shares", member, 0, subscribed_topic_names=("t",))
                elif kind == "leave":
                    share = ShareHeartbeat("shares", member, -1)
                else:
                    share = ShareHeartbeat("shares", member, held.member_epoch)
                await service.share_heartbeat(share)
        except GroupError:
            pass
    await service.background_done()


@pytest.mark.parametrize("seed", range(12))
async def test_the_live_groups_are_the_replayed_records(seed: int) -> None:
    rng = random.Random(seed)
    broker = VirtualBroker(
        **{
            "kemu.group.share.initialize.before.answer": "false",
            "group.streams.initial.rebalance.delay.ms": "2000",
        }
    )
    broker.cluster.create_topic("t", 3, 1)
    for name in ("in", "app-words-repartition", "app-counts-changelog"):
        broker.cluster.create_topic(name, 2, 1)
    seen: set[str] = set()
    for _ in range(40):
        await step(broker, rng)
        check(broker)
        seen |= {g.group_id for g in group_coordinator(broker.runtime).registry if not g.is_empty()}
    assert seen == {"kip848", "shares", "app"}  # every type had members at some point
    await asyncio.sleep(0)
