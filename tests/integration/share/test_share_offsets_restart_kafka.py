"""AlterShareGroupOffsets on a share group that exists only through it, and on an existing empty
one, then the server stopped and started again on its data, on kemu beside a real Apache Kafka
4.4.0. The Kafka is this module's own (it is restarted), single-node KRaft from bench/.cache/lib
as the session's plain one; skipped without java or the jars. Both servers get the same
hand-built requests and the same assertions; ``__consumer_offsets`` is read with a plain
consumer and decoded with kemu's serde.

- A group the offsets admin created is known after the restart from its
  ShareGroupStatePartitionMetadata record alone (Kafka writes no other): what the admin APIs
  show of it and what its first member gets.
- Altering a group whose partition is already initialized (a member consumed and left): the
  record is written with the partition initializing and still initialized, then initialized.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kemu.coordinator.group.share import records as group_records
from kemu.protocol.errors import ErrorCode
from kemu.testing.kafka import (
    HOST,
    READY_TIMEOUT_S,
    KafkaServer,
    kafka_timing_overrides,
    missing_prerequisite,
    wait_ready,
)
from kemu.testing.plugin import KemuProcess
from tests.integration.groups.test_deleted_topic_admin_kafka import create_topic
from tests.integration.share.test_share_deleted_topic_state_kafka import (
    Fetcher,
    alter_offsets,
    describe_offsets,
    group_share_records,
    produce,
    state_partitions,
    wait_for,
)
from tests.integration.share.test_share_offsets_new_group_kafka import (
    described,
    initialized,
    listed,
    normalised,
)
from tests.integration.share.test_share_topic_changes_kafka import (
    COORDINATOR_STARTING,
    SHARE_HEARTBEAT,
    Broker,
)
from tests.integration.share.test_share_topic_changes_kafka import Member as ShareMember
from tests.integration.txn.wire_parity import Server, coordinator_ready, until_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

PRODUCED = 3
WAIT_S = 60.0  # a bound for failing, not a measurement
LEAVE = -1


class RestartableKafka(KafkaServer):
    """A KafkaServer that can be started again on its ports and log dirs once stopped (a
    ``start`` would format new storage on new ports)."""

    def start_again(self) -> None:
        with (self.workdir / "server.out").open("ab") as out:
            process = subprocess.Popen(
                self._command(), stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir
            )
        self.process = process
        try:
            wait_ready(
                HOST, self.port, time.monotonic(), READY_TIMEOUT_S, lambda: process.poll() is None
            )
        except Exception as error:
            self.stop()
            raise RuntimeError(f"kafka did not restart; see {self.workdir}/server.out") from error


@dataclass
class Restartable:
    """A server and how to stop it and start it again on its data (its bootstrap kept)."""

    server: Server
    restart: Callable[[], None]


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def restartable(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Restartable]:
    directory = tmp_path_factory.mktemp(request.param)
    if request.param == "kemu":
        kemu = KemuProcess(
            brokers=1,
            data_dir=directory / "data",
            log_path=directory / "kemu.log",
            timing="kafka",
            overrides=kafka_timing_overrides(),
        ).start()

        def restart_kemu() -> None:
            kemu.stop()
            kemu.start()

        try:
            yield Restartable(Server("kemu", kemu.bootstrap), restart_kemu)
        finally:
            kemu.stop()
        return
    reason = missing_prerequisite()
    if reason is not None:
        pytest.skip(reason)
    kafka = RestartableKafka(
        directory / "kafka",
        partitions=1,
        # one partition of each internal topic instead of 50: less to create and load again
        properties={
            "offsets.topic.num.partitions": "1",
            "share.coordinator.state.topic.num.partitions": "1",
        },
        quick=True,
    )
    kafka.workdir.mkdir()
    kafka.start()

    def restart_kafka() -> None:
        kafka.stop()
        kafka.start_again()

    try:
        yield Restartable(Server("kafka", kafka.bootstrap), restart_kafka)
    finally:
        kafka.stop()


def leave(member: ShareMember) -> ErrorCode:
    answer = member.broker.client.call(
        1,
        SHARE_HEARTBEAT,
        1,
        group_id=member.group,
        member_id=member.member_id,
        member_epoch=LEAVE,
        rack_id=None,
        subscribed_topic_names=None,
    )
    return ErrorCode(answer.error_code)


def acquire(fetcher: Fetcher, topic: str, count: int) -> list[tuple[int, int, int]]:
    """ShareFetch until ``count`` records of ``topic`` were acquired: (first, last, delivery
    count) of each acquired range."""
    acquired: list[tuple[int, int, int]] = []
    if count <= 0:
        return acquired

    def enough() -> bool:
        acquired.extend(fetcher.fetch(()).get(topic, []))
        return sum(last - first + 1 for first, last, _ in acquired) >= count

    wait_for(enough, f"{count} records of {topic} acquired")
    return acquired


def delivered(ranges: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """(offset, delivery count) of each record the acquired ``ranges`` hold, however a server
    splits them into ranges."""
    return sorted((o, count) for first, last, count in ranges for o in range(first, last + 1))


def written_by_alteration(server: Server, group: str, before: int) -> list[Any]:
    """The group's records after its first ``before``: at once on kemu (which writes them
    within the request), once some are and the last state-partitions record has no partition
    initializing on Kafka."""

    def settled() -> tuple[list[Any]] | None:
        records = group_share_records(server.bootstrap, group)
        found = state_partitions(records)
        written = records[before:]
        done = written and found is not None and not found["initializing"]
        return (written,) if server.name == "kemu" or done else None

    found: tuple[list[Any]] = wait_for(settled, f"{group}'s alteration written")
    return found[0]


@dataclass
class Scenario:
    new_topic: str
    new_topic_id: uuid.UUID
    # the group the offsets admin created, after the restart
    described: Any
    listed: Any
    offsets: Any
    beats: Any
    described_after_join: Any
    records_of_join: list[Any]
    acquired: list[tuple[int, int, int]]
    fetch_errors: list[Any]
    # the existing group: its member's consumption, then the alteration
    used_topic: str
    used_topic_id: uuid.UUID
    consumed: list[tuple[int, int, int]]
    left: ErrorCode
    described_before_alter: Any
    used_altered: Any
    records_of_alter: list[Any]
    described_after_alter: Any
    offsets_after_alter: Any


@pytest.fixture(scope="module")
def scenario(restartable: Restartable) -> Scenario:
    server = restartable.server
    suffix = uuid.uuid4().hex[:8]
    new_topic, new_group = f"altered-{suffix}", f"new-{suffix}"
    used_topic, used_group = f"used-{suffix}", f"used-{suffix}"
    broker = Broker(server)
    try:
        for topic in (new_topic, used_topic):
            create_topic(broker, topic, 1)
            produce(broker.bootstrap, topic, PRODUCED)
        coordinator_ready(broker.client, 0, new_group)
        created = until_ready(
            lambda: alter_offsets(broker, new_group, new_topic, 1),
            lambda answer: answer.error_code not in COORDINATOR_STARTING,
        )
        assert created.error_code == ErrorCode.none, created
        wait_for(
            lambda: initialized(group_share_records(broker.bootstrap, new_group)),
            "the altered partition's share state initialized",
        )

        # a member initializes the used group's partition (at its end, share.auto.offset.reset
        # latest), consumes what comes next and leaves
        member = ShareMember(broker, used_group)
        member.heartbeat(subscribed=(used_topic,))
        member.beat_until(lambda held: held == {(used_topic, 0)}, "the partition")
        fetcher = Fetcher(member, dict(broker.ids))
        consumed = fetcher.fetch((used_topic,)).get(used_topic, [])
        produce(broker.bootstrap, used_topic, PRODUCED)
        consumed += acquire(fetcher, used_topic, PRODUCED)
        accepted = fetcher.accept({used_topic: (PRODUCED, PRODUCED * 2 - 1)})
        assert accepted == {used_topic: ErrorCode.none}, accepted
        fetcher.close()
        left = leave(member)
        described_before_alter = wait_for(
            lambda: (found := described(broker, used_group))[2] == "Empty" and found,
            "the used group empty",
        )
        before = len(group_share_records(broker.bootstrap, used_group))
        used_altered = alter_offsets(broker, used_group, used_topic, 1)
        records_of_alter = written_by_alteration(server, used_group, before)
        described_after_alter = described(broker, used_group)
        offsets_after_alter = describe_offsets(broker, used_group)
    finally:
        broker.close()

    restartable.restart()
    broker = Broker(server)
    try:
        coordinator_ready(broker.client, 0, new_group)
        group_described = until_ready(
            lambda: described(broker, new_group),
            lambda found: found[0] not in COORDINATOR_STARTING,
        )
        group_listed = listed(broker, new_group)
        offsets = describe_offsets(broker, new_group)
        for topic in (new_topic, used_topic):
            broker.ids[topic] = uuid.UUID(str(broker.metadata(topic).topic_id))
        before_join = len(group_share_records(broker.bootstrap, new_group))
        member = ShareMember(broker, new_group)
        beats = [member.heartbeat(subscribed=(new_topic,))]
        beats += member.beat_until(lambda held: held == {(new_topic, 0)}, "the partition")
        described_after_join = described(broker, new_group)
        records_of_join = group_share_records(broker.bootstrap, new_group)[before_join:]
        fetcher = Fetcher(member, dict(broker.ids))
        acquired = fetcher.fetch((new_topic,)).get(new_topic, [])
        acquired += acquire(fetcher, new_topic, PRODUCED - 1 - len(delivered(acquired)))
        return Scenario(
            new_topic,
            broker.ids[new_topic],
            group_described,
            group_listed,
            offsets,
            beats,
            described_after_join,
            records_of_join,
            acquired,
            list(fetcher.errors),
            used_topic,
            broker.ids[used_topic],
            consumed,
            left,
            described_before_alter,
            used_altered,
            records_of_alter,
            described_after_alter,
            offsets_after_alter,
        )
    finally:
        broker.close()


def test_a_group_known_from_its_state_partitions_record_after_a_restart(
    scenario: Scenario,
) -> None:
    """Empty at group epoch and assignment epoch 1, no members, listed as a share group; its
    start offset the altered one."""
    s = scenario
    assert s.described == (ErrorCode.none, None, "Empty", 1, 1, "simple", [])
    assert s.listed == [(s.listed[0][0], "share", "Empty", "share")]
    assert s.offsets == {(s.new_topic, 0): (1, ErrorCode.none)}


def test_its_first_member_after_the_restart_joins_at_epoch_two(scenario: Scenario) -> None:
    """Assigned the partition on its first heartbeat at epoch 2; the join writes the member,
    the group epoch 2, its target, the target epoch 2 and its current assignment; its fetches
    start at the altered offset."""
    s = scenario
    assert [(beat.epoch, beat.assignment) for beat in s.beats] == [(2, {(s.new_topic, 0)})]
    assert s.described_after_join == (
        ErrorCode.none,
        None,
        "Stable",
        2,
        2,
        "simple",
        [(2, [s.new_topic])],
    )
    assigned = frozenset({(s.new_topic_id, 0)})
    assert normalised(s.records_of_join) == [
        (group_records.MEMBER_METADATA, "member", (s.new_topic,)),
        (group_records.GROUP_METADATA, None, (2, "hash")),
        (group_records.TARGET_MEMBER, "member", assigned),
        (group_records.TARGET_METADATA, None, (2, "time")),
        (group_records.CURRENT_ASSIGNMENT, "member", (2, 0, assigned)),
    ]
    assert delivered(s.acquired) == [(offset, 1) for offset in range(1, PRODUCED)]
    assert s.fetch_errors == []


def test_the_existing_group_consumed_and_emptied(scenario: Scenario) -> None:
    """Its member initialized the partition at its end, consumed what came next and left."""
    s = scenario
    assert delivered(s.consumed) == [(offset, 1) for offset in range(PRODUCED, PRODUCED * 2)]
    assert s.left == ErrorCode.none
    assert s.described_before_alter == (ErrorCode.none, None, "Empty", 4, 4, "simple", [])


def test_altering_an_initialized_partition_writes_it_initializing_and_initialized(
    scenario: Scenario,
) -> None:
    """The state-partitions record only: the partition initializing and still initialized,
    then initialized; the group's epochs unchanged, its start offset the altered one."""
    s = scenario
    assert s.used_altered.error_code == ErrorCode.none
    partition = {(s.used_topic_id, s.used_topic, (0,))}
    assert normalised(s.records_of_alter) == [
        (group_records.STATE_PARTITIONS, None, (partition, partition, set())),
        (group_records.STATE_PARTITIONS, None, (set(), partition, set())),
    ]
    assert s.described_after_alter == (ErrorCode.none, None, "Empty", 4, 4, "simple", [])
    assert s.offsets_after_alter == {(s.used_topic, 0): (1, ErrorCode.none)}
