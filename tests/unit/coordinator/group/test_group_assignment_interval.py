"""``consumer.assignment.interval.ms`` and ``share.assignment.interval.ms`` as Kafka 4.4.0's
``GroupMetadataManager.maybeUpdateTargetAssignment`` applies them
(``canComputeNextTargetAssignment``, read in the 4.4.0 jar), on a virtual clock:

- a group that never computed a target (or whose last member left) computes one at once;
- afterwards at most one per interval: a heartbeat inside it bumps the group epoch as usual but
  reconciles the member towards the *last* target (a new member gets that target's epoch and
  nothing), and the first heartbeat after it computes the new target; no timer does it;
- the time is kept across a restart (the consumer group's TargetAssignmentMetadata tag 0, the
  share-group store);
- ``kemu serve`` sets both intervals to 0; Kafka's code default is 1000.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kemu.coordinator.group.consumer.group import (
    UNRELEASED,
    UNREVOKED,
    ConsumerGroup,
    ConsumerGroupCoordinator,
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
    ConsumerSettings,
)
from kemu.coordinator.group.modern_group import TopicMeta, can_compute_target
from kemu.coordinator.group.registry import GroupRegistry
from kemu.coordinator.group.share.group import (
    MembershipSettings,
    ShareGroup,
    ShareGroupCoordinator,
    ShareHeartbeat,
    ShareHeartbeatResult,
)

T = uuid.UUID(int=7)
INTERVAL_MS = 1_000
START_MS = 1_700_000_000_000  # a wall-clock time, as the service passes


def parts(*indexes: int) -> frozenset[tuple[uuid.UUID, int]]:
    return frozenset((T, index) for index in indexes)


@dataclass
class Consumers:
    """A consumer-group coordinator over one 4-partition topic and a clock that moves only when
    told."""

    interval_ms: int = INTERVAL_MS
    now: int = START_MS
    registry: GroupRegistry = field(default_factory=GroupRegistry)

    def __post_init__(self) -> None:
        settings = ConsumerSettings(assignment_interval_ms=self.interval_ms)
        self.coordinator = ConsumerGroupCoordinator(
            self.registry, lambda group_id: settings, lambda: ["t"]
        )

    def beat(
        self, member: str, epoch: int, owned: frozenset[Any] | None = None, **fields: Any
    ) -> ConsumerHeartbeatResult:
        request = ConsumerHeartbeat("g", member, epoch, owned=owned, **fields)
        return self.coordinator.heartbeat(request, self.topics, self.now)

    def join(self, member: str) -> ConsumerHeartbeatResult:
        return self.beat(
            member, 0, frozenset(), rebalance_timeout_ms=30_000, subscribed_topic_names=("t",)
        )

    @staticmethod
    def topics(name: str) -> TopicMeta | None:
        return TopicMeta(T, 4) if name == "t" else None

    @property
    def group(self) -> ConsumerGroup:
        found = self.coordinator.group("g")
        assert found is not None
        return found


def test_the_rule_is_kafkas() -> None:
    assert can_compute_target(0, INTERVAL_MS, 5)  # never computed
    assert can_compute_target(5, 0, 5)  # no interval
    assert not can_compute_target(5, INTERVAL_MS, 1_004)
    assert can_compute_target(5, INTERVAL_MS, 1_005)


def test_a_new_consumer_group_is_assigned_at_once() -> None:
    consumers = Consumers()
    first = consumers.join("a")
    assert (first.member_epoch, first.assignment) == (2, parts(0, 1, 2, 3))
    assert consumers.group.assignment_timestamp_ms == START_MS


def test_a_consumer_joining_inside_the_interval_waits_for_the_next_target() -> None:
    consumers = Consumers()
    consumers.join("a")
    consumers.now += 100
    second = consumers.join("b")
    # The group epoch moves on (3); the target stays the one of epoch 2, which has nothing
    # for b: b gets epoch 2 and no partitions, a keeps all four.
    assert (second.member_epoch, second.assignment) == (2, frozenset())
    group = consumers.group
    assert (group.group_epoch, group.assignment_epoch, group.state_name) == (3, 2, "Assigning")
    inside = consumers.beat("a", 2)
    assert (inside.member_epoch, inside.assignment) == (2, None)
    assert consumers.group.members["a"].assigned == parts(0, 1, 2, 3)

    consumers.now = START_MS + INTERVAL_MS  # the first heartbeat after the interval computes
    told = consumers.beat("b", 2)
    group = consumers.group
    assert (group.assignment_epoch, group.assignment_timestamp_ms) == (3, consumers.now)
    assert told.member_epoch == 3 and group.members["b"].state == UNRELEASED
    revoking = consumers.beat("a", 2)
    assert revoking.assignment is not None and len(revoking.assignment) == 2
    assert consumers.group.members["a"].state == UNREVOKED


def test_a_consumer_group_whose_last_member_left_is_assigned_at_once_again() -> None:
    consumers = Consumers()
    consumers.join("a")
    consumers.now += 10
    consumers.beat("a", -1)
    assert consumers.group.assignment_timestamp_ms == 0
    consumers.now += 10
    again = consumers.join("b")
    assert (again.member_epoch, again.assignment) == (4, parts(0, 1, 2, 3))


def test_no_interval_computes_with_every_new_epoch() -> None:
    consumers = Consumers(interval_ms=0)
    consumers.join("a")
    second = consumers.join("b")
    assert second.member_epoch == 3 and consumers.group.assignment_epoch == 3


def test_the_consumer_assignment_time_is_written_as_kafka_writes_it() -> None:
    from kemu.coordinator.group.consumer.persistence import ImageBuilder, diff, image_of
    from kemu.coordinator.group.consumer.records import ConsumerRecordKey, TargetEpochValue
    from kemu.coordinator.group.records import decode_record, encode_key, encode_value

    key = ConsumerRecordKey(6, "g")
    plain, stamped = TargetEpochValue(3), TargetEpochValue(3, 1_700_000_000_123)
    # version 0, AssignmentEpoch, then the tagged fields: none, or tag 0 of 8 bytes.
    assert encode_value(plain).hex() == "00000000000300"
    assert encode_value(stamped).hex() == "0000000000030100080000018bcfe5687b"
    for value in (plain, stamped):
        assert decode_record(encode_key(key), encode_value(value)) == (key, value)

    consumers = Consumers()
    consumers.join("a")
    consumers.now += 100
    consumers.join("b")  # inside the interval: the group epoch moves, the target does not
    builder = ImageBuilder()
    for record_key, value in diff("g", None, image_of(consumers.group)):
        builder.apply(record_key, value)
    ((rebuilt, _),) = builder.groups(now_ms=consumers.now, session_timeout_ms=45_000)
    assert (rebuilt.group_epoch, rebuilt.assignment_epoch) == (3, 2)
    assert rebuilt.assignment_timestamp_ms == START_MS  # the interval holds across a restart


# --- share groups ------------------------------------------------------------------------------


@dataclass
class Shares:
    interval_ms: int = INTERVAL_MS
    now: int = START_MS
    registry: GroupRegistry = field(default_factory=GroupRegistry)

    def __post_init__(self) -> None:
        settings = MembershipSettings(45_000, 500, 100, assignment_interval_ms=self.interval_ms)
        self.coordinator = ShareGroupCoordinator(self.registry, lambda group_id: settings)

    def beat(self, member: str, epoch: int, topics: tuple[str, ...] | None = None) -> Any:
        request = ShareHeartbeat("s", member, epoch, subscribed_topic_names=topics)
        return self.coordinator.heartbeat(request, Consumers.topics, self.now)

    def join(self, member: str) -> ShareHeartbeatResult:
        joined: ShareHeartbeatResult = self.beat(member, 0, ("t",))
        return joined

    def initialize(self) -> None:
        """The share state of the partitions the join asked for is written (by the service)."""
        self.coordinator.partitions_initialized("s", [(T, index) for index in range(4)])

    @property
    def group(self) -> ShareGroup:
        found = self.registry.get("s")
        assert isinstance(found, ShareGroup)
        return found


def test_a_share_member_gets_its_partitions_at_the_first_heartbeat_after_the_interval() -> None:
    shares = Shares()
    joined = shares.join("m")  # a new group: a target at once (empty: nothing initialized yet)
    assert (joined.member_epoch, joined.assignment) == (2, frozenset())
    shares.initialize()
    shares.now += 500  # the 500 ms heartbeat of kemu's pytest plugin
    early = shares.beat("m", 2)
    # Initialized partitions wait to be assigned: the epoch goes up, the target does not.
    assert early.member_epoch == 2 and early.assignment is None
    assert (shares.group.group_epoch, shares.group.assignment_epoch) == (3, 2)
    shares.now = START_MS + INTERVAL_MS
    assigned = shares.beat("m", 2)
    assert (assigned.member_epoch, assigned.assignment) == (3, parts(0, 1, 2, 3))
    assert shares.group.assignment_timestamp_ms == shares.now


def test_without_an_interval_the_share_member_is_assigned_on_its_second_heartbeat() -> None:
    shares = Shares(interval_ms=0)
    shares.join("m")
    shares.initialize()
    shares.now += 500
    assigned = shares.beat("m", 2)
    assert (assigned.member_epoch, assigned.assignment) == (3, parts(0, 1, 2, 3))


def test_the_share_group_resets_its_assignment_time_when_empty_and_keeps_it_on_disk() -> None:
    from kemu.coordinator.group.share import records as share_records
    from kemu.coordinator.group.share.legacy import group_from_json

    shares = Shares()
    shares.join("m")
    log = share_records.ShareImageBuilder()
    image = share_records.image_of(shares.group, lambda topic_id: "t")
    for key, value in share_records.diff("s", None, image):
        encoded = share_records.encode_value(value) if value is not None else None
        log.apply(key, share_records.decode_value(key, encoded))
    replayed = share_records.group_from_image("s", log.images["s"], 0)
    assert replayed.assignment_timestamp_ms == START_MS
    # a share-groups file of an older kemu had no assignment time
    older = {
        "group_epoch": 1,
        "assignment_epoch": 1,
        "members": {},
        "target": {},
        "subscribed_metadata": {},
        "initialized": {},
    }
    assert group_from_json("s", older, 0).assignment_timestamp_ms == 0
    shares.beat("m", -1)
    assert shares.group.assignment_timestamp_ms == 0


# --- settings ----------------------------------------------------------------------------------


def test_kemu_serve_sets_both_intervals_to_zero_and_kafkas_default_is_one_second() -> None:
    from kemu.config.definitions import BrokerConfig
    from kemu.config.timing import profile_properties
    from kemu.coordinator.group.config import GroupConfigStore

    served = GroupConfigStore(BrokerConfig.load(None, [], base=profile_properties("fast")))
    kafka = GroupConfigStore(BrokerConfig.load(None, [], base={}))
    for name in ("consumer.assignment.interval.ms", "share.assignment.interval.ms"):
        assert (served.value("g", name), kafka.value("g", name)) == ("0", "1000")
    restored = GroupConfigStore(
        BrokerConfig.load(
            None, ["group.consumer.assignment.interval.ms=1000"], base=profile_properties("fast")
        )
    )
    assert restored.value("g", "consumer.assignment.interval.ms") == "1000"


def test_the_service_reads_each_groups_own_interval() -> None:
    """The settings the coordinators get are the group's config over the broker's, as Kafka's
    consumerGroupAssignmentIntervalMs / shareGroupAssignmentIntervalMs read them."""
    from kemu.coordinator.group.config import group_config_store
    from kemu.coordinator.group.service import group_coordinator
    from tests.unit.broker.handlers.test_group_handlers import Broker

    broker = Broker(**{"group.share.assignment.interval.ms": "250"})
    service = group_coordinator(broker.runtime)
    group_config_store(broker.runtime).overrides["slow"] = {
        "consumer.assignment.interval.ms": "2000"
    }
    assert service.consumer_settings("slow").assignment_interval_ms == 2_000
    assert service.consumer_settings("other").assignment_interval_ms == 0
    assert service.membership_settings("other").assignment_interval_ms == 250
