"""Records first, then state, for every group type: when the ``__consumer_offsets`` append of a
KIP-848, share or streams heartbeat fails (a storage fault on the group's partition), the
heartbeat is answered with Kafka's error for it (NOT_COORDINATOR for a storage error, as Kafka
4.4's GroupCoordinatorService maps it), the group is exactly as before, and a restart (a fresh
coordinator replaying the log) brings back that same group; a classic leader's SyncGroup whose
assignment is not written gives it to nobody. Share groups come back from
their records alone, and a data dir written by a kemu that kept them in
``kemu-share-groups.json`` still loads."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kemu.cluster.partition import Partition
from kemu.coordinator.group.classic.model import ClassicGroup as ClassicGroupType
from kemu.coordinator.group.consumer import persistence as consumer_persistence
from kemu.coordinator.group.consumer.group import ConsumerGroup, ConsumerHeartbeat
from kemu.coordinator.group.errors import GroupError
from kemu.coordinator.group.offsets_log import TOPIC, answer_for
from kemu.coordinator.group.placement import GROUP, coordinator_partition
from kemu.coordinator.group.service import group_coordinator
from kemu.coordinator.group.share import records as share_records
from kemu.coordinator.group.share.group import ShareGroup
from kemu.coordinator.group.share.legacy import LEGACY_FILE
from kemu.coordinator.group.streams import records as streams_records
from kemu.coordinator.group.streams.model import StreamsGroup, StreamsHeartbeat
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_classic_group_handlers import Broker as ClassicBroker
from tests.unit.broker.handlers.test_group_handlers import Broker, _alter
from tests.unit.coordinator.group.consumer.test_consumer_group import consumer_beat
from tests.unit.coordinator.group.streams.test_streams_group import COUNT


@contextmanager
def failing_appends(broker: Broker | ClassicBroker) -> Iterator[list[str]]:
    """Every append to ``__consumer_offsets`` fails as a disk does (OSError) while inside."""
    coordinator_partition(broker.cluster, GROUP, "any")  # created as on first use
    failed: list[str] = []
    broken = {id(p) for p in broker.cluster.topics[TOPIC].partitions}
    append = Partition.append

    def failing(self: Partition, *args: Any, **kwargs: Any) -> Any:
        if id(self) in broken:
            failed.append("append")
            raise OSError("disk gone")
        return append(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Partition, "append", failing)
        yield failed


def durable(broker: Broker | ClassicBroker, group_id: str) -> object:
    """What the log must hold of the group: its image as each type writes it."""
    group = group_coordinator(broker.runtime).registry.get(group_id)
    if isinstance(group, ConsumerGroup):
        return consumer_persistence.image_of(group)
    if isinstance(group, ShareGroup):
        return share_records.image_of(group, lambda topic_id: "t")
    if isinstance(group, StreamsGroup):
        return streams_records.image_of(group)
    return group


def test_kafka_maps_append_errors_to_coordinator_errors() -> None:
    assert answer_for(ErrorCode.kafka_storage_error) == ErrorCode.not_coordinator
    assert answer_for(ErrorCode.not_leader_or_follower) == ErrorCode.not_coordinator
    assert answer_for(ErrorCode.not_enough_replicas) == ErrorCode.coordinator_not_available
    assert answer_for(ErrorCode.request_timed_out) == ErrorCode.coordinator_not_available
    assert answer_for(ErrorCode.record_list_too_large) == ErrorCode.unknown_server_error


async def test_a_kip848_heartbeat_whose_records_fail_is_refused_and_changes_nothing() -> None:
    broker = ClassicBroker()
    first = str(uuid.uuid4())
    joined = await consumer_beat(broker, 1, member_id=first)
    assert joined.error_code == ErrorCode.none
    before = durable(broker, "kip848")
    with failing_appends(broker) as failed:
        second = await consumer_beat(broker, 1, member_id=str(uuid.uuid4()))
        assert second.error_code == ErrorCode.not_coordinator and failed
        left = await consumer_beat(broker, 1, member_id=first, member_epoch=-1)
        assert left.error_code == ErrorCode.not_coordinator
        fresh = await consumer_beat(broker, 1, group_id="fresh", member_id=str(uuid.uuid4()))
        assert fresh.error_code == ErrorCode.not_coordinator
    assert durable(broker, "kip848") == before
    assert group_coordinator(broker.runtime).registry.get("fresh") is None
    broker.restart()
    assert durable(broker, "kip848") == before
    # The member carries on with the epoch it was given; the refused joiner can join now.
    again = await consumer_beat(
        broker, 1, member_id=first, member_epoch=joined.member_epoch, subscribed_topic_names=None
    )
    assert (again.error_code, again.member_epoch) == (ErrorCode.none, joined.member_epoch)
    assert (await consumer_beat(broker, 1, member_id=str(uuid.uuid4()))).error_code == 0


async def test_a_share_heartbeat_whose_records_fail_is_refused_and_changes_nothing() -> None:
    broker = Broker()
    broker.cluster.create_topic("t", 3, 1)
    joined = await broker.join("shares", "m1")
    assert joined.error_code == ErrorCode.none and joined.assignment is not None
    before = durable(broker, "shares")
    with failing_appends(broker) as failed:
        second = await broker.heartbeat("shares", "m2", 0, ("t",))
        assert second.error_code == ErrorCode.not_coordinator and failed
        left = await broker.heartbeat("shares", "m1", -1)
        assert left.error_code == ErrorCode.not_coordinator
        fresh = await broker.heartbeat("fresh", "m3", 0, ("t",))
        assert fresh.error_code == ErrorCode.not_coordinator
    assert durable(broker, "shares") == before
    assert group_coordinator(broker.runtime).registry.get("fresh") is None
    broker.restart()
    assert durable(broker, "shares") == before
    again = await broker.heartbeat("shares", "m1", joined.member_epoch)
    assert (again.error_code, again.member_epoch) == (ErrorCode.none, joined.member_epoch)


async def test_a_streams_heartbeat_whose_records_fail_is_refused_and_changes_nothing() -> None:
    broker = Broker(**{"group.streams.initial.rebalance.delay.ms": "0"})
    for name in ("in", "app-words-repartition", "app-counts-changelog"):
        broker.cluster.create_topic(name, 2, 1)
    service = group_coordinator(broker.runtime)

    def beat(member: str, epoch: int) -> Any:
        fields: dict[str, Any] = {}
        if epoch == 0:
            fields = {"topology": COUNT, "rebalance_timeout_ms": 30_000, "process_id": member}
        return service.streams_heartbeat(StreamsHeartbeat("app", member, epoch, **fields))

    joined = beat("a", 0)
    assert joined.member_epoch == 2 and joined.assignment.active
    before = durable(broker, "app")
    with failing_appends(broker) as failed:
        with pytest.raises(GroupError) as refused:
            beat("b", 0)
        assert refused.value.code == ErrorCode.not_coordinator and failed
        with pytest.raises(GroupError):
            beat("a", -1)
    assert durable(broker, "app") == before
    broker.restart()
    service = group_coordinator(broker.runtime)
    assert durable(broker, "app") == before
    assert beat("a", joined.member_epoch).member_epoch == joined.member_epoch


async def test_share_groups_come_back_from_their_records_alone(tmp_path: Path) -> None:
    broker = Broker(data_dir=tmp_path)
    broker.cluster.create_topic("t", 3, 1)
    joined = await broker.join("shares", "m1")
    await broker.join("shares", "m2")
    before = durable(broker, "shares")
    assert not (tmp_path / LEGACY_FILE).exists()  # nothing but records
    broker.restart()
    group = group_coordinator(broker.runtime).registry.get("shares")
    assert isinstance(group, ShareGroup) and durable(broker, "shares") == before
    assert group.initialized == {broker.cluster.topics["t"].topic_id: {0, 1, 2}}
    again = await broker.heartbeat("shares", "m1", group.members["m1"].member_epoch)
    assert again.error_code == ErrorCode.none and joined.member_id == "m1"
    # A deleted group stays deleted.
    for member in ("m1", "m2"):
        await broker.heartbeat("shares", member, -1)
    deleted = await broker.send(broker.request(42, 2, groups_names=("shares",)))
    assert deleted.results[0].error_code == ErrorCode.none
    broker.restart()
    assert group_coordinator(broker.runtime).registry.get("shares") is None


async def test_a_share_groups_file_of_an_older_kemu_is_written_as_records(tmp_path: Path) -> None:
    broker = Broker(data_dir=tmp_path)
    broker.cluster.create_topic("t", 3, 1)
    topic_id = str(broker.cluster.topics["t"].topic_id)
    old = {
        "shares": {
            "group_epoch": 4,
            "assignment_epoch": 4,
            "assignment_timestamp_ms": 123,
            "members": {
                "m1": {
                    "member_epoch": 4,
                    "previous_member_epoch": 3,
                    "rack_id": None,
                    "client_id": "c1",
                    "client_host": "/127.0.0.1",
                    "subscribed_topic_names": ["t"],
                    "assigned": [[topic_id, 0], [topic_id, 1], [topic_id, 2]],
                }
            },
            "target": {"m1": [[topic_id, 0], [topic_id, 1], [topic_id, 2]]},
            "subscribed_metadata": {"t": [topic_id, 3]},
            "initialized": {topic_id: [0, 1, 2]},
        }
    }
    (tmp_path / LEGACY_FILE).write_text(json.dumps(old))
    group = group_coordinator(broker.runtime).registry.get("shares")
    assert isinstance(group, ShareGroup) and group.group_epoch == 4
    assert not (tmp_path / LEGACY_FILE).exists()  # read once, then records only
    before = durable(broker, "shares")
    broker.restart()
    assert durable(broker, "shares") == before
    beat = await broker.heartbeat("shares", "m1", 4)
    assert (beat.error_code, beat.member_epoch) == (ErrorCode.none, 4)


async def test_one_coordinator_partition_loads_on_its_own() -> None:
    """``load(partitions)`` replays just those ``__consumer_offsets`` partitions (what a
    coordinator taking a partition over does)."""
    broker = Broker(**{"offsets.topic.num.partitions": "5"})
    broker.cluster.create_topic("t", 3, 1)
    await broker.join("shares", "m1")
    before = durable(broker, "shares")
    service = group_coordinator(broker.runtime)
    index = coordinator_partition(broker.cluster, GROUP, "shares").index
    others = [i for i in range(5) if i != index]
    service.registry.restore("shares", None)
    service.load(others)
    assert service.registry.get("shares") is None
    service.load([index])
    assert durable(broker, "shares") == before


async def test_a_classic_assignment_whose_record_fails_is_given_to_nobody() -> None:
    """The leader's SyncGroup writes the group's assignment before anyone gets it: when the
    append fails, SyncGroup answers Kafka's error, the group rebalances, and a restart finds
    the group as the log last held it (not Stable with an assignment nobody was given)."""
    broker = ClassicBroker()
    member = (await broker.joined(9, "g")).member_id
    with failing_appends(broker) as failed:
        synced = await broker.sync(5, "g", member, 1, {member: b"asg"})
    assert synced.error_code == ErrorCode.not_coordinator and failed
    assert synced.assignment == b""
    group = group_coordinator(broker.runtime).registry.get("g")
    assert group is not None and group.state_name == "PreparingRebalance"
    broker.restart()
    group = group_coordinator(broker.runtime).registry.get("g")
    assert group is not None and group.state_name == "Empty"
    member = (await broker.joined(9, "g")).member_id
    synced = await broker.sync(5, "g", member, 1, {member: b"asg"})
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"asg")
    broker.restart()
    group = group_coordinator(broker.runtime).registry.get("g")
    assert group is not None and group.state_name == "Stable"


async def test_a_group_whose_tombstones_fail_is_not_deleted() -> None:
    broker = ClassicBroker()
    member = str(uuid.uuid4())
    joined = await consumer_beat(broker, 1, member_id=member)
    await consumer_beat(broker, 1, member_id=member, member_epoch=-1)
    before = durable(broker, "kip848")
    delete = broker.request(42, 2, groups_names=("kip848",))
    with failing_appends(broker):
        refused = await broker.send(delete)
    assert refused.results[0].error_code == ErrorCode.not_coordinator
    assert durable(broker, "kip848") == before and joined.error_code == ErrorCode.none
    assert (await broker.send(delete)).results[0].error_code == ErrorCode.none
    broker.restart()
    assert group_coordinator(broker.runtime).registry.get("kip848") is None


async def test_what_the_log_holds_is_the_records_replayed_and_matches_each_group() -> None:
    """After joins, a revocation and a leave, the images rebuilt from the records written
    equal each group's own (so the next heartbeat writes nothing), for every type."""
    broker = Broker(**{"group.streams.initial.rebalance.delay.ms": "0"})
    for name in ("t", "in", "app-words-repartition", "app-counts-changelog"):
        broker.cluster.create_topic(name, 3, 1)
    service = group_coordinator(broker.runtime)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())

    def consumer(member: str, epoch: int, **fields: Any) -> Any:
        request = ConsumerHeartbeat("kip848", member, epoch, **fields)
        return service.consumer_heartbeat(request)

    joining = {"rebalance_timeout_ms": 30_000, "subscribed_topic_names": ("t",)}
    a = consumer(first, 0, owned=frozenset(), **joining)
    consumer(second, 0, owned=frozenset(), **joining)
    consumer(first, a.member_epoch, owned=a.assignment)  # revokes what the second one gets
    await broker.join("shares", "m1")
    await broker.join("shares", "m2")
    await broker.heartbeat("shares", "m1", -1)
    fields = {"topology": COUNT, "rebalance_timeout_ms": 30_000}
    service.streams_heartbeat(StreamsHeartbeat("app", "a", 0, process_id="a", **fields))
    service.streams_heartbeat(StreamsHeartbeat("app", "b", 0, process_id="b", **fields))
    kip848 = service.registry.get("kip848")
    share = service.registry.get("shares")
    streams = service.registry.get("app")
    assert isinstance(kip848, ConsumerGroup) and len(kip848.members) == 2
    assert service._consumer_log.images["kip848"] == consumer_persistence.image_of(kip848)
    assert isinstance(share, ShareGroup) and list(share.members) == ["m2"]
    assert service._share_log.images["shares"] == share_records.image_of(share, service._topic_name)
    assert isinstance(streams, StreamsGroup) and len(streams.members) == 2
    assert service.streams.log.images["app"] == streams_records.image_of(streams)


async def test_altered_share_offsets_whose_records_fail_answer_kafkas_error() -> None:
    broker = Broker()
    broker.cluster.create_topic("t", 3, 1)
    topic_id = broker.cluster.topics["t"].topic_id
    with failing_appends(broker):
        refused = await broker.send(_alter(broker, "fresh", [("t", [(0, 7)])]))
    assert (refused.error_code, refused.responses) == (ErrorCode.not_coordinator, ())
    answer = await broker.send(_alter(broker, "fresh", [("t", [(0, 7)])]))
    assert answer.error_code == ErrorCode.none
    broker.restart()
    group = group_coordinator(broker.runtime).registry.get("fresh")
    assert isinstance(group, ShareGroup) and group.initialized == {topic_id: {0}}


async def test_a_migration_cut_short_keeps_the_records(tmp_path: Path) -> None:
    """Killed after writing the old file's groups as records, before dropping the file: the
    next start takes the group from the records and drops the file."""
    broker = Broker(data_dir=tmp_path)
    broker.cluster.create_topic("t", 3, 1)
    await broker.join("shares", "m1")
    before = durable(broker, "shares")
    stale = {
        "shares": {
            "group_epoch": 1,
            "assignment_epoch": 1,
            "members": {},
            "target": {},
            "subscribed_metadata": {},
            "initialized": {},
        }
    }
    (tmp_path / LEGACY_FILE).write_text(json.dumps(stale))
    broker.restart()
    assert durable(broker, "shares") == before
    assert not (tmp_path / LEGACY_FILE).exists()


async def test_a_new_groups_empty_record_that_fails_leaves_no_group() -> None:
    """A join creating a group writes its Empty record first (Kafka's
    ``classicGroupJoinToClassicGroup``): when that fails the group is not created and a parked
    joiner gets Kafka's error; a MEMBER_ID_REQUIRED answer (sent before the append in Kafka)
    stands, and the id it hands out then names a member of no group."""
    broker = ClassicBroker()
    with failing_appends(broker) as failed:
        parked = await broker.join(3, "new")  # v3: joins without MEMBER_ID_REQUIRED
        assert (parked.error_code, parked.member_id) == (ErrorCode.not_coordinator, "")
        assert failed
        required = await broker.join(9, "newer")
        assert required.error_code == ErrorCode.member_id_required
    registry = group_coordinator(broker.runtime).registry
    assert registry.get("new") is None and registry.get("newer") is None
    again = await broker.join(9, "newer", required.member_id)
    assert again.error_code == ErrorCode.unknown_member_id
    broker.restart()
    assert group_coordinator(broker.runtime).registry.get("new") is None
    assert (await broker.joined(9, "new")).error_code == ErrorCode.none


async def test_an_empty_kip848_group_taken_over_by_a_failed_join_stays() -> None:
    broker = ClassicBroker()
    member = str(uuid.uuid4())
    await consumer_beat(broker, 1, member_id=member)
    await consumer_beat(broker, 1, member_id=member, member_epoch=-1)
    before = durable(broker, "kip848")
    with failing_appends(broker):
        refused = await broker.join(3, "kip848")
    assert refused.error_code == ErrorCode.not_coordinator
    assert durable(broker, "kip848") == before
    broker.restart()
    assert durable(broker, "kip848") == before


async def test_a_static_member_whose_rejoin_fails_keeps_its_old_id() -> None:
    """A restarted static member taking its old id's place in a Stable group writes the group
    first (Kafka's ``updateStaticMemberThenRebalanceOrCompleteJoin``): when that fails the old
    id stays the member, and the join gets Kafka's error with the group's generation."""
    broker = ClassicBroker()
    first = await broker.join(9, "g", group_instance_id="i-1")
    await broker.sync(5, "g", first.member_id, 1, {first.member_id: b"kept"})
    with failing_appends(broker) as failed:
        again = await broker.join(9, "g", group_instance_id="i-1")
    assert failed and (again.error_code, again.member_id) == (ErrorCode.not_coordinator, "")
    assert (again.generation_id, again.leader) == (1, first.member_id)
    group = group_coordinator(broker.runtime).registry.get("g")
    assert isinstance(group, ClassicGroupType) and list(group.members) == [first.member_id]
    assert group.static_members == {"i-1": first.member_id} and group.state == "Stable"
    beat = broker.request(
        12, 4, group_id="g", generation_id=1, member_id=first.member_id, group_instance_id="i-1"
    )
    assert (await broker.send(beat)).error_code == ErrorCode.none
    broker.restart()
    group = group_coordinator(broker.runtime).registry.get("g")
    assert isinstance(group, ClassicGroupType) and list(group.members) == [first.member_id]
    rejoined = await broker.join(9, "g", group_instance_id="i-1")
    assert rejoined.error_code == ErrorCode.none and rejoined.skip_assignment


async def test_a_leave_whose_empty_record_fails_leaves_the_member_in() -> None:
    """The last member's LeaveGroup writes the group's Empty record before anything is
    answered (Kafka's ``classicGroupLeave`` fails as a whole): when that fails, the leave gets
    Kafka's error and the member is still in the Stable group, in memory and after a restart."""
    broker = ClassicBroker()
    member = (await broker.joined(9, "g")).member_id
    synced = await broker.sync(5, "g", member, 1, {member: b"asg"})
    assert synced.error_code == ErrorCode.none
    leave = broker.request(
        13, 5, group_id="g", members=(broker.nested(13, 5, "MemberIdentity", member_id=member),)
    )
    with failing_appends(broker) as failed:
        refused = await broker.send(leave)
    assert failed and refused.error_code == ErrorCode.not_coordinator
    group = group_coordinator(broker.runtime).registry.get("g")
    assert isinstance(group, ClassicGroupType) and list(group.members) == [member]
    assert group.state == "Stable"
    broker.restart()
    group = group_coordinator(broker.runtime).registry.get("g")
    assert isinstance(group, ClassicGroupType) and list(group.members) == [member]
    left = await broker.send(leave)
    assert left.error_code == ErrorCode.none and left.members[0].error_code == ErrorCode.none
    broker.restart()
    group = group_coordinator(broker.runtime).registry.get("g")
    assert isinstance(group, ClassicGroupType) and group.state == "Empty" and not group.members
