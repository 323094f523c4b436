"""A topic's creation and deletion come through a SIGKILL of kemu whole, as through a crash of
Kafka, whose controller commits either to the metadata log before the brokers touch the logs:

- killed (``KEMU_CRASH_AT=topic.deleted``) once the catalogue forgot a deleted topic, before its
  logs were removed: started again, the topic is gone and so are its logs; a topic created
  again under the name starts empty. (Before, kemu removed the logs first: killed in between,
  it came back with the topic still there and its acknowledged records gone.)
- killed (``topic.logs_created``) once a new topic's logs exist, before the catalogue names it:
  started again, there is no such topic and no log of it, and creating it works. (With no
  catalogue at all, the first topic of a data dir, nothing is removed at start: a directory
  without kemu's catalogue may not be kemu's. A topic created later under the name still
  starts empty.)

confluent-kafka's AdminClient and producer are the clients; kemu is the process ``kemu serve``
runs, on a data dir.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.testing.plugin import KemuProcess
from tests.integration.txn.test_transactions import read_all, unique

pytestmark = [pytest.mark.integration, pytest.mark.process]


def topics(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics)


def partition_dirs(data_dir: Path, topic: str) -> list[str]:
    return sorted(d.name for d in data_dir.iterdir() if d.name.startswith(f"{topic}-"))


def killed_by(kemu: KemuProcess, request: object) -> None:
    """Send ``request`` (a future of the admin call); kemu SIGKILLs itself on the way."""
    with contextlib.suppress(KafkaException):
        request.result(timeout=15)  # type: ignore[attr-defined]
    assert kemu.process is not None
    assert kemu.process.wait(30) == -9


def test_a_crash_after_the_deletion_is_recorded_leaves_no_topic_and_no_logs(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    kemu = kemu_factory(data_dir=data_dir, env={"KEMU_CRASH_AT": "topic.deleted"}).start()
    topic = unique("doomed")
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "acks": "all"})
    for index in range(4):
        producer.produce(topic, b"old-%d" % index, partition=index % 2)
    assert producer.flush(30) == 0
    assert partition_dirs(data_dir, topic) == [f"{topic}-0", f"{topic}-1"]

    killed_by(kemu, admin.delete_topics([topic])[topic])
    assert partition_dirs(data_dir, topic) == [f"{topic}-0", f"{topic}-1"]  # still on disk

    kemu.env = {}
    kemu.start()
    assert topic not in topics(kemu.bootstrap)
    assert partition_dirs(data_dir, topic) == []  # removed at start, as Kafka's stray logs
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kemu.bootstrap, "acks": "all"})
    producer.produce(topic, b"new", partition=0)
    assert producer.flush(30) == 0
    assert read_all(kemu.bootstrap, topic, "read_uncommitted", 1) == [b"new"]


def test_a_crash_before_a_new_topic_is_recorded_leaves_no_topic_and_no_logs(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    kemu = kemu_factory(data_dir=data_dir).start()
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic("first", 1, 1)])["first"].result(30)  # a catalogue to read
    kemu.env = {"KEMU_CRASH_AT": "topic.logs_created"}
    kemu.restart()
    topic = unique("unborn")
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    killed_by(kemu, admin.create_topics([NewTopic(topic, 3, 1)])[topic])

    kemu.env = {}
    kemu.start()
    assert topics(kemu.bootstrap) >= {"first"} and topic not in topics(kemu.bootstrap)
    assert partition_dirs(data_dir, topic) == []
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    assert topic in topics(kemu.bootstrap)
