"""A transaction's consumer-group offsets (``send_offsets_to_transaction``, TxnOffsetCommit) come
through a SIGKILL of kemu, as they come through a restart of Kafka, where they are records of the
transaction in ``__consumer_offsets``:

- kemu SIGKILLs itself (``KEMU_CRASH_AT``) while it commits the transaction: after the PREPARE
  record (``txn.prepared``), after the marker of ``__consumer_offsets`` and before the output's
  (``txn.data_marker_written``: ``__consumer_offsets`` sorts before the output topic), after
  every marker (``txn.markers_appended``). Started again, it finishes the commit: the output is
  visible read_committed and the group's offset is the transaction's;
- kemu is SIGKILLed while the transaction is open: started again, the transaction is still open
  and the same producer commits it, offsets and all (before, kemu kept the offsets in memory,
  so it fenced the producer and aborted the transaction at start; at ``txn.prepared`` the
  offsets were lost and the transaction committed without them).

confluent-kafka (librdkafka) is the client: its ``committed()`` reads read_committed, with
``require_stable``, so it waits while the transaction holds the offset.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from kemu.testing.plugin import KemuProcess
from tests.integration.txn.test_transactions import (
    committed_offsets,
    create_topic,
    read_all,
    transactional_producer,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.process]

OFFSET = 5  # the input offset the transaction commits for the group


def send_in_transaction(bootstrap: str, output: str, source: str, group: str) -> Producer:
    """A transactional producer with an open transaction: two output records and the group's
    offset of ``source`` partition 0."""
    producer = transactional_producer(bootstrap, unique("tid"), **{"transaction.timeout.ms": 60000})
    producer.begin_transaction()
    for value in (b"out-0", b"out-1"):
        producer.produce(output, value, partition=0)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, OFFSET)], consumer.consumer_group_metadata(), 30
        )
    finally:
        consumer.close()
    return producer


@pytest.mark.parametrize(
    "crash_at", ["txn.prepared", "txn.data_marker_written", "txn.markers_appended"]
)
def test_a_crash_while_committing_keeps_the_transactions_offsets(
    kemu_factory: type[KemuProcess], tmp_path: Path, crash_at: str
) -> None:
    kemu = kemu_factory(
        brokers=3, data_dir=tmp_path / "data", env={"KEMU_CRASH_AT": crash_at}
    ).start()
    source, output, group = unique("src"), unique("out"), unique("group")
    assert sorted(["__consumer_offsets", output])[0] == "__consumer_offsets"
    for topic in (source, output):
        create_topic(kemu.bootstrap, topic, partitions=1)
    producer = send_in_transaction(kemu.bootstrap, output, source, group)

    def commit() -> None:
        # kemu dies before answering, or after: either way the outcome is its log's
        with contextlib.suppress(KafkaException):
            producer.commit_transaction(10)

    committing = threading.Thread(target=commit, daemon=True)
    committing.start()
    assert kemu.process is not None
    assert kemu.process.wait(30) == -9  # SIGKILL, from the crash point
    committing.join(15)

    kemu.env = {}
    kemu.start()
    assert sorted(read_all(kemu.bootstrap, output, "read_committed", 2)) == [b"out-0", b"out-1"]
    assert committed_offsets(kemu.bootstrap, group, source, 1) == [OFFSET]


def test_an_open_transaction_keeps_its_offsets_across_a_sigkill(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    kemu = kemu_factory(brokers=3, data_dir=tmp_path / "data").start()
    source, output, group = unique("src"), unique("out"), unique("group")
    for topic in (source, output):
        create_topic(kemu.bootstrap, topic, partitions=1)
    producer = send_in_transaction(kemu.bootstrap, output, source, group)
    producer.flush(30)

    kemu.restart()  # SIGKILL, then a start on the same data dir
    producer.commit_transaction(30)
    assert sorted(read_all(kemu.bootstrap, output, "read_committed", 2)) == [b"out-0", b"out-1"]
    assert committed_offsets(kemu.bootstrap, group, source, 1) == [OFFSET]
