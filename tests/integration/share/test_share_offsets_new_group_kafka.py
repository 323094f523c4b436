"""AlterShareGroupOffsets naming a share group that does not exist yet, on kemu beside a real
Apache Kafka 4.4.0 (the session's plain Kafka; that side skipped without java or bench's jars).
Both servers get the same hand-built requests and the same assertions; ``__consumer_offsets`` is
read with a plain consumer and decoded with kemu's serde.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kemu.coordinator.group.share import records as group_records
from kemu.protocol.errors import ErrorCode
from tests.integration.groups.test_deleted_topic_admin_kafka import create_topic
from tests.integration.parity import kemu_or_kafka
from tests.integration.share.test_share_deleted_topic_state_kafka import (
    Fetcher,
    alter_offsets,
    describe_offsets,
    group_share_records,
    produce,
    state_partitions,
    wait_for,
)
from tests.integration.share.test_share_topic_changes_kafka import COORDINATOR_STARTING, Broker
from tests.integration.share.test_share_topic_changes_kafka import Member as ShareMember
from tests.integration.txn.wire_parity import Server, coordinator_ready, until_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

LIST_GROUPS, SHARE_DESCRIBE = 16, 77
PRODUCED = 3
WAIT_S = 60.0  # a bound for failing, not a measurement
KEMU_WAIT_S = 10.0  # kemu writes the record within the request


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


def initialized(records: list[Any]) -> list[Any] | None:
    """``records`` once the last state-partitions record among them has an initialized topic."""
    found = state_partitions(records)
    return records if found is not None and found["initialized"] else None


def listed(broker: Broker, group: str) -> Any:
    answer = broker.client.call(1, LIST_GROUPS, 5, states_filter=(), types_filter=())
    return [
        (g.group_id, g.protocol_type, g.group_state, g.group_type)
        for g in answer.groups
        if g.group_id == group
    ]


def described(broker: Broker, group: str) -> Any:
    (g,) = broker.client.call(
        1, SHARE_DESCRIBE, 1, group_ids=(group,), include_authorized_operations=False
    ).groups
    return (
        ErrorCode(g.error_code),
        g.error_message,
        g.group_state,
        g.group_epoch,
        g.assignment_epoch,
        g.assignor_name,
        [(m.member_epoch, sorted(m.subscribed_topic_names)) for m in g.members],
    )


@dataclass
class Scenario:
    topic: str
    topic_id: uuid.UUID
    altered: Any
    records: list[Any]
    described: Any
    listed: Any
    offsets: Any
    beats: Any
    records_after_join: list[Any]
    described_after_join: Any
    # what the member's fetches acquired (a record more produced after the first), the errors
    # they answered, the start offset then
    acquired: list[tuple[int, int, int]]
    fetch_errors: list[Any]
    offsets_after_fetch: Any


@pytest.fixture(scope="module")
def scenario(server: Server) -> Scenario:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"altered-{suffix}", f"new-{suffix}"
    broker = Broker(server)
    try:
        create_topic(broker, topic, 1)
        produce(broker.bootstrap, topic, PRODUCED)
        coordinator_ready(broker.client, 0, group)
        altered = until_ready(
            lambda: alter_offsets(broker, group, topic, 1),
            lambda answer: answer.error_code not in COORDINATOR_STARTING,
        )
        records = wait_for(
            lambda: initialized(group_share_records(broker.bootstrap, group)),
            "the partition's share state initialized",
            bound_s=KEMU_WAIT_S if server.name == "kemu" else WAIT_S,
        )
        group_described = described(broker, group)
        group_listed = listed(broker, group)
        offsets = describe_offsets(broker, group)
        member = ShareMember(broker, group)
        beats = [member.heartbeat(subscribed=(topic,))]
        beats += member.beat_until(lambda held: held == {(topic, 0)}, "the partition")
        records_after_join = group_share_records(broker.bootstrap, group)
        described_after_join = described(broker, group)
        fetcher = Fetcher(member, dict(broker.ids))
        acquired = fetcher.fetch((topic,)).get(topic, [])
        produce(broker.bootstrap, topic, 1)

        def all_acquired() -> bool:
            acquired.extend(fetcher.fetch(()).get(topic, []))
            return sum(last - first + 1 for first, last, _ in acquired) >= PRODUCED

        wait_for(all_acquired, "the records from the altered offset on")
        return Scenario(
            topic,
            broker.ids[topic],
            altered,
            records,
            group_described,
            group_listed,
            offsets,
            beats,
            records_after_join,
            described_after_join,
            acquired,
            list(fetcher.errors),
            describe_offsets(broker, group),
        )
    finally:
        broker.close()


def normalised(records: list[Any]) -> list[tuple[Any, ...]]:
    """The records by type, member ids, metadata hashes and timestamps as placeholders (they
    differ from run to run) and state-partitions values as sets."""
    found: list[tuple[Any, ...]] = []
    for key, value in records:
        member = None if key.member is None else "member"
        if isinstance(value, group_records.ShareEpochValue):
            shown: Any = (value.epoch, "hash" if value.metadata_hash else 0)
        elif isinstance(value, group_records.ShareTargetEpochValue):
            shown = (value.assignment_epoch, "time" if value.assignment_timestamp_ms else 0)
        elif isinstance(value, group_records.ShareStatePartitionsValue):
            shown = (
                {(t.topic_id, t.topic_name, t.partitions) for t in value.initializing},
                {(t.topic_id, t.topic_name, t.partitions) for t in value.initialized},
                set(value.deleting),
            )
        elif isinstance(value, group_records.ShareMemberValue):
            shown = value.subscribed_topic_names
        elif isinstance(value, group_records.ShareTargetMemberValue):
            shown = value.partitions
        elif isinstance(value, group_records.ShareAssignmentValue):
            shown = (value.member_epoch, value.previous_member_epoch, value.assigned)
        else:
            shown = value
        found.append((key.record_type, member, shown))
    return found


def test_alter_share_group_offsets_creates_the_group(scenario: Scenario) -> None:
    s = scenario
    assert (s.altered.error_code, s.altered.error_message) == (ErrorCode.none, None)
    assert [
        (t.topic_name, t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
        for t in s.altered.responses
    ] == [(s.topic, s.topic_id, [(0, ErrorCode.none)])]


def test_the_records_alter_share_group_offsets_writes_for_a_new_group(scenario: Scenario) -> None:
    """Only ShareGroupStatePartitionMetadata: the partition initializing, then initialized."""
    s = scenario
    partition = {(s.topic_id, s.topic, (0,))}
    assert normalised(s.records) == [
        (group_records.STATE_PARTITIONS, None, (partition, set(), set())),
        (group_records.STATE_PARTITIONS, None, (set(), partition, set())),
    ]


def test_the_new_group_as_the_admin_apis_show_it(scenario: Scenario) -> None:
    """Empty, group epoch and assignment epoch 1, no members; its start offset the altered one."""
    s = scenario
    assert s.described == (ErrorCode.none, None, "Empty", 1, 1, "simple", [])
    assert s.listed == [(s.listed[0][0], "share", "Empty", "share")]
    assert s.offsets == {(s.topic, 0): (1, ErrorCode.none)}


def test_the_first_member_joins_at_epoch_two(server: Server, scenario: Scenario) -> None:
    """Its first heartbeat assigns it the partition at epoch 2; the join writes the member, the
    group epoch 2, its target, the target epoch 2 and its current assignment."""
    s = scenario
    assert [(beat.epoch, beat.assignment) for beat in s.beats] == [(2, {(s.topic, 0)})]
    assert s.described_after_join == (
        ErrorCode.none,
        None,
        "Stable",
        2,
        2,
        "simple",
        [(2, [s.topic])],
    )
    assigned = frozenset({(s.topic_id, 0)})
    assert normalised(s.records_after_join[len(s.records) :]) == [
        (group_records.MEMBER_METADATA, "member", (s.topic,)),
        (group_records.GROUP_METADATA, None, (2, "hash")),
        (group_records.TARGET_MEMBER, "member", assigned),
        (group_records.TARGET_METADATA, None, (2, "time")),
        (group_records.CURRENT_ASSIGNMENT, "member", (2, 0, assigned)),
    ]


def test_the_first_fetch_starts_at_the_altered_offset(scenario: Scenario) -> None:
    """The records from the altered start offset on are delivered; the start offset stays until
    something is acknowledged."""
    s = scenario
    assert s.acquired == [(1, PRODUCED - 1, 1), (PRODUCED, PRODUCED, 1)]
    assert s.fetch_errors == []
    assert s.offsets_after_fetch == {(s.topic, 0): (1, ErrorCode.none)}
