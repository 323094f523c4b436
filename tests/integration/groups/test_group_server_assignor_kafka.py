"""A KIP-848 consumer group's preferred server assignor, on kemu beside a real Apache Kafka 4.4.0
(bench's jars; that side skipped without java or them). Both servers get the same hand-built
ConsumerGroupHeartbeats; the group's ``__consumer_offsets`` records (by type, in log order) and
the epochs answered are compared.

Kafka 4.4.0's heartbeat bumps the group epoch when the group's preferred assignor (the
ServerAssignor most members name, ``uniform`` when none does) is another once the heartbeat is
counted (``hasPreferredServerAssignorChanged``), whether or not the subscription changed, and
that assignor computes the target. Ties go to the first in the order of the Java map holding
the counts: before the heartbeat ``uniform``, after it the name its member put back last
(``consumer.preferred_assignor``).

- A join with only a regex nothing matches yet, naming ``range``: the preferred assignor goes
  from the default ``uniform`` to ``range``, so the join writes the member (5), the group epoch
  (3), the target member (7), the target metadata (6) and the assignment (8), at member epoch 2;
  the resolution (16) follows. Naming ``uniform`` it writes 5 and 8 alone at epoch 1
  (``test_group_record_order_kafka.py``).
- A stable member naming ``range`` in a later heartbeat, same subscription: 5, 3, 6, 8 (its
  target did not change: no 7), a new epoch; naming it again: nothing; naming ``uniform``
  again: 5, 3, 6, 8 and another epoch.
- One member naming ``uniform``, a second joining with ``range``, two topics of one partition:
  ``range`` computes the target (one member gets both partitions; ``uniform`` would give one
  each); from then on each heartbeat of the ``range`` member bumps the epoch (the tie read
  before it goes to ``uniform``, after it to ``range``), the other's do not, and
  ConsumerGroupDescribe names ``uniform``.
- A ServerAssignor Kafka does not have (the empty name too) is UNSUPPORTED_ASSIGNOR, "ServerAssignor
  <name> is not supported. Supported assignors: uniform, range.", from the request's validation:
  on a leave and for a group the coordinator does not hold as well.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from kemu.protocol.errors import ErrorCode
from tests.integration.groups import consumer_wire
from tests.integration.groups.consumer_wire import Broker, Partition, wait_for
from tests.integration.groups.test_group_record_order_kafka import (
    CURRENT,
    GROUP_EPOCH,
    MEMBER,
    REGULAR_EXPRESSION,
    TARGET_EPOCH,
    TARGET_MEMBER,
    group_records,
)
from tests.integration.parity import kemu_or_kafka
from tests.integration.txn.wire_parity import Server, coordinator_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

WAIT_S = 60.0  # a bound for failing, not a measurement


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


class Member:
    """A member on the wire: its id, epoch and what it owns (it owns what it is assigned)."""

    def __init__(self, broker: Broker, group: str) -> None:
        self.broker, self.group = broker, group
        self.member_id = uuid.uuid4().hex
        self.epoch = 0
        self.owned: frozenset[Partition] = frozenset()

    def beat(
        self,
        names: tuple[str, ...] | None = None,
        regex: str | None = None,
        assignor: str | None = None,
    ) -> int:
        """One heartbeat owning what the member owns; the epoch answered."""
        answer = consumer_wire.heartbeat(
            self.broker.client,
            self.group,
            self.member_id,
            self.epoch,
            topic_partitions=consumer_wire.owned_topic_partitions(self.broker.ids, self.owned),
            subscribed=names,
            regex=regex,
            assignor=assignor,
        )
        assert answer.error_code == ErrorCode.none, answer
        self.epoch = int(answer.member_epoch)
        if answer.assignment is not None:
            self.owned = self.broker.named(answer.assignment.topic_partitions)
        return self.epoch


def settle(*members: Member, holding: frozenset[Partition]) -> None:
    """Heartbeat each member in turn until together they hold ``holding`` and a round changes
    nothing they own (epochs may move on: a tie's range member bumps the epoch with each
    heartbeat). Kafka's coordinator may learn of a topic created just before a heartbeat later."""
    deadline = time.monotonic() + WAIT_S
    while True:
        before = [m.owned for m in members]
        for member in members:
            member.beat()
        after = [m.owned for m in members]
        if after == before and frozenset().union(*after) == holding:
            return
        assert time.monotonic() < deadline, "timed out waiting for the members to settle"
        time.sleep(0.05)


def types_since(server: Server, group: str, start: int) -> list[int]:
    return [t for t, _, _ in group_records(server.bootstrap, group)[start:]]


def test_a_regex_only_join_naming_range_bumps_the_epoch(server: Server) -> None:
    suffix = uuid.uuid4().hex[:8]
    broker = Broker(server)
    try:
        group = f"assignor-regex-{suffix}"
        coordinator_ready(broker.client, 0, group)
        member = Member(broker, group)
        epoch = member.beat(regex=f"asr-{suffix}-.*", assignor="range")
        wait_for(lambda: REGULAR_EXPRESSION in types_since(server, group, 0), "the regex resolved")
        written = types_since(server, group, 0)
    finally:
        broker.close()
    assert epoch == 2
    assert written == [
        MEMBER,
        GROUP_EPOCH,
        TARGET_MEMBER,
        TARGET_EPOCH,
        CURRENT,
        REGULAR_EXPRESSION,
    ]


def test_naming_another_assignor_bumps_the_epoch(server: Server) -> None:
    suffix = uuid.uuid4().hex[:8]
    broker = Broker(server)
    try:
        group, topic = f"assignor-switch-{suffix}", f"assignor-switch-{suffix}"
        broker.create_topic(topic, 2)
        coordinator_ready(broker.client, 0, group)
        member = Member(broker, group)
        member.beat(names=(topic,))
        settle(member, holding=frozenset({(topic, 0), (topic, 1)}))
        steps = []
        for assignor in ("range", "range", "uniform"):
            start, epoch = len(group_records(server.bootstrap, group)), member.epoch
            member.beat(names=(topic,), assignor=assignor)
            steps.append((member.epoch - epoch, types_since(server, group, start)))
    finally:
        broker.close()
    changed = (1, [MEMBER, GROUP_EPOCH, TARGET_EPOCH, CURRENT])
    assert steps == [changed, (0, []), changed]


def test_a_tie_of_range_and_uniform(server: Server) -> None:
    suffix = uuid.uuid4().hex[:8]
    broker = Broker(server)
    try:
        group = f"assignor-tie-{suffix}"
        topics = (f"assignor-tie-{suffix}-a", f"assignor-tie-{suffix}-b")
        for topic in topics:
            broker.create_topic(topic, 1)
        coordinator_ready(broker.client, 0, group)
        plain, ranged = Member(broker, group), Member(broker, group)
        every = frozenset((topic, 0) for topic in topics)
        plain.beat(names=topics, assignor="uniform")
        settle(plain, holding=every)
        ranged.beat(names=topics, assignor="range")
        settle(plain, ranged, holding=every)
        # ``range`` computed the target: one member holds both topics' partition
        held = sorted([len(plain.owned), len(ranged.owned)])
        described = broker.describe(group).assignor_name
        start, group_epoch = len(group_records(server.bootstrap, group)), ranged.epoch
        epochs = [ranged.beat(), ranged.beat(), plain.beat(), plain.beat()]
        written = types_since(server, group, start)
    finally:
        broker.close()
    assert held == [0, 2]
    assert described == "uniform"
    # each heartbeat of the range member: a new epoch, its target (same partitions) stamped;
    # the uniform member's first heartbeat takes the last epoch, its second changes nothing
    assert epochs == [group_epoch + 1, group_epoch + 2, group_epoch + 2, group_epoch + 2]
    assert written == [GROUP_EPOCH, TARGET_EPOCH, CURRENT] * 2 + [CURRENT], written


@pytest.mark.parametrize(
    ("epoch", "assignor"),
    [
        (0, ""),  # a join naming the empty name
        (0, "sticky"),
        (5, "sticky"),  # a heartbeat to a group the coordinator does not hold
        (-1, "sticky"),  # a leave, likewise
    ],
)
def test_an_unknown_assignor_is_refused_before_the_group_is_looked_at(
    server: Server, epoch: int, assignor: str
) -> None:
    broker = Broker(server)
    try:
        group = f"assignor-unknown-{uuid.uuid4().hex[:8]}"
        coordinator_ready(broker.client, 0, group)
        answer = consumer_wire.heartbeat(
            broker.client,
            group,
            uuid.uuid4().hex,
            epoch,
            topic_partitions=(),
            subscribed=("any",),
            assignor=assignor,
        )
    finally:
        broker.close()
    assert (answer.error_code, answer.error_message) == (
        ErrorCode.unsupported_assignor,
        f"ServerAssignor {assignor} is not supported. Supported assignors: uniform, range.",
    )
