"""A share group with a topic left in InitializingTopics, across a restart, on kemu beside a real
Apache Kafka 4.4.0. The Kafka is this module's own (it is restarted: ``restartable`` of
``test_share_offsets_restart_kafka.py``); skipped without java or the jars. Both servers get the
same hand-built requests and the same assertions; ``__consumer_offsets`` and
``__share_group_state`` are read with a plain consumer and decoded with kemu's serdes.

AlterShareGroupOffsets creates the group with partition 0 of ``consumed`` (two partitions) and
only an out-of-range index of ``small``: ``small`` is listed initializing with no partition, and
stays so (nothing is initialized for it). After the restart:

- Kafka replays InitializingTopics: the record AlterShareGroupOffsets of partition 1 of
  ``consumed`` writes still lists ``small`` initializing. kemu dropped what was being
  initialized when it loaded the log, and wrote the record without ``small``, until this was
  fixed.
- A member subscribing to ``small`` initializes its partition from offset 0 (Kafka's
  buildInitializeShareGroupStateRequest: ``small`` is a topic the group lists), so the record
  produced to it before the member joined is delivered (share.auto.offset.reset is latest).
  kemu, which no longer knew ``small``, initialized it with -1 and missed the record.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from kemu.coordinator.group.share import records as group_records
from kemu.protocol.errors import ErrorCode
from tests.integration.groups.test_deleted_topic_admin_kafka import create_topic
from tests.integration.parity import COORDINATOR_STARTING
from tests.integration.share.test_share_deleted_topic_state_kafka import (
    Fetcher,
    group_share_records,
    produce,
    replayed,
    share_state_of,
    state_partitions,
    wait_for,
)
from tests.integration.share.test_share_offsets_deletion_records_kafka import alter
from tests.integration.share.test_share_offsets_new_group_kafka import described, normalised
from tests.integration.share.test_share_offsets_restart_kafka import (  # noqa: F401 - fixture
    Restartable,
    restartable,
)
from tests.integration.share.test_share_topic_changes_kafka import Broker
from tests.integration.share.test_share_topic_changes_kafka import Member as ShareMember
from tests.integration.txn.wire_parity import coordinator_ready, until_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

STATE = group_records.STATE_PARTITIONS
# how long to fetch for the record before taking none was delivered, not a measurement: within
# the member's session timeout (45 s), since it does not heartbeat while it fetches
FETCH_BOUND_S = 20.0


@dataclass
class Scenario:
    topic: str
    topic_id: uuid.UUID
    small: str
    small_id: uuid.UUID
    before_restart: Any
    # after the restart
    described: Any
    after_restart: Any
    records_of_alteration: list[Any]
    assigned: frozenset[tuple[str, int]]
    records_of_join: list[Any]
    acquired: list[tuple[int, int, int]]
    small_start_offset: int


@pytest.fixture(scope="module")
def s(restartable: Restartable) -> Scenario:  # noqa: F811 - the fixture imported
    server = restartable.server
    suffix = uuid.uuid4().hex[:8]
    topic, small, group = f"consumed-{suffix}", f"small-{suffix}", f"initializing-{suffix}"
    broker = Broker(server)
    try:
        create_topic(broker, topic, 2)
        create_topic(broker, small, 1)
        coordinator_ready(broker.client, 0, group)
        alter(broker, group, {topic: (0,), small: (3,)})

        def settled() -> Any:
            found = state_partitions(group_share_records(broker.bootstrap, group))
            return found if found is not None and found["initialized"] else None

        before_restart = wait_for(settled, "the altered partition initialized")
        ids = dict(broker.ids)
    finally:
        broker.close()
    restartable.restart()
    broker = Broker(server)
    broker.ids = ids
    try:
        coordinator_ready(broker.client, 0, group)
        group_described = until_ready(
            lambda: described(broker, group),
            lambda found: found[0] not in COORDINATOR_STARTING,
        )
        records = group_share_records(broker.bootstrap, group)
        after_restart = state_partitions(records)
        alter(broker, group, {topic: (1,)})

        def both_initialized() -> Any:
            records = group_share_records(broker.bootstrap, group)
            found = state_partitions(records)
            done = found is not None and len(found["initialized"]) == 1
            done = done and {p for *_, p in found["initialized"]} == {(0, 1)}
            return records if done else None

        after_alteration = wait_for(both_initialized, f"{topic} 1 initialized")
        produce(broker.bootstrap, small, 1)
        member = ShareMember(broker, group)
        member.heartbeat(subscribed=(small,))
        member.beat_until(lambda held: held == {(small, 0)}, f"{small} 0")
        after_join = group_share_records(broker.bootstrap, group)
        fetcher = Fetcher(member, broker.ids)
        acquired: list[tuple[int, int, int]] = list(fetcher.fetch((small,)).get(small, []))

        deadline = time.monotonic() + FETCH_BOUND_S
        while not acquired and time.monotonic() < deadline:  # none at all: asserted below
            acquired.extend(fetcher.fetch(()).get(small, []))
        fetcher.close()
        state = replayed(share_state_of(broker.bootstrap, group))
        return Scenario(
            topic,
            broker.ids[topic],
            small,
            broker.ids[small],
            before_restart,
            group_described,
            after_restart,
            after_alteration[len(records) :],
            member.held,
            after_join[len(after_alteration) :],
            acquired,
            state[(group, broker.ids[small], 0)].start_offset,
        )
    finally:
        broker.close()


def test_an_out_of_range_alteration_leaves_the_topic_initializing(s: Scenario) -> None:
    assert s.before_restart == {
        "initializing": {(s.small_id, s.small, ())},
        "initialized": {(s.topic_id, s.topic, (0,))},
        "deleting": set(),
    }


def test_after_the_restart_the_group_is_there(s: Scenario) -> None:
    assert s.described[:3] == (ErrorCode.none, None, "Empty")
    assert s.after_restart == s.before_restart


def test_the_next_record_still_lists_the_initializing_topic(s: Scenario) -> None:
    small = {(s.small_id, s.small, ())}
    assert normalised(s.records_of_alteration) == [
        (
            STATE,
            None,
            ({(s.topic_id, s.topic, (1,))} | small, {(s.topic_id, s.topic, (0,))}, set()),
        ),
        (STATE, None, (small, {(s.topic_id, s.topic, (0, 1))}, set())),
    ]


def test_a_member_initializes_the_listed_topic_from_offset_zero(s: Scenario) -> None:
    assert s.assigned == {(s.small, 0)}
    states = [shown for kind, _, shown in normalised(s.records_of_join) if kind == STATE]
    consumed = {(s.topic_id, s.topic, (0, 1))}
    small = {(s.small_id, s.small, (0,))}
    assert states[0] == (small, consumed, set())
    assert states[-1] == (set(), consumed | small, set())
    assert [(first, last) for first, last, _ in s.acquired] == [(0, 0)]
    assert s.small_start_offset == 0
