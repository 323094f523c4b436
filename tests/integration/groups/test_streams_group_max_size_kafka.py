"""A full KIP-1071 streams group (``group.streams.max.size``) on kemu beside a real Apache Kafka
4.4.0 (bench's jars; that side skipped without java or them), with the same hand-built
StreamsGroupHeartbeats and the same assertions.

Kafka 4.4.0's ``streamsGroupHeartbeat`` runs ``throwIfStreamsGroupIsFull`` on a join (epoch 0)
only, after finding or creating the group: a member id the group does not know gets
GROUP_MAX_SIZE_REACHED from a full group, unless the join names an instance id a member holds
(``StreamsGroup.hasStaticMember``, a member at -2 too). Then the instance id's own checks answer
(``getOrMaybeCreateStaticStreamsGroupMember``): UNRELEASED_INSTANCE_ID while its holder is active,
whatever member id the join brings (the holder's own too: ``throwIfInstanceIdIsUnreleased``
looks at its epoch alone); a holder that left with -2 is replaced, so a static member's
replacement gets into a full group. A heartbeat that is not a join is never checked: an unknown
member id gets UNKNOWN_MEMBER_ID, one naming a held instance id FENCED_INSTANCE_ID.

``group.streams.max.size`` is a static broker property, so the Kafka side is the Kafka of
``test_group_max_size_kafka.py``'s configuration (``FULL_GROUPS``), which sets it too.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kemu.protocol.errors import ErrorCode
from tests.integration.groups.consumer_wire import Broker
from tests.integration.groups.test_group_max_size_kafka import FULL_GROUPS
from tests.integration.groups.test_static_leave_kafka import STATIC_LEAVE_EPOCH
from tests.integration.parity import COORDINATOR_STARTING, kemu_or_kafka, nested
from tests.integration.txn.wire_parity import Server, coordinator_ready, until_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

STREAMS_HEARTBEAT = 88
INSTANCE, OTHER_INSTANCE = "instance-a", "instance-z"
TASKS = 4  # the source topic's partitions
WAIT_S = 60.0  # a bound for failing, not a measurement

Task = tuple[str, int]


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory, kafka_config=FULL_GROUPS) as chosen:
        yield chosen


@dataclass(frozen=True)
class Answer:
    error: ErrorCode
    epoch: int
    active: frozenset[Task] | None  # None: the answer carries none


@dataclass
class Member:
    broker: Broker
    group: str
    topic: str
    instance_id: str | None = None
    member_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    process_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    epoch: int = 0
    owned: frozenset[Task] = frozenset()

    def send(self, epoch: int) -> Answer:
        """One StreamsGroupHeartbeat at ``epoch`` (a join carries the topology and owns
        nothing, else it owns what the member owns); nothing of the member changes."""
        joining = epoch == 0
        subtopology = nested(
            STREAMS_HEARTBEAT, 0, "Subtopology", subtopology_id="0", source_topics=(self.topic,),
            source_topic_regex=(), state_changelog_topics=(), repartition_sink_topics=(),
            repartition_source_topics=(), copartition_groups=(),
        )  # fmt: skip
        owned = () if joining else tuple(self._owned_task_ids())
        fields: dict[str, Any] = {
            "group_id": self.group,
            "member_id": self.member_id,
            "member_epoch": epoch,
            "endpoint_information_epoch": 0,
            "instance_id": self.instance_id,
            "rack_id": None,
            "rebalance_timeout": datetime.timedelta(milliseconds=30_000 if joining else -1),
            "topology": (
                nested(STREAMS_HEARTBEAT, 0, "Topology", epoch=0, subtopologies=(subtopology,))
                if joining
                else None
            ),
            "process_id": self.process_id if joining else None,
            "user_endpoint": None,
            "client_tags": () if joining else None,
            "active_tasks": owned if epoch >= 0 else None,
            "standby_tasks": () if epoch >= 0 else None,
            "warmup_tasks": () if epoch >= 0 else None,
            "task_offsets": None,
            "task_end_offsets": None,
            "shutdown_application": False,
        }
        answer = until_ready(
            lambda: self.broker.client.call(1, STREAMS_HEARTBEAT, 0, **fields),
            lambda answer: answer.error_code not in COORDINATOR_STARTING,
        )
        active = answer.active_tasks
        return Answer(
            ErrorCode(answer.error_code),
            int(answer.member_epoch),
            None
            if active is None
            else frozenset((t.subtopology_id, p) for t in active for p in t.partitions),
        )

    def _owned_task_ids(self) -> Iterator[Any]:
        for sub in sorted({sub for sub, _ in self.owned}):
            partitions = tuple(sorted(p for s, p in self.owned if s == sub))
            yield nested(STREAMS_HEARTBEAT, 0, "TaskIds", subtopology_id=sub, partitions=partitions)

    def heartbeat(self) -> Answer:
        """A heartbeat at the member's epoch; it takes the answer's epoch and tasks."""
        answer = self.send(self.epoch)
        assert answer.error == ErrorCode.none, answer
        self.epoch = answer.epoch
        if answer.active is not None:
            self.owned = answer.active
        return answer


def settle(members: list[Member]) -> int:
    """Heartbeat every member until all are at one epoch, owning every task between them: that
    epoch."""
    deadline = time.monotonic() + WAIT_S
    while True:
        for member in members:
            member.heartbeat()
        if len({m.epoch for m in members}) == 1 and sum(len(m.owned) for m in members) == TASKS:
            for member in members:
                member.heartbeat()  # owning what the last answer gave it
            if len({m.epoch for m in members}) == 1:
                return members[0].epoch
        assert time.monotonic() < deadline, f"the group never settled: {members}"
        time.sleep(0.2)


@dataclass
class Full:
    """Static member A (``INSTANCE``) and dynamic member B fill a streams group of two
    (``group.streams.max.size``), stable at ``epoch``; the answers to what came knocking (each
    from a member id the group does not know unless said), then to A's temporary leave and to a
    new member id taking A's place (and to it joining again)."""

    epoch: int
    held: frozenset[Task]
    dynamic_join: Answer
    dynamic_beat: Answer
    free_instance_join: Answer
    held_instance_join: Answer
    held_instance_beat: Answer
    holder_rejoin: Answer
    known_beat: Answer
    static_leave: Answer
    replacement: Answer
    after_replacement: Answer
    replacement_rejoin: Answer


@pytest.fixture(scope="module")
def full(server: Server) -> Full:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"streams-full-{suffix}", f"streams-full-{suffix}"
    broker = Broker(server)
    try:
        broker.create_topic(topic, TASKS)
        coordinator_ready(broker.client, 0, group)
        a = Member(broker, group, topic, INSTANCE)
        b = Member(broker, group, topic)
        a.heartbeat()
        b.heartbeat()
        epoch = settle([a, b])
        stranger = Member(broker, group, topic)
        taker = Member(broker, group, topic, INSTANCE)
        found = dict(
            dynamic_join=stranger.send(0),
            dynamic_beat=stranger.send(epoch),
            free_instance_join=Member(broker, group, topic, OTHER_INSTANCE).send(0),
            held_instance_join=taker.send(0),
            held_instance_beat=taker.send(epoch),
            holder_rejoin=a.send(0),
            known_beat=b.heartbeat(),
        )
        held = a.owned
        static_leave = a.send(STATIC_LEAVE_EPOCH)
        # the restarted instance, with the process id its state directory keeps
        replacing = Member(broker, group, topic, INSTANCE, process_id=a.process_id)
        replacement = replacing.send(0)
        return Full(
            epoch,
            held,
            **found,
            static_leave=static_leave,
            replacement=replacement,
            after_replacement=stranger.send(0),
            replacement_rejoin=replacing.send(0),
        )
    finally:
        broker.close()


def test_an_unknown_member_joining_finds_the_group_full(full: Full) -> None:
    assert full.dynamic_join.error == ErrorCode.group_max_size_reached
    assert full.free_instance_join.error == ErrorCode.group_max_size_reached


def test_a_heartbeat_that_is_not_a_join_is_not_checked(full: Full) -> None:
    assert full.dynamic_beat.error == ErrorCode.unknown_member_id
    assert full.held_instance_beat.error == ErrorCode.fenced_instance_id


def test_a_held_instance_id_is_spared_the_size_check(full: Full) -> None:
    """Kemu once answered GROUP_MAX_SIZE_REACHED."""
    assert full.held_instance_join.error == ErrorCode.unreleased_instance_id


def test_an_active_holder_rejoining_under_its_own_member_id(full: Full) -> None:
    """Kemu once took it as a rejoin."""
    assert full.holder_rejoin.error == ErrorCode.unreleased_instance_id
    assert full.replacement_rejoin.error == ErrorCode.unreleased_instance_id


def test_the_members_heartbeat_on(full: Full) -> None:
    assert (full.known_beat.error, full.known_beat.epoch) == (ErrorCode.none, full.epoch)


def test_a_static_members_replacement_gets_into_the_full_group(full: Full) -> None:
    """Kemu once refused it with GROUP_MAX_SIZE_REACHED: the member at -2 counts, but its
    instance id is held."""
    assert (full.static_leave.error, full.static_leave.epoch) == (
        ErrorCode.none,
        STATIC_LEAVE_EPOCH,
    )
    answer = full.replacement
    assert (answer.error, answer.epoch, answer.active) == (ErrorCode.none, full.epoch, full.held)
    # still full: the replaced member is gone, its replacement counts
    assert full.after_replacement.error == ErrorCode.group_max_size_reached
