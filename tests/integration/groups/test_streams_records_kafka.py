"""Kafka 4.4.0's own generated record classes (kafka-group-coordinator from bench/.cache/lib)
read every streams-group record kemu writes to ``__consumer_offsets`` (types 17, 19-23), to the
last byte, with the fields kemu meant (the active tasks' AssignmentEpochs of KIP-1251 too).
Needs ``javac`` and the jars ``make bench`` fetches."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kemu.coordinator.group.streams.records import diff, encode_key, encode_value, image_of
from tests import REPO_ROOT
from tests.unit.coordinator.group.streams.test_streams_group import Harness

pytestmark = [pytest.mark.integration, pytest.mark.parity]

LIB = REPO_ROOT / "bench" / ".cache" / "lib"
JARS = [LIB / "kafka-group-coordinator-4.4.0.jar", LIB / "kafka-clients-4.4.0.jar"]

DECODER = """
import org.apache.kafka.coordinator.group.generated.*;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import java.nio.ByteBuffer;
import java.nio.file.*;
import java.util.HexFormat;

public class StreamsRecordDecoder {
    public static void main(String[] args) throws Exception {
        for (String line : Files.readAllLines(Path.of(args[0]))) {
            String[] f = line.split(" ");
            ByteBuffer k = ByteBuffer.wrap(HexFormat.of().parseHex(f[0]));
            ByteBuffer v = ByteBuffer.wrap(HexFormat.of().parseHex(f[1]));
            short type = k.getShort();
            short version = v.getShort();
            var kr = new ByteBufferAccessor(k);
            var vr = new ByteBufferAccessor(v);
            Object key, value;
            switch (type) {
                case 17 -> { key = new StreamsGroupMetadataKey(kr, (short) 0);
                             value = new StreamsGroupMetadataValue(vr, version); }
                case 19 -> { key = new StreamsGroupMemberMetadataKey(kr, (short) 0);
                             value = new StreamsGroupMemberMetadataValue(vr, version); }
                case 20 -> { key = new StreamsGroupTargetAssignmentMetadataKey(kr, (short) 0);
                             value = new StreamsGroupTargetAssignmentMetadataValue(vr, version); }
                case 21 -> { key = new StreamsGroupTargetAssignmentMemberKey(kr, (short) 0);
                             value = new StreamsGroupTargetAssignmentMemberValue(vr, version); }
                case 22 -> { key = new StreamsGroupCurrentMemberAssignmentKey(kr, (short) 0);
                             value = new StreamsGroupCurrentMemberAssignmentValue(vr, version); }
                case 23 -> { key = new StreamsGroupTopologyKey(kr, (short) 0);
                             value = new StreamsGroupTopologyValue(vr, version); }
                default -> throw new IllegalArgumentException("type " + type);
            }
            if (k.hasRemaining() || v.hasRemaining()) {
                throw new IllegalStateException("trailing bytes in a record of type " + type);
            }
            System.out.println(type + " " + key + " -> " + value);
        }
    }
}
"""


def test_kafka_reads_kemus_streams_group_records(tmp_path: Path) -> None:
    if shutil.which("javac") is None or not all(jar.exists() for jar in JARS):
        pytest.skip("needs javac and Kafka's jars in bench/.cache/lib (make bench fetches them)")
    h = Harness()
    h.now = 1_700_000_000_000  # written as the target's AssignmentTimestamp (tag 0)
    owned = h.beat("a", 0, user_endpoint=("localhost", 8080), client_tags=(("az", "1"),))
    h.beat("b", 0)
    # a is revoking: tasks pending revocation
    h.beat("a", owned.member_epoch, owned=owned.assignment)
    group = h.coordinator.group("app")
    assert group is not None
    lines = [
        f"{encode_key(key).hex()} {encode_value(value).hex()}"
        for key, value in diff(None, image_of(group))
        if value is not None
    ]
    records = tmp_path / "records.txt"
    records.write_text("\n".join(lines) + "\n")
    source = tmp_path / "StreamsRecordDecoder.java"
    source.write_text(DECODER)
    classpath = ":".join(str(jar) for jar in JARS)
    subprocess.run(
        ["javac", "-cp", classpath, "-d", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
    )
    done = subprocess.run(
        ["java", "-cp", f"{classpath}:{tmp_path}", "StreamsRecordDecoder", str(records)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    decoded = done.stdout.splitlines()
    assert sorted(int(line.split()[0]) for line in decoded) == [17, 19, 19, 20, 21, 21, 22, 22, 23]
    text = done.stdout
    assert "validatedTopologyEpoch=1" in text
    assert group.metadata_hash != 0 and f"metadataHash={group.metadata_hash}," in text
    assert "lastAssignmentConfigs=[LastAssignmentConfig(key='num.standby.replicas'" in text
    assert "userEndpoint=Endpoint(host='localhost', port=8080)" in text
    assert "clientTags=[KeyValue(key='az', value='1')]" in text
    assert "state=1" in text and "activeTasksPendingRevocation=[TaskIds(subtopologyId=" in text
    assert "repartitionSinkTopics=[app-words-repartition]" in text
    assert "assignmentTimestamp=1700000000000" in text
    # KIP-1251: each active task list carries its assignment epochs (tag 0), a's all 2.
    assert "activeTasks=[TaskIds(subtopologyId='0', partitions=[0], assignmentEpochs=[2])" in text
    assert "activeTasksPendingRevocation=[TaskIds(subtopologyId='0', partitions=[1], " in text
    assert text.count("assignmentEpochs=[2]") == 4
