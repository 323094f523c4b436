"""Fetch through the real wire (``test_admin_handlers.Broker``): what its error answers carry,
and a fetch by the zero topic id.

Where they came from: the error answers are a difference from Kafka 4.4.0 that
``make conformance-diff`` found (docs/conformance.md); the zero topic id a regression test for
what ``bench.fuzz`` found."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_admin_handlers import Broker

FETCH = 1


def test_fetch_errors_carry_kafkas_offsets_and_aborted_transactions() -> None:
    broker = Broker()
    broker.create("f", partitions=2)
    broker.produce("f", 0, 3)
    topic = broker.cluster.topics["f"]

    def wanted(index: int, offset: int, epoch: int = -1) -> Any:
        return broker.nested(
            FETCH,
            17,
            "FetchPartition",
            partition=index,
            current_leader_epoch=epoch,
            fetch_offset=offset,
            log_start_offset=-1,
            partition_max_bytes=1000,
        )

    known = broker.nested(
        FETCH, 17, "FetchTopic", topic_id=topic.topic_id, partitions=(wanted(0, 0, 9), wanted(1, 7))
    )
    unknown = broker.nested(
        FETCH, 17, "FetchTopic", topic_id=uuid.UUID(int=7), partitions=(wanted(0, 0),)
    )
    node = topic.partitions[0].leader_id
    answer = broker.send(
        broker.request(
            FETCH,
            17,
            max_wait=datetime.timedelta(0),
            min_bytes=1,
            max_bytes=100000,
            session_id=0,
            session_epoch=-1,
            topics=(known, unknown),
        ),
        node_id=node,
    )
    by_topic = {t.topic_id: t.partitions for t in answer.responses}
    offsets = {
        p.partition_index: (
            p.error_code,
            p.high_watermark,
            p.last_stable_offset,
            p.log_start_offset,
            p.aborted_transactions,
        )
        for p in by_topic[topic.topic_id]
    }
    assert offsets[0] == (ErrorCode.unknown_leader_epoch, -1, -1, -1, None)
    if topic.partitions[1].leader_id == node:
        assert offsets[1] == (ErrorCode.offset_out_of_range, -1, -1, -1, None)
    [missing] = by_topic[uuid.UUID(int=7)]
    assert missing.error_code is ErrorCode.unknown_topic_id
    assert missing.aborted_transactions == ()


ZERO_UUID = uuid.UUID(int=0)


def test_fetch_by_the_zero_topic_id_is_unknown_topic_id() -> None:
    # found by bench.fuzz: kio decodes the zero uuid as None; a session keyed by it failed an
    # assertion
    broker = Broker()
    broker.create("t")
    for version in (13, 16, 18):
        partition = broker.nested(
            FETCH, version, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=1024
        )
        topic = broker.nested(
            FETCH, version, "FetchTopic", topic_id=ZERO_UUID, partitions=(partition,)
        )
        forgotten = broker.nested(
            FETCH, version, "ForgottenTopic", topic_id=ZERO_UUID, partitions=(1,)
        )
        for epoch in (0, -1):  # a new session, and no session
            response = broker.send(
                broker.request(
                    FETCH,
                    version,
                    max_bytes=1 << 20,
                    session_id=0,
                    session_epoch=epoch,
                    topics=(topic,),
                    forgotten_topics_data=(forgotten,),
                )
            )
            assert response.error_code == ErrorCode.none
            codes = [p.error_code for t in response.responses for p in t.partitions]
            assert codes == [ErrorCode.unknown_topic_id]
