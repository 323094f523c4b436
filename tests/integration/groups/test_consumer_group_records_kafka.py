"""Kafka 4.4.0's own ``GroupCoordinatorRecordSerde`` (kafka-group-coordinator from
bench/.cache/lib) reads the KIP-848 consumer-group records kemu writes to ``__consumer_offsets``
(types 3, 5-8), among them the current assignment's AssignmentEpochs (KIP-1251, tag 0 of each
TopicPartitions struct), with the fields kemu meant, and serializes what it read back to the
same bytes. Needs ``javac`` and the jars ``make bench`` fetches."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from kemu.coordinator.group.consumer.group import UNREVOKED, ConsumerGroup, ConsumerMember
from kemu.coordinator.group.consumer.persistence import diff, image_of
from kemu.coordinator.group.consumer.records import encode_key, encode_value
from tests import REPO_ROOT
from tests.integration.share.test_share_group_records_kafka import DECODER, JARS

pytestmark = [pytest.mark.integration, pytest.mark.parity]


def test_kafka_reads_kemus_consumer_group_records(tmp_path: Path) -> None:
    if shutil.which("javac") is None or not all(jar.exists() for jar in JARS):
        pytest.skip("needs javac and Kafka's jars in bench/.cache/lib (make bench fetches them)")
    t1, t2 = uuid.UUID(int=7), uuid.UUID(int=9)
    group = ConsumerGroup("consumers", group_epoch=6, assignment_epoch=6)
    group.members["m1"] = ConsumerMember(
        "m1",
        member_epoch=5,
        previous_member_epoch=4,
        state=UNREVOKED,
        client_id="client-1",
        client_host="/10.0.0.1",
        subscribed_topic_names=frozenset({"orders", "pay"}),
        assigned=frozenset({(t1, 0), (t1, 2), (t2, 1)}),
        pending_revocation=frozenset({(t1, 1)}),
        assignment_epochs={(t1, 0): 3, (t1, 2): 5, (t2, 1): 4, (t1, 1): 2},
    )
    group.members["m2"] = ConsumerMember("m2", member_epoch=6, client_id="client-2")
    group.target = {"m1": frozenset({(t1, 0), (t1, 2), (t2, 1)}), "m2": frozenset({(t1, 1)})}
    written = image_of(group)
    records = diff("consumers", None, written) + diff("consumers", written, None)
    lines = [
        f"{encode_key(key).hex()} {encode_value(value).hex() if value is not None else '-'}"
        for key, value in records
    ]
    (tmp_path / "records.txt").write_text("\n".join(lines) + "\n")
    source = tmp_path / "ShareRecordDecoder.java"  # the share test's decoder: any group record
    source.write_text(DECODER)
    classpath = ":".join(str(jar) for jar in JARS)
    subprocess.run(
        ["javac", "-cp", classpath, "-d", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
    )
    done = subprocess.run(
        ["java", "-cp", f"{classpath}:{tmp_path}", "ShareRecordDecoder", tmp_path / "records.txt"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "memberEpoch=5, previousMemberEpoch=4, state=1" in text
    assert f"topicId={_kafka_uuid(t1)}, partitions=[0, 2], assignmentEpochs=[3, 5]" in text
    assert f"topicId={_kafka_uuid(t2)}, partitions=[1], assignmentEpochs=[4]" in text
    assert f"topicId={_kafka_uuid(t1)}, partitions=[1], assignmentEpochs=[2]" in text
    assert "memberEpoch=6, previousMemberEpoch=-1, state=0, assignedPartitions=[]" in text


def _kafka_uuid(topic_id: uuid.UUID) -> str:
    import base64

    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
