"""KIP-1101's metadata hash as Kafka 4.4.0 computes it: its own ``Utils.computeTopicHash`` and
``computeGroupHash`` (kafka-group-coordinator from bench/.cache/lib, over a metadata image built
from the records a controller writes) give the hashes kemu computes, for topics without racks,
with racks, with a non-ASCII name and with enough partitions for XXH3's long path; and Kafka's
``GroupCoordinatorRecordSerde`` reads the hash kemu writes in a consumer group's metadata
record (tag 0). Needs ``javac`` and the jars ``make bench`` fetches."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from kemu.coordinator.group.consumer.records import (
    GROUP_METADATA,
    ConsumerRecordKey,
    GroupEpochValue,
    decode_value,
    encode_key,
    encode_value,
)
from kemu.coordinator.group.metadata_hash import group_hash, topic_hash
from tests import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.parity]

LIB = REPO_ROOT / "bench" / ".cache" / "lib"
JARS = [
    LIB / name
    for name in (
        "kafka-group-coordinator-4.4.0.jar",
        "kafka-coordinator-common-4.4.0.jar",
        "kafka-metadata-4.4.0.jar",
        "kafka-server-common-4.4.0.jar",
        "kafka-clients-4.4.0.jar",
        "hash4j-0.22.0.jar",
        "slf4j-api-1.7.36.jar",
    )
]

# Each line: topic id, name, partition count, the rack of each broker ("-": none). Partition p
# is on broker p % brokers + 1. Prints the topic's hash, then (last line) the group hash of all.
HASHER = """
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.*;
import org.apache.kafka.coordinator.common.runtime.KRaftCoordinatorMetadataImage;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.Utils;
import org.apache.kafka.image.*;
import java.nio.ByteBuffer;
import java.nio.file.*;
import java.util.*;

public class KafkaHashes {
    public static void main(String[] args) throws Exception {
        List<String> lines = Files.readAllLines(Path.of(args[0]));
        Map<String, Long> hashes = new HashMap<>();
        for (String line : lines.subList(0, lines.size() - 1)) {
            String[] f = line.split(" ");
            MetadataDelta delta = new MetadataDelta.Builder().setImage(MetadataImage.EMPTY).build();
            String[] racks = f[3].split(",");
            for (int b = 0; b < racks.length; b++) {
                delta.replay(new RegisterBrokerRecord().setBrokerId(b + 1)
                    .setIncarnationId(Uuid.randomUuid())
                    .setRack(racks[b].equals("-") ? null : racks[b]));
            }
            Uuid id = Uuid.fromString(f[0]);
            delta.replay(new TopicRecord().setName(f[1]).setTopicId(id));
            for (int p = 0; p < Integer.parseInt(f[2]); p++) {
                int broker = p % racks.length + 1;
                delta.replay(new PartitionRecord().setTopicId(id).setPartitionId(p)
                    .setReplicas(List.of(broker)).setIsr(List.of(broker)).setLeader(broker));
            }
            var image = new KRaftCoordinatorMetadataImage(delta.apply(MetadataProvenance.EMPTY));
            long hash = Utils.computeTopicHash(f[1], image);
            hashes.put(f[1], hash);
            System.out.println(hash);
        }
        System.out.println(Utils.computeGroupHash(hashes));
        String[] record = lines.get(lines.size() - 1).split(" ");
        var serde = new GroupCoordinatorRecordSerde();
        System.out.println(serde.deserialize(ByteBuffer.wrap(HexFormat.of().parseHex(record[0])),
            ByteBuffer.wrap(HexFormat.of().parseHex(record[1]))).value().message());
    }
}
"""

TOPICS = [
    (uuid.UUID(int=(7 << 64) | 42), "orders", 3, ["-"]),
    (uuid.UUID("1b4e28ba-420f-11d2-883f-0016cb4e5ee0"), "payments", 50, ["-", "-", "-"]),
    (uuid.UUID(int=(1 << 127) | 5), "tøpic-ünïcode", 7, ["rack-a", "rack-b"]),
    (uuid.UUID(int=123456789), "wide", 300, ["eu-west-1a", "-", "eu-west-1c-longer"]),
]


def _kafka_uuid(topic_id: uuid.UUID) -> str:
    import base64

    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def test_kemus_metadata_hash_is_kafkas(tmp_path: Path) -> None:
    if shutil.which("javac") is None or not all(jar.exists() for jar in JARS):
        pytest.skip("needs javac and Kafka's jars in bench/.cache/lib (make bench fetches them)")
    expected: dict[str, int] = {}
    for topic_id, name, partitions, racks in TOPICS:
        replica_racks = [
            tuple(r for r in [racks[p % len(racks)]] if r != "-") for p in range(partitions)
        ]
        expected[name] = topic_hash(topic_id, name, replica_racks)
    record = (
        ConsumerRecordKey(GROUP_METADATA, "g"),
        GroupEpochValue(3, group_hash(expected)),
    )
    lines = [f"{_kafka_uuid(t)} {n} {p} {','.join(r)}" for t, n, p, r in TOPICS]
    lines.append(f"{encode_key(record[0]).hex()} {encode_value(record[1]).hex()}")
    (tmp_path / "topics.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    source = tmp_path / "KafkaHashes.java"
    source.write_text(HASHER)
    classpath = f"{LIB}/*"  # the image needs Kafka's own dependencies too (pcollections, ...)
    subprocess.run(
        ["javac", "-cp", classpath, "-d", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
    )
    done = subprocess.run(
        ["java", "-cp", f"{classpath}:{tmp_path}", "KafkaHashes", tmp_path / "topics.txt"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    *topics, group, decoded = done.stdout.splitlines()
    assert [int(h) for h in topics] == list(expected.values())
    assert int(group) == group_hash(expected) != 0
    assert decoded == f"ConsumerGroupMetadataValue(epoch=3, metadataHash={group})"
    assert decode_value(record[0], encode_value(record[1])) == record[1]
