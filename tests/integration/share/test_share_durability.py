"""Share groups survive a SIGKILL of kemu (``--data-dir``, 3 brokers).

confluent-kafka ShareConsumers of one group, before the kill:

* one ACCEPTs or REJECTs what it polls and commits; a record counts as settled only when
  commit_sync reported success for its partition;
* one, in a child process, polls and holds what it got without acknowledging (acquired, lock
  running) when kemu is SIGKILLed; the child dies after kemu.

After kemu restarts from the same directory, ``__share_group_state`` read as a topic (a plain
Consumer with assign) decodes to exactly what ReadShareGroupState answers, and agrees with what
the clients were told; DescribeShareGroupOffsets reports the same start offsets. A new consumer
of the group (confluent-kafka's, or Java's KafkaShareConsumer through ShareConsumerProbe) then
gets every record that was not settled - never a settled one - and those the child held come
back with delivery count 2 or more. Finally the state is checked again:
everything acknowledged, the start offsets at the end of the log, lag 0.

And when it is a consumer that is SIGKILLed, kemu staying up: its connections close, its share
sessions end with them, and the next consumer gets its records at once, the delivery undone.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kemu.coordinator.share.decode import ShareStateDecoder
from kemu.coordinator.share.keys import kafka_uuid
from kemu.protocol.errors import ErrorCode
from kemu.testing.plugin import KemuProcess
from tests.integration.clients.test_java_clients import java_probes, run_probe  # noqa: F401  (java_probes: a fixture)
from tests.integration.share.test_share_state_rpcs import (
    STATE_PARTITIONS,
    WireClient,
    consume_state_topic,
    decoded_state,
    state_of,
)

pytestmark = [pytest.mark.integration, pytest.mark.process]

PARTITIONS = 3
FIRST_RECORDS = 90  # 30 per partition, in batches of 5
LATE_RECORDS = 15  # produced while the holder holds, just before the kill
TIMEOUT = 30.0
FIND_COORDINATOR, DESCRIBE_SHARE_OFFSETS = 10, 90
ACKNOWLEDGED, ARCHIVED, AVAILABLE = 2, 4, 0

Key = tuple[int, int]  # (partition, offset)

HOLDER = """
import json, sys, time
from confluent_kafka import ShareConsumer
bootstrap, group, topic = sys.argv[1:4]
share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit", "max.poll.records": 10})
share.subscribe([topic])
held = []
deadline = time.monotonic() + 30
while not held and time.monotonic() < deadline:
    held = [m for m in share.poll(0.2) if m.error() is None]
for m in held:
    print(json.dumps([m.partition(), m.offset(), m.delivery_count()]), flush=True)
print("held", flush=True)
time.sleep(600)  # killed by the test, after kemu
"""


@dataclass
class Ledger:
    """What the clients were told before the kill."""

    accepted: set[Key] = field(default_factory=set)
    rejected: set[Key] = field(default_factory=set)
    held: dict[Key, int] = field(default_factory=dict)  # acquired, never acknowledged
    unsure: set[Key] = field(default_factory=set)  # acknowledged, commit failed

    def settled(self) -> set[Key]:
        return self.accepted | self.rejected


def setup(
    kemu: KemuProcess, topic: str, group: str, partitions: int = PARTITIONS, **configs: str
) -> None:
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(TIMEOUT)
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in {"share.auto.offset.reset": "earliest", **configs}.items()
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    produce(kemu, topic, 0, FIRST_RECORDS, partitions)


def produce(
    kemu: KemuProcess, topic: str, start: int, count: int, partitions: int = PARTITIONS
) -> None:
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for index in range(start, start + count):
        producer.produce(topic, value=b"v%d" % index, partition=index % partitions)
        if (index + 1) % (5 * partitions) == 0:
            assert producer.flush(TIMEOUT) == 0  # batches of 5 records per partition
    assert producer.flush(TIMEOUT) == 0


def every_key(total: int, partitions: int = PARTITIONS) -> set[Key]:
    return {(index % partitions, index // partitions) for index in range(total)}


def settle_some(kemu: KemuProcess, group: str, topic: str, ledger: Ledger, wanted: int) -> None:
    """ACCEPT (REJECT every fifth offset) about ``wanted`` records, committing each poll."""
    share = ShareConsumer(
        {
            "bootstrap.servers": kemu.bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
            "max.poll.records": 10,
        }
    )
    share.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + TIMEOUT
    try:
        while seen < wanted and time.monotonic() < deadline:
            decided: dict[Key, bool] = {}
            for message in share.poll(0.2):
                assert message.error() is None, message.error()
                key = (message.partition(), message.offset())
                reject = message.offset() % 5 == 4
                kind = AcknowledgeType.REJECT if reject else AcknowledgeType.ACCEPT
                share.acknowledge(message, kind)
                decided[key] = reject
            if not decided:
                continue
            seen += len(decided)
            results = share.commit_sync(TIMEOUT)
            failed = {tp.partition for tp, error in results.items() if error is not None}
            for key, reject in decided.items():
                if key[0] in failed:
                    ledger.unsure.add(key)
                else:
                    (ledger.rejected if reject else ledger.accepted).add(key)
    finally:
        share.close()


@contextlib.contextmanager
def holder(kemu: KemuProcess, group: str, topic: str) -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, kemu.bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield child
    finally:
        child.kill()
        child.wait(10)


def read_held(child: subprocess.Popen[str], ledger: Ledger) -> None:
    assert child.stdout is not None
    for line in child.stdout:
        if line.strip() == "held":
            return
        partition, offset, count = json.loads(line)
        ledger.held[(partition, offset)] = count
    raise AssertionError("the holder died before holding anything")


def consume_rest(
    kemu: KemuProcess, group: str, topic: str, expected: set[Key], timeout: float = 2 * TIMEOUT
) -> list[Any]:
    """ACCEPT everything that comes until ``expected`` came and 3 more seconds passed."""
    share = ShareConsumer(
        {
            "bootstrap.servers": kemu.bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    share.subscribe([topic])
    got: list[tuple[int, int, int]] = []
    deadline = time.monotonic() + timeout
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            if quiet_until is None and expected <= {(p, o) for p, o, _ in got}:
                quiet_until = time.monotonic() + 3  # anything settled would show up now
            if quiet_until is not None and time.monotonic() > quiet_until:
                break
            for message in share.poll(0.2):
                assert message.error() is None, message.error()
                got.append((message.partition(), message.offset(), message.delivery_count()))
                share.acknowledge(message, AcknowledgeType.ACCEPT)
            if got:
                results = share.commit_sync(TIMEOUT)
                assert all(error is None for error in results.values()), results
    finally:
        share.close()
    return got


def consume_rest_in_java(kemu: KemuProcess, prefix: str, topic: str, count: int) -> list[Any]:
    """KafkaShareConsumer (implicit mode) polls ``count`` records and commits; another one then
    polls for 3 s: everything both got, as (partition, offset, delivery count)."""
    run = run_probe(
        "ShareConsumerProbe",
        kemu.bootstrap,
        "--checks",
        "implicit",
        "--prefix",
        prefix,
        "--topic",
        topic,
        "--records",
        str(count),
    )
    consumed = run.one("consume_all")
    assert consumed["commit_errors"] == {}
    got = []
    for key in consumed["records"]:
        partition, offset = map(int, key.split(":"))
        got.append((partition, offset, consumed["delivery_counts"][key]))
    for key in run.one("nothing_left")["records"]:
        where, count_text = key.split("#")
        partition, offset = map(int, where.split(":"))
        got.append((partition, offset, int(count_text)))
    return got


# --- the state, three ways ----------------------------------------------------------------------


def leader_epochs(client: WireClient, topic: str) -> dict[int, int]:
    topic_request = client.nested(3, 12, "MetadataRequestTopic", name=topic, topic_id=None)
    response = client.call(1, 3, 12, topics=(topic_request,), allow_auto_topic_creation=False)
    [found] = response.topics
    return {p.partition_index: p.leader_epoch for p in found.partitions}


def read_states(
    client: WireClient, group: str, topic_id: uuid.UUID, epochs: dict[int, int]
) -> dict[int, tuple[Any, ...]]:
    """ReadShareGroupState per partition, at the partition's own leader epoch (so that the
    share-partition leaders are not fenced by a newer one)."""
    return {p: state_of(client.read(group, topic_id, p, epoch)) for p, epoch in epochs.items()}


def decoded_states(bootstrap: str, group: str, topic_id: uuid.UUID) -> dict[int, tuple[Any, ...]]:
    decoder = ShareStateDecoder()
    for record in consume_state_topic(bootstrap):
        assert "error" not in decoder.add(record)
    return {
        state["partition"]: decoded_state(state)
        for state in decoder.states()
        if state["groupId"] == group and state["topicId"] == kafka_uuid(topic_id)
    }


def describe_offsets(client: WireClient, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """DescribeShareGroupOffsets from the group coordinator: partition -> (start, lag)."""
    found = client.call(1, FIND_COORDINATOR, 6, key_type=0, coordinator_keys=(group,))
    [coordinator] = found.coordinators
    assert coordinator.error_code == ErrorCode.none
    request_topic = client.nested(
        DESCRIBE_SHARE_OFFSETS,
        1,
        "DescribeShareGroupOffsetsRequestTopic",
        topic_name=topic,
        partitions=tuple(range(PARTITIONS)),
    )
    request_group = client.nested(
        DESCRIBE_SHARE_OFFSETS,
        1,
        "DescribeShareGroupOffsetsRequestGroup",
        group_id=group,
        topics=(request_topic,),
    )
    response = client.call(
        int(coordinator.node_id), DESCRIBE_SHARE_OFFSETS, 1, groups=(request_group,)
    )
    [answer] = response.groups
    assert answer.error_code == ErrorCode.none, answer
    [described] = answer.topics
    offsets = {}
    for partition in described.partitions:
        assert partition.error_code == ErrorCode.none, partition
        offsets[partition.partition_index] = (partition.start_offset, partition.lag)
    return offsets


def complete_past_start(state: tuple[Any, ...]) -> int:
    """How many records at or past the start offset are acknowledged or archived."""
    _, _, start, batches = state
    return sum(
        last - max(first, start) + 1
        for first, last, delivery_state, _ in batches
        if delivery_state in (ACKNOWLEDGED, ARCHIVED) and last >= start
    )


def state_of_record(state: tuple[Any, ...], offset: int) -> tuple[int, int] | None:
    """(delivery state, delivery count) of ``offset`` in a state; None below the start offset
    (complete) or past the last batch (never delivered)."""
    _, _, start, batches = state
    if offset < start:
        return None
    for first, last, delivery_state, count in batches:
        if first <= offset <= last:
            return delivery_state, count
    return None


# --- the test -----------------------------------------------------------------------------------


@pytest.mark.parametrize("successor", ["confluent", "java"])
def test_share_group_state_survives_sigkill(
    kemu_factory: type[KemuProcess], tmp_path: Path, successor: str, request: pytest.FixtureRequest
) -> None:
    if successor == "java":
        request.getfixturevalue("java_probes")  # built, or the test skips without java
    data_dir = tmp_path / "data"
    kemu = kemu_factory(
        brokers=3,
        data_dir=data_dir,
        overrides=[
            f"share.coordinator.state.topic.num.partitions={STATE_PARTITIONS}",
            # The dead holder stays a member, with partitions assigned, until its session
            # expires (as in Kafka, members survive the restart): keep that short.
            "group.share.min.session.timeout.ms=6000",
            "group.share.session.timeout.ms=6000",
            "group.share.min.heartbeat.interval.ms=1000",
            "group.share.heartbeat.interval.ms=1000",
        ],
    ).start()
    topic, prefix = f"durable-{uuid.uuid4().hex[:8]}", f"dg-{uuid.uuid4().hex[:8]}"
    group = f"{prefix}-implicit"  # the group ShareConsumerProbe's consume_all check uses
    setup(kemu, topic, group)
    ledger = Ledger()

    settle_some(kemu, group, topic, ledger, wanted=30)
    assert ledger.accepted and ledger.rejected
    with holder(kemu, group, topic) as child:
        read_held(child, ledger)
        produce(kemu, topic, FIRST_RECORDS, LATE_RECORDS)
        kemu.kill()  # the holder still holds; then it dies too, talking to nobody
    assert ledger.held and not ledger.held.keys() & ledger.settled()
    assert set(ledger.held.values()) == {1}

    kemu.start()
    total = FIRST_RECORDS + LATE_RECORDS
    ends = {p: len([k for k in every_key(total) if k[0] == p]) for p in range(PARTITIONS)}
    client = WireClient(kemu.bootstrap)
    try:
        topic_id = client.topic_id(topic)
        epochs = leader_epochs(client, topic)

        # What the state says after the restart: three views agree, and match the ledger.
        read = read_states(client, group, topic_id, epochs)
        assert decoded_states(kemu.bootstrap, group, topic_id) == read
        # lag: what is past the start offset and not complete yet
        assert describe_offsets(client, group, topic) == {
            p: (state[2], ends[p] - state[2] - complete_past_start(state))
            for p, state in read.items()
        }
        for partition, offset in ledger.accepted:
            assert state_of_record(read[partition], offset) in (None, (ACKNOWLEDGED, 1))
        for partition, offset in ledger.rejected:
            assert state_of_record(read[partition], offset) in (None, (ARCHIVED, 1))
        for (partition, offset), count in ledger.held.items():
            # acquisitions are written through: the holder's delivery is on record
            assert state_of_record(read[partition], offset) == (AVAILABLE, count)

        # A new consumer gets every record that was not settled, and no settled one.
        unsettled = every_key(total) - ledger.settled() - ledger.unsure
        if successor == "java":
            got = consume_rest_in_java(kemu, prefix, topic, len(unsettled))
        else:
            got = consume_rest(kemu, group, topic, unsettled)
        keys = [(p, o) for p, o, _ in got]
        assert len(keys) == len(set(keys)), "a record was delivered twice"
        assert not set(keys) & ledger.settled()
        assert set(keys) - ledger.unsure == unsettled
        counts = {(p, o): count for p, o, count in got}
        for key, before in ledger.held.items():
            assert counts[key] >= before + 1, (key, before, counts[key])

        # Everything is acknowledged now: the three views agree on it. As Kafka writes it, the
        # persisted start offset may stay below the end (a write carries the start from before
        # its own move), with every record from there on complete: the lag is 0.
        read = read_states(client, group, topic_id, epochs)
        assert decoded_states(kemu.bootstrap, group, topic_id) == read
        for p, state in read.items():
            assert 0 <= state[2] <= ends[p], (p, state)
            assert complete_past_start(state) == ends[p] - state[2], (p, state)
        assert describe_offsets(client, group, topic) == {
            p: (state[2], 0) for p, state in read.items()
        }
    finally:
        client.close()


def test_a_killed_consumers_records_go_to_the_next_one(kemu_cluster: KemuProcess) -> None:
    """The holder's process is SIGKILLed: its connections close, so its share sessions end and
    its records are released at once, their delivery counted as lock expiry would count it
    (count 2: Kafka 4.4.0 releases a closed session's records with DeliveryCountOps.NO_OP, see
    test_share_close_java.py). One partition, so that the dead member (still in the group until its
    45 s session expires) does not keep the partition from the next consumer; the wait is
    shorter than that session and than the 60 s lock."""
    topic, group = f"crash-{uuid.uuid4().hex[:8]}", f"cg-{uuid.uuid4().hex[:8]}"
    setup(kemu_cluster, topic, group, 1, **{"share.record.lock.duration.ms": "60000"})
    ledger = Ledger()
    with holder(kemu_cluster, group, topic) as child:
        read_held(child, ledger)
        child.kill()
        child.wait(10)
    everything = every_key(FIRST_RECORDS, 1)
    got = consume_rest(kemu_cluster, group, topic, everything, timeout=20)
    counts = {(p, o): count for p, o, count in got}
    assert sorted(counts) == sorted(everything)
    assert {counts[key] for key in ledger.held} == {2}
