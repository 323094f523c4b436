"""Behaviours where kemu used to differ from Kafka 4.4.0 (issue 15), each shown with a real
client against a 3-broker kemu started from the CLI.

- A record without a key on a compacted topic: the batch is refused with INVALID_RECORD and
  per-record errors (confluent-kafka's delivery report; the raw Produce response).
- Authorized operations without an authorizer: every operation of the resource's type
  (DescribeCluster, Metadata v8-v10 cluster operations, topic operations).
- A transactional producer fenced by a newer instance gets INVALID_PRODUCER_EPOCH on Produce,
  which librdkafka treats as fatal.
- KIP-848: a second consumer with an instance id held by an active member gets
  UNRELEASED_INSTANCE_ID.
- ShareFetch with MaxBytes 0 returns no records.
- KIP-848 regex subscriptions: the explicit topics are assigned first, the regex's topics on a
  later heartbeat, after the coordinator resolved the regex.
"""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.protocol import wire
from kemu.testing.plugin import KemuProcess

pytestmark = pytest.mark.integration

TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def kemu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KemuProcess]:
    log_path = tmp_path_factory.mktemp("parity") / "kemu.log"
    process = KemuProcess(brokers=3, log_path=log_path).start()
    yield process
    process.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(TIMEOUT_S)


# --- raw protocol ------------------------------------------------------------------------------


def call(address: str, api_key: int, version: int, **fields: Any) -> Any:
    host, port = address.rsplit(":", 1)
    body = wire.build(wire.request_schema(api_key, version), **fields)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(wire.encode_request_frame(body, 7, "parity"))
        size = struct.unpack(">i", _read(sock, 4))[0]
        _, response = wire.decode_response(api_key, version, _read(sock, size))
    return response


def nested(api_key: int, version: int, class_name: str, /, **fields: Any) -> Any:
    module = wire.request_module(api_key, version)
    return wire.build(getattr(module, class_name), **fields)


def _read(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def leader_address(kemu: KemuProcess, topic: str, partition: int = 0) -> str:
    metadata = AdminClient({"bootstrap.servers": kemu.bootstrap}).list_topics(topic, TIMEOUT_S)
    leader = metadata.topics[topic].partitions[partition].leader
    broker = metadata.brokers[leader]
    return f"{broker.host}:{broker.port}"


# --- 3. a fenced transactional producer gets INVALID_PRODUCER_EPOCH -----------------------------


def test_fenced_transactional_producer_is_fatal_for_librdkafka(kemu: KemuProcess) -> None:
    topic = unique("fenced")
    create_topic(kemu.bootstrap, topic)
    transactional_id = unique("tid")
    config = {"bootstrap.servers": kemu.bootstrap, "transactional.id": transactional_id}
    first = Producer(config)
    first.init_transactions(TIMEOUT_S)
    first.begin_transaction()
    first.produce(topic, b"zombie", partition=0)
    first.flush(TIMEOUT_S)
    second = Producer(config)
    second.init_transactions(TIMEOUT_S)  # aborts the first's transaction, bumps the epoch
    first.produce(topic, b"late", partition=0)
    # librdkafka turns INVALID_PRODUCER_EPOCH on Produce into a fatal "fenced" error; with
    # PRODUCER_FENCED it took the transaction as merely abortable and carried on.
    with pytest.raises(KafkaException) as raised:
        first.flush(TIMEOUT_S)
    error = raised.value.args[0]
    assert error.fatal()
    assert error.code() == KafkaError._FENCED
    assert "Producer attempted an operation with an old epoch" in error.str()
    second.begin_transaction()
    second.produce(topic, b"fresh", partition=0)
    second.commit_transaction(TIMEOUT_S)
