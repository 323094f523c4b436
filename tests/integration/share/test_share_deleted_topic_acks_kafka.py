"""Acknowledging records of a topic deleted while a share member holds them, in the share session
that acquired them, on kemu beside a real Apache Kafka 4.4.0 (the session's plain Kafka; that
side skipped without java or bench's jars). Both servers get the same hand-built requests and the
same assertions.

Two share groups each have one member that acquired three records of ``gone`` and of ``live``
(one partition each). ``gone`` is deleted (once Metadata no longer shows it); then one member
accepts all six records with a ShareAcknowledge, the other with acknowledgement batches
piggybacked on a ShareFetch of its share session. Then three more records are produced to
``live`` and each member fetches in its session again. Kafka 4.4.0 and kemu agree:

- ShareAcknowledge: top level NONE; the deleted topic's partition UNKNOWN_TOPIC_ID (no message),
  the live one NONE.
- ShareFetch: top level NONE; the deleted topic's partition AcknowledgeErrorCode
  UNKNOWN_TOPIC_ID and ErrorCode UNKNOWN_TOPIC_OR_PARTITION (the session holds the partition by
  name and finds none), no records; the live one NONE, NONE.
- Both sessions stay usable: the live topic's next three records are delivered (once), and
  each fetch answers the deleted topic's partition, still in the session,
  UNKNOWN_TOPIC_OR_PARTITION.
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
    produce,
)
from tests.integration.share.test_share_topic_changes_kafka import Broker, nested
from tests.integration.share.test_share_topic_changes_kafka import Member as ShareMember
from tests.integration.txn.wire_parity import Server, coordinator_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

SHARE_FETCH, SHARE_ACK = 78, 79
ACCEPT = 1
PRODUCED = 3  # records produced to each topic before the deletion


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


# (topic name, partition) -> (error code, error message[, acknowledge error, its message])
PartitionAnswers = dict[tuple[str, int], tuple[Any, ...]]


@dataclass(frozen=True)
class Answered:
    """A ShareAcknowledge's or ShareFetch's answer: top level and per partition."""

    error: ErrorCode
    message: str | None
    partitions: PartitionAnswers
    acquired: dict[str, list[tuple[int, int, int]]]


def answered(answer: Any, ids: dict[str, uuid.UUID], *, fetch: bool) -> Answered:
    names = {topic_id: name for name, topic_id in ids.items()}
    partitions: PartitionAnswers = {}
    acquired: dict[str, list[tuple[int, int, int]]] = {}
    for topic in answer.responses:
        name = names.get(uuid.UUID(str(topic.topic_id)), str(topic.topic_id))
        for p in topic.partitions:
            found: tuple[Any, ...] = (ErrorCode(p.error_code), p.error_message)
            if fetch:
                found += (ErrorCode(p.acknowledge_error_code), p.acknowledge_error_message)
                acquired.setdefault(name, []).extend(
                    (int(a.first_offset), int(a.last_offset), int(a.delivery_count))
                    for a in p.acquired_records
                )
            partitions[(name, p.partition_index)] = found
    return Answered(ErrorCode(answer.error_code), answer.error_message, partitions, acquired)


def batches(first: int, last: int, api_key: int, partition_class: str) -> Any:
    batch = nested(
        api_key,
        1,
        "AcknowledgementBatch",
        first_offset=first,
        last_offset=last,
        acknowledge_types=(ACCEPT,),
    )
    return nested(api_key, 1, partition_class, partition_index=0, acknowledgement_batches=(batch,))


def acknowledge(fetcher: Fetcher, topics: tuple[str, ...]) -> Answered:
    """One ShareAcknowledge accepting offsets 0..PRODUCED-1 of partition 0 of each topic."""
    answer = fetcher.member.broker.client.call(
        1,
        SHARE_ACK,
        1,
        group_id=fetcher.member.group,
        member_id=fetcher.member.member_id,
        share_session_epoch=fetcher.epoch,
        topics=tuple(
            nested(
                SHARE_ACK,
                1,
                "AcknowledgeTopic",
                topic_id=fetcher.ids[t],
                partitions=(batches(0, PRODUCED - 1, SHARE_ACK, "AcknowledgePartition"),),
            )
            for t in topics
        ),
    )
    if answer.error_code == ErrorCode.none:
        fetcher.epoch += 1
    return answered(answer, fetcher.ids, fetch=False)


def fetch_acknowledging(fetcher: Fetcher, topics: tuple[str, ...]) -> Answered:
    """One ShareFetch of the session (no wait) carrying acknowledgement batches accepting
    offsets 0..PRODUCED-1 of partition 0 of each topic."""
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
        topics=tuple(
            nested(
                SHARE_FETCH,
                1,
                "FetchTopic",
                topic_id=fetcher.ids[t],
                partitions=(batches(0, PRODUCED - 1, SHARE_FETCH, "FetchPartition"),),
            )
            for t in topics
        ),
        forgotten_topics_data=(),
    )
    if answer.error_code == ErrorCode.none:
        fetcher.epoch += 1
    return answered(answer, fetcher.ids, fetch=True)


@dataclass(frozen=True)
class Scenario:
    gone: str
    live: str
    by_share_acknowledge: Answered
    by_share_fetch: Answered
    # after three more records of ``live``: what each session's next fetches acquired and the
    # errors they answered, per partition
    acked_later: dict[str, list[tuple[int, int, int]]]
    acked_later_errors: list[Any]
    fetched_later: dict[str, list[tuple[int, int, int]]]
    fetched_later_errors: list[Any]


def joined(broker: Broker, group: str, gone: str, live: str) -> Fetcher:
    """A member of ``group`` holding partition 0 of both topics, its share session opened on
    them before any record was produced (share.auto.offset.reset=latest starts them at 0)."""
    coordinator_ready(broker.client, 0, group)
    member = ShareMember(broker, group)
    member.heartbeat(subscribed=(gone, live))
    member.beat_until(lambda held: held == {(gone, 0), (live, 0)}, "both partitions")
    fetcher = Fetcher(member, dict(broker.ids))
    assert fetcher.fetch((gone, live)) == {gone: [], live: []}
    return fetcher


@pytest.fixture(scope="module")
def scenario(server: Server) -> Scenario:
    suffix = uuid.uuid4().hex[:8]
    gone, live = f"gone-{suffix}", f"live-{suffix}"
    broker = Broker(server)
    try:
        create_topic(broker, gone, 1)
        create_topic(broker, live, 1)
        acker = joined(broker, f"ack-{suffix}", gone, live)
        piggy = joined(broker, f"piggy-{suffix}", gone, live)
        produce(broker.bootstrap, gone, PRODUCED)
        produce(broker.bootstrap, live, PRODUCED)
        wanted = {gone: PRODUCED, live: PRODUCED}
        assert acquire_all(acker, wanted) == {gone: [(0, 2, 1)], live: [(0, 2, 1)]}
        assert acquire_all(piggy, wanted) == {gone: [(0, 2, 1)], live: [(0, 2, 1)]}

        broker.delete_topic(gone)
        by_share_acknowledge = acknowledge(acker, (gone, live))
        by_share_fetch = fetch_acknowledging(piggy, (gone, live))

        produce(broker.bootstrap, live, PRODUCED)
        acker.errors.clear()
        piggy.errors.clear()
        acked_later = acquire_all(acker, {live: PRODUCED})
        fetched_later = acquire_all(piggy, {live: PRODUCED})
        return Scenario(
            gone,
            live,
            by_share_acknowledge,
            by_share_fetch,
            acked_later,
            list(acker.errors),
            fetched_later,
            list(piggy.errors),
        )
    finally:
        broker.close()


def test_share_acknowledge_answers_the_deleted_partition_unknown_topic_id(
    scenario: Scenario,
) -> None:
    """Top level NONE; the deleted topic's partition UNKNOWN_TOPIC_ID (no message), the live
    topic's accepted."""
    s = scenario
    assert (s.by_share_acknowledge.error, s.by_share_acknowledge.message) == (ErrorCode.none, None)
    assert s.by_share_acknowledge.partitions == {
        (s.gone, 0): (ErrorCode.unknown_topic_id, None),
        (s.live, 0): (ErrorCode.none, None),
    }


def test_piggybacked_acknowledgements_of_the_deleted_partition(scenario: Scenario) -> None:
    """Top level NONE; the deleted topic's partition: its acknowledgements UNKNOWN_TOPIC_ID, the
    fetch of it UNKNOWN_TOPIC_OR_PARTITION (the session holds it by name), no records; the live
    topic's acknowledgements accepted."""
    s = scenario
    assert (s.by_share_fetch.error, s.by_share_fetch.message) == (ErrorCode.none, None)
    assert s.by_share_fetch.partitions == {
        (s.gone, 0): (ErrorCode.unknown_topic_or_partition, None, ErrorCode.unknown_topic_id, None),
        (s.live, 0): (ErrorCode.none, None, ErrorCode.none, None),
    }
    assert s.by_share_fetch.acquired == {s.gone: [], s.live: []}


def test_both_sessions_go_on_delivering_the_live_topic(scenario: Scenario) -> None:
    """The live topic's next records are delivered in both sessions (the acknowledged ones are
    not again); the deleted topic's partition, still in each session, is answered
    UNKNOWN_TOPIC_OR_PARTITION."""
    s = scenario
    assert s.acked_later[s.live] == [(PRODUCED, 2 * PRODUCED - 1, 1)]
    assert s.fetched_later[s.live] == [(PRODUCED, 2 * PRODUCED - 1, 1)]
    assert s.acked_later.get(s.gone, []) == s.fetched_later.get(s.gone, []) == []
    gone_unknown = {(s.gone, ErrorCode.unknown_topic_or_partition)}  # each fetch answers it
    assert set(s.acked_later_errors) == set(s.fetched_later_errors) == gone_unknown
