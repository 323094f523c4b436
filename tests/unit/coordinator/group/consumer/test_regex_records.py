"""KIP-848 regex subscriptions in ``__consumer_offsets``, as Kafka 4.4.0 writes them: the
ConsumerGroupRegularExpression record (type 16) byte for byte, a regex-only join that writes no
group epoch, each resolution written before the epoch it bumps, a tombstone when a regex's last
subscriber drops it or leaves, and a restart that keeps what the regexes matched
(tests/integration/groups/test_group_record_order_kafka.py compares the order with Kafka)."""

from __future__ import annotations

import struct
from typing import Any

from kemu.coordinator.group import records
from kemu.coordinator.group.consumer.group import ConsumerGroup, ConsumerHeartbeat
from kemu.coordinator.group.consumer.records import ConsumerRecordKey
from kemu.coordinator.group.consumer.regexes import REGULAR_EXPRESSION, ResolvedRegex, resolve
from kemu.coordinator.group.service import GroupCoordinatorService, group_coordinator
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_group_handlers import Broker

GROUP_EPOCH, MEMBER, TARGET_EPOCH, TARGET_MEMBER, CURRENT = 3, 5, 6, 7, 8
GROUP = "regex-group"


def kafka_string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_the_record_is_kafkas_bytes() -> None:
    key = ConsumerRecordKey(REGULAR_EXPRESSION, "group-id", "ab*")
    value = ResolvedRegex(frozenset({"abcd", "abc"}), 10, 12345)
    # ConsumerGroupRegularExpressionKey (type 16, not flexible) and ...Value v0 (flexible):
    # compact array of compact strings (sorted), Version int64, Timestamp int64, no tags.
    key_bytes = b"\x00\x10" + kafka_string("group-id") + kafka_string("ab*")
    value_bytes = (
        b"\x00\x00" + b"\x03" + b"\x04abc" + b"\x05abcd" + struct.pack(">qq", 10, 12345) + b"\x00"
    )
    assert records.encode_key(key) == key_bytes
    assert records.encode_value(value) == value_bytes
    assert records.decode_key(key_bytes) == key
    assert records.decode_value(key, value_bytes) == value
    assert records.decode_value(key, None) is None  # the tombstone
    nothing = ResolvedRegex(frozenset(), 0, 7)
    assert records.decode_value(key, records.encode_value(nothing)) == nothing


def test_resolving_matches_whole_topic_names() -> None:
    resolved = resolve(["rx-.*", "a"], ["rx-1", "xrx-1", "a", "ab"], 42)
    assert resolved == {
        "a": ResolvedRegex(frozenset({"a"}), 0, 42),
        "rx-.*": ResolvedRegex(frozenset({"rx-1"}), 0, 42),
    }


class Members:
    """One group's members heartbeating through the service (the log is the cluster's)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, frozenset[Any]] = {}

    @property
    def service(self) -> GroupCoordinatorService:
        return group_coordinator(self.broker.runtime)

    def group(self) -> ConsumerGroup:
        group = self.service.registry.get(GROUP)
        assert isinstance(group, ConsumerGroup)
        return group

    def beat(self, member: str, regex: str | None = None, epoch: int | None = None) -> Any:
        joining = member not in self.epochs
        request = ConsumerHeartbeat(
            GROUP,
            member,
            0 if joining else self.epochs[member] if epoch is None else epoch,
            rebalance_timeout_ms=30_000 if joining else -1,
            subscribed_topic_regex=regex,
            server_assignor="uniform" if joining else None,
            owned=frozenset() if joining else self.owned[member],
        )
        answer = self.service.consumer_heartbeat(request)
        if answer.member_epoch < 0:
            self.epochs.pop(member, None)
            return answer
        self.epochs[member] = answer.member_epoch
        if answer.assignment is not None:
            self.owned[member] = answer.assignment
        return answer

    def resolve(self) -> None:
        """The resolution the heartbeats asked for (the service runs it on the next tick)."""
        self.service.resolve_pending_regexes()

    def written(self) -> list[tuple[int, str | None, object]]:
        """The group's records in the log, in order: type, member (or regex), value."""
        return [
            (key.record_type, key.member, value)
            for key, value in self.service.offsets_log.replay()
            if isinstance(key, ConsumerRecordKey) and key.group == GROUP
        ]


def types(found: list[tuple[int, str | None, object]]) -> list[int]:
    return [record_type for record_type, _, _ in found]


def regex_group() -> tuple[Broker, Members]:
    broker = Broker()
    broker.cluster.create_topic("other", 1, 1)
    return broker, Members(broker)


async def test_a_regex_join_writes_kafkas_records_in_kafkas_order() -> None:
    broker, members = regex_group()
    joined = members.beat("a", "rx-.*")
    assert (joined.member_epoch, joined.assignment) == (1, frozenset())
    assert types(members.written()) == [MEMBER, CURRENT]  # no epoch: nothing to assign yet
    members.resolve()
    assert members.written()[-1] == (
        REGULAR_EXPRESSION,
        "rx-.*",
        ResolvedRegex(frozenset(), 0, broker.now),
    )
    assert members.group().group_epoch == 1

    broker.cluster.create_topic("rx-a", 2, 1)
    broker.now += 5_000
    members.beat("a")
    members.resolve()  # nothing due: resolved less than 10 s ago
    assert len(members.written()) == 3
    broker.now += 5_001
    members.beat("a")
    members.resolve()
    assert members.group().group_epoch == 2
    assigned = members.beat("a").assignment
    topic_id = broker.cluster.topics["rx-a"].topic_id
    assert assigned == frozenset({(topic_id, 0), (topic_id, 1)})
    found = members.written()
    assert types(found) == [
        MEMBER,
        CURRENT,
        REGULAR_EXPRESSION,
        REGULAR_EXPRESSION,
        GROUP_EPOCH,
        TARGET_MEMBER,
        TARGET_EPOCH,
        CURRENT,
    ]
    assert found[3][2] == ResolvedRegex(frozenset({"rx-a"}), 0, broker.now)


async def test_a_restart_keeps_what_the_regexes_matched() -> None:
    broker, members = regex_group()
    broker.cluster.create_topic("rx-a", 2, 1)
    members.beat("a", "rx-.*")
    members.resolve()
    assigned = members.beat("a").assignment
    assert assigned is not None and len(assigned) == 2
    before = members.group()
    resolved, epoch = dict(before.resolved_regexes), before.group_epoch
    count = len(members.written())

    broker.restart()
    after = members.group()
    assert after is not before
    assert (after.resolved_regexes, after.group_epoch) == (resolved, epoch)
    kept = members.beat("a")
    assert kept.member_epoch == members.epochs["a"] and not members.service.consumer.pending_regexes
    assert len(members.written()) == count  # no new resolution, no rebalance
    # After a load every topic counts as new: the first heartbeat 10 s after the last
    # resolution resolves again, which writes the same topics and bumps nothing.
    broker.now += 10_001
    members.beat("a")
    members.resolve()
    found = members.written()
    assert types(found[count:]) == [REGULAR_EXPRESSION]
    assert found[-1][2] == ResolvedRegex(frozenset({"rx-a"}), 0, broker.now)
    assert members.group().group_epoch == epoch


async def test_a_regex_without_subscribers_is_tombstoned() -> None:
    broker, members = regex_group()
    broker.cluster.create_topic("rx-a", 1, 1)
    members.beat("a", "rx-.*")
    members.beat("b", "rx-.*")
    members.resolve()
    count = len(members.written())
    members.beat("a", epoch=-1)  # b still subscribes with it
    assert REGULAR_EXPRESSION not in types(members.written()[count:])

    count = len(members.written())
    members.beat("b", "other")  # its last subscriber changes it
    found = members.written()[count:]
    assert found[:2] == [
        (MEMBER, "b", found[0][2]),
        (REGULAR_EXPRESSION, "rx-.*", None),
    ]
    epoch = members.group().group_epoch  # the switch bumps nothing: "other" is not resolved
    members.resolve()  # and not due: the dropped regex's resolution, under 10 s old, counts
    assert not members.service.consumer.pending_regexes
    members.beat("b")  # the next heartbeat asks for it
    count = len(members.written())
    members.resolve()  # "other" matches the topic other: the epoch goes up after its record
    assert members.group().group_epoch == epoch + 1
    assert [(t, m) for t, m, _ in members.written()[count:]] == [
        (REGULAR_EXPRESSION, "other"),
        (GROUP_EPOCH, None),
    ]

    count = len(members.written())
    members.beat("b", epoch=-1)  # and the last member leaves
    left = members.written()[count:]
    assert [(t, m, v is None) for t, m, v in left[:5]] == [
        (CURRENT, "b", True),
        (TARGET_MEMBER, "b", True),
        (MEMBER, "b", True),
        (REGULAR_EXPRESSION, "other", True),
        (GROUP_EPOCH, None, False),
    ]
    assert not members.group().resolved_regexes


async def test_deleting_a_group_tombstones_its_regexes() -> None:
    broker, members = regex_group()
    members.beat("a", "rx-.*")
    members.resolve()
    members.beat("a", epoch=-1)  # the last subscriber leaves: its tombstone
    members.beat("c", "c-.*")
    members.resolve()
    members.beat("c", epoch=-1)
    count = len(members.written())
    members.group().resolved_regexes["kept"] = ResolvedRegex(frozenset(), 0, 1)
    members.service.write_group(GROUP)  # a resolution no member holds any more, say
    assert members.service.delete_group(GROUP) == ErrorCode.none
    deleted = members.written()[count + 1 :]
    # Kafka's ConsumerGroup.createGroupTombstoneRecords: target metadata, regexes, the
    # subscription metadata (4), the group epoch
    assert [(t, m, v) for t, m, v in deleted] == [
        (TARGET_EPOCH, None, None),
        (REGULAR_EXPRESSION, "kept", None),
        (4, None, None),
        (GROUP_EPOCH, None, None),
    ]
    broker.restart()
    assert members.service.registry.get(GROUP) is None
