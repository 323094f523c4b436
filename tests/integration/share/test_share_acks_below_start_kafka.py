"""Acknowledgement batches below the share-partition start offset, on kemu beside a real Apache
Kafka 4.4.0 (the session's plain Kafka; that side skipped without java or bench's jars). Both
servers get the same hand-built requests and the same assertions.

One member of a share group acquires records 0..11 of a one-partition topic and ACCEPTs 0..3
with a ShareAcknowledge, so the start offset moves to 4. Then, each answer's partition error
and message kept and the start offset read with DescribeShareGroupOffsets after it:

(a) a ShareAcknowledge whose only batch, 0..1, is entirely below the start offset;
(b) one with that batch and 4..5 above it;
(c) one straddling the start offset, 2..7;
(d) a ShareFetch of the member's session carrying 0..1 and 8..9 (piggybacked);
(e) a ShareFetch carrying 6..10, straddling again.

DescribeShareGroupOffsets shows the start offset last written to the share coordinator, and
Kafka writes an acknowledgement's record states with the start offset it had *before* applying
them (kemu's window does the same): so the start offset the accepted records move to shows one
write later, and a request that changes nothing writes nothing.

Kafka 4.4.0's SharePartition.acknowledge skips a batch whose last offset is below the start
offset ("All offsets in the acknowledgement batch are already archived", a trace log), and the
part of a straddling batch below it: every answer is NONE with no message, and the start offset
moves past what was accepted above it (4, 6, 8, 10, 11, written one step late). kemu refused an
entirely-below batch with INVALID_RECORD_STATE ("Batch record not found. The request batch
offsets are not found in the cache."), the whole partition's acknowledgement with it, until
this was fixed. Nothing acknowledged is delivered again: a record produced after all this is
the next and only one acquired.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kemu.protocol.errors import ErrorCode
from tests.integration.groups.test_deleted_topic_admin_kafka import create_topic
from tests.integration.parity import kemu_or_kafka
from tests.integration.share.test_share_deleted_topic_state_kafka import (
    Fetcher,
    acquire_all,
    describe_offsets,
    produce,
)
from tests.integration.share.test_share_topic_changes_kafka import Broker, nested
from tests.integration.share.test_share_topic_changes_kafka import Member as ShareMember
from tests.integration.txn.wire_parity import Server, coordinator_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

SHARE_FETCH, SHARE_ACK = 78, 79
ACCEPT = 1
PRODUCED = 12

Batch = tuple[int, int]  # first, last offset; every batch here ACCEPTs


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


@dataclass(frozen=True)
class Step:
    """One acknowledging request's answer for the partition, and the start offset after it."""

    error: ErrorCode
    message: str | None
    start_offset: int  # DescribeShareGroupOffsets after it: the one written (see below)


def partition_with(batches: tuple[Batch, ...], api_key: int, partition_class: str) -> Any:
    return nested(
        api_key,
        1,
        partition_class,
        partition_index=0,
        acknowledgement_batches=tuple(
            nested(
                api_key,
                1,
                "AcknowledgementBatch",
                first_offset=first,
                last_offset=last,
                acknowledge_types=(ACCEPT,),
            )
            for first, last in batches
        ),
    )


def share_acknowledge(fetcher: Fetcher, topic: str, batches: tuple[Batch, ...]) -> Any:
    """One ShareAcknowledge of the session: the topic's partition's answer."""
    answer = fetcher.member.broker.client.call(
        1,
        SHARE_ACK,
        1,
        group_id=fetcher.member.group,
        member_id=fetcher.member.member_id,
        share_session_epoch=fetcher.epoch,
        topics=(
            nested(
                SHARE_ACK,
                1,
                "AcknowledgeTopic",
                topic_id=fetcher.ids[topic],
                partitions=(partition_with(batches, SHARE_ACK, "AcknowledgePartition"),),
            ),
        ),
    )
    assert (answer.error_code, answer.error_message) == (ErrorCode.none, None), answer
    fetcher.epoch += 1
    ((partition,),) = [t.partitions for t in answer.responses]
    return partition


def fetch_acknowledging(fetcher: Fetcher, topic: str, batches: tuple[Batch, ...]) -> Any:
    """One ShareFetch of the session (no wait) carrying ``batches``: the partition's answer,
    which must have acquired nothing (nothing is AVAILABLE)."""
    answer = fetcher.member.broker.client.call(
        1,
        SHARE_FETCH,
        1,
        group_id=fetcher.member.group,
        member_id=fetcher.member.member_id,
        share_session_epoch=fetcher.epoch,
        max_wait=datetime.timedelta(milliseconds=0),
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=500,
        batch_size=500,
        topics=(
            nested(
                SHARE_FETCH,
                1,
                "FetchTopic",
                topic_id=fetcher.ids[topic],
                partitions=(partition_with(batches, SHARE_FETCH, "FetchPartition"),),
            ),
        ),
        forgotten_topics_data=(),
    )
    assert (answer.error_code, answer.error_message) == (ErrorCode.none, None), answer
    fetcher.epoch += 1
    ((partition,),) = [t.partitions for t in answer.responses]
    assert (partition.error_code, list(partition.acquired_records)) == (ErrorCode.none, [])
    return partition


@dataclass(frozen=True)
class Scenario:
    accepted_below: Step  # 0..3, the start offset moving to 4
    only_below: Step  # (a)
    below_and_above: Step  # (b)
    straddling: Step  # (c)
    fetch_below_and_above: Step  # (d)
    fetch_straddling: Step  # (e)
    acquired_after: list[tuple[int, int, int]]


@pytest.fixture(scope="module")
def scenario(server: Server) -> Scenario:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"below-{suffix}", f"below-{suffix}"
    broker = Broker(server)
    try:
        create_topic(broker, topic, 1)
        coordinator_ready(broker.client, 0, group)
        member = ShareMember(broker, group)
        member.heartbeat(subscribed=(topic,))
        member.beat_until(lambda held: held == {(topic, 0)}, "the partition")
        fetcher = Fetcher(member, dict(broker.ids))
        # the session opened before any record (share.auto.offset.reset=latest starts at 0)
        assert fetcher.fetch((topic,)) == {topic: []}
        produce(broker.bootstrap, topic, PRODUCED)
        acquired = acquire_all(fetcher, {topic: PRODUCED})[topic]
        assert sorted(acquired) == [(first, last, 1) for first, last, _ in sorted(acquired)]
        assert sum(last - first + 1 for first, last, _ in acquired) == PRODUCED

        def start_offset() -> int:
            return int(describe_offsets(broker, group)[(topic, 0)][0])

        def acknowledged(*batches: Batch) -> Step:
            p = share_acknowledge(fetcher, topic, batches)
            return Step(ErrorCode(p.error_code), p.error_message, start_offset())

        def fetched(*batches: Batch) -> Step:
            p = fetch_acknowledging(fetcher, topic, batches)
            return Step(
                ErrorCode(p.acknowledge_error_code), p.acknowledge_error_message, start_offset()
            )

        accepted_below = acknowledged((0, 3))
        only_below = acknowledged((0, 1))
        below_and_above = acknowledged((0, 1), (4, 5))
        straddling = acknowledged((2, 7))
        fetch_below_and_above = fetched((0, 1), (8, 9))
        fetch_straddling = fetched((6, 10))
        # the write of 11 carries the start offset 11 moved to; the next write would carry 12
        assert acknowledged((11, 11)) == Step(ErrorCode.none, None, PRODUCED - 1)
        produce(broker.bootstrap, topic, 1)
        acquired_after = acquire_all(fetcher, {topic: 1})[topic]
        return Scenario(
            accepted_below,
            only_below,
            below_and_above,
            straddling,
            fetch_below_and_above,
            fetch_straddling,
            acquired_after,
        )
    finally:
        broker.close()


NONE = (ErrorCode.none, None)


def test_accepting_the_first_records_moves_the_start_offset(scenario: Scenario) -> None:
    """Written with the start offset from before (0); 4 shows with the next write."""
    assert scenario.accepted_below == Step(*NONE, 0)


def test_a_batch_entirely_below_the_start_offset_is_skipped(scenario: Scenario) -> None:
    """(a): NONE, nothing changes, nothing is written."""
    assert scenario.only_below == Step(*NONE, 0)


def test_a_batch_below_the_start_offset_does_not_fail_the_others(scenario: Scenario) -> None:
    """(b): NONE, 4..5 accepted (written with the start offset 4, which moves to 6)."""
    assert scenario.below_and_above == Step(*NONE, 4)


def test_a_straddling_batch_applies_from_the_start_offset(scenario: Scenario) -> None:
    """(c): NONE, 6..7 accepted (the start offset moves to 8)."""
    assert scenario.straddling == Step(*NONE, 6)


def test_piggybacked_batches_below_the_start_offset(scenario: Scenario) -> None:
    """(d), (e): on ShareFetch, the same: 8..9 accepted, then 10 (the start offset 11)."""
    assert scenario.fetch_below_and_above == Step(*NONE, 8)
    assert scenario.fetch_straddling == Step(*NONE, 10)


def test_nothing_acknowledged_is_delivered_again(scenario: Scenario) -> None:
    assert scenario.acquired_after == [(PRODUCED, PRODUCED, 1)]
