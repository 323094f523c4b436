"""Kafka 4.4.0's own ``GroupCoordinatorRecordSerde`` (kafka-group-coordinator from
bench/.cache/lib) reads every share-group record kemu writes to ``__consumer_offsets`` (types
10-15, tombstones too) with the fields kemu meant, and serializes what it read back to the same
bytes. Needs ``javac`` and the jars ``make bench`` fetches."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from kemu.coordinator.group.share.group import ShareGroup, ShareMember
from kemu.coordinator.group.share.records import diff, encode_key, encode_value, image_of
from tests import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.parity]

LIB = REPO_ROOT / "bench" / ".cache" / "lib"
JARS = [
    LIB / name
    for name in (
        "kafka-group-coordinator-4.4.0.jar",
        "kafka-coordinator-common-4.4.0.jar",
        "kafka-server-common-4.4.0.jar",
        "kafka-clients-4.4.0.jar",
    )
]

DECODER = """
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import java.nio.ByteBuffer;
import java.nio.file.*;
import java.util.Arrays;
import java.util.HexFormat;

public class ShareRecordDecoder {
    public static void main(String[] args) throws Exception {
        var serde = new GroupCoordinatorRecordSerde();
        for (String line : Files.readAllLines(Path.of(args[0]))) {
            String[] f = line.split(" ");
            byte[] key = HexFormat.of().parseHex(f[0]);
            byte[] value = f[1].equals("-") ? null : HexFormat.of().parseHex(f[1]);
            var record = serde.deserialize(ByteBuffer.wrap(key),
                value == null ? null : ByteBuffer.wrap(value));
            if (!Arrays.equals(serde.serializeKey(record), key)
                    || !Arrays.equals(serde.serializeValue(record), value)) {
                throw new IllegalStateException("not the same bytes again: " + record);
            }
            System.out.println(f[0].substring(0, 4) + " " + record);
        }
    }
}
"""


def test_kafka_reads_kemus_share_group_records(tmp_path: Path) -> None:
    if shutil.which("javac") is None or not all(jar.exists() for jar in JARS):
        pytest.skip("needs javac and Kafka's jars in bench/.cache/lib (make bench fetches them)")
    topic = uuid.UUID(int=7)
    group = ShareGroup(
        "shares",
        group_epoch=5,
        assignment_epoch=4,
        assignment_timestamp_ms=1_700_000_000_000,
        metadata_hash=-4_242_424_242_424_242,
        members={
            "m1": ShareMember(
                "m1",
                4,
                3,
                "rack-a",
                "client-1",
                "/10.0.0.1",
                frozenset({"orders", "pay"}),
                frozenset({(topic, 0), (topic, 2)}),
            ),
            "m2": ShareMember("m2", 4, 0, None, "client-2", "/10.0.0.2", frozenset({"orders"})),
        },
        target={"m1": frozenset({(topic, 0), (topic, 2)}), "m2": frozenset({(topic, 1)})},
        initialized={topic: {0, 1, 2}},
        initializing={topic: {3}},
    )
    written = image_of(group, lambda topic_id: "orders")
    records = diff("shares", None, written) + diff("shares", written, None)
    lines = [
        f"{encode_key(key).hex()} {encode_value(value).hex() if value is not None else '-'}"
        for key, value in records
    ]
    (tmp_path / "records.txt").write_text("\n".join(lines) + "\n")
    source = tmp_path / "ShareRecordDecoder.java"
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
    )
    assert done.returncode == 0, done.stderr
    decoded = done.stdout.splitlines()
    types = [int(line.split()[0], 16) for line in decoded]
    # Written: 2 members, group, 2 targets, target metadata, 2 assignments, state partitions;
    # then every one of them as a tombstone, in Kafka's createGroupTombstoneRecords order.
    assert types == [10, 10, 11, 13, 13, 12, 14, 14, 15, 14, 14, 13, 13, 12, 10, 10, 15, 11]
    text = done.stdout
    assert "rackId='rack-a', clientId='client-1', clientHost='/10.0.0.1'" in text
    assert "subscribedTopicNames=[orders, pay]" in text
    assert "ShareGroupMetadataValue(epoch=5, metadataHash=-4242424242424242)" in text
    assert "assignmentEpoch=4, assignmentTimestamp=1700000000000" in text
    assert "memberEpoch=4, previousMemberEpoch=3, state=0" in text
    assert "initializingTopics=[TopicPartitionsInfo(topicId=" in text
    assert "topicName='orders', partitions=[0, 1, 2])" in text
    assert text.count("value=null") == 9
