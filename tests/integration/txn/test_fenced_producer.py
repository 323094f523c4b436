"""A transactional producer fenced by a newer instance gets INVALID_PRODUCER_EPOCH on Produce,
which librdkafka treats as fatal, as against Kafka 4.4.0 (confluent-kafka, a 3-broker kemu
in the test's process).

Where it came from: a difference from Kafka 4.4.0 found with librdkafka-based clients (issue 15)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import (
    KafkaError,
    KafkaException,
    Producer,
)

from kemu.testing.inprocess import InProcessKemu
from tests.integration.three_brokers import (
    TIMEOUT_S,
    create_topic,
    three_brokers_in_process,
    unique,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kemu() -> Iterator[InProcessKemu]:
    yield from three_brokers_in_process()


def test_fenced_transactional_producer_is_fatal_for_librdkafka(kemu: InProcessKemu) -> None:
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
