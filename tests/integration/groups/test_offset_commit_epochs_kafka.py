"""OffsetCommit from a KIP-848 consumer group member at an older member epoch than the
coordinator's, on kemu beside a real Apache Kafka 4.4.0 (bench's jars; that side skipped without
java or them). Both servers get the same hand-built requests and the same assertions.

Member A owns all six partitions at epoch E; member B joins; A acknowledges the revocation of
the three partitions B gets (its heartbeat owns only the three it keeps) and the coordinator
moves A to a newer epoch E'. A Java KafkaConsumer sends commitSync()'s OffsetCommit with the
epoch it knows, so a commit sent after that heartbeat and before its answer names epoch E while
the coordinator has E'. Kafka 4.4.0 implements KIP-1251 (assignment epochs): a commit with an
epoch older than the member's is validated per partition (``ConsumerGroup.validateOffsetCommit``
and ``createAssignmentEpochValidator``): accepted for a partition the member still has with an
assignment epoch not newer than the commit's epoch, STALE_MEMBER_EPOCH for a partition it no
longer has. An epoch newer than the member's is STALE_MEMBER_EPOCH.

kemu applies the same rule (``consumer.offset_commit``). Under the rule before KIP-1251 (the
member's exact epoch) the commit of the kept partitions at epoch E was refused and the Java
client threw CommitFailedException from commitSync() (what the loaded-machine failures of
test_consumer_group_java.py's consumer run were).
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.testing.wire_client import WireClient
from tests.integration.parity import kemu_or_kafka
from tests.integration.txn.wire_parity import Server, coordinator_ready, until_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

OFFSET_COMMIT, CONSUMER_HEARTBEAT = 8, 68
COMMIT_VERSION, HEARTBEAT_VERSION = 9, 1  # v9: the first OffsetCommit a KIP-848 member may use
PARTITIONS = 6
COORDINATOR_STARTING = {
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
}
WAIT_S = 60.0  # a bound for failing, not a measurement


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


@dataclass
class Member:
    """A consumer group member on the wire: its id, its epoch and the partitions it owns."""

    client: WireClient
    group: str
    topic: str
    member_id: str
    epoch: int = 0
    owned: tuple[int, ...] = ()
    topic_id: uuid.UUID | None = None

    def heartbeat(self, owned: tuple[int, ...] | None = None) -> Any:
        """One ConsumerGroupHeartbeat owning ``owned`` (else what it owns); keeps the epoch."""
        joining = self.epoch == 0
        owned = self.owned if owned is None else owned
        partitions: tuple[Any, ...] = ()
        if self.topic_id is not None and owned:
            partitions = (
                self._nested("TopicPartitions", topic_id=self.topic_id, partitions=owned),
            )
        # A coordinator that has just created __consumer_offsets loads it first (Kafka).
        answer = until_ready(
            lambda: self.client.call(
                1,
                CONSUMER_HEARTBEAT,
                HEARTBEAT_VERSION,
                group_id=self.group,
                member_id=self.member_id,
                member_epoch=self.epoch,
                instance_id=None,
                rack_id=None,
                rebalance_timeout=datetime.timedelta(minutes=5),
                subscribed_topic_names=(self.topic,) if joining else None,
                subscribed_topic_regex=None,
                server_assignor="uniform" if joining else None,
                topic_partitions=partitions,
            ),
            lambda answer: answer.error_code not in COORDINATOR_STARTING,
        )
        assert answer.error_code == ErrorCode.none, answer
        self.epoch = int(answer.member_epoch)
        return answer

    def commit(
        self, epoch: int, partitions: tuple[int, ...], version: int = COMMIT_VERSION
    ) -> set[ErrorCode]:
        """OffsetCommit ``version`` of offset 0 for ``partitions`` at ``epoch``: the distinct
        answers."""
        commits = tuple(
            self._commit_nested(
                version,
                "OffsetCommitRequestPartition",
                partition_index=partition,
                committed_offset=0,
                committed_leader_epoch=-1,
                committed_metadata="",
            )
            for partition in partitions
        )
        topic = self._commit_nested(
            version, "OffsetCommitRequestTopic", name=self.topic, partitions=commits
        )
        answer = self.client.call(
            1,
            OFFSET_COMMIT,
            version,
            group_id=self.group,
            generation_id_or_member_epoch=epoch,
            member_id=self.member_id,
            group_instance_id=None,
            topics=(topic,),
        )
        return {ErrorCode(p.error_code) for t in answer.topics for p in t.partitions}

    def _nested(self, class_name: str, /, **fields: Any) -> Any:
        return wire.build(
            getattr(wire.request_module(CONSUMER_HEARTBEAT, HEARTBEAT_VERSION), class_name),
            **fields,
        )

    def _commit_nested(self, version: int, class_name: str, /, **fields: Any) -> Any:
        return wire.build(
            getattr(wire.request_module(OFFSET_COMMIT, version), class_name), **fields
        )


def assigned(answer: Any) -> tuple[uuid.UUID | None, tuple[int, ...]] | None:
    """The topic id and partitions of a heartbeat's assignment, None when it carries none."""
    if answer.assignment is None:
        return None
    partitions = tuple(sorted(p for t in answer.assignment.topic_partitions for p in t.partitions))
    ids = {uuid.UUID(str(t.topic_id)) for t in answer.assignment.topic_partitions}
    return (ids.pop() if ids else None), partitions


def beat_until(
    member: Member, reached: Callable[[tuple[int, ...]], bool], what: str
) -> tuple[int, ...]:
    """Heartbeat (owning what ``member`` owns) until its assignment satisfies ``reached``."""
    deadline = time.monotonic() + WAIT_S
    while True:
        found = assigned(member.heartbeat())
        if found is not None:
            topic_id, partitions = found
            member.topic_id = topic_id or member.topic_id
            if reached(partitions):
                return partitions
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@dataclass
class Bumped:
    """Member A after the revocation: the epoch before it, the partitions kept and given."""

    member: Member
    old_epoch: int
    kept: tuple[int, ...]
    revoked: tuple[int, ...]


@pytest.fixture(scope="module")
def bumped(server: Server) -> Iterator[Bumped]:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"commit-epochs-{suffix}", f"commit-epochs-{suffix}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=60)
    client = WireClient(server.bootstrap, client_id="commit-epochs")
    try:
        coordinator_ready(client, 0, group)
        first = Member(client, group, topic, uuid.uuid4().hex)
        first.owned = beat_until(first, lambda got: len(got) == PARTITIONS, "A to own everything")
        first.heartbeat()  # A acknowledges all six: stable
        old_epoch = first.epoch
        second = Member(client, group, topic, uuid.uuid4().hex)
        second.heartbeat()  # B joins: the new target gives it three of A's partitions
        kept = beat_until(first, lambda got: 0 < len(got) < PARTITIONS, "A's revocation")
        assert first.epoch == old_epoch  # A keeps its epoch until it has revoked
        first.owned = kept
        first.heartbeat()  # A owns only what it keeps: the coordinator moves it on
        assert first.epoch > old_epoch
        revoked = tuple(p for p in range(PARTITIONS) if p not in kept)
        yield Bumped(first, old_epoch, kept, revoked)
    finally:
        client.close()


def test_a_commit_at_the_current_epoch_is_accepted(bumped: Bumped) -> None:
    member = bumped.member
    assert member.commit(member.epoch, bumped.kept) == {ErrorCode.none}


def test_a_commit_at_a_newer_epoch_is_stale(bumped: Bumped) -> None:
    member = bumped.member
    assert member.commit(member.epoch + 1, bumped.kept) == {ErrorCode.stale_member_epoch}


def test_an_older_epoch_commit_of_partitions_no_longer_assigned_is_stale(bumped: Bumped) -> None:
    member = bumped.member
    assert member.commit(bumped.old_epoch, bumped.revoked) == {ErrorCode.stale_member_epoch}


def test_an_older_epoch_commit_of_partitions_kept_since_is_accepted(bumped: Bumped) -> None:
    """KIP-1251: the kept partitions' assignment epoch is the old epoch, so the commit a member
    sent just before learning of its new epoch is taken."""
    member = bumped.member
    assert member.commit(bumped.old_epoch, bumped.kept) == {ErrorCode.none}


def test_a_member_commit_below_v9_is_an_unsupported_version(bumped: Bumped) -> None:
    """``validateOffsetCommit``: a consumer-protocol member's OffsetCommit must be v9 or later
    (the older versions carry a classic generation)."""
    member = bumped.member
    answer = member.commit(member.epoch, bumped.kept, version=COMMIT_VERSION - 1)
    assert answer == {ErrorCode.unsupported_version}
