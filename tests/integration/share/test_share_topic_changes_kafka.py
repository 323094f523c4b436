"""A KIP-932 share group member whose topics change, on kemu beside a real Apache Kafka 4.4.0
(bench's jars; that side skipped without java or them). Both servers get the same hand-built
ShareGroupHeartbeats (v1) and ShareGroupDescribes and the same assertions.

A member joins subscribed to two topics of two partitions each, at the server's assignment
interval (0), and heartbeats until it holds all four; then the group's
``share.assignment.interval.ms`` is set to 15 s (the longest Kafka lets a group ask), so that
the target computed with that last assignment holds the next one back, and the subscription
or the topics change:

- The member drops a topic. Kafka 4.4.0 bumps the group epoch, computes no target, and yet its
  answer to that heartbeat, at the member's epoch, assigns only the topic it kept: told that the
  subscription changed, its ``ShareGroupAssignmentBuilder`` sets the member's partitions to its
  part of the held target filtered by the topics it subscribes to now. A heartbeat naming the
  dropped topic again is given its partitions back from that target (the group epoch up once
  more). kemu kept the dropped topic's partitions until the next target before it did the same
  (``share/group.py``'s ``_reconcile``). At the server's interval the heartbeat computes the new
  target at once.
- A topic the member subscribes to is deleted (once Metadata no longer shows it). The first
  heartbeat after the coordinator learns of it has a new metadata hash: the group epoch goes up
  and, as for a changed subscription, the member's partitions are filtered by the topics that
  exist, so that answer, at the member's epoch, takes the deleted topic's partitions away. A
  full heartbeat still naming the deleted topic is answered with the live topic's partitions.
  kemu bumped the epoch but kept the deleted topic's partitions until the next target, before.
  At the server's interval the new target comes with that heartbeat.
- The member adds a topic: the answer keeps its epoch and its partitions (the held target has
  nothing of the new topic), the group epoch one ahead of the target's, until the first
  heartbeat after the interval computes the target of the new epoch with the new topic's
  partitions (their share state initialized meanwhile). kemu agrees.

Epochs are compared relative to each other (Kafka's coordinator sometimes learns of a topic
created just before after a first join, which costs it an epoch).
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.protocol.errors import ErrorCode
from tests.integration.config_describe import describe_configs
from tests.integration.groups import consumer_wire
from tests.integration.groups.consumer_wire import Partition, wait_for
from tests.integration.parity import COORDINATOR_STARTING, kemu_or_kafka, nested
from tests.integration.txn.wire_parity import Server, coordinator_ready, until_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

METADATA, INCREMENTAL_ALTER_CONFIGS = 3, 44
SHARE_HEARTBEAT, SHARE_DESCRIBE = 76, 77
GROUP_RESOURCE = 32
INTERVAL_CONFIG = "share.assignment.interval.ms"
INTERVAL_MS = "15000"  # group.share.max.assignment.interval.ms: the longest a group may ask
WAIT_S = 60.0  # a bound for failing, not a measurement
BEAT_PAUSE_S = 0.2  # between heartbeats that change nothing


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


def partitions_of(*topics: str) -> frozenset[Partition]:
    """Both partitions of each of ``topics`` (every topic here has two)."""
    return frozenset((topic, index) for topic in topics for index in range(2))


class Broker(consumer_wire.Broker):
    """``consumer_wire.Broker`` with what the share modules add: topics of two partitions made
    at once, a group's assignment interval, partitions named by topic id."""

    def create_topics(self, *topics: str) -> None:
        """The topics (two partitions each), once Metadata shows all their partitions (their
        ids kept)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_topics([NewTopic(t, 2, 1) for t in topics]).values():
            future.result(timeout=60)
        for topic in topics:
            shown = wait_for(functools.partial(self.shown, topic), f"{topic} in the metadata")
            self.ids[topic] = uuid.UUID(str(shown.topic_id))

    def shown(self, topic: str) -> Any:
        """The topic's Metadata once it shows both partitions, else None."""
        found = self.metadata(topic)
        return found if found.error_code == 0 and len(found.partitions) == 2 else None

    def hold_targets_back(self, group: str) -> None:
        """The group's assignment interval set to ``INTERVAL_MS``, once DescribeConfigs shows
        it (Kafka applies a group config from its metadata log)."""
        config = nested(
            INCREMENTAL_ALTER_CONFIGS,
            1,
            "AlterableConfig",
            name=INTERVAL_CONFIG,
            config_operation=0,
            value=INTERVAL_MS,
        )
        resource = nested(
            INCREMENTAL_ALTER_CONFIGS,
            1,
            "AlterConfigsResource",
            resource_type=GROUP_RESOURCE,
            resource_name=group,
            configs=(config,),
        )
        answer = self.client.call(
            1, INCREMENTAL_ALTER_CONFIGS, 1, resources=(resource,), validate_only=False
        )
        assert answer.responses[0].error_code == ErrorCode.none, answer
        wait_for(
            lambda: (
                describe_configs(self.bootstrap, GROUP_RESOURCE, group)[INTERVAL_CONFIG].value
                == INTERVAL_MS
            ),
            f"{INTERVAL_CONFIG} on {group}",
        )

    def describe(self, group: str) -> Any:
        (described,) = self.client.call(
            1, SHARE_DESCRIBE, 1, group_ids=(group,), include_authorized_operations=False
        ).groups
        assert described.error_code == ErrorCode.none, described
        return described


@dataclass
class Answer:
    epoch: int
    assignment: frozenset[Partition] | None  # None: the answer carries none


@dataclass
class Described:
    """What ShareGroupDescribe told of the group and its only member."""

    group_epoch: int
    assignment_epoch: int
    state: str
    member_epoch: int
    subscribed: frozenset[str]
    assignment: frozenset[Partition]


@dataclass
class Member:
    """A share group member on the wire: its epoch and the partitions it was last given."""

    broker: Broker
    group: str
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    epoch: int = 0
    held: frozenset[Partition] = frozenset()

    def heartbeat(self, subscribed: tuple[str, ...] | None = None) -> Answer:
        """One ShareGroupHeartbeat (a full one when it names a subscription): its epoch and
        assignment, both kept."""
        answer = until_ready(
            lambda: self.broker.client.call(
                1,
                SHARE_HEARTBEAT,
                1,
                group_id=self.group,
                member_id=self.member_id,
                member_epoch=self.epoch,
                rack_id=None,
                subscribed_topic_names=subscribed,
            ),
            lambda answer: answer.error_code not in COORDINATOR_STARTING,
        )
        assert answer.error_code == ErrorCode.none, answer
        self.epoch = int(answer.member_epoch)
        assignment = answer.assignment
        got = None if assignment is None else self.broker.named(assignment.topic_partitions)
        if got is not None:
            self.held = got
        return Answer(self.epoch, got)

    def beat_until(
        self, reached: Callable[[frozenset[Partition]], bool], what: str
    ) -> list[Answer]:
        """Heartbeat until the partitions the member holds satisfy ``reached``: the answers."""
        answers: list[Answer] = []
        deadline = time.monotonic() + WAIT_S
        while not reached(self.held):
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            answers.append(self.heartbeat())
            if answers[-1].assignment is None:
                time.sleep(BEAT_PAUSE_S)
        return answers

    def described(self) -> Described:
        group = self.broker.describe(self.group)
        (member,) = group.members
        assert member.member_id == self.member_id
        return Described(
            group.group_epoch,
            group.assignment_epoch,
            group.group_state,
            member.member_epoch,
            frozenset(member.subscribed_topic_names),
            frozenset(
                (t.topic_name, p) for t in member.assignment.topic_partitions for p in t.partitions
            ),
        )


@dataclass
class Stable:
    """A member holding both partitions of each of ``topics`` at ``epoch``."""

    broker: Broker
    member: Member
    topics: tuple[str, ...]
    epoch: int


def stable_member(server: Server, prefix: str, *topics: str) -> Stable:
    """A new group (named after ``prefix``) whose one member holds all of ``topics`` (made
    here, named ``topic-suffix``), the group's assignment interval still the server's."""
    suffix = uuid.uuid4().hex[:8]
    broker = Broker(server)
    names = tuple(f"{topic}-{suffix}" for topic in topics)
    broker.create_topics(*names)
    group = f"{prefix}-{suffix}"
    coordinator_ready(broker.client, 0, group)
    member = Member(broker, group)
    member.heartbeat(subscribed=names)
    member.beat_until(lambda held: held == partitions_of(*names), "all the partitions")
    return Stable(broker, member, names, member.epoch)


# --- dropping a topic from the subscription ----------------------------------------------------


@dataclass
class Dropped:
    """A member of ``kept`` and ``dropped``, stable at ``epoch``, that heartbeat naming ``kept``
    alone, then a plain heartbeat, then one naming both again."""

    epoch: int
    kept: str
    dropped: str
    on_drop: Answer
    after_drop: Described
    next_beat: Answer
    on_resubscribe: Answer
    after_resubscribe: Described


def drop_a_topic(server: Server, *, hold: bool) -> Dropped:
    stable = stable_member(server, "share-drop", "kept", "dropped")
    try:
        member, (kept, dropped) = stable.member, stable.topics
        if hold:
            stable.broker.hold_targets_back(member.group)
        on_drop = member.heartbeat(subscribed=(kept,))
        after_drop = member.described()
        next_beat = member.heartbeat()
        on_resubscribe = member.heartbeat(subscribed=(kept, dropped))
        return Dropped(
            stable.epoch,
            kept,
            dropped,
            on_drop,
            after_drop,
            next_beat,
            on_resubscribe,
            member.described(),
        )
    finally:
        stable.broker.close()


@pytest.fixture(scope="module")
def dropped_within_interval(server: Server) -> Dropped:
    return drop_a_topic(server, hold=True)


@pytest.fixture(scope="module")
def dropped_at_the_servers_interval(server: Server) -> Dropped:
    return drop_a_topic(server, hold=False)


def test_dropping_a_topic_within_the_interval_bumps_the_epoch_without_a_target(
    dropped_within_interval: Dropped,
) -> None:
    scenario = dropped_within_interval
    described = scenario.after_drop
    assert (described.group_epoch, described.assignment_epoch) == (
        scenario.epoch + 1,
        scenario.epoch,
    )
    assert described.state == "Stable"  # share groups have no Assigning state
    assert described.member_epoch == scenario.epoch
    assert described.subscribed == {scenario.kept}


def test_the_share_heartbeat_dropping_a_topic_takes_its_partitions_away(
    dropped_within_interval: Dropped,
) -> None:
    scenario = dropped_within_interval
    assert scenario.on_drop == Answer(scenario.epoch, partitions_of(scenario.kept))
    assert scenario.after_drop.assignment == partitions_of(scenario.kept)
    assert scenario.next_beat == Answer(scenario.epoch, None)


def test_subscribing_again_within_the_interval_gives_the_held_targets_partitions_back(
    dropped_within_interval: Dropped,
) -> None:
    scenario = dropped_within_interval
    both = partitions_of(scenario.kept, scenario.dropped)
    assert scenario.on_resubscribe == Answer(scenario.epoch, both)
    described = scenario.after_resubscribe
    assert (described.group_epoch, described.assignment_epoch) == (
        scenario.epoch + 2,
        scenario.epoch,
    )
    assert (described.member_epoch, described.assignment) == (scenario.epoch, both)


def test_at_the_servers_interval_dropping_a_topic_computes_the_target_at_once(
    dropped_at_the_servers_interval: Dropped,
) -> None:
    scenario = dropped_at_the_servers_interval
    assert scenario.on_drop == Answer(scenario.epoch + 1, partitions_of(scenario.kept))
    described = scenario.after_drop
    assert described.group_epoch == described.assignment_epoch == scenario.epoch + 1
    assert scenario.next_beat == Answer(scenario.epoch + 1, None)


# --- a subscribed topic deleted ----------------------------------------------------------------


@dataclass
class Deleted:
    """A member of ``live`` and ``deleted``, stable at ``epoch``; ``deleted`` was deleted and the
    member heartbeat until the group epoch went up (``on_bump``, with what came before), then
    once more, then a full heartbeat still naming both topics."""

    epoch: int
    live: str
    deleted: str
    before_bump: list[Answer]
    on_bump: Answer
    after_bump: Described
    next_beat: Answer
    full_beat: Answer
    after_full_beat: Described


def delete_a_topic(server: Server, *, hold: bool) -> Deleted:
    stable = stable_member(server, "share-deleted", "live", "deleted")
    try:
        member, (live, deleted) = stable.member, stable.topics
        if hold:
            stable.broker.hold_targets_back(member.group)
        stable.broker.delete_topic(deleted)
        answers: list[Answer] = []

        def epoch_bumped() -> Described | None:
            answers.append(member.heartbeat())
            described = member.described()
            return described if described.group_epoch > stable.epoch else None

        # Kafka's coordinator learns of the deletion from its own metadata listener, maybe
        # after the broker's Metadata answers show it
        after_bump = wait_for(epoch_bumped, "the group epoch to go up")
        next_beat = member.heartbeat()
        full_beat = member.heartbeat(subscribed=(live, deleted))
        return Deleted(
            stable.epoch,
            live,
            deleted,
            answers[:-1],
            answers[-1],
            after_bump,
            next_beat,
            full_beat,
            member.described(),
        )
    finally:
        stable.broker.close()


@pytest.fixture(scope="module")
def deleted_within_interval(server: Server) -> Deleted:
    return delete_a_topic(server, hold=True)


@pytest.fixture(scope="module")
def deleted_at_the_servers_interval(server: Server) -> Deleted:
    return delete_a_topic(server, hold=False)


def test_a_deleted_topic_bumps_the_epoch_with_the_next_heartbeat(
    deleted_within_interval: Deleted,
) -> None:
    scenario = deleted_within_interval
    assert scenario.before_bump == [Answer(scenario.epoch, None)] * len(scenario.before_bump)
    described = scenario.after_bump
    assert (described.group_epoch, described.assignment_epoch) == (
        scenario.epoch + 1,
        scenario.epoch,
    )
    assert described.member_epoch == scenario.epoch
    # the member's subscription still names the deleted topic
    assert described.subscribed == {scenario.live, scenario.deleted}


def test_the_heartbeat_learning_of_a_deleted_topic_takes_its_partitions_away(
    deleted_within_interval: Deleted,
) -> None:
    scenario = deleted_within_interval
    assert scenario.on_bump == Answer(scenario.epoch, partitions_of(scenario.live))
    assert scenario.after_bump.assignment == partitions_of(scenario.live)
    assert scenario.next_beat == Answer(scenario.epoch, None)


def test_a_full_heartbeat_naming_a_deleted_topic_gets_the_live_partitions(
    deleted_within_interval: Deleted,
) -> None:
    scenario = deleted_within_interval
    assert scenario.full_beat == Answer(scenario.epoch, partitions_of(scenario.live))
    described = scenario.after_full_beat
    assert (described.group_epoch, described.assignment_epoch) == (
        scenario.epoch + 1,
        scenario.epoch,
    )
    assert described.assignment == partitions_of(scenario.live)


def test_at_the_servers_interval_a_deleted_topic_gets_a_new_target_at_once(
    deleted_at_the_servers_interval: Deleted,
) -> None:
    scenario = deleted_at_the_servers_interval
    live = partitions_of(scenario.live)
    assert scenario.on_bump == Answer(scenario.epoch + 1, live)
    described = scenario.after_bump
    assert described.group_epoch == described.assignment_epoch == scenario.epoch + 1
    assert scenario.next_beat == Answer(scenario.epoch + 1, None)
    assert scenario.full_beat == Answer(scenario.epoch + 1, live)


# --- adding a topic to the subscription --------------------------------------------------------


@dataclass
class Added:
    """A member of ``first``, stable at ``epoch``, that heartbeat naming ``first`` and
    ``added``, then heartbeat until it held ``added`` too (``waiting``: the answers before the
    one that gave them, ``on_target``)."""

    epoch: int
    first: str
    added: str
    on_add: Answer
    after_add: Described
    waiting: list[Answer]
    on_target: Answer
    after_target: Described


@pytest.fixture(scope="module")
def added_within_interval(server: Server) -> Added:
    stable = stable_member(server, "share-add", "first")
    try:
        member, (first,) = stable.member, stable.topics
        added = first.replace("first", "added")
        stable.broker.create_topics(added)
        stable.broker.hold_targets_back(member.group)
        on_add = member.heartbeat(subscribed=(first, added))
        after_add = member.described()
        answers = member.beat_until(lambda held: (added, 0) in held, f"{added}'s partitions")
        return Added(
            stable.epoch,
            first,
            added,
            on_add,
            after_add,
            answers[:-1],
            answers[-1],
            member.described(),
        )
    finally:
        stable.broker.close()


def test_adding_a_topic_within_the_interval_keeps_the_members_partitions(
    added_within_interval: Added,
) -> None:
    scenario = added_within_interval
    assert scenario.on_add == Answer(scenario.epoch, partitions_of(scenario.first))
    described = scenario.after_add
    assert (described.group_epoch, described.assignment_epoch) == (
        scenario.epoch + 1,
        scenario.epoch,
    )
    assert described.subscribed == {scenario.first, scenario.added}
    assert scenario.waiting == [Answer(scenario.epoch, None)] * len(scenario.waiting)


def test_the_first_target_after_the_interval_adds_the_topics_partitions(
    added_within_interval: Added,
) -> None:
    scenario = added_within_interval
    both = partitions_of(scenario.first, scenario.added)
    assert scenario.on_target == Answer(scenario.epoch + 1, both)
    described = scenario.after_target
    assert described.group_epoch == described.assignment_epoch == scenario.epoch + 1
    assert described.assignment == both
