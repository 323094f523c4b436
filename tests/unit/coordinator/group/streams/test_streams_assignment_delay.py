"""``streams.initial.rebalance.delay.ms`` and ``streams.assignment.interval.ms`` as Kafka 4.4.0's
group coordinator applies them (``GroupMetadataManager.streamsGroupHeartbeat``,
``maybeUpdateStreamsTargetAssignment``, ``computeDelayedTargetAssignment``), on a virtual clock:

- the first member of an empty group starts the initial delay; until it ends every member
  reconciles towards an empty target at the last assignment epoch and is told ASSIGNMENT_DELAYED;
  when it ends (the coordinator's timer) the target of the current group epoch is computed;
- a new target is computed at most once per assignment interval; a heartbeat inside it is told
  ASSIGNMENT_DELAYED and the next one after it computes the target;
- the assignment time is kept in TargetAssignmentMetadata's tag 0 (KIP-1263) and reset when the
  group empties.
"""

from __future__ import annotations

from typing import Any

from kemu.coordinator.group.registry import GroupRegistry
from kemu.coordinator.group.streams.group import StreamsGroupCoordinator, can_compute_target
from kemu.coordinator.group.streams.model import (
    StreamsGroup,
    StreamsHeartbeat,
    StreamsHeartbeatResult,
    StreamsSettings,
)
from kemu.coordinator.group.streams.records import (
    TARGET_METADATA,
    StreamsRecordKey,
    StreamsTargetEpochValue,
    decode_value,
    encode_value,
)
from kemu.coordinator.group.streams.topology import ASSIGNMENT_DELAYED
from tests.unit.coordinator.group.streams.test_streams_group import COUNT

INITIAL = (ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay.")
INTERVAL = (ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment interval.")


class Clocked:
    """The sans-IO coordinator with a virtual clock and the group's settings."""

    def __init__(self, delay_ms: int = 0, interval_ms: int = 0) -> None:
        self.topics = {"in": 2, "app-words-repartition": 2, "app-counts-changelog": 2}
        self.settings = StreamsSettings(
            initial_rebalance_delay_ms=delay_ms, assignment_interval_ms=interval_ms
        )
        self.coordinator = StreamsGroupCoordinator(GroupRegistry(), lambda _: self.settings)
        self.now = 1_000_000

    def beat(self, member: str, epoch: int, **fields: object) -> StreamsHeartbeatResult:
        if epoch == 0:
            fields.setdefault("topology", COUNT)
            fields.setdefault("rebalance_timeout_ms", 30_000)
            fields.setdefault("process_id", f"process-{member}")
        request = StreamsHeartbeat("app", member, epoch, **fields)  # type: ignore[arg-type]
        return self.coordinator.heartbeat(request, self.topics.get, self.now)

    def fire_timers(self) -> list[str]:
        """What the service's timer does at ``now``."""
        deadline = self.coordinator.next_deadline_ms()
        assert deadline is not None and deadline <= self.now
        return self.coordinator.end_initial_delays(self.now)

    @property
    def group(self) -> StreamsGroup:
        group = self.coordinator.group("app")
        assert group is not None
        return group


def test_the_first_assignment_of_a_new_group_waits_for_the_initial_delay() -> None:
    c = Clocked(delay_ms=3000)
    a = c.beat("a", 0)
    # As Kafka 4.4.0: the group epoch moves to 2, the member reconciles to the empty target of
    # assignment epoch 1 and is told why.
    assert (a.member_epoch, a.assignment, a.status) == (1, a.assignment, (INITIAL,))
    assert a.assignment is not None and a.assignment.is_empty()
    assert (c.group.group_epoch, c.group.assignment_epoch, c.group.state_name) == (
        2,
        1,
        "Assigning",
    )
    assert c.coordinator.next_deadline_ms() == c.now + 3000

    c.now += 1000
    b = c.beat("b", 0)  # joins during the delay: nothing assigned either, no new delay
    assert (b.member_epoch, b.status) == (1, (INITIAL,))
    assert c.group.initial_delay_deadline_ms == c.now + 2000

    c.now += 2000
    assert c.fire_timers() == ["app"]
    assert (c.group.group_epoch, c.group.assignment_epoch) == (3, 3)
    assert c.group.assignment_timestamp_ms == c.now
    assert sorted(len(t.active) for t in c.group.target.values()) == [2, 2]

    moved = c.beat("a", 1, owned=a.assignment)
    assert moved.member_epoch == 3 and moved.status == ()
    assert moved.assignment is not None and len(moved.assignment.active) == 2


def test_a_heartbeat_after_the_deadline_ends_the_delay_before_the_timer() -> None:
    c = Clocked(delay_ms=3000)
    c.beat("a", 0)
    c.now += 3000
    a = c.beat("a", 1)
    assert a.member_epoch == 2 and a.status == ()
    assert a.assignment is not None and len(a.assignment.active) == 4
    assert c.coordinator.end_initial_delays(c.now) == []


def test_an_emptied_group_delays_its_next_first_assignment_again() -> None:
    c = Clocked(delay_ms=3000)
    c.beat("a", 0)
    c.now += 3000
    c.fire_timers()
    a = c.beat("a", 1)
    c.beat("a", -1)
    group = c.group
    # Kafka's streamsGroupFenceMember: the last member leaving stamps the empty target with the
    # new epoch and resets the assignment time.
    assert (group.group_epoch, group.assignment_epoch, group.assignment_timestamp_ms) == (3, 3, 0)
    assert a.member_epoch == 2
    c.now += 10_000
    again = c.beat("a2", 0)
    assert (again.member_epoch, again.status) == (3, (INITIAL,))


def test_no_delay_assigns_on_the_first_heartbeat() -> None:
    c = Clocked(delay_ms=0)
    a = c.beat("a", 0)
    assert a.member_epoch == 2 and a.status == ()
    assert c.coordinator.next_deadline_ms() == c.now + 45_000  # only the session


def test_targets_are_computed_at_most_once_per_assignment_interval() -> None:
    c = Clocked(interval_ms=1000)
    a = c.beat("a", 0)  # never computed before: at once
    assert a.member_epoch == 2 and c.group.assignment_timestamp_ms == c.now
    c.now += 400
    b = c.beat("b", 0)
    # a new group epoch, but the last target is younger than the interval
    assert (b.member_epoch, b.status) == (2, (INTERVAL,))
    assert (c.group.group_epoch, c.group.assignment_epoch) == (3, 2)
    c.now += 400
    assert c.beat("a", 2, owned=a.assignment).status == (INTERVAL,)
    c.now += 200  # 1000 ms after the last target
    step = c.beat("a", 2, owned=a.assignment)
    assert step.status == () and c.group.assignment_epoch == 3
    assert step.assignment is not None and len(step.assignment.active) == 2  # a gives two up


def test_the_interval_does_not_delay_a_heartbeat_without_a_new_epoch() -> None:
    c = Clocked(interval_ms=60_000)
    a = c.beat("a", 0)
    c.now += 10
    again = c.beat("a", a.member_epoch, owned=a.assignment)
    assert again.status == () and again.member_epoch == a.member_epoch


def test_can_compute_target_is_kafkas_rule() -> None:
    assert can_compute_target(0, 1000, 5)  # never computed
    assert can_compute_target(5, 0, 5)  # no interval
    assert not can_compute_target(5, 1000, 1004)
    assert can_compute_target(5, 1000, 1005)


def test_the_assignment_time_is_tag_0_of_the_target_metadata_record() -> None:
    key = StreamsRecordKey(TARGET_METADATA, "g")
    plain = StreamsTargetEpochValue(3)
    stamped = StreamsTargetEpochValue(3, 1_700_000_000_123)
    # AssignmentEpoch, then the tagged fields: none, or tag 0 with 8 bytes (Kafka's default 0 is
    # not written).
    assert encode_value(plain).hex() == "00000000000300"
    assert encode_value(stamped).hex() == "0000000000030100080000018bcfe5687b"
    assert decode_value(key, encode_value(stamped)) == stamped
    assert decode_value(key, encode_value(plain)) == plain


def test_kemu_serve_assigns_a_new_group_at_once_and_kafkas_timing_waits() -> None:
    """--timing fast (kemu serve's default): no initial delay and no assignment interval, as for
    consumer and share groups; --timing kafka keeps Kafka's 3000 ms and 1000 ms."""
    from kemu.config.definitions import BrokerConfig
    from kemu.config.timing import profile_properties
    from kemu.coordinator.group.config import GroupConfigStore

    served = GroupConfigStore(BrokerConfig.load(None, [], base=profile_properties("fast")))
    assert served.value("g", "streams.initial.rebalance.delay.ms") == "0"
    assert served.value("g", "streams.assignment.interval.ms") == "0"
    kafka = GroupConfigStore(BrokerConfig.load(None, [], base=profile_properties("kafka")))
    assert kafka.value("g", "streams.initial.rebalance.delay.ms") == "3000"
    assert kafka.value("g", "streams.assignment.interval.ms") == "1000"


def test_the_heartbeat_answers_the_groups_own_streams_configs() -> None:
    """Kafka 4.4.0 takes every streams setting the heartbeat answers from the group's config
    first (GroupMetadataManager.streamsGroup*), internal ones included; they are checked and
    clamped against the broker's group.streams.min/max.* as GroupConfig does."""
    import pytest

    from kemu.config.definitions import BrokerConfig, InvalidConfig
    from kemu.coordinator.group.config import GroupConfigStore

    store = GroupConfigStore(BrokerConfig({}))
    overrides = {
        "streams.task.offset.interval.ms": "20000",
        "streams.acceptable.recovery.lag": "12345678901",
        "streams.num.warmup.replicas": "3",
        "streams.num.standby.replicas": "2",
        "streams.initial.rebalance.delay.ms": "0",
        "streams.assignment.interval.ms": "0",
    }
    store.validate(overrides)
    store.set_overrides("app", overrides)
    assert store.value("app", "streams.acceptable.recovery.lag") == "12345678901"
    assert store.value("other", "streams.task.offset.interval.ms") == "60000"
    # internal: settable, not described
    described = {d.name for d in store.describe("app")}
    assert "streams.num.standby.replicas" in described
    assert not described & {"streams.task.offset.interval.ms", "streams.num.warmup.replicas"}
    for name, value, message in (
        ("streams.task.offset.interval.ms", "14999", "must be greater than or equal to 15000"),
        ("streams.num.warmup.replicas", "21", "must be less than or equal to 20"),
        ("streams.num.standby.replicas", "3", "must be less than or equal to 2"),
        ("streams.acceptable.recovery.lag", "-1", "Value must be at least 0"),
    ):
        with pytest.raises(InvalidConfig, match=message):
            store.validate({name: value})
    # a broker ceiling lowered later clamps the group's value
    store.broker = BrokerConfig({"group.streams.max.standby.replicas": "1"})
    assert store.value("app", "streams.num.standby.replicas") == "1"


async def test_the_coordinators_timer_ends_the_delay_through_the_wire() -> None:
    """The service arms its timer on the delay's deadline; a virtual clock's advance fires it and
    the target is computed (and written) before the member's next heartbeat."""
    import datetime

    from kemu.cluster.clock import VirtualClock
    from kemu.cluster.context import Runtime
    from kemu.coordinator.group.service import group_coordinator
    from tests.unit.broker.handlers.test_classic_group_handlers import Broker

    broker = Broker()
    clock = VirtualClock(1_000_000)
    broker.runtime = Runtime(cluster=broker.cluster, clock=clock)
    broker.cluster.create_topic("in", 2, 1)
    stateless = broker.nested(
        88, 0, "Topology", epoch=0,
        subtopologies=(
            broker.nested(
                88, 0, "Subtopology", subtopology_id="0", source_topics=("in",),
                repartition_sink_topics=(), state_changelog_topics=(),
                repartition_source_topics=(), copartition_groups=(),
            ),
        ),
    )  # fmt: skip
    base = {
        "group_id": "app", "member_id": "m1", "endpoint_information_epoch": 0,
        "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
        "client_tags": None, "task_offsets": None, "task_end_offsets": None,
    }  # fmt: skip

    async def beat(**fields: object) -> Any:
        return await broker.send(broker.request(88, 0, **{**base, **fields}))

    joined = await beat(
        member_epoch=0,
        rebalance_timeout=datetime.timedelta(seconds=30),
        topology=stateless,
        process_id="p1",
        active_tasks=(),
        standby_tasks=(),
        warmup_tasks=(),
        client_tags=(),
    )
    assert (joined.member_epoch, joined.active_tasks) == (1, ())
    assert [(s.status_code, s.status_detail) for s in joined.status] == [INITIAL]
    group = group_coordinator(broker.runtime).streams.coordinator.group("app")
    assert group is not None and (group.group_epoch, group.assignment_epoch) == (2, 1)
    clock.advance(2999)
    assert group.assignment_epoch == 1
    clock.advance(1)  # Kafka's code default, 3000 ms: the broker config sets none
    assert group.assignment_epoch == 2 and group.initial_delay_deadline_ms is None
    assigned = await beat(member_epoch=1)
    assert assigned.member_epoch == 2 and assigned.status == ()
    assert [(t.subtopology_id, sorted(t.partitions)) for t in assigned.active_tasks] == [
        ("0", [0, 1])
    ]
