"""Produce through the real wire (``test_admin_handlers.Broker``): a batch above the topic's
``max.message.bytes`` is MESSAGE_TOO_LARGE with a null error message, as Kafka answers (Kafka sends
a text only for record validation failures), and nothing is appended."""

from __future__ import annotations

import datetime

from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch
from tests.unit.broker.handlers.test_admin_handlers import Broker

PRODUCE = 0


def test_a_batch_above_max_message_bytes_is_too_large_without_a_message() -> None:
    broker = Broker()
    broker.create("small", 1, 1, configs={"max.message.bytes": "200"})
    batch = build_batch([(b"k", b"x" * 500)], timestamp_ms=1_700_000_000_000)
    data = broker.nested(PRODUCE, 9, "PartitionProduceData", index=0, records=batch)
    topic = broker.nested(PRODUCE, 9, "TopicProduceData", name="small", partition_data=(data,))
    request = broker.request(
        PRODUCE,
        9,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(topic,),
    )
    (answer,) = broker.send(request).responses
    (result,) = answer.partition_responses
    assert result.error_code == ErrorCode.message_too_large
    assert result.error_message is None
    assert result.base_offset == -1
    assert broker.cluster.topics["small"].partitions[0].log.log_end_offset == 0
