"""Classic-group and offset handlers through the wire: requests built from kio's schemas,
encoded and decoded as a broker would, answered by the registered handlers (JoinGroup and
SyncGroup park on the event loop), and the responses encoded and decoded again. Also: what is
in ``__consumer_offsets`` is what a fresh coordinator over the same logs reads back."""

from __future__ import annotations

import asyncio
import datetime
import sys
from typing import Any

import pytest

from kemu.broker.handlers import REGISTRY, load_handlers
from kemu.cluster.context import RequestContext, Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.group.consumer.protocol import encode_subscription
from kemu.coordinator.group.offsets_log import OffsetsLog
from kemu.coordinator.group.placement import GROUP, coordinator_partition
from kemu.coordinator.group.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
from kemu.coordinator.group.service import group_coordinator
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.storage.log import MemoryLog

OFFSET_COMMIT, OFFSET_FETCH, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST = (
    8,
    9,
    11,
    12,
    13,
    14,
    15,
    16,
)
DELETE_GROUPS, OFFSET_DELETE = 42, 47
NOW = 1_700_000_000_000
SUBSCRIPTION = encode_subscription(["t"])


class Broker:
    def __init__(self) -> None:
        load_handlers()
        nodes = {i: BrokerNode(i, "127.0.0.1", 19190 + i) for i in (1, 2, 3)}
        self.cluster = Cluster(
            cluster_id="unit",
            nodes=nodes,
            config=BrokerConfig(
                {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5"}
            ),
            log_factory=lambda topic, index: MemoryLog(),
        )
        self.cluster.create_topic("t", 3, 1)
        self.now = NOW
        self.restart()
        self.correlation = 0

    def restart(self) -> None:
        """A fresh runtime over the same logs: the coordinator replays __consumer_offsets."""
        self.runtime = Runtime(cluster=self.cluster, clock_ms=lambda: self.now)

    def request(self, api_key: int, version: int, **fields: Any) -> Any:
        return wire.build(wire.request_schema(api_key, version), **fields)

    def nested(self, api_key: int, version: int, class_name: str, /, **fields: Any) -> Any:
        module = sys.modules[wire.request_schema(api_key, version).__module__]
        return wire.build(getattr(module, class_name), **fields)

    async def send(self, body: Any, node_id: int = 1) -> Any:
        self.correlation += 1
        frame = wire.encode_request_frame(body, self.correlation, client_id="unit-client")
        decoded = wire.decode_request(frame[4:])
        header = decoded.header
        spec = REGISTRY[header.api_key]
        assert spec.min_version <= header.api_version <= spec.max_version
        context = RequestContext(self.cluster.nodes[node_id], self.runtime, header)
        answer = spec.function(context, decoded.body)
        if asyncio.iscoroutine(answer):
            answer = await answer
        out = wire.encode_response_frame(
            header.api_key, header.api_version, header.correlation_id, answer
        )
        _, response = wire.decode_response(header.api_key, header.api_version, out[4:])
        return response

    # --- group calls ---------------------------------------------------------------------------

    async def join(self, version: int, group: str, member_id: str = "", **extra: Any) -> Any:
        protocol = self.nested(
            JOIN, version, "JoinGroupRequestProtocol", name="range", metadata=SUBSCRIPTION
        )
        values: dict[str, Any] = {
            "group_id": group,
            "session_timeout": _ms(10_000),
            "rebalance_timeout": _ms(30_000),
            "member_id": member_id,
            "protocol_type": "consumer",
            "protocols": (protocol,),
        }
        values.update(extra)
        return await self.send(self.request(JOIN, version, **values))

    async def joined(self, version: int, group: str, **extra: Any) -> Any:
        """JoinGroup, through MEMBER_ID_REQUIRED on v4+."""
        first = await self.join(version, group, **extra)
        if first.error_code == ErrorCode.member_id_required:
            return await self.join(version, group, first.member_id, **extra)
        return first

    async def sync(
        self, version: int, group: str, member: str, generation: int, assign: dict[str, bytes]
    ) -> Any:
        assignments = tuple(
            self.nested(SYNC, version, "SyncGroupRequestAssignment", member_id=m, assignment=a)
            for m, a in assign.items()
        )
        return await self.send(
            self.request(
                SYNC,
                version,
                group_id=group,
                generation_id=generation,
                member_id=member,
                protocol_type="consumer",
                protocol_name="range",
                assignments=assignments,
            )
        )

    async def commit(self, version: int, group: str, offset: int, **fields: Any) -> Any:
        by_id = version >= 10
        partition = self.nested(
            OFFSET_COMMIT,
            version,
            "OffsetCommitRequestPartition",
            partition_index=0,
            committed_offset=offset,
            committed_leader_epoch=2,
            committed_metadata="m",
        )
        topic = self.nested(
            OFFSET_COMMIT,
            version,
            "OffsetCommitRequestTopic",
            name="t",
            topic_id=self.cluster.topics["t"].topic_id if by_id else None,
            partitions=(partition,),
        )
        values: dict[str, Any] = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "retention_time": _ms(-1),
            "topics": (topic,),
        }
        values.update(fields)
        return await self.send(self.request(OFFSET_COMMIT, version, **values))

    async def fetch(self, version: int, group: str, partitions: tuple[int, ...] | None) -> Any:
        if version >= 8:
            topics = None
            if partitions is not None:
                topics = (
                    self.nested(
                        OFFSET_FETCH,
                        version,
                        "OffsetFetchRequestTopics",
                        name="t",
                        topic_id=self.cluster.topics["t"].topic_id,
                        partition_indexes=partitions,
                    ),
                )
            entry = self.nested(
                OFFSET_FETCH,
                version,
                "OffsetFetchRequestGroup",
                group_id=group,
                member_epoch=-1,
                topics=topics,
            )
            return await self.send(self.request(OFFSET_FETCH, version, groups=(entry,)))
        topics = None
        if partitions is not None:
            topics = (
                self.nested(
                    OFFSET_FETCH,
                    version,
                    "OffsetFetchRequestTopic",
                    name="t",
                    partition_indexes=partitions,
                ),
            )
        return await self.send(self.request(OFFSET_FETCH, version, group_id=group, topics=topics))


def _ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


@pytest.fixture
def broker() -> Broker:
    return Broker()


# (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) versions
VERSION_SETS = [(0, 0, 0, 0), (3, 2, 2, 2), (4, 3, 3, 3), (5, 3, 3, 4), (7, 4, 4, 4), (9, 5, 4, 5)]


@pytest.mark.parametrize(("join_v", "sync_v", "heartbeat_v", "leave_v"), VERSION_SETS)
async def test_join_sync_heartbeat_leave(
    broker: Broker, join_v: int, sync_v: int, heartbeat_v: int, leave_v: int
) -> None:
    first = await broker.join(join_v, "g")
    if join_v >= 4:
        assert first.error_code == ErrorCode.member_id_required
        assert first.member_id.startswith("unit-client-")
        first = await broker.join(join_v, "g", first.member_id)
    assert first.error_code == ErrorCode.none
    assert first.generation_id == 1 and first.leader == first.member_id
    assert first.protocol_name == "range"
    assert [m.member_id for m in first.members] == [first.member_id]
    assert first.members[0].metadata == SUBSCRIPTION
    member = first.member_id

    synced = await broker.sync(sync_v, "g", member, 1, {member: b"assigned"})
    assert synced.error_code == ErrorCode.none and synced.assignment == b"assigned"
    if sync_v >= 5:
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")

    beat = broker.request(HEARTBEAT, heartbeat_v, group_id="g", generation_id=1, member_id=member)
    assert (await broker.send(beat)).error_code == ErrorCode.none
    stale = broker.request(HEARTBEAT, heartbeat_v, group_id="g", generation_id=0, member_id=member)
    assert (await broker.send(stale)).error_code == ErrorCode.illegal_generation

    if leave_v >= 3:
        who = broker.nested(LEAVE, leave_v, "MemberIdentity", member_id=member)
        ghost = broker.nested(LEAVE, leave_v, "MemberIdentity", member_id="ghost")
        left = await broker.send(broker.request(LEAVE, leave_v, group_id="g", members=(who, ghost)))
        assert left.error_code == ErrorCode.none
        assert [(m.member_id, m.error_code) for m in left.members] == [
            (member, ErrorCode.none),
            ("ghost", ErrorCode.unknown_member_id),
        ]
    else:
        leave = broker.request(LEAVE, leave_v, group_id="g", member_id=member)
        assert (await broker.send(leave)).error_code == ErrorCode.none
        again = broker.request(LEAVE, leave_v, group_id="g", member_id=member)
        assert (await broker.send(again)).error_code == ErrorCode.unknown_member_id
    assert group_coordinator(broker.runtime).registry.get("g").state_name == "Empty"  # type: ignore[union-attr]


async def test_two_members_rebalance_through_the_wire(broker: Broker) -> None:
    first = await broker.joined(9, "g")
    await broker.sync(5, "g", first.member_id, 1, {first.member_id: b"all"})
    # A second member parks until the first rejoins (told by its heartbeat).
    second_join = asyncio.ensure_future(broker.joined(9, "g"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    beat = broker.request(HEARTBEAT, 4, group_id="g", generation_id=1, member_id=first.member_id)
    assert (await broker.send(beat)).error_code == ErrorCode.rebalance_in_progress
    rejoin = await broker.join(9, "g", first.member_id)
    second = await second_join
    assert rejoin.generation_id == second.generation_id == 2
    assert len(rejoin.members) == 2 and second.members == ()
    follower_sync = asyncio.ensure_future(broker.sync(5, "g", second.member_id, 2, {}))
    await asyncio.sleep(0)
    assert not follower_sync.done()
    assigned = {first.member_id: b"a", second.member_id: b"b"}
    assert (await broker.sync(5, "g", first.member_id, 2, assigned)).assignment == b"a"
    assert (await follower_sync).assignment == b"b"


async def test_join_errors(broker: Broker) -> None:
    assert (await broker.join(9, "")).error_code == ErrorCode.invalid_group_id
    assert (await broker.join(9, "g", "ghost")).error_code == ErrorCode.unknown_member_id
    short = await broker.join(5, "g", session_timeout=_ms(10))
    assert short.error_code == ErrorCode.invalid_session_timeout
    beat = broker.request(HEARTBEAT, 4, group_id="nope", generation_id=1, member_id="m")
    assert (await broker.send(beat)).error_code == ErrorCode.unknown_member_id
    sync = await broker.sync(5, "nope", "m", 1, {})
    assert sync.error_code == ErrorCode.unknown_member_id


async def test_static_member_rejoins_without_a_rebalance(broker: Broker) -> None:
    first = await broker.join(9, "g", group_instance_id="i-1")
    assert first.error_code == ErrorCode.none and first.member_id.startswith("i-1-")
    await broker.sync(5, "g", first.member_id, 1, {first.member_id: b"kept"})
    again = await broker.join(9, "g", group_instance_id="i-1")
    assert again.generation_id == 1 and again.skip_assignment
    assert again.member_id != first.member_id
    fenced = broker.request(
        HEARTBEAT,
        4,
        group_id="g",
        generation_id=1,
        member_id=first.member_id,
        group_instance_id="i-1",
    )
    assert (await broker.send(fenced)).error_code == ErrorCode.fenced_instance_id


async def test_describe_and_list_groups(broker: Broker) -> None:
    member = (await broker.joined(9, "g")).member_id
    await broker.sync(5, "g", member, 1, {member: b"asg"})
    described = await broker.send(
        broker.request(DESCRIBE, 6, groups=("g", "nope"), include_authorized_operations=True)
    )
    stable, missing = described.groups
    assert (stable.group_state, stable.protocol_type, stable.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    assert stable.members[0].member_id == member
    assert stable.members[0].client_id == "unit-client"
    assert stable.members[0].member_assignment == b"asg"
    assert stable.members[0].member_metadata == SUBSCRIPTION
    assert stable.authorized_operations > 0
    assert (missing.group_state, missing.error_code) == ("Dead", ErrorCode.group_id_not_found)
    old = await broker.send(broker.request(DESCRIBE, 0, groups=("nope",)))
    assert (old.groups[0].group_state, old.groups[0].error_code) == ("Dead", ErrorCode.none)

    listed = []
    for node in (1, 2, 3):
        answer = await broker.send(broker.request(LIST, 5, types_filter=("classic",)), node)
        listed += [(g.group_id, g.protocol_type, g.group_state) for g in answer.groups]
    assert listed == [("g", "consumer", "Stable")]


@pytest.mark.parametrize("commit_v", [2, 5, 7, 8, 9, 10])
async def test_simple_commits_and_fetches(broker: Broker, commit_v: int) -> None:
    committed = await broker.commit(commit_v, "simple", 42)
    assert committed.topics[0].partitions[0].error_code == ErrorCode.none
    for fetch_v in (1, 2, 5, 7, 8, 10):
        answer = await broker.fetch(fetch_v, "simple", (0, 1))
        topics = answer.groups[0].topics if fetch_v >= 8 else answer.topics
        offsets = [(p.partition_index, p.committed_offset) for p in topics[0].partitions]
        assert offsets == [(0, 42), (1, -1)], fetch_v
        if fetch_v >= 5:
            assert topics[0].partitions[0].committed_leader_epoch == (2 if commit_v >= 6 else -1)
        assert topics[0].partitions[0].metadata == "m"
    everything = await broker.fetch(8, "simple", None)
    assert [p.partition_index for p in everything.groups[0].topics[0].partitions] == [0]
    nothing = await broker.fetch(8, "never-committed", (0,))
    assert nothing.groups[0].topics[0].partitions[0].committed_offset == -1


async def test_commit_errors(broker: Broker) -> None:
    unknown = await broker.commit(8, "g", 1, generation_id_or_member_epoch=3, member_id="m")
    assert unknown.topics[0].partitions[0].error_code == ErrorCode.illegal_generation
    unknown = await broker.commit(9, "g", 1, generation_id_or_member_epoch=3, member_id="m")
    assert unknown.topics[0].partitions[0].error_code == ErrorCode.group_id_not_found
    partition = broker.nested(
        OFFSET_COMMIT, 8, "OffsetCommitRequestPartition", partition_index=7, committed_offset=1
    )
    bad = broker.nested(
        OFFSET_COMMIT, 8, "OffsetCommitRequestTopic", name="t", partitions=(partition,)
    )
    missing = broker.nested(
        OFFSET_COMMIT, 8, "OffsetCommitRequestTopic", name="nope", partitions=(partition,)
    )
    answer = await broker.commit(8, "g", 1, topics=(bad, missing))
    assert [t.partitions[0].error_code for t in answer.topics] == [
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_or_partition,
    ]


async def test_member_commits_check_the_generation(broker: Broker) -> None:
    member = (await broker.joined(9, "g")).member_id
    # CompletingRebalance: the member must finish its rebalance first.
    early = await broker.commit(9, "g", 5, generation_id_or_member_epoch=1, member_id=member)
    assert early.topics[0].partitions[0].error_code == ErrorCode.rebalance_in_progress
    await broker.sync(5, "g", member, 1, {member: b""})
    ok = await broker.commit(9, "g", 5, generation_id_or_member_epoch=1, member_id=member)
    assert ok.topics[0].partitions[0].error_code == ErrorCode.none
    stale = await broker.commit(9, "g", 5, generation_id_or_member_epoch=0, member_id=member)
    assert stale.topics[0].partitions[0].error_code == ErrorCode.illegal_generation
    simple = await broker.commit(9, "g", 5)
    assert simple.topics[0].partitions[0].error_code == ErrorCode.unknown_member_id


async def test_offset_delete_and_delete_groups(broker: Broker) -> None:
    await broker.commit(8, "simple", 9)
    topic = broker.nested(
        OFFSET_DELETE,
        0,
        "OffsetDeleteRequestTopic",
        name="t",
        partitions=(broker.nested(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition"),),
    )
    deleted = await broker.send(
        broker.request(OFFSET_DELETE, 0, group_id="simple", topics=(topic,))
    )
    assert deleted.error_code == ErrorCode.none
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.none
    assert (await broker.fetch(8, "simple", (0,))).groups[0].topics[0].partitions[
        0
    ].committed_offset == -1
    missing = await broker.send(broker.request(OFFSET_DELETE, 0, group_id="nope", topics=()))
    assert missing.error_code == ErrorCode.group_id_not_found

    member = (await broker.joined(9, "busy")).member_id
    await broker.sync(5, "busy", member, 1, {})
    subscribed = await broker.send(
        broker.request(OFFSET_DELETE, 0, group_id="busy", topics=(topic,))
    )
    assert subscribed.topics[0].partitions[0].error_code == ErrorCode.group_subscribed_to_topic

    await broker.commit(8, "simple", 10)
    answer = await broker.send(broker.request(DELETE_GROUPS, 2, groups_names=("simple", "busy")))
    assert [(r.group_id, r.error_code) for r in answer.results] == [
        ("simple", ErrorCode.none),
        ("busy", ErrorCode.non_empty_group),
    ]
    broker.restart()
    coordinator = group_coordinator(broker.runtime)
    assert coordinator.registry.get("simple") is None
    assert coordinator.registry.get("busy") is not None
    assert not coordinator.offsets.has_offsets("simple")


async def test_offsets_and_groups_are_read_back_from_consumer_offsets(broker: Broker) -> None:
    member = (await broker.joined(9, "g")).member_id
    await broker.sync(5, "g", member, 1, {member: b"asg"})
    await broker.commit(9, "g", 77, generation_id_or_member_epoch=1, member_id=member)
    await broker.commit(8, "simple", 5)

    partition = coordinator_partition(broker.cluster, GROUP, "g")
    records = list(OffsetsLog(broker.cluster).replay())
    assert any(key == GroupMetadataKey("g") for key, _ in records)
    assert any(
        k == OffsetCommitKey("g", "t", 0) and isinstance(v, OffsetCommitValue) and v.offset == 77
        for k, v in records
    )
    assert partition.high_watermark > 0

    broker.restart()
    coordinator = group_coordinator(broker.runtime)
    group = coordinator.registry.get("g")
    assert group is not None and group.state_name == "Stable"
    assert (await broker.fetch(8, "g", (0,))).groups[0].topics[0].partitions[
        0
    ].committed_offset == 77
    assert (await broker.fetch(8, "simple", (0,))).groups[0].topics[0].partitions[
        0
    ].committed_offset == 5
    # The member carries on with the generation it had.
    beat = broker.request(HEARTBEAT, 4, group_id="g", generation_id=1, member_id=member)
    assert (await broker.send(beat)).error_code == ErrorCode.none
