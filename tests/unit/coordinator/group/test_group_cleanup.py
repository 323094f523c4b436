"""The offsets-retention check deletes every empty group of a type that expires once it has no
committed offsets left, as Kafka 4.4.0's ``cleanupGroupMetadata`` does (``cleanup``): classic,
KIP-848 and streams groups, never share groups; its tombstones are written after its offsets'
in one write, and a failed write keeps the group until the next check. An open transaction's
offsets hold their group. The first check is one interval after the coordinator starts. Time
is a virtual clock: nothing here waits."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kemu.coordinator.group.classic.group import JoinRequest, LeavingMember
from kemu.coordinator.group.classic.model import ClassicGroup
from kemu.coordinator.group.cleanup import expires, groups_to_delete, spare_open_offsets
from kemu.coordinator.group.consumer.group import ConsumerGroup
from kemu.coordinator.group.offset_manager import CommitPartition
from kemu.coordinator.group.offsets import CommittedOffset, OffsetStore
from kemu.coordinator.group.records import OffsetCommitKey
from kemu.coordinator.group.service import GroupCoordinatorService, group_coordinator
from kemu.coordinator.group.share.group import ShareGroup
from kemu.coordinator.group.streams.model import StreamsGroup, StreamsHeartbeat
from kemu.coordinator.group.timers import RETRY_BACKOFF_MS
from kemu.protocol.errors import ErrorCode
from tests.unit.coordinator.group.consumer.test_consumer_group import consumer_beat
from tests.unit.coordinator.group.streams.test_streams_group import COUNT
from tests.unit.coordinator.group.test_records_before_state import failing_appends
from tests.unit.coordinator.group.test_timers_records_before_state import VirtualBroker

CHECK_MS = 1_000


def cleaning_broker(**static: str) -> VirtualBroker:
    broker = VirtualBroker(**{"offsets.retention.check.interval.ms": str(CHECK_MS), **static})
    broker.cluster.create_topic("t", 3, 1)
    return broker


async def joined_and_left(broker: VirtualBroker, group_id: str) -> None:
    """A KIP-848 group whose one member joined and left: empty, no offsets."""
    member = str(uuid.uuid4())
    joined = await consumer_beat(broker, 1, group_id=group_id, member_id=member)
    assert joined.error_code == ErrorCode.none
    left = await consumer_beat(broker, 1, group_id=group_id, member_id=member, member_epoch=-1)
    assert left.error_code == ErrorCode.none


def commit(service: GroupCoordinatorService, group_id: str) -> None:
    committed = service.commit_offsets(
        group_id, "", None, -1, [CommitPartition("t", 0, 5)], api_version=9
    )
    assert committed.error == ErrorCode.none


def streams_joined_and_left(service: GroupCoordinatorService, group_id: str) -> None:
    fields: dict[str, Any] = {"topology": COUNT, "rebalance_timeout_ms": 30_000}
    joined = service.streams_heartbeat(StreamsHeartbeat(group_id, "a", 0, process_id="a", **fields))
    service.streams_heartbeat(StreamsHeartbeat(group_id, "a", -1, process_id="a"))
    assert joined.member_epoch > 0
    group = service.registry.get(group_id)
    assert isinstance(group, StreamsGroup) and not group.members


async def test_an_empty_kip848_group_is_deleted_at_the_first_check_after_start() -> None:
    broker = cleaning_broker()
    service = group_coordinator(broker.runtime)
    await joined_and_left(broker, "kip848")
    assert isinstance(service.registry.get("kip848"), ConsumerGroup)
    await broker.advance(CHECK_MS - 1)
    assert service.registry.get("kip848") is not None
    await broker.advance(1)
    assert service.registry.get("kip848") is None
    beat = await consumer_beat(broker, 1, member_id=str(uuid.uuid4()), member_epoch=5)
    assert beat.error_code == ErrorCode.group_id_not_found
    broker.restart()  # its tombstones were written: a reload does not bring it back
    assert group_coordinator(broker.runtime).registry.get("kip848") is None


async def test_what_is_kept_and_what_goes() -> None:
    broker = cleaning_broker()
    service = group_coordinator(broker.runtime)
    for group_id in ("empty", "with-offsets"):
        await joined_and_left(broker, group_id)
    commit(service, "with-offsets")
    stable = await consumer_beat(broker, 1, group_id="stable", member_id=str(uuid.uuid4()))
    assert stable.error_code == ErrorCode.none
    await broker.join("shares", "m1")
    assert (await broker.heartbeat("shares", "m1", -1)).error_code == ErrorCode.none
    for name in ("in", "app-words-repartition", "app-counts-changelog"):
        broker.cluster.create_topic(name, 2, 1)
    streams_joined_and_left(service, "app")
    commit(service, "simple")  # a classic group of no protocol, then its offsets deleted
    commit(service, "simple-kept")
    assert service.delete_offsets("simple", [("t", [0])]).error == ErrorCode.none
    await broker.advance(CHECK_MS)
    left = {group.group_id: type(group).__name__ for group in service.registry}
    assert left == {
        "with-offsets": "ConsumerGroup",
        "stable": "ConsumerGroup",
        "shares": "ShareGroup",  # never deleted, empty or not
        "simple-kept": "ClassicGroup",
    }
    broker.restart()
    assert {group.group_id for group in group_coordinator(broker.runtime).registry} == set(left)


async def test_a_group_goes_with_its_last_offsets_in_one_write() -> None:
    broker = cleaning_broker(**{"offsets.retention.minutes": "1"})
    service = group_coordinator(broker.runtime)
    await joined_and_left(broker, "kip848")
    commit(service, "kip848")
    await broker.advance(59_000)
    assert service.registry.get("kip848") is not None and service.offsets.has_offsets("kip848")
    written = service.offsets_log.write
    batches: list[list[Any]] = []

    def recorded(group_id: str, records: list[Any], now_ms: int) -> tuple[ErrorCode, int]:
        batches.append(records)
        return written(group_id, records, now_ms)

    service.offsets_log.write = recorded  # type: ignore[method-assign]
    await broker.advance(CHECK_MS)
    assert service.registry.get("kip848") is None and not service.offsets.has_offsets("kip848")
    [batch] = batches
    assert isinstance(batch[0][0], OffsetCommitKey) and all(value is None for _, value in batch)
    assert len(batch) > 1  # the group's own tombstones after its offset's


async def test_a_failed_write_keeps_the_group_until_the_next_check() -> None:
    broker = cleaning_broker()
    service = group_coordinator(broker.runtime)
    await joined_and_left(broker, "kip848")
    with failing_appends(broker) as failed:
        await broker.advance(CHECK_MS)
        assert failed
        assert isinstance(service.registry.get("kip848"), ConsumerGroup)
    await broker.advance(RETRY_BACKOFF_MS)  # no retry before the next check
    assert service.registry.get("kip848") is not None
    await broker.advance(CHECK_MS - RETRY_BACKOFF_MS)
    assert service.registry.get("kip848") is None


async def test_an_empty_classic_group_that_never_committed_goes() -> None:
    broker = cleaning_broker(**{"group.initial.rebalance.delay.ms": "0"})
    service = group_coordinator(broker.runtime)
    join = JoinRequest("g", "", "consumer", (("range", b""),), 10_000, 30_000, "i-1")
    joining = asyncio.ensure_future(service.join_group(join))
    await broker.advance(0)
    joined = await joining
    left = service.leave_group("g", [LeavingMember(joined.member_id, "i-1")])
    assert left.error == ErrorCode.none
    group = service.registry.get("g")
    assert isinstance(group, ClassicGroup) and group.is_empty()
    await broker.advance(CHECK_MS)
    assert service.registry.get("g") is None
    broker.restart()
    assert group_coordinator(broker.runtime).registry.get("g") is None


def test_which_groups_a_check_deletes() -> None:
    now = 0
    empty_share = ShareGroup("share")
    empty_consumer = ConsumerGroup("consumer")
    kept_offsets = ConsumerGroup("kept")
    going_offsets = ConsumerGroup("going")
    assert not expires(empty_share) and expires(empty_consumer)
    offsets = OffsetStore()
    for group_id in ("kept", "going"):
        offsets.put(group_id, "t", 0, CommittedOffset(1, -1, "", now))
    offsets.put("kept", "t", 1, CommittedOffset(1, -1, "", now))
    expired = {
        group_id: [(OffsetCommitKey(group_id, "t", 0), None)] for group_id in ("kept", "going")
    }
    groups = [empty_share, empty_consumer, kept_offsets, going_offsets]
    assert groups_to_delete(groups, offsets, expired) == ["consumer", "going"]


async def test_an_open_transactions_offsets_hold_their_group() -> None:
    """Kafka expires no offset an open transaction also holds, and deletes no group one has
    offsets for, until the transaction ends."""
    broker = cleaning_broker(**{"offsets.retention.minutes": "1"})
    service = group_coordinator(broker.runtime)
    for group_id in ("pending", "committed"):
        await joined_and_left(broker, group_id)
    commit(service, "committed")  # expires at the check after a minute, but for the transaction
    for group_id in ("pending", "committed"):
        staged = [CommitPartition("t", 0, 9)]
        assert service.commit_transactional_offsets(group_id, 7, 0, staged) is ErrorCode.none
    await broker.advance(60_000)
    assert {group.group_id for group in service.registry} == {"pending", "committed"}
    assert service.offsets.has_offsets("committed")
    service.offset_manager.end_transaction(7, False, lambda _group: True)  # its ABORT marker
    await broker.advance(CHECK_MS)
    assert not list(service.registry) and not service.offsets.has_offsets("committed")


def test_open_offsets_are_spared() -> None:
    expired: dict[str, list[Any]] = {
        "g": [(OffsetCommitKey("g", "t", 0), None), (OffsetCommitKey("g", "t", 1), None)],
        "h": [(OffsetCommitKey("h", "t", 0), None)],
    }
    assert spare_open_offsets(expired, {"g": {("t", 1)}, "h": {("t", 0)}}) == {
        "g": [(OffsetCommitKey("g", "t", 0), None)]
    }
    offsets = OffsetStore()
    assert groups_to_delete([ConsumerGroup("g")], offsets, {}, {"g"}) == []


async def test_a_group_a_txn_offset_commit_makes_stays_until_the_transaction_ends() -> None:
    """TxnOffsetCommit (generation -1) into no group: Kafka makes an empty simple classic group
    at once, held by the open transaction, deleted at the first check after it."""
    broker = cleaning_broker()
    service = group_coordinator(broker.runtime)
    service.transactional_commit_group("made")
    staged = [CommitPartition("t", 0, 9)]
    assert service.commit_transactional_offsets("made", 7, 0, staged) is ErrorCode.none
    group = service.registry.get("made")
    assert isinstance(group, ClassicGroup) and group.is_empty()
    await broker.advance(3 * CHECK_MS)
    assert service.registry.get("made") is not None
    service.offset_manager.end_transaction(7, False, lambda _group: True)  # its ABORT marker
    await broker.advance(CHECK_MS)
    assert service.registry.get("made") is None
