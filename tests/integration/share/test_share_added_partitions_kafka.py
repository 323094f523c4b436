"""Partitions added to a topic a share group consumes, on kemu beside a real Apache Kafka 4.4.0
(the session's plain Kafka; that side skipped without java or bench's jars). Both servers get the
same hand-built requests and the same assertions; ``__share_group_state`` is read with a plain
consumer and decoded with kemu's serdes.

A member of a new group (share.auto.offset.reset=latest, the default) holds the one partition of
``grown`` and acquires and accepts a record of it. ``grown`` then gets a second partition
(CreatePartitions) and three records are produced to that partition before the member's next
heartbeat. That heartbeat initializes the new partition's share state: Kafka's
buildInitializeShareGroupStateRequest gives a partition of a topic the group already had
initialized start offset 0, not -1 (which lets ``share.auto.offset.reset`` decide), so the
records produced before the group noticed the partition are delivered. kemu initialized it with
-1 and started at the latest offset, missing them, until this was fixed. A topic new to the group
(``fresh``, subscribed at the same time, with a record produced before) still starts at -1 and
delivers nothing produced before, on both.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from kemu.protocol.errors import ErrorCode
from tests.integration.groups.test_deleted_topic_admin_kafka import create_topic
from tests.integration.parity import kemu_or_kafka
from tests.integration.share.test_share_deleted_topic_state_kafka import (
    KeyState,
    replayed,
    share_state_of,
    wait_for,
)
from tests.integration.share.test_share_topic_changes_kafka import Broker, nested
from tests.integration.share.test_share_topic_changes_kafka import Member as ShareMember
from tests.integration.txn.wire_parity import Server, coordinator_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

SHARE_FETCH, SHARE_ACK = 78, 79
ACCEPT = 1
PRODUCED_TO_NEW = 3
# a bound for failing, not a measurement: within the member's session timeout (45 s), since it
# does not heartbeat while it fetches
FETCH_BOUND_S = 20.0
Partition = tuple[str, int]


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


def produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for index in range(count):
        producer.produce(topic, value=b"v%d" % index, partition=partition)
    assert producer.flush(30) == 0


def grow(broker: Broker, topic: str, partitions: int) -> None:
    """The topic with ``partitions`` partitions, once Metadata shows them all."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions(topic, partitions)])[topic].result(timeout=60)
    wait_for(
        lambda: len(broker.metadata(topic).partitions) == partitions,
        f"{topic} with {partitions} partitions",
    )


@dataclass
class Session:
    """ShareFetch / ShareAcknowledge of one member over one share session, naming every
    partition it holds on its first fetch."""

    member: ShareMember
    epoch: int = 0

    def fetch(self, wanted: frozenset[Partition]) -> dict[Partition, list[tuple[int, int]]]:
        broker = self.member.broker
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(wanted if self.epoch == 0 else ()):
            by_topic.setdefault(topic, []).append(index)
        topics = tuple(
            nested(
                SHARE_FETCH,
                1,
                "FetchTopic",
                topic_id=broker.ids[topic],
                partitions=tuple(
                    nested(
                        SHARE_FETCH,
                        1,
                        "FetchPartition",
                        partition_index=index,
                        acknowledgement_batches=(),
                    )
                    for index in indexes
                ),
            )
            for topic, indexes in by_topic.items()
        )
        answer = broker.client.call(
            1,
            SHARE_FETCH,
            1,
            group_id=self.member.group,
            member_id=self.member.member_id,
            share_session_epoch=self.epoch,
            max_wait=datetime.timedelta(milliseconds=500 if self.epoch >= 0 else 0),
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=500,
            batch_size=500,
            topics=topics,
            forgotten_topics_data=(),
        )
        assert answer.error_code == ErrorCode.none, answer
        self.epoch += 1
        names = {topic_id: name for name, topic_id in broker.ids.items()}
        acquired: dict[Partition, list[tuple[int, int]]] = {}
        for topic in answer.responses:
            name = names[uuid.UUID(str(topic.topic_id))]
            for partition in topic.partitions:
                assert partition.error_code == ErrorCode.none, partition
                acquired.setdefault((name, partition.partition_index), []).extend(
                    (int(a.first_offset), int(a.last_offset)) for a in partition.acquired_records
                )
        return acquired

    def accept(self, where: Partition, first: int, last: int) -> None:
        broker = self.member.broker
        topic, index = where
        batch = nested(
            SHARE_ACK,
            1,
            "AcknowledgementBatch",
            first_offset=first,
            last_offset=last,
            acknowledge_types=(ACCEPT,),
        )
        partition = nested(
            SHARE_ACK,
            1,
            "AcknowledgePartition",
            partition_index=index,
            acknowledgement_batches=(batch,),
        )
        answer = broker.client.call(
            1,
            SHARE_ACK,
            1,
            group_id=self.member.group,
            member_id=self.member.member_id,
            share_session_epoch=self.epoch,
            topics=(
                nested(
                    SHARE_ACK,
                    1,
                    "AcknowledgeTopic",
                    topic_id=broker.ids[topic],
                    partitions=(partition,),
                ),
            ),
        )
        assert answer.error_code == ErrorCode.none, answer
        self.epoch += 1

    def close(self) -> None:
        self.epoch = -1
        assert self.fetch(frozenset()) == {}


def acquire(
    session: Session,
    wanted: frozenset[Partition],
    what: str,
    got: dict[Partition, list[tuple[int, int]]] | None = None,
) -> dict[Partition, Any]:
    """ShareFetch until a record of each of ``wanted`` was acquired (beside ``got``, what was
    already); then a last fetch so that whatever else was there is acquired too."""
    got = {} if got is None else got

    def done() -> bool:
        for where, ranges in session.fetch(wanted).items():
            got.setdefault(where, []).extend(ranges)
        return all(got.get(where) for where in wanted)

    wait_for(done, what, bound_s=FETCH_BOUND_S)
    for where, ranges in session.fetch(wanted).items():
        got.setdefault(where, []).extend(ranges)
    return {where: ranges for where, ranges in got.items() if ranges}


@dataclass
class Scenario:
    grown: str
    fresh: str
    first: dict[Partition, Any]
    assigned: frozenset[Partition]
    after_growth: dict[Partition, Any]
    state: dict[Partition, KeyState]


@pytest.fixture(scope="module")
def s(server: Server) -> Iterator[Scenario]:
    suffix = uuid.uuid4().hex[:8]
    grown, fresh, group = f"grown-{suffix}", f"fresh-{suffix}", f"added-{suffix}"
    broker = Broker(server)
    try:
        create_topic(broker, grown, 1)
        create_topic(broker, fresh, 1)
        coordinator_ready(broker.client, 0, group)
        member = ShareMember(broker, group)
        member.heartbeat(subscribed=(grown,))
        member.beat_until(lambda held: held == {(grown, 0)}, f"{grown}-0")
        session = Session(member)
        session.fetch(member.held)  # the share partition starts at the (empty) log's end
        produce(broker.bootstrap, grown, 0, 1)
        first = acquire(session, member.held, f"the record of {grown}-0")
        session.accept((grown, 0), 0, 0)
        session.close()
        grow(broker, grown, 2)
        produce(broker.bootstrap, grown, 1, PRODUCED_TO_NEW)
        produce(broker.bootstrap, fresh, 0, 1)
        member.heartbeat(subscribed=(grown, fresh))
        everything = {(grown, 0), (grown, 1), (fresh, 0)}
        member.beat_until(lambda held: held == everything, "every partition")
        assigned = member.held
        session = Session(member)
        wanted = frozenset({(grown, 1), (fresh, 0)})
        got = session.fetch(wanted)  # the share partitions loaded: fresh's starts at its end
        produce(broker.bootstrap, fresh, 0, 1)  # so this one is delivered
        after = acquire(session, wanted, "the new partitions", got)
        session.close()
        names = {topic_id: name for name, topic_id in broker.ids.items()}
        state = {
            (names[topic_id], index): found
            for (_, topic_id, index), found in replayed(
                share_state_of(broker.bootstrap, group)
            ).items()
        }
        yield Scenario(grown, fresh, first, assigned, after, state)
    finally:
        broker.close()


def test_the_first_partition_is_consumed(s: Scenario) -> None:
    assert s.first == {(s.grown, 0): [(0, 0)]}


def test_records_produced_to_an_added_partition_before_the_group_saw_it_are_delivered(
    s: Scenario,
) -> None:
    assert s.assigned == {(s.grown, 0), (s.grown, 1), (s.fresh, 0)}
    assert s.after_growth[(s.grown, 1)] == [(0, PRODUCED_TO_NEW - 1)]


def test_a_topic_new_to_the_group_starts_at_its_latest_offset(s: Scenario) -> None:
    assert s.after_growth[(s.fresh, 0)] == [(1, 1)]


def test_the_added_partition_is_initialized_from_offset_zero(s: Scenario) -> None:
    assert s.state[(s.grown, 1)].start_offset == 0
    assert not s.state[(s.grown, 1)].deleted
