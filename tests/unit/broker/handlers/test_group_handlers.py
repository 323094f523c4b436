"""Group handlers through the wire: ShareGroupHeartbeat/Describe, FindCoordinator, ListGroups,
DeleteGroups, the share-group offsets APIs and the GROUP config resource. Requests are built
from kio's schemas, encoded and decoded as a broker would, answered by the registered handler,
and the response is encoded and decoded again."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from kemu.cluster.context import Runtime
from kemu.config.definitions import ConfigSource
from kemu.coordinator.group.hashing import java_string_hash, kafka_abs, partition_for
from kemu.coordinator.group.placement import share_coordinator_key, to_kafka_uuid
from kemu.coordinator.group.ports import SHARE_LEADERS
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.share.persister import InMemorySharePersister, SharePartitionKey
from kemu.coordinator.share.service import SHARE_PERSISTER, ShareCoordinatorService, share_persister
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch, split_batches
from kemu.testing.harness import HandlerHarness

FIND_COORDINATOR, LIST_GROUPS, DELETE_GROUPS = 10, 16, 42
HEARTBEAT, DESCRIBE, DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 76, 77, 90, 91, 92
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
GROUP_RESOURCE = 32
ZERO_UUID = uuid.UUID(int=0)
NOW = 1_700_000_000_000


SERVE_ASSIGNMENT_INTERVALS = {
    "group.consumer.assignment.interval.ms": "0",
    "group.share.assignment.interval.ms": "0",
}


class Broker(HandlerHarness):
    """A 3-node kemu model whose handlers are reached through encoded frames
    (kemu/testing/harness.py); ``send`` takes a built request."""

    def __init__(self, data_dir: Path | None = None, **static: str) -> None:
        self.persister = InMemorySharePersister()
        super().__init__(
            # kemu serve's assignment intervals (0: the frozen clock never passes Kafka's 1 s).
            config={**SERVE_ASSIGNMENT_INTERVALS, **static},
            data_dir=data_dir,
            now_ms=NOW,
            client_id="unit-client",
        )

    def _runtime(self) -> Runtime:
        runtime = super()._runtime()
        runtime.services.provide(SHARE_PERSISTER, self.persister)
        return runtime

    async def send(self, body: Any, node_id: int = 1) -> Any:  # type: ignore[override]
        return await self.send_body(body, node_id)

    async def heartbeat(
        self, group: str, member: str, epoch: int, topics: tuple[str, ...] | None = None
    ) -> Any:
        answer = await self.send(
            self.request(
                HEARTBEAT,
                1,
                group_id=group,
                member_id=member,
                member_epoch=epoch,
                rack_id=None,
                subscribed_topic_names=topics,
            )
        )
        # The share state a heartbeat asks for is initialized after the answer, before the
        # next heartbeat.
        await group_coordinator(self.runtime).background_done()
        return answer

    async def join(self, group: str, member: str, topics: tuple[str, ...] = ("t",)) -> Any:
        """Join, then heartbeat once more: the second answer carries the initialized share
        partitions (Kafka assigns nothing on a first heartbeat)."""
        joined = await self.heartbeat(group, member, 0, topics)
        return await self.heartbeat(group, member, joined.member_epoch)

    def produce(self, topic: str, partition: int, count: int) -> None:
        target = self.cluster.topics[topic].partitions[partition]
        target.append(
            split_batches(build_batch([(None, b"v")] * count, timestamp_ms=NOW)), now_ms=NOW
        )


@pytest.fixture
def broker() -> Broker:
    made = Broker()
    made.cluster.create_topic("t", 3, 1)
    return made


def assigned(response: Any) -> set[tuple[uuid.UUID, int]]:
    return {(tp.topic_id, p) for tp in response.assignment.topic_partitions for p in tp.partitions}


# --- ShareGroupHeartbeat / ShareGroupDescribe --------------------------------------------------


async def test_heartbeat_join_assign_describe(broker: Broker) -> None:
    topic_id = broker.cluster.topics["t"].topic_id
    joined = await broker.heartbeat("g", "m1", 0, ("t",))
    # Kafka 4.4: a new group is at epoch 1; the first heartbeat assigns nothing, the next one
    # the partitions whose share state was initialized in between.
    assert (joined.error_code, joined.member_id, joined.member_epoch) == (ErrorCode.none, "m1", 2)
    assert joined.heartbeat_interval.total_seconds() == 5
    assert assigned(joined) == set()
    initialized = await broker.heartbeat("g", "m1", 2)
    assert initialized.member_epoch == 3
    assert assigned(initialized) == {(topic_id, 0), (topic_id, 1), (topic_id, 2)}
    steady = await broker.heartbeat("g", "m1", 3)
    assert (steady.member_epoch, steady.assignment) == (3, None)
    await broker.heartbeat("g", "m2", 0, ("t",))

    described = await broker.send(
        broker.request(DESCRIBE, 1, group_ids=("g", "nope"), include_authorized_operations=True)
    )
    group, missing = described.groups
    assert (group.error_code, group.group_state, group.group_epoch) == (ErrorCode.none, "Stable", 4)
    assert (group.assignment_epoch, group.assignor_name) == (4, "simple")
    assert group.authorized_operations > 0
    members = {m.member_id: m for m in group.members}
    assert set(members) == {"m1", "m2"}
    m2 = members["m2"]
    assert (m2.member_epoch, m2.client_id, m2.client_host) == (4, "unit-client", "/127.0.0.1")
    assert m2.subscribed_topic_names == ("t",)
    assert {tp.topic_name for tp in m2.assignment.topic_partitions} == {"t"}
    assert missing.error_code == ErrorCode.group_id_not_found


async def test_heartbeat_errors(broker: Broker) -> None:
    unknown_group = await broker.heartbeat("g", "m1", 3)
    assert unknown_group.error_code == ErrorCode.group_id_not_found
    assert (unknown_group.member_id, unknown_group.member_epoch) == (None, 0)
    invalid = await broker.heartbeat("g", "", 0, ("t",))
    assert (invalid.error_code, invalid.error_message) == (
        ErrorCode.invalid_request,
        "MemberId can't be empty.",
    )
    no_topics = await broker.heartbeat("g", "m1", 0)
    assert no_topics.error_code == ErrorCode.invalid_request
    await broker.heartbeat("g", "m1", 0, ("t",))
    fenced = await broker.heartbeat("g", "m1", 7)
    assert fenced.error_code == ErrorCode.fenced_member_epoch
    stranger = await broker.heartbeat("g", "m9", 1)
    assert stranger.error_code == ErrorCode.unknown_member_id
    left = await broker.heartbeat("g", "m1", -1)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)


async def test_heartbeat_uses_the_group_heartbeat_interval(broker: Broker) -> None:
    await _alter_group_configs(broker, "g", {"share.heartbeat.interval.ms": "7000"})
    joined = await broker.heartbeat("g", "m1", 0, ("t",))
    assert joined.heartbeat_interval.total_seconds() == 7


async def test_group_max_size(broker: Broker) -> None:
    small = Broker(**{"group.share.max.size": "1"})
    small.cluster.create_topic("t", 1, 1)
    await small.heartbeat("g", "m1", 0, ("t",))
    full = await small.heartbeat("g", "m2", 0, ("t",))
    assert full.error_code == ErrorCode.group_max_size_reached


async def test_member_left_releases_through_the_share_partitions_service(broker: Broker) -> None:
    released: list[tuple[str, str]] = []

    class SharePartitions:
        async def release_member(self, group_id: str, member_id: str) -> None:
            released.append((group_id, member_id))

    broker.runtime.services.provide(SHARE_LEADERS, SharePartitions())  # type: ignore[arg-type]
    await broker.heartbeat("g", "m1", 0, ("t",))
    await broker.heartbeat("g", "m1", -1)
    assert released == [("g", "m1")]


async def test_joining_initializes_share_state_once(broker: Broker) -> None:
    topic_id = broker.cluster.topics["t"].topic_id
    await broker.heartbeat("g", "m1", 0, ("t",))
    key = SharePartitionKey("g", topic_id, 0)
    assert broker.persister.states[key].state_epoch == 2  # the group epoch that asked for it
    await broker.persister.write_state(
        key, state_epoch=2, leader_epoch=0, start_offset=4, delivery_complete_count=0, batches=()
    )
    await broker.heartbeat("g", "m1", -1)
    await broker.heartbeat("g", "m2", 0, ("t",))
    assert broker.persister.states[key].start_offset == 4  # not re-initialized


async def test_initialized_before_the_answer_the_join_answer_assigns() -> None:
    """kemu.group.share.initialize.before.answer (--timing fast): the join waits for the share
    state it asks for and answers what Kafka answers on the member's next heartbeat."""
    broker = Broker(**{"kemu.group.share.initialize.before.answer": "true"})
    broker.cluster.create_topic("t", 3, 1)
    topic_id = broker.cluster.topics["t"].topic_id
    everything = {(topic_id, 0), (topic_id, 1), (topic_id, 2)}
    joined = await broker.heartbeat("g", "m1", 0, ("t",))
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 3)
    assert assigned(joined) == everything
    key = SharePartitionKey("g", topic_id, 0)
    assert broker.persister.states[key].state_epoch == 2  # asked for by the join, as on Kafka
    steady = await broker.heartbeat("g", "m1", 3)
    assert (steady.member_epoch, steady.assignment) == (3, None)
    second = await broker.heartbeat("g", "m2", 0, ("t",))  # nothing left to initialize
    assert (second.member_epoch, len(assigned(second))) == (4, 1)


async def test_a_failed_initialization_before_the_answer_assigns_nothing_yet() -> None:
    class Refusing(InMemorySharePersister):
        async def initialize(
            self, key: SharePartitionKey, state_epoch: int, start_offset: int
        ) -> ErrorCode:
            return ErrorCode.coordinator_not_available

    broker = Broker(**{"kemu.group.share.initialize.before.answer": "true"})
    broker.persister = Refusing()
    broker.restart()
    broker.cluster.create_topic("t", 3, 1)
    joined = await broker.heartbeat("g", "m1", 0, ("t",))
    assert (joined.error_code, joined.member_epoch, assigned(joined)) == (ErrorCode.none, 2, set())


# --- FindCoordinator ---------------------------------------------------------------------------


def test_java_string_hash() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert kafka_abs(java_string_hash("polygenelubricants")) == 0
    assert java_string_hash("") == 0
    assert partition_for("my-group", 50) == abs(java_string_hash("my-group")) % 50


async def test_find_group_coordinator_all_versions(broker: Broker) -> None:
    expected_partition = partition_for("my-group", 50)
    for version in range(0, 4):
        fields: dict[str, Any] = {"key": "my-group"}
        if version >= 1:
            fields["key_type"] = 0
        answer = await broker.send(broker.request(FIND_COORDINATOR, version, **fields))
        offsets = broker.cluster.topics["__consumer_offsets"]
        leader = offsets.partitions[expected_partition].leader_id
        assert (answer.error_code, answer.node_id) == (ErrorCode.none, leader)
        assert answer.port == 19090 + leader
    assert len(broker.cluster.topics["__consumer_offsets"].partitions) == 50
    assert broker.cluster.topics["__consumer_offsets"].is_internal


async def test_find_coordinator_batched_and_share_keys(broker: Broker) -> None:
    broker.runtime.services.discard(SHARE_PERSISTER)  # the share coordinator places SHARE keys
    topic_id = broker.cluster.topics["t"].topic_id
    share_key = share_coordinator_key("g", topic_id, 1)
    assert share_key == f"g:{to_kafka_uuid(topic_id)}:1"
    answer = await broker.send(
        broker.request(
            FIND_COORDINATOR, 6, key_type=2, coordinator_keys=(share_key, "bad", "g:x:1")
        )
    )
    good, bad, bad_id = answer.coordinators
    state = broker.cluster.topics["__share_group_state"]
    leader = state.partitions[partition_for(share_key, len(state.partitions))].leader_id
    assert (good.key, good.error_code, good.node_id) == (share_key, ErrorCode.none, leader)
    for refused in (bad, bad_id):
        assert (refused.error_code, refused.node_id, refused.host, refused.port) == (
            ErrorCode.invalid_request,
            -1,
            "",
            -1,
        )
    too_old = await broker.send(
        broker.request(FIND_COORDINATOR, 5, key_type=2, coordinator_keys=(share_key,))
    )
    assert too_old.coordinators[0].error_code == ErrorCode.invalid_request
    txn = await broker.send(
        broker.request(FIND_COORDINATOR, 4, key_type=1, coordinator_keys=("tx-1", "tx-2"))
    )
    assert [c.error_code for c in txn.coordinators] == [ErrorCode.none, ErrorCode.none]
    assert "__transaction_state" in broker.cluster.topics
    unknown_type = await broker.send(
        broker.request(FIND_COORDINATOR, 4, key_type=9, coordinator_keys=("x",))
    )
    assert unknown_type.coordinators[0].error_code == ErrorCode.invalid_request


# --- ListGroups / DeleteGroups -----------------------------------------------------------------


async def _list(broker: Broker, version: int, node: int, **filters: Any) -> list[Any]:
    answer = await broker.send(broker.request(LIST_GROUPS, version, **filters), node_id=node)
    assert answer.error_code == ErrorCode.none
    return list(answer.groups)


async def test_list_groups_each_group_once_across_brokers(broker: Broker) -> None:
    names = [f"group-{i}" for i in range(12)]
    for name in names:
        await broker.heartbeat(name, "m", 0, ("t",))
    await broker.heartbeat("group-0", "m", -1)
    seen = [g for node in (1, 2, 3) for g in await _list(broker, 5, node)]
    assert sorted(g.group_id for g in seen) == sorted(names)
    assert {(g.protocol_type, g.group_type) for g in seen} == {("share", "share")}
    states = {g.group_id: g.group_state for g in seen}
    assert states["group-0"] == "Empty" and states["group-1"] == "Stable"
    empty = [
        g.group_id
        for node in (1, 2, 3)
        for g in await _list(broker, 5, node, states_filter=("empty",), types_filter=("Share",))
    ]
    assert empty == ["group-0"]
    consumers = [
        g for node in (1, 2, 3) for g in await _list(broker, 5, node, types_filter=("consumer",))
    ]
    assert consumers == []
    v0 = [g.group_id for node in (1, 2, 3) for g in await _list(broker, 0, node)]
    assert sorted(v0) == sorted(names)


@pytest.mark.parametrize("version", [2, 3])
async def test_delete_groups(broker: Broker, version: int) -> None:
    topic_id = broker.cluster.topics["t"].topic_id
    await broker.heartbeat("busy", "m", 0, ("t",))
    await broker.heartbeat("idle", "m", 0, ("t",))
    await broker.heartbeat("idle", "m", -1)
    assert SharePartitionKey("idle", topic_id, 0) in broker.persister.states
    answer = await broker.send(
        broker.request(DELETE_GROUPS, version, groups_names=("busy", "idle", "ghost", ""))
    )
    # v3's per-group ErrorMessage: null, as Kafka 4.4 leaves it outside streams topology errors
    assert all(getattr(r, "error_message", None) is None for r in answer.results)
    assert [(r.group_id, r.error_code) for r in answer.results] == [
        ("busy", ErrorCode.non_empty_group),
        ("idle", ErrorCode.none),
        ("ghost", ErrorCode.group_id_not_found),
        ("", ErrorCode.invalid_group_id),
    ]
    assert group_coordinator(broker.runtime).registry.get("idle") is None
    assert not any(key.group_id == "idle" for key in broker.persister.states)


# --- DescribeShareGroupOffsets / AlterShareGroupOffsets / DeleteShareGroupOffsets ---------------


def _describe_offsets(broker: Broker, version: int, group: str, topics: Any) -> Any:
    requested = (
        None
        if topics is None
        else tuple(
            broker.nested(
                DESCRIBE_OFFSETS,
                version,
                "DescribeShareGroupOffsetsRequestTopic",
                topic_name=name,
                partitions=tuple(indexes),
            )
            for name, indexes in topics
        )
    )
    group_entry = broker.nested(
        DESCRIBE_OFFSETS,
        version,
        "DescribeShareGroupOffsetsRequestGroup",
        group_id=group,
        topics=requested,
    )
    return broker.request(DESCRIBE_OFFSETS, version, groups=(group_entry,))


async def test_describe_offsets_with_lag(broker: Broker) -> None:
    topic_id = broker.cluster.topics["t"].topic_id
    await broker.heartbeat("g", "m", 0, ("t",))
    broker.produce("t", 0, 5)
    fresh = await broker.send(_describe_offsets(broker, 1, "g", None))
    (topic,) = fresh.groups[0].topics
    assert (topic.topic_name, topic.topic_id) == ("t", topic_id)
    assert [(p.partition_index, p.start_offset, p.lag) for p in topic.partitions] == [
        (0, -1, -1),
        (1, -1, -1),
        (2, -1, -1),
    ]
    await broker.persister.write_state(
        SharePartitionKey("g", topic_id, 0),
        state_epoch=1,
        leader_epoch=3,
        start_offset=2,
        delivery_complete_count=1,
        batches=(),
    )
    named = await broker.send(_describe_offsets(broker, 1, "g", [("t", [0]), ("missing", [0])]))
    known, unknown = named.groups[0].topics
    (partition,) = known.partitions
    assert (partition.start_offset, partition.leader_epoch, partition.lag) == (2, 3, 5 - 2 - 1)
    assert unknown.topic_name == "missing"
    assert unknown.topic_id in (None, ZERO_UUID)  # kio decodes the all-zero uuid as None
    assert unknown.partitions[0].start_offset == -1
    v0 = await broker.send(_describe_offsets(broker, 0, "g", [("t", [0])]))
    assert v0.groups[0].topics[0].partitions[0].start_offset == 2
    assert not hasattr(v0.groups[0].topics[0].partitions[0], "lag")
    nobody = await broker.send(_describe_offsets(broker, 1, "nobody", None))
    assert (nobody.groups[0].error_code, nobody.groups[0].topics) == (ErrorCode.none, ())


def _alter(broker: Broker, group: str, entries: list[tuple[str, list[tuple[int, int]]]]) -> Any:
    topics = tuple(
        broker.nested(
            ALTER_OFFSETS,
            0,
            "AlterShareGroupOffsetsRequestTopic",
            topic_name=name,
            partitions=tuple(
                broker.nested(
                    ALTER_OFFSETS,
                    0,
                    "AlterShareGroupOffsetsRequestPartition",
                    partition_index=index,
                    start_offset=offset,
                )
                for index, offset in partitions
            ),
        )
        for name, partitions in entries
    )
    return broker.request(ALTER_OFFSETS, 0, group_id=group, topics=topics)


async def test_alter_offsets(broker: Broker) -> None:
    topic_id = broker.cluster.topics["t"].topic_id
    await broker.heartbeat("busy", "m", 0, ("t",))
    refused = await broker.send(_alter(broker, "busy", [("t", [(0, 1)])]))
    assert refused.error_code == ErrorCode.non_empty_group
    answer = await broker.send(_alter(broker, "new", [("t", [(0, 7), (5, 1)]), ("nope", [(0, 1)])]))
    assert answer.error_code == ErrorCode.none
    t, nope = answer.responses
    assert t.topic_id == topic_id
    assert [(p.partition_index, p.error_code) for p in t.partitions] == [
        (0, ErrorCode.none),
        (5, ErrorCode.unknown_topic_or_partition),
    ]
    assert nope.partitions[0].error_code == ErrorCode.unknown_topic_or_partition
    state = broker.persister.states[SharePartitionKey("new", topic_id, 0)]
    assert state.start_offset == 7
    again = await broker.send(_alter(broker, "new", [("t", [(0, 9)])]))
    assert again.responses[0].partitions[0].error_code == ErrorCode.none
    newer = broker.persister.states[SharePartitionKey("new", topic_id, 0)]
    assert (newer.start_offset, newer.state_epoch > state.state_epoch) == (9, True)
    listed = [g.group_id for node in (1, 2, 3) for g in await _list(broker, 5, node)]
    assert "new" in listed  # altering offsets creates the (empty) share group
    described = await broker.send(_describe_offsets(broker, 1, "new", None))
    assert described.groups[0].topics[0].partitions[0].start_offset == 9


async def test_delete_offsets(broker: Broker) -> None:
    topic_id = broker.cluster.topics["t"].topic_id
    broker.cluster.create_topic("u", 1, 1)

    def delete(group: str, *topics: str) -> Any:
        entries = tuple(
            broker.nested(DELETE_OFFSETS, 0, "DeleteShareGroupOffsetsRequestTopic", topic_name=t)
            for t in topics
        )
        return broker.request(DELETE_OFFSETS, 0, group_id=group, topics=entries)

    assert (await broker.send(delete("ghost", "t"))).error_code == ErrorCode.group_id_not_found
    await broker.heartbeat("g", "m", 0, ("t",))
    assert (await broker.send(delete("g", "t"))).error_code == ErrorCode.non_empty_group
    await broker.heartbeat("g", "m", -1)
    answer = await broker.send(delete("g", "t", "u", "nope"))
    assert answer.error_code == ErrorCode.none
    assert [(r.topic_name, r.error_code) for r in answer.responses] == [
        ("t", ErrorCode.none),
        ("u", ErrorCode.unknown_topic_or_partition),
        ("nope", ErrorCode.unknown_topic_or_partition),
    ]
    assert answer.responses[0].topic_id == topic_id
    assert not any(key.group_id == "g" for key in broker.persister.states)
    twice = await broker.send(delete("g", "t"))
    assert twice.responses[0].error_code == ErrorCode.unknown_topic_or_partition
    # Kafka's order: the deleted topics, then the refused ones in request order
    await broker.heartbeat("g", "m2", 0, ("t",))
    await broker.heartbeat("g", "m2", -1)
    ordered = await broker.send(delete("g", "nope", "t", "u"))
    assert [(r.topic_name, r.error_code) for r in ordered.responses] == [
        ("t", ErrorCode.none),
        ("nope", ErrorCode.unknown_topic_or_partition),
        ("u", ErrorCode.unknown_topic_or_partition),
    ]
    # a group that never had share state (no state-partitions record): no topic at all
    await broker.heartbeat("bare", "m", 0, ("nope",))
    await broker.heartbeat("bare", "m", -1)
    bare = await broker.send(delete("bare", "t", "nope"))
    assert (bare.error_code, bare.responses) == (ErrorCode.none, ())


# --- GROUP config resource ---------------------------------------------------------------------


async def _alter_group_configs(broker: Broker, group: str, values: dict[str, str]) -> Any:
    configs = tuple(
        broker.nested(
            INCREMENTAL_ALTER_CONFIGS, 1, "AlterableConfig", name=k, config_operation=0, value=v
        )
        for k, v in values.items()
    )
    resource = broker.nested(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        "AlterConfigsResource",
        resource_type=GROUP_RESOURCE,
        resource_name=group,
        configs=configs,
    )
    return await broker.send(
        broker.request(INCREMENTAL_ALTER_CONFIGS, 1, resources=(resource,), validate_only=False)
    )


async def test_group_configs_through_describe_and_incremental_alter(broker: Broker) -> None:
    from kemu.coordinator.group.config import group_config

    altered = await _alter_group_configs(broker, "g", {"share.auto.offset.reset": "earliest"})
    assert altered.responses[0].error_code == ErrorCode.none
    assert group_config(broker.runtime, "g").auto_offset_reset.strategy == "earliest"
    bad = await _alter_group_configs(broker, "g", {"share.record.lock.duration.ms": "1"})
    assert bad.responses[0].error_code == ErrorCode.invalid_config
    unknown = await _alter_group_configs(broker, "g", {"nope": "1"})
    assert unknown.responses[0].error_message == "Unknown group config name: nope"

    resource = broker.nested(
        DESCRIBE_CONFIGS,
        4,
        "DescribeConfigsResource",
        resource_type=GROUP_RESOURCE,
        resource_name="g",
        configuration_keys=None,
    )
    described = await broker.send(
        broker.request(DESCRIBE_CONFIGS, 4, resources=(resource,), include_synonyms=True)
    )
    (result,) = described.results
    assert result.error_code == ErrorCode.none
    entries = {c.name: c for c in result.configs}
    assert entries["share.auto.offset.reset"].value == "earliest"
    assert entries["share.auto.offset.reset"].config_source == ConfigSource.DYNAMIC_GROUP_CONFIG
    assert entries["share.record.lock.duration.ms"].value == "30000"
    assert entries["share.record.lock.duration.ms"].config_source == ConfigSource.DEFAULT_CONFIG
    assert "share.isolation.level" in entries


async def test_share_persister_is_the_share_coordinator() -> None:
    fresh = Broker()
    fresh.runtime.services.discard(SHARE_PERSISTER)
    assert isinstance(share_persister(fresh.runtime), ShareCoordinatorService)


async def test_session_expiry_timer_removes_silent_members(broker: Broker) -> None:
    released: list[tuple[str, str]] = []

    class SharePartitions:
        async def release_member(self, group_id: str, member_id: str) -> None:
            released.append((group_id, member_id))

    broker.runtime.services.provide(SHARE_LEADERS, SharePartitions())  # type: ignore[arg-type]
    await _alter_group_configs(broker, "g", {"share.session.timeout.ms": "50000"})
    await broker.heartbeat("g", "quiet", 0, ("t",))
    await broker.heartbeat("g", "chatty", 0, ("t",))
    service = group_coordinator(broker.runtime)
    assert service.share.next_deadline_ms() == NOW + 50_000
    broker.now += 30_000
    await broker.heartbeat("g", "chatty", 3)
    broker.now += 20_000  # quiet's session is over, chatty's is not
    await broker.heartbeat("other", "m", 0, ("t",))  # any heartbeat re-arms the timer
    for _ in range(5):
        await asyncio.sleep(0)
    assert released == [("g", "quiet")]
    group = service.share.describe("g")
    assert set(group.members) == {"chatty"} and group.group_epoch == 4
    assert (await broker.heartbeat("g", "quiet", 2)).error_code == ErrorCode.unknown_member_id


async def test_share_groups_survive_a_restart_with_a_data_dir(tmp_path: Path) -> None:
    broker = Broker(data_dir=tmp_path)
    broker.cluster.create_topic("t", 3, 1)
    topic_id = broker.cluster.topics["t"].topic_id
    await broker.heartbeat("g", "m1", 0, ("t",))
    joined = await broker.heartbeat("g", "m2", 0, ("t",))
    await broker.heartbeat("g", "m1", 2)
    await broker.send(_alter(broker, "altered", [("t", [(0, 3)])]))
    await broker.heartbeat("gone", "m", 0, ("t",))
    await broker.heartbeat("gone", "m", -1)
    await broker.send(broker.request(DELETE_GROUPS, 2, groups_names=("gone",)))

    broker.restart()
    broker.now += 1000
    again = await broker.heartbeat("g", "m2", 3)  # no rejoin needed
    assert (again.error_code, again.member_epoch, again.assignment) == (ErrorCode.none, 3, None)
    group = group_coordinator(broker.runtime).share.describe("g")
    assert (group.group_epoch, group.assignment_epoch) == (3, 3)
    assert group.members["m2"].assigned == assigned(joined)
    assert group.members["m1"].session_deadline_ms == broker.now + 45_000  # a fresh session
    assert group.initialized == {topic_id: {0, 1, 2}}
    altered = group_coordinator(broker.runtime).share.describe("altered")
    assert altered.initialized == {topic_id: {0}}
    assert group_coordinator(broker.runtime).registry.get("gone") is None
    assert (await broker.heartbeat("g", "m3", 0, ("t",))).member_epoch == 4


async def test_admin_changes_make_share_leaders_forget_cached_state(broker: Broker) -> None:
    topic_id = broker.cluster.topics["t"].topic_id
    forgotten: list[tuple[str, set[uuid.UUID] | None]] = []

    class SharePartitions:
        def forget_group(self, group_id: str, topic_ids: set[uuid.UUID] | None) -> None:
            forgotten.append((group_id, topic_ids))

    broker.runtime.services.provide(SHARE_LEADERS, SharePartitions())  # type: ignore[arg-type]
    await broker.send(_alter(broker, "g", [("t", [(0, 1)])]))
    entries = (
        broker.nested(DELETE_OFFSETS, 0, "DeleteShareGroupOffsetsRequestTopic", topic_name="t"),
    )
    await broker.send(broker.request(DELETE_OFFSETS, 0, group_id="g", topics=entries))
    await broker.send(broker.request(DELETE_GROUPS, 2, groups_names=("g",)))
    assert forgotten == [("g", {topic_id}), ("g", {topic_id}), ("g", None)]
