"""A KIP-848 consumer group member losing a topic, on kemu beside a real Apache Kafka 4.4.0
(bench's jars; that side skipped without java or them). Both servers get the same hand-built
requests and the same assertions.

- The member drops a topic from its subscription (ConsumerGroupHeartbeat whose
  SubscribedTopicNames no longer name it) while the group's assignment interval
  (``consumer.assignment.interval.ms``, 15 s on the group) holds the next target back. Kafka
  4.4.0 bumps the group epoch, computes no target (the group is Assigning), and yet its answer
  to that heartbeat already takes the topic's partitions away, at the member's epoch: its
  ``CurrentAssignmentBuilder`` is told the subscription changed and strips the topics the member
  no longer subscribes to (``updateCurrentAssignment``), and ``computeNextAssignment`` leaves
  them out of the member's target. Once the member owns only the rest it is stable at the same
  epoch, with the group still Assigning; kemu does the same (``consumer.reconciliation``; it
  used to keep the topic's partitions until the next target). At the server's interval (0) the
  heartbeat computes the new target and both revoke at once.
- OffsetCommit v9 from a member for the partitions of a topic deleted since (once Metadata no
  longer shows it): UNKNOWN_TOPIC_OR_PARTITION for each, at the member's epoch, at the older
  epoch under which it held them and at a newer one (v10, naming the topic by its id:
  UNKNOWN_TOPIC_ID). Kafka's broker answers these partitions from its metadata before the
  coordinator sees the request (``KafkaApis.handleOffsetCommitRequest``), as kemu's handler
  does; a live partition in the same request is judged by the member-epoch rules
  (``test_offset_commit_epochs_kafka.py``).

Epochs are compared relative to each other (Kafka's coordinator sometimes learns of a topic
created just before after a first join, which costs it an epoch).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kemu.protocol.errors import ErrorCode
from tests.integration.groups import consumer_wire
from tests.integration.groups.consumer_wire import Broker, Partition
from tests.integration.parity import kemu_or_kafka
from tests.integration.txn.wire_parity import Server, coordinator_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

INTERVAL_MS = "15000"  # group.consumer.max.assignment.interval.ms: the longest a group may ask
WAIT_S = 60.0  # a bound for failing, not a measurement


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


@dataclass
class Answer:
    epoch: int
    assignment: frozenset[Partition] | None  # None: the answer carries none


@dataclass
class Member:
    """A consumer group member on the wire: its epoch and what it owns."""

    broker: Broker
    group: str
    member_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    epoch: int = 0
    owned: frozenset[Partition] = frozenset()

    def heartbeat(self, subscribed: tuple[str, ...] | None = None) -> Answer:
        """One ConsumerGroupHeartbeat owning what the member owns (a full one when it names a
        subscription): its epoch and assignment, the epoch kept."""
        answer = consumer_wire.heartbeat(
            self.broker.client,
            self.group,
            self.member_id,
            self.epoch,
            topic_partitions=consumer_wire.owned_topic_partitions(self.broker.ids, self.owned),
            subscribed=subscribed,
            assignor="uniform" if self.epoch == 0 else None,
        )
        assert answer.error_code == ErrorCode.none, answer
        self.epoch = int(answer.member_epoch)
        assignment = answer.assignment
        return Answer(
            self.epoch,
            None if assignment is None else self.broker.named(assignment.topic_partitions),
        )

    def join(self, topics: tuple[str, ...]) -> Answer:
        """Join subscribed to ``topics``, owning what the answer assigns."""
        answer = self.heartbeat(subscribed=topics)
        self.owned = answer.assignment or frozenset()
        return answer

    def beat_until(self, reached: Callable[[frozenset[Partition]], bool], what: str) -> None:
        """Heartbeat, owning what each answer assigns, until what the member owns satisfies
        ``reached``; then once more, owning it (acknowledged)."""
        deadline = time.monotonic() + WAIT_S
        while not reached(self.owned):
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            answer = self.heartbeat()
            if answer.assignment is not None:
                self.owned = answer.assignment
            else:
                time.sleep(0.1)
        self.heartbeat()


def partitions_of(topic: str, count: int) -> frozenset[Partition]:
    return frozenset((topic, index) for index in range(count))


def described_partitions(assignment: Any) -> frozenset[Partition]:
    """A ConsumerGroupDescribe assignment's partitions (it names their topics)."""
    return frozenset((t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)


# --- dropping a topic from the subscription ----------------------------------------------------


@dataclass
class Dropped:
    """A member subscribed to ``kept`` and ``dropped`` (two partitions each), stable at ``epoch``
    with all four, that then heartbeat without ``dropped`` (still owning all four), then owning
    what that answer left it."""

    epoch: int
    kept: str
    on_drop: Answer
    described_after_drop: Any
    on_acknowledge: Answer
    described_after_acknowledge: Any


def drop_a_topic(server: Server, interval: str | None) -> Dropped:
    suffix = uuid.uuid4().hex[:8]
    kept, dropped, group = f"kept-{suffix}", f"dropped-{suffix}", f"drop-{suffix}"
    broker = Broker(server)
    try:
        broker.create_topic(kept, 2)
        broker.create_topic(dropped, 2)
        coordinator_ready(broker.client, 0, group)
        if interval is not None:
            broker.set_interval(group, interval)
        member = Member(broker, group)
        member.join((kept, dropped))
        member.beat_until(lambda got: len(got) == 4, "the member to own all four partitions")
        epoch = member.epoch
        on_drop = member.heartbeat(subscribed=(kept,))
        described_after_drop = broker.describe(group)
        if on_drop.assignment is not None:
            member.owned = on_drop.assignment
        on_acknowledge = member.heartbeat()
        return Dropped(
            epoch, kept, on_drop, described_after_drop, on_acknowledge, broker.describe(group)
        )
    finally:
        broker.close()


@pytest.fixture(scope="module")
def dropped_within_interval(server: Server) -> Dropped:
    return drop_a_topic(server, INTERVAL_MS)


@pytest.fixture(scope="module")
def dropped_at_the_servers_interval(server: Server) -> Dropped:
    return drop_a_topic(server, None)


def test_dropping_a_topic_within_the_interval_bumps_the_epoch_without_a_target(
    dropped_within_interval: Dropped,
) -> None:
    described = dropped_within_interval.described_after_drop
    assert described.group_state == "Assigning"
    assert described.group_epoch == dropped_within_interval.epoch + 1
    assert described.assignment_epoch == dropped_within_interval.epoch


def test_the_heartbeat_dropping_a_topic_takes_its_partitions_away(
    dropped_within_interval: Dropped,
) -> None:
    scenario = dropped_within_interval
    assert scenario.on_drop.epoch == scenario.epoch
    assert scenario.on_drop.assignment == partitions_of(scenario.kept, 2)


def test_once_revoked_the_member_is_stable_at_its_epoch_while_assigning(
    dropped_within_interval: Dropped,
) -> None:
    scenario = dropped_within_interval
    assert scenario.on_acknowledge.epoch == scenario.epoch
    described = scenario.described_after_acknowledge
    assert described.group_state == "Assigning"
    (member,) = described.members
    assert member.member_epoch == scenario.epoch
    assert described_partitions(member.assignment) == partitions_of(scenario.kept, 2)


def test_at_the_servers_interval_the_new_target_revokes_at_once(
    dropped_at_the_servers_interval: Dropped,
) -> None:
    scenario = dropped_at_the_servers_interval
    assert scenario.on_drop.epoch == scenario.epoch
    assert scenario.on_drop.assignment == partitions_of(scenario.kept, 2)
    assert scenario.on_acknowledge.epoch == scenario.epoch + 1
    assert scenario.described_after_acknowledge.group_state == "Stable"


# --- committing for a deleted topic ------------------------------------------------------------


@dataclass
class Deleted:
    """Member A held all of ``deleted`` (four partitions) and ``live`` (two) at ``old_epoch``,
    gave some to member B and moved to ``epoch``; then ``deleted`` was deleted."""

    broker: Broker
    group: str
    member_id: str
    old_epoch: int
    epoch: int
    deleted_id: uuid.UUID
    kept: frozenset[Partition]  # of the deleted topic, held since old_epoch
    given: frozenset[Partition]  # of the deleted topic, held at old_epoch only
    live: frozenset[Partition]  # all held at old_epoch
    given_live: frozenset[Partition]  # held at old_epoch only


@pytest.fixture(scope="module")
def deleted(server: Server) -> Iterator[Deleted]:
    suffix = uuid.uuid4().hex[:8]
    gone, live, group = f"deleted-{suffix}", f"live-{suffix}", f"deleted-{suffix}"
    broker = Broker(server)
    try:
        broker.create_topic(gone, 4)
        broker.create_topic(live, 2)
        coordinator_ready(broker.client, 0, group)
        first = Member(broker, group)
        first.join((gone, live))
        first.beat_until(lambda got: len(got) == 6, "A to own all six partitions")
        old_epoch, held = first.epoch, first.owned
        Member(broker, group).join((gone, live))  # B: the new target gives it some of A's
        first.beat_until(lambda got: got < held, "A's revocation")
        assert first.epoch > old_epoch
        given = held - first.owned
        deleted_id = broker.ids[gone]
        broker.delete_topic(gone)
        scenario = Deleted(
            broker,
            group,
            first.member_id,
            old_epoch,
            first.epoch,
            deleted_id,
            kept=frozenset(p for p in first.owned if p[0] == gone),
            given=frozenset(p for p in given if p[0] == gone),
            live=partitions_of(live, 2),
            given_live=frozenset(p for p in given if p[0] == live),
        )
        # A keeps three of the six (which ones varies: Kafka's assignor orders topics by id),
        # so at least one of the deleted topic's and gives at least one away
        assert scenario.kept and scenario.given, scenario
        yield scenario
    finally:
        broker.close()


def commit(scenario: Deleted, epoch: int, partitions: frozenset[Partition]) -> Any:
    return scenario.broker.commit(scenario.group, scenario.member_id, epoch, partitions)


def unknown(partitions: frozenset[Partition]) -> dict[Partition, ErrorCode]:
    return dict.fromkeys(partitions, ErrorCode.unknown_topic_or_partition)


def test_a_commit_for_a_deleted_topic_at_the_members_epoch_is_unknown(deleted: Deleted) -> None:
    assert commit(deleted, deleted.epoch, deleted.kept) == unknown(deleted.kept)


def test_a_commit_for_a_deleted_topic_at_an_older_epoch_is_unknown(deleted: Deleted) -> None:
    """Under the older epoch the member held these partitions (KIP-1251 would take the commit
    of those it still holds): the broker answers first."""
    assert commit(deleted, deleted.old_epoch, deleted.kept) == unknown(deleted.kept)
    assert commit(deleted, deleted.old_epoch, deleted.given) == unknown(deleted.given)


def test_a_commit_for_a_deleted_topic_at_a_newer_epoch_is_unknown(deleted: Deleted) -> None:
    assert commit(deleted, deleted.epoch + 1, deleted.kept) == unknown(deleted.kept)


def test_live_partitions_beside_a_deleted_topic_follow_the_epoch_rules(deleted: Deleted) -> None:
    """The coordinator judges the rest: at the older epoch, the live partitions are taken if
    the member kept them all and are all stale if it gave one away (the first partition that
    fails fails the request); at its epoch they are taken."""
    both = deleted.kept | deleted.live
    at_old = ErrorCode.stale_member_epoch if deleted.given_live else ErrorCode.none
    expected = unknown(deleted.kept) | dict.fromkeys(deleted.live, at_old)
    assert commit(deleted, deleted.old_epoch, both) == expected
    taken = dict.fromkeys(deleted.live, ErrorCode.none)
    assert commit(deleted, deleted.epoch, both) == unknown(deleted.kept) | taken


def test_a_commit_naming_the_deleted_topics_id_is_an_unknown_topic_id(deleted: Deleted) -> None:
    indexes = sorted(index for _, index in deleted.kept)
    for epoch in (deleted.epoch, deleted.old_epoch):
        answer = deleted.broker.commit_by_id(
            deleted.group, deleted.member_id, epoch, deleted.deleted_id, indexes
        )
        assert answer == {ErrorCode.unknown_topic_id}
