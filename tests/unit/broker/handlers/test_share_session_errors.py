"""ShareFetch and ShareAcknowledge answers without a share session, and the unset leader of a
share partition's answer, as Kafka 4.4.0 fills them (through the real wire,
``test_admin_handlers.Broker``; the ShareFetch tests over a socket are in
``test_share_fetch.py``).

Where they came from: differences from Kafka 4.4.0 that ``make conformance-diff`` found
(docs/conformance.md)."""

from __future__ import annotations

import datetime

from kemu.broker.share.routing import PartitionAnswer, current_leader
from kemu.cluster.context import RequestContext
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_admin_handlers import Broker

SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79


def test_share_session_errors_carry_no_acquisition_lock_timeout() -> None:
    broker = Broker()
    broker.create("s")
    topic_id = broker.cluster.topics["s"].topic_id
    partition = broker.nested(SHARE_FETCH, 1, "FetchPartition", partition_index=0)
    topic = broker.nested(SHARE_FETCH, 1, "FetchTopic", topic_id=topic_id, partitions=(partition,))
    fetch = broker.send(
        broker.request(
            SHARE_FETCH,
            1,
            group_id="g",
            member_id="AAAAAAAAAAAAAAAAAAAAAA",
            share_session_epoch=5,
            max_wait=datetime.timedelta(0),
            min_bytes=1,
            max_bytes=1000,
            max_records=10,
            batch_size=10,
            topics=(topic,),
        )
    )
    assert fetch.error_code is ErrorCode.share_session_not_found
    assert fetch.acquisition_lock_timeout == datetime.timedelta(0)
    ack = broker.send(
        broker.request(
            SHARE_ACKNOWLEDGE,
            2,
            group_id="g",
            member_id="AAAAAAAAAAAAAAAAAAAAAA",
            share_session_epoch=5,
            topics=(),
        )
    )
    assert ack.error_code is ErrorCode.share_session_not_found
    assert ack.acquisition_lock_timeout == datetime.timedelta(0)


def test_share_partition_answers_keep_kafkas_unset_current_leader() -> None:
    broker = Broker()
    header = wire.RequestHeader(SHARE_FETCH, 1, 1, "c")
    ctx = RequestContext(broker.cluster.nodes[1], broker.runtime, header)
    unset = current_leader(ctx, PartitionAnswer())
    assert (unset.leader_id, unset.leader_epoch) == (0, 0)
