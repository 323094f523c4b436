"""A static KIP-848 consumer group member's temporary leave (ConsumerGroupHeartbeat with member
epoch -2), on kemu beside a real Apache Kafka 4.4.0 (bench's jars; that side skipped without
java or them). Both servers get the same hand-built requests and the same assertions.

This is what a Java consumer with ``group.instance.id`` does when it is closed (a rolling
restart): Kafka 4.4.0's ``consumerGroupStaticMemberGroupLeave`` keeps the member, its epoch set
to -2 and its assignment kept (pending revocations dropped), and writes only its current
assignment record; the answer carries the member id and epoch -2. The group epoch does not move
and the other members are not rebalanced. A new member id joining with the same instance id
(epoch 0) replaces it (``getOrMaybeSubscribeStaticConsumerGroupMember``, ``replaceMember``):
the old id's records are deleted, the new one takes its assignment and target and, with the
same subscription, gets back the same partitions at the group's epoch, without a new group
epoch; the old member id is then FENCED_INSTANCE_ID. Nobody rejoining, the member's session
(from its last heartbeat before the leave) runs out and it is removed like any other member:
the group epoch goes up and the others take its partitions. A rejoin with another subscription
bumps the group epoch, as any subscription change does.

The session timeout is the group's (``consumer.session.timeout.ms``), at its minimum of 45 s on
the shared Kafka (``group.consumer.min.session.timeout.ms``); kemu's side lowers the minimum and
gives the group whose member expires a session of a few seconds.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kemu.protocol.errors import ErrorCode
from tests.integration.groups import consumer_wire
from tests.integration.groups.consumer_wire import Broker, Partition
from tests.integration.parity import kemu_or_kafka
from tests.integration.txn.wire_parity import Server, coordinator_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

STATIC_LEAVE_EPOCH = -2
INSTANCE = "instance-a"
WAIT_S = 60.0  # a bound for failing, not a measurement (beyond the 45 s session)
# kemu's side: the expiring group's session (Kafka's cannot be below 45 s on the shared server)
KEMU_SESSION_MS = 5_000
KEMU_PROPERTIES = {
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "500",
}


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory, KEMU_PROPERTIES) as chosen:
        yield chosen


@dataclass(frozen=True)
class Answer:
    error: ErrorCode
    member_id: str
    epoch: int
    interval_ms: int
    assignment: frozenset[Partition] | None  # None: the answer carries none


@dataclass
class Member:
    broker: Broker
    group: str
    instance_id: str | None = None
    member_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    epoch: int = 0
    owned: frozenset[Partition] = frozenset()

    def send(self, epoch: int, subscribed: tuple[str, ...] | None = None) -> Answer:
        """One ConsumerGroupHeartbeat at ``epoch`` owning what the member owns (a full one when
        it names a subscription); nothing of the member changes."""
        owned = consumer_wire.owned_topic_partitions(self.broker.ids, self.owned)
        answer = consumer_wire.heartbeat(
            self.broker.client,
            self.group,
            self.member_id,
            epoch,
            topic_partitions=owned if epoch >= 0 else None,
            instance_id=self.instance_id,
            subscribed=subscribed,
            assignor="uniform" if epoch == 0 else None,
        )
        assignment = answer.assignment
        return Answer(
            ErrorCode(answer.error_code),
            answer.member_id,
            int(answer.member_epoch),
            int(answer.heartbeat_interval.total_seconds() * 1000),
            None if assignment is None else self.broker.named(assignment.topic_partitions),
        )

    def heartbeat(self, subscribed: tuple[str, ...] | None = None) -> Answer:
        """A heartbeat at the member's epoch; it takes the answer's epoch and assignment."""
        answer = self.send(self.epoch, subscribed)
        assert answer.error == ErrorCode.none, answer
        self.epoch = answer.epoch
        if answer.assignment is not None:
            self.owned = answer.assignment
        return answer

    def join(self, topics: tuple[str, ...]) -> Answer:
        self.owned = frozenset()
        self.epoch = 0
        return self.heartbeat(subscribed=topics)


def settle(broker: Broker, group: str, members: list[Member], partitions: int) -> Any:
    """Heartbeat every member until the group is stable with each at the group epoch, the
    members owning all ``partitions`` between them: the description then. (Kafka's coordinator
    sometimes learns of a topic created just before only after a first target.)"""
    deadline = time.monotonic() + WAIT_S
    while True:
        for member in members:
            member.heartbeat()
        described = broker.describe(group)
        epochs = {m.member_id: m.member_epoch for m in described.members}
        owned = sum(len(m.owned) for m in members)
        if (
            described.group_state == "Stable"
            and owned == partitions
            and all(epochs.get(m.member_id) == described.group_epoch for m in members)
        ):
            for member in members:
                member.heartbeat()  # owning what the last answer gave it
            return broker.describe(group)
        assert time.monotonic() < deadline, f"the group never settled: {described}"
        time.sleep(0.2)


def described_partitions(assignment: Any) -> frozenset[Partition]:
    return frozenset((t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)


def described_member(described: Any, member_id: str) -> Any:
    return next((m for m in described.members if m.member_id == member_id), None)


# --- the temporary leave and a rejoin ------------------------------------------------------------


@dataclass
class Rejoined:
    """Static member A (instance ``INSTANCE``) and member B, stable at ``epoch`` on a topic of
    four partitions (A holding ``held``); A left with epoch -2; then a new member id A2 joined
    with A's instance id (``subscribed``: the same subscription, or one more topic)."""

    server: str
    epoch: int
    held: frozenset[Partition]
    b_held: frozenset[Partition]
    old_id: str
    new_id: str
    on_leave: Answer
    described_after_leave: Any
    b_after_leave: Answer
    old_id_after_leave: ErrorCode
    on_rejoin: Answer
    described_after_rejoin: Any
    old_id_after_rejoin: ErrorCode
    b_after_rejoin: Answer


def leave_and_rejoin(server: Server, more_topics: bool) -> Rejoined:
    suffix = uuid.uuid4().hex[:8]
    topic, other, group = f"static-{suffix}", f"other-{suffix}", f"static-{suffix}"
    broker = Broker(server)
    try:
        broker.create_topic(topic, 4)
        if more_topics:
            broker.create_topic(other, 2)
        coordinator_ready(broker.client, 0, group)
        a = Member(broker, group, INSTANCE)
        b = Member(broker, group)
        a.join((topic,))
        b.join((topic,))
        described = settle(broker, group, [a, b], 4)
        epoch = described.group_epoch
        held, b_held = a.owned, b.owned
        on_leave = a.send(STATIC_LEAVE_EPOCH)
        described_after_leave = broker.describe(group)
        b_after_leave = b.heartbeat()
        old_id_after_leave = a.send(a.epoch).error
        a2 = Member(broker, group, INSTANCE)
        on_rejoin = a2.join((topic, other) if more_topics else (topic,))
        described_after_rejoin = broker.describe(group)
        old_id_after_rejoin = a.send(a.epoch).error
        b_after_rejoin = b.heartbeat()
        return Rejoined(
            server.name,
            epoch,
            held,
            b_held,
            a.member_id,
            a2.member_id,
            on_leave,
            described_after_leave,
            b_after_leave,
            old_id_after_leave,
            on_rejoin,
            described_after_rejoin,
            old_id_after_rejoin,
            b_after_rejoin,
        )
    finally:
        broker.close()


@pytest.fixture(scope="module")
def rejoined(server: Server) -> Rejoined:
    return leave_and_rejoin(server, more_topics=False)


@pytest.fixture(scope="module")
def rejoined_with_more(server: Server) -> Rejoined:
    return leave_and_rejoin(server, more_topics=True)


def test_the_leave_answer_has_the_member_id_and_epoch_minus_two(rejoined: Rejoined) -> None:
    answer = rejoined.on_leave
    assert answer.error == ErrorCode.none
    assert answer.member_id == rejoined.old_id
    assert answer.epoch == STATIC_LEAVE_EPOCH
    assert answer.interval_ms == 0
    assert answer.assignment is None


def test_the_leaving_static_member_stays_with_its_assignment(rejoined: Rejoined) -> None:
    described = rejoined.described_after_leave
    assert described.group_epoch == rejoined.epoch
    assert described.group_state == "Reconciling"  # a member's epoch (-2) is not the group's
    member = described_member(described, rejoined.old_id)
    assert member is not None
    assert member.member_epoch == STATIC_LEAVE_EPOCH
    assert member.instance_id == INSTANCE
    assert described_partitions(member.assignment) == rejoined.held


def test_the_other_members_are_not_rebalanced_by_the_leave(rejoined: Rejoined) -> None:
    assert rejoined.b_after_leave.epoch == rejoined.epoch
    assert rejoined.b_after_leave.assignment is None


def test_the_left_member_id_heartbeating_on_is_fenced(rejoined: Rejoined) -> None:
    """Its epoch (-2 since the leave) is older than the one it sends."""
    assert rejoined.old_id_after_leave == ErrorCode.fenced_member_epoch


def test_a_rejoin_with_the_instance_id_gets_the_partitions_back(rejoined: Rejoined) -> None:
    answer = rejoined.on_rejoin
    assert answer.error == ErrorCode.none
    assert answer.member_id == rejoined.new_id
    assert answer.epoch == rejoined.epoch
    assert answer.assignment == rejoined.held


def test_a_rejoin_replaces_the_member_without_a_new_group_epoch(rejoined: Rejoined) -> None:
    described = rejoined.described_after_rejoin
    assert described.group_epoch == rejoined.epoch
    assert described.group_state == "Stable"
    assert described_member(described, rejoined.old_id) is None
    member = described_member(described, rejoined.new_id)
    assert member.member_epoch == rejoined.epoch
    assert member.instance_id == INSTANCE
    assert described_partitions(member.assignment) == rejoined.held
    assert rejoined.b_after_rejoin.epoch == rejoined.epoch
    assert rejoined.b_after_rejoin.assignment is None


def test_the_replaced_member_id_is_fenced_by_instance_id(rejoined: Rejoined) -> None:
    assert rejoined.old_id_after_rejoin == ErrorCode.fenced_instance_id


def test_a_rejoin_with_another_subscription_bumps_the_group_epoch(
    rejoined_with_more: Rejoined,
) -> None:
    scenario = rejoined_with_more
    described = scenario.described_after_rejoin
    assert described.group_epoch == scenario.epoch + 1
    assert described_member(described, scenario.old_id) is None
    answer = scenario.on_rejoin
    assert answer.error == ErrorCode.none
    assert answer.epoch == scenario.epoch + 1
    # the new target at once (the joining member owns nothing, so nothing waits for a
    # revocation): both partitions of the new topic, and one of the four it held kept
    assert answer.assignment is not None
    assert len(answer.assignment) == 3
    assert len(answer.assignment & scenario.held) == 1


# --- nobody rejoins ------------------------------------------------------------------------------


@dataclass
class Expired:
    server: str
    topic: str
    epoch: int
    old_id: str
    described_after_leave: Any
    described_after_expiry: Any
    b_owned: frozenset[Partition]
    b_epoch: int


@pytest.fixture(scope="module")
def expired(server: Server) -> Expired:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"expire-{suffix}", f"expire-{suffix}"
    broker = Broker(server)
    try:
        broker.create_topic(topic, 4)
        coordinator_ready(broker.client, 0, group)
        if server.name == "kemu":
            broker.set_session_timeout(group, KEMU_SESSION_MS)
        a = Member(broker, group, INSTANCE)
        b = Member(broker, group)
        a.join((topic,))
        b.join((topic,))
        epoch = settle(broker, group, [a, b], 4).group_epoch
        assert a.send(STATIC_LEAVE_EPOCH).error == ErrorCode.none
        described_after_leave = broker.describe(group)
        deadline = time.monotonic() + WAIT_S
        while described_member(broker.describe(group), a.member_id) is not None:
            assert time.monotonic() < deadline, "the left static member never expired"
            b.heartbeat()
            time.sleep(1.0)
        described_after_expiry = broker.describe(group)
        settle(broker, group, [b], 4)
        return Expired(
            server.name,
            topic,
            epoch,
            a.member_id,
            described_after_leave,
            described_after_expiry,
            b.owned,
            b.epoch,
        )
    finally:
        broker.close()


def test_the_left_member_is_there_until_its_session_runs_out(expired: Expired) -> None:
    member = described_member(expired.described_after_leave, expired.old_id)
    assert member is not None
    assert member.member_epoch == STATIC_LEAVE_EPOCH


def test_once_its_session_runs_out_the_others_take_its_partitions(expired: Expired) -> None:
    described = expired.described_after_expiry
    assert described_member(described, expired.old_id) is None
    assert described.group_epoch == expired.epoch + 1
    assert expired.b_owned == frozenset((expired.topic, p) for p in range(4))
    assert expired.b_epoch == expired.epoch + 1
