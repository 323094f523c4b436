"""How fast released records come back, through the wire (what franz-go's TestShareGroupETL found).

The test lost records against kemu: short-lived share consumers, each joining, fetching and then
closing its share session with every record it got released (kgo releases buffered records on
close), pushed the same released batch through all five deliveries in a quarter of a second, and
it was archived. Two Kafka behaviours kemu lacked, each checked here:

* Throttled delivery: a batch whose records were delivered ``ceil(5 / 2) = 3`` times is handed
  out halved, and a record on its last attempt alone, so each bouncing consumer can exhaust at
  most one record.
* A ShareFetch's piggy-backed RELEASE is still being written to the share coordinator when
  Kafka's fetch acquires, so the consumer does not get back in the same response what it just
  released, unless there is nothing else (then the fetch waits for it).

Plain ShareGroupHeartbeat / ShareFetch / ShareAcknowledge frames, kemu with one broker.
"""

from __future__ import annotations

import datetime
import socket
import struct
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.records import build_batch
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

PRODUCE, METADATA, HEARTBEAT, SHARE_FETCH, SHARE_ACK = 0, 3, 76, 78, 79
ACCEPT, RELEASE = 1, 2
FINAL_EPOCH = -1


class Wire:
    """Blocking kio-framed requests to one broker."""

    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.correlation = 0

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        body = wire.build(wire.request_schema(api_key, version), **fields)
        self.correlation += 1
        self.sock.sendall(wire.encode_request_frame(body, self.correlation, "throttle-test"))
        size = struct.unpack(">i", self._read(4))[0]
        correlation, response = wire.decode_response(api_key, version, self._read(size))
        assert correlation == self.correlation
        return response

    def nested(self, api_key: int, version: int, name: str, /, **fields: Any) -> Any:
        return wire.build(getattr(wire.request_module(api_key, version), name), **fields)

    def _read(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.sock.close()


class ShortLivedConsumer:
    """Joins, fetches from partition 0, then releases what it got and leaves (kgo's close)."""

    def __init__(self, kemu: InProcessKemu, group: str, topic: str, topic_id: uuid.UUID) -> None:
        self.wire = Wire(kemu.first_broker)
        self.group, self.topic, self.topic_id = group, topic, topic_id
        self.member_id = str(uuid.uuid4())
        self.session_epoch = 0
        joined = self.heartbeat(0, (topic,))
        assert joined.error_code == ErrorCode.none, joined

    def heartbeat(self, epoch: int, topics: tuple[str, ...] | None) -> Any:
        return self.wire.call(
            HEARTBEAT,
            1,
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=epoch,
            rack_id=None,
            subscribed_topic_names=topics,
        )

    def fetch(
        self, *, release: tuple[int, int] | None = None, max_records: int = 500
    ) -> list[tuple[int, int, int]]:
        """One ShareFetch (the first opens the session), optionally carrying a RELEASE of
        [first, last]: [(first, last, delivery count)] acquired."""
        acks = ()
        if release is not None:
            acks = (
                self.wire.nested(
                    SHARE_FETCH,
                    2,
                    "AcknowledgementBatch",
                    first_offset=release[0],
                    last_offset=release[1],
                    acknowledge_types=(RELEASE,),
                ),
            )
        partition = self.wire.nested(
            SHARE_FETCH, 2, "FetchPartition", partition_index=0, acknowledgement_batches=acks
        )
        topic = self.wire.nested(
            SHARE_FETCH, 2, "FetchTopic", topic_id=self.topic_id, partitions=(partition,)
        )
        response = self.wire.call(
            SHARE_FETCH,
            2,
            group_id=self.group,
            member_id=self.member_id,
            share_session_epoch=self.session_epoch,
            max_wait=datetime.timedelta(milliseconds=200),
            min_bytes=1,
            max_bytes=2**31 - 1,
            max_records=max_records,
            batch_size=500,
            topics=(topic,),
        )
        assert response.error_code == ErrorCode.none, response
        self.session_epoch += 1
        [[partition_answer]] = [t.partitions for t in response.responses]
        assert partition_answer.error_code == ErrorCode.none, partition_answer
        assert partition_answer.acknowledge_error_code == ErrorCode.none, partition_answer
        return [
            (int(a.first_offset), int(a.last_offset), int(a.delivery_count))
            for a in partition_answer.acquired_records
        ]

    def close(self, acquired: list[tuple[int, int, int]], ack_type: int) -> None:
        """Acknowledge everything with ``ack_type`` in the closing ShareAcknowledge, then leave."""
        batches = tuple(
            self.wire.nested(
                SHARE_ACK,
                2,
                "AcknowledgementBatch",
                first_offset=first,
                last_offset=last,
                acknowledge_types=(ack_type,),
            )
            for first, last, _ in acquired
        )
        partition = self.wire.nested(
            SHARE_ACK, 2, "AcknowledgePartition", partition_index=0, acknowledgement_batches=batches
        )
        topic = self.wire.nested(
            SHARE_ACK, 2, "AcknowledgeTopic", topic_id=self.topic_id, partitions=(partition,)
        )
        response = self.wire.call(
            SHARE_ACK,
            2,
            group_id=self.group,
            member_id=self.member_id,
            share_session_epoch=FINAL_EPOCH,
            topics=(topic,),
        )
        assert response.error_code == ErrorCode.none, response
        [[partition_answer]] = [t.partitions for t in response.responses]
        assert partition_answer.error_code == ErrorCode.none, partition_answer
        assert self.heartbeat(-1, None).error_code == ErrorCode.none
        self.wire.close()


def produce_one_batch(kemu: InProcessKemu, topic: str, count: int) -> None:
    client = Wire(kemu.first_broker)
    batch = build_batch([(None, b"v%d" % i) for i in range(count)], timestamp_ms=1000)
    data = client.nested(PRODUCE, 9, "PartitionProduceData", index=0, records=batch)
    topic_data = client.nested(PRODUCE, 9, "TopicProduceData", name=topic, partition_data=(data,))
    response = client.call(
        PRODUCE,
        9,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(topic_data,),
    )
    [[answer]] = [t.partition_responses for t in response.responses]
    assert answer.error_code == ErrorCode.none, answer
    client.close()


def topic_id_of(kemu: InProcessKemu, topic: str) -> uuid.UUID:
    client = Wire(kemu.first_broker)
    wanted = client.nested(METADATA, 12, "MetadataRequestTopic", name=topic, topic_id=None)
    response = client.call(METADATA, 12, topics=(wanted,), allow_auto_topic_creation=False)
    client.close()
    [found] = response.topics
    return uuid.UUID(str(found.topic_id))


def new_topic(kemu: InProcessKemu) -> tuple[str, uuid.UUID]:
    """A one-partition topic (also the group's name) whose share partition starts at offset 0."""
    topic = f"redelivery-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    topic_id = topic_id_of(kemu, topic)
    # A first session before the records exist starts the share partition at offset 0
    # (share.auto.offset.reset=latest).
    opener = ShortLivedConsumer(kemu, topic, topic, topic_id)
    assert opener.fetch() == []
    opener.close([], RELEASE)
    return topic, topic_id


def test_consumers_that_release_on_close_exhaust_one_record_at_a_time(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(brokers=1).start()
    topic, topic_id = new_topic(kemu)
    group = topic
    produce_one_batch(kemu, topic, 16)

    handed_out = []
    for _ in range(6):
        consumer = ShortLivedConsumer(kemu, group, topic, topic_id)
        acquired = consumer.fetch()
        consumer.close(acquired, RELEASE)
        handed_out.append(acquired)
    assert handed_out == [
        [(0, 15, 1)],
        [(0, 15, 2)],
        [(0, 15, 3)],
        [(0, 7, 4)],  # delivered 3 times: half the batch
        [(0, 0, 5)],  # delivered 4 times, the last attempt: alone (and archived on release)
        [(1, 1, 5)],
    ]

    # A consumer that accepts still gets every record but the two that were exhausted.
    accepted: set[int] = set()
    for _ in range(10):
        consumer = ShortLivedConsumer(kemu, group, topic, topic_id)
        acquired = consumer.fetch()
        consumer.close(acquired, ACCEPT)
        accepted.update(o for first, last, _ in acquired for o in range(first, last + 1))
        if not acquired:
            break
    assert accepted == set(range(2, 16))


def test_a_fetch_does_not_hand_back_what_it_released_while_there_is_something_else(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(brokers=1).start()
    topic, topic_id = new_topic(kemu)
    produce_one_batch(kemu, topic, 4)  # 0-3
    produce_one_batch(kemu, topic, 4)  # 4-7
    consumer = ShortLivedConsumer(kemu, topic, topic, topic_id)
    assert consumer.fetch(max_records=4) == [(0, 3, 1)]
    # 0-3 released in this request: the fetch goes on to 4-7, not back to 0-3
    assert consumer.fetch(release=(0, 3), max_records=4) == [(4, 7, 1)]
    # ... and the next request finds 0-3 available again
    assert consumer.fetch(release=(4, 7), max_records=4) == [(0, 3, 2)]
    # room for 8, but only 4-7 (released before this request) go out, 0-3 stay behind
    assert consumer.fetch(release=(0, 3), max_records=8) == [(4, 7, 2)]


def test_a_fetch_hands_back_what_it_released_when_there_is_nothing_else(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(brokers=1).start()
    topic, topic_id = new_topic(kemu)
    produce_one_batch(kemu, topic, 4)
    consumer = ShortLivedConsumer(kemu, topic, topic, topic_id)
    assert consumer.fetch() == [(0, 3, 1)]
    assert consumer.fetch(release=(0, 3)) == [(0, 3, 2)]
    consumer.close([(0, 3, 2)], ACCEPT)
