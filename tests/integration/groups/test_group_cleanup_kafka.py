"""The offsets-retention check's group cleanup on kemu beside a real Apache Kafka 4.4.0 (bench's
jars; that side skipped without java or them), with the same hand-built requests and the same
assertions.

Kafka 4.4.0's ``cleanupGroupMetadata`` runs every ``offsets.retention.check.interval.ms`` over
every group: it tombstones the offsets past their retention, then deletes each group left with
no offsets that is empty and of a type that expires: a KIP-848 consumer group and a streams
group with no member, a classic group in Empty state; a share group never. A heartbeat into a
deleted group then gets GROUP_ID_NOT_FOUND. An open transaction's offsets (TxnOffsetCommit)
hold their group until it ends. Kemu deleted only empty classic groups, and only
when some of their offsets had just expired.

The check interval is a static broker property, so the Kafka side is a Kafka of its own
configuration, started for this module, checking every ``CHECK_MS``.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kemu.protocol.errors import ErrorCode
from kemu.testing.kafka import KafkaConfig
from tests.integration.groups import consumer_wire
from tests.integration.groups.consumer_wire import Broker
from tests.integration.groups.test_static_leave_kafka import Member
from tests.integration.parity import COORDINATOR_STARTING, kemu_or_kafka, nested
from tests.integration.txn.wire_parity import Server, coordinator_ready, until_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

LIST_GROUPS, OFFSET_DELETE, SHARE_HEARTBEAT, STREAMS_HEARTBEAT = 16, 47, 76, 88
CHECK_MS = 500
WAIT_S = 30.0  # a bound for failing, not a measurement
CLEANING = KafkaConfig(
    "kafka-group-cleanup", {"offsets.retention.check.interval.ms": str(CHECK_MS)}
)

# name -> kept by the check (every group below is empty but "stable")
GROUPS = {
    "consumer-empty": False,
    "consumer-offsets": True,  # an empty KIP-848 group with an offset not yet expired
    "consumer-stable": True,  # a member still in it
    "share-empty": True,  # share groups never expire
    "streams-empty": False,
    "classic-empty": False,  # a simple group whose offsets were deleted (OffsetDelete)
    "classic-offsets": True,
}


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory, kafka_config=CLEANING) as chosen:
        yield chosen


def share_beat(broker: Broker, group: str, member_id: str, epoch: int, topic: str) -> Any:
    return until_ready(
        lambda: broker.client.call(
            1,
            SHARE_HEARTBEAT,
            1,
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            rack_id=None,
            subscribed_topic_names=(topic,) if epoch == 0 else None,
        ),
        lambda answer: answer.error_code not in COORDINATOR_STARTING,
    )


def streams_beat(broker: Broker, group: str, member_id: str, epoch: int, topic: str) -> Any:
    joining = epoch == 0
    subtopology = nested(
        STREAMS_HEARTBEAT, 0, "Subtopology", subtopology_id="0", source_topics=(topic,),
        source_topic_regex=(), state_changelog_topics=(), repartition_sink_topics=(),
        repartition_source_topics=(), copartition_groups=(),
    )  # fmt: skip
    fields: dict[str, Any] = {
        "group_id": group,
        "member_id": member_id,
        "member_epoch": epoch,
        "endpoint_information_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": datetime.timedelta(milliseconds=30_000 if joining else -1),
        "topology": (
            nested(STREAMS_HEARTBEAT, 0, "Topology", epoch=0, subtopologies=(subtopology,))
            if joining
            else None
        ),
        "process_id": uuid.uuid4().hex if joining else None,
        "user_endpoint": None,
        "client_tags": () if joining else None,
        "active_tasks": () if epoch >= 0 else None,
        "standby_tasks": () if epoch >= 0 else None,
        "warmup_tasks": () if epoch >= 0 else None,
        "task_offsets": None,
        "task_end_offsets": None,
        "shutdown_application": False,
    }
    return until_ready(
        lambda: broker.client.call(1, STREAMS_HEARTBEAT, 0, **fields),
        lambda answer: answer.error_code not in COORDINATOR_STARTING,
    )


def delete_offset(broker: Broker, group: str, topic: str) -> ErrorCode:
    partition = nested(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition", partition_index=0)
    entry = nested(
        OFFSET_DELETE, 0, "OffsetDeleteRequestTopic", name=topic, partitions=(partition,)
    )
    answer = broker.client.call(1, OFFSET_DELETE, 0, group_id=group, topics=(entry,))
    assert answer.error_code == ErrorCode.none, answer
    return ErrorCode(answer.topics[0].partitions[0].error_code)


def listed(broker: Broker, names: set[str]) -> dict[str, tuple[str, str]]:
    """Each of ``names`` ListGroups shows: its type and state."""
    answer = broker.client.call(1, LIST_GROUPS, 5, states_filter=(), types_filter=())
    return {g.group_id: (g.group_type, g.group_state) for g in answer.groups if g.group_id in names}


@dataclass
class Cleaned:
    """Every group of ``GROUPS`` (ids ``<name>-<suffix>``) as ListGroups showed it before the
    checks and after them, and the heartbeats into the deleted ones."""

    suffix: str
    before: dict[str, tuple[str, str]]
    after: dict[str, tuple[str, str]]
    consumer_beat: tuple[ErrorCode, str | None]
    streams_beat: tuple[ErrorCode, str | None]

    def id(self, name: str) -> str:
        return f"{name}-{self.suffix}"


@pytest.fixture(scope="module")
def cleaned(server: Server) -> Cleaned:
    suffix = uuid.uuid4().hex[:8]
    ids = {name: f"{name}-{suffix}" for name in GROUPS}
    topic = f"cleanup-{suffix}"
    broker = Broker(server)
    # a group that goes is listed while it cannot go yet: once it can, a check (every CHECK_MS)
    # may take it before any listing; the kept ones are listed at the end
    before: dict[str, tuple[str, str]] = {}
    try:
        broker.create_topic(topic, 1)
        for group in ids.values():
            coordinator_ready(broker.client, 0, group)
        for name in ("consumer-empty", "consumer-offsets", "consumer-stable"):
            member = Member(broker, ids[name])
            member.join((topic,))
            if name == "consumer-offsets":
                committed = broker.commit(
                    ids[name], member.member_id, member.epoch, frozenset({(topic, 0)})
                )
                assert committed == {(topic, 0): ErrorCode.none}
            if name == "consumer-empty":
                before.update(listed(broker, {ids[name]}))
            if name != "consumer-stable":
                assert member.send(-1).error == ErrorCode.none
        share_member = uuid.uuid4().hex
        joined = share_beat(broker, ids["share-empty"], share_member, 0, topic)
        assert joined.error_code == ErrorCode.none, joined
        left = share_beat(broker, ids["share-empty"], share_member, -1, topic)
        assert left.error_code == ErrorCode.none, left
        streams_member = uuid.uuid4().hex
        joined = streams_beat(broker, ids["streams-empty"], streams_member, 0, topic)
        assert joined.error_code == ErrorCode.none, joined
        before.update(listed(broker, {ids["streams-empty"]}))
        left = streams_beat(broker, ids["streams-empty"], streams_member, -1, topic)
        assert left.error_code == ErrorCode.none, left
        for name in ("classic-empty", "classic-offsets"):
            committed = broker.commit(ids[name], "", -1, frozenset({(topic, 0)}))
            assert committed == {(topic, 0): ErrorCode.none}
        before.update(listed(broker, {ids["classic-empty"]}))
        assert delete_offset(broker, ids["classic-empty"], topic) == ErrorCode.none
        kept = {ids[name] for name, stays in GROUPS.items() if stays}
        before.update(listed(broker, kept))
        deadline = time.monotonic() + WAIT_S
        while set(listed(broker, set(ids.values()))) - kept and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(3 * CHECK_MS / 1000)  # more checks: the kept ones stay
        after = listed(broker, set(ids.values()))
        consumer_beat = consumer_wire.heartbeat_once(
            broker.client,
            ids["consumer-empty"],
            uuid.uuid4().hex,
            5,
            rebalance_timeout=consumer_wire.UNSET_REBALANCE_TIMEOUT,
        )
        streams = streams_beat(broker, ids["streams-empty"], uuid.uuid4().hex, 5, topic)
        return Cleaned(
            suffix,
            before,
            after,
            (ErrorCode(consumer_beat.error_code), consumer_beat.error_message),
            (ErrorCode(streams.error_code), streams.error_message),
        )
    finally:
        broker.close()


def test_every_group_is_there_before_a_check(cleaned: Cleaned) -> None:
    assert set(cleaned.before) == {cleaned.id(name) for name in GROUPS}
    assert cleaned.before[cleaned.id("share-empty")] == ("share", "Empty")
    assert cleaned.before[cleaned.id("streams-empty")][0] == "streams"  # its member still in


def test_empty_groups_with_no_offsets_are_deleted_but_share_groups(cleaned: Cleaned) -> None:
    """Kemu once kept every KIP-848, streams and classic group here."""
    kept = {cleaned.id(name) for name, stays in GROUPS.items() if stays}
    assert set(cleaned.after) == kept
    assert {k: v for k, v in cleaned.before.items() if k in kept} == cleaned.after


def test_a_heartbeat_into_a_deleted_group(cleaned: Cleaned) -> None:
    assert cleaned.consumer_beat == (
        ErrorCode.group_id_not_found,
        f"Consumer group {cleaned.id('consumer-empty')} not found.",
    )
    assert cleaned.streams_beat == (
        ErrorCode.group_id_not_found,
        f"Streams group {cleaned.id('streams-empty')} not found.",
    )


@dataclass
class Held:
    """A classic group whose member put offsets in a transaction (TxnOffsetCommit) and left: an
    empty group with no committed offsets, listed after several checks while the transaction is
    open, and after its abort once the checks have had time to run."""

    during: bool
    after_abort: bool


@pytest.fixture(scope="module")
def held(server: Server) -> Held:
    suffix = uuid.uuid4().hex[:8]
    group, topic = f"txn-held-{suffix}", f"txn-held-{suffix}"
    broker = Broker(server)
    producer = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": f"t-{suffix}"})
    consumer = Consumer(
        {"bootstrap.servers": server.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        broker.create_topic(topic, 1)
        coordinator_ready(broker.client, 0, group)
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while not consumer.assignment():
            consumer.poll(0.1)
            assert time.monotonic() < deadline, "the consumer was never assigned"
        producer.init_transactions(WAIT_S)
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, 5)], consumer.consumer_group_metadata(), WAIT_S
        )
        consumer.close()  # the group is empty, its only offset in the open transaction
        assert listed(broker, {group}) == {group: ("classic", "Empty")}
        time.sleep(4 * CHECK_MS / 1000)  # several checks with the transaction open
        during = group in listed(broker, {group})
        producer.abort_transaction(WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while group in listed(broker, {group}) and time.monotonic() < deadline:
            time.sleep(0.1)
        return Held(during, group in listed(broker, {group}))
    finally:
        broker.close()


def test_an_open_transactions_offsets_hold_the_group(held: Held) -> None:
    """Kemu once deleted it (the transaction's offsets were not looked at)."""
    assert (held.during, held.after_abort) == (True, False)


def test_a_txn_offset_commit_makes_a_group_that_stays_until_the_transaction_ends(
    server: Server,
) -> None:
    """A TxnOffsetCommit (generation -1) naming a group that does not exist makes a simple
    classic group, empty, listed at once; the checks keep it while the transaction is open and
    delete it after the abort. Kemu once made no group until the commit."""
    suffix = uuid.uuid4().hex[:8]
    group, topic = f"txn-made-{suffix}", f"cleanup-made-{suffix}"
    broker = Broker(server)
    producer = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "transactional.id": f"made-{suffix}",
            "transaction.timeout.ms": 60_000,
        }
    )
    # never subscribed: only its group metadata (no member, generation -1) is used
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group})
    try:
        broker.create_topic(topic, 1)
        coordinator_ready(broker.client, 0, group)
        producer.init_transactions(WAIT_S)
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, 5)], consumer.consumer_group_metadata(), WAIT_S
        )
        time.sleep(4 * CHECK_MS / 1000)  # checks under the open transaction
        held = listed(broker, {group})
        producer.abort_transaction(WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while listed(broker, {group}) and time.monotonic() < deadline:
            time.sleep(0.1)
        after_abort = listed(broker, {group})
    finally:
        consumer.close()
        broker.close()
    assert held == {group: ("classic", "Empty")}
    assert after_abort == {}
