"""Share-group administration with real Admin clients: confluent-kafka (group configs through
IncrementalAlterConfigs/DescribeConfigs on the GROUP resource, DeleteGroups, and two
ShareConsumers splitting a topic's partitions through ShareGroupHeartbeat) and the
Java Admin (describeShareGroups, listShareGroupOffsets, alterShareGroupOffsets,
deleteShareGroupOffsets, deleteShareGroups, incrementalAlterConfigs on the group).

For the admin checks, share-group members are made with raw ShareGroupHeartbeat requests so that
they depend only on the group coordinator, not on share fetching.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kemu.testing.inprocess import InProcessKemu
from kemu.testing.plugin import KemuProcess
from kemu.testing.wire_client import WireClient
from tests import REPO_ROOT

pytestmark = pytest.mark.integration

HEARTBEAT = 76
JAVA_DIR = REPO_ROOT / "tests" / "java"
JAR = JAVA_DIR / "target" / "kemu-java-probes-0.1.0.jar"


class RawClient(WireClient):
    """One connection speaking kemu's own encoding of any request (for share-group members)."""

    def __init__(self, address: str) -> None:
        super().__init__(address, client_id="raw-member", timeout=10)

    def send(self, api_key: int, version: int, **fields: Any) -> Any:
        return self.call(1, api_key, version, **fields)

    def heartbeat(
        self, group: str, member: str, epoch: int, topics: tuple[str, ...] | None = None
    ) -> Any:
        return self.send(
            HEARTBEAT,
            1,
            group_id=group,
            member_id=member,
            member_epoch=epoch,
            rack_id=None,
            subscribed_topic_names=topics,
        )

    def close(self) -> None:
        super().close()


def join_assigned(client: RawClient, group: str, member: str, topics: tuple[str, ...]) -> Any:
    """Join a new group and be assigned in the answer: under --timing fast (the plugin's) kemu
    initializes the share partitions' state before answering, so the join's answer is the one
    Kafka 4.4 gives on the heartbeat after the initialization (epoch 3: the join makes 2, the
    initialized partitions 3), not an empty assignment at epoch 2."""
    joined = client.heartbeat(group, member, 0, topics)
    assert (joined.error_code, joined.member_epoch) == (0, 3)
    assert joined.assignment.topic_partitions
    return joined


def admin_for(kemu: KemuProcess | InProcessKemu) -> AdminClient:
    return AdminClient({"bootstrap.servers": kemu.bootstrap})


def create_topic(admin: AdminClient, name: str, partitions: int) -> None:
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(20)


def group_config(admin: AdminClient, group: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.GROUP, group)
    return dict(admin.describe_configs([resource])[resource].result(20))


def alter_group_config(admin: AdminClient, group: str, name: str, value: str) -> None:
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([resource])[resource].result(20)


def test_group_configs_with_confluent_admin(kemu_inprocess_shared: InProcessKemu) -> None:
    admin = admin_for(kemu_inprocess_shared)
    group = f"cfg-{uuid.uuid4().hex[:8]}"
    before = group_config(admin, group)
    assert before["share.auto.offset.reset"].value == "latest"
    assert before["share.isolation.level"].value == "read_uncommitted"

    alter_group_config(admin, group, "share.auto.offset.reset", "earliest")
    after = group_config(admin, group)
    assert after["share.auto.offset.reset"].value == "earliest"
    assert after["share.auto.offset.reset"].source == 8  # DYNAMIC_GROUP_CONFIG
    assert after["share.record.lock.duration.ms"].value == "30000"

    alter_group_config(admin, group, "share.auto.offset.reset", "by_duration:PT10M")
    assert group_config(admin, group)["share.auto.offset.reset"].value == "by_duration:PT10M"

    with pytest.raises(KafkaException) as refused:
        alter_group_config(admin, group, "share.auto.offset.reset", "sometime")
    assert "INVALID_CONFIG" in str(refused.value) or "share.auto.offset.reset" in str(refused.value)
    with pytest.raises(KafkaException):
        alter_group_config(admin, group, "share.session.timeout.ms", "1000")
    assert group_config(admin, group)["share.auto.offset.reset"].value == "by_duration:PT10M"


def test_delete_share_groups_with_confluent_admin(kemu_inprocess_shared: InProcessKemu) -> None:
    admin = admin_for(kemu_inprocess_shared)
    topic = f"sg-del-{uuid.uuid4().hex[:8]}"
    create_topic(admin, topic, 3)
    busy, idle, ghost = f"busy-{topic}", f"idle-{topic}", f"ghost-{topic}"
    member = RawClient(kemu_inprocess_shared.first_broker)
    try:
        joined = join_assigned(member, busy, "m-busy", (topic,))
        assert (joined.error_code, joined.member_epoch) == (0, 3)
        assert sum(len(t.partitions) for t in joined.assignment.topic_partitions) == 3
        assert member.heartbeat(idle, "m-idle", 0, (topic,)).error_code == 0
        assert member.heartbeat(idle, "m-idle", -1).member_epoch == -1

        # librdkafka's ListConsumerGroups keeps only groups of protocol type "consumer" (or
        # none), as Kafka's own consumer-group listing does: share groups are not listed there.
        listed = admin.list_consumer_groups().result(20)
        assert listed.errors == []
        assert not {busy, idle} & {g.group_id for g in listed.valid}

        deleted = admin.delete_consumer_groups([busy, idle, ghost])
        deleted[idle].result(20)
        with pytest.raises(KafkaException) as non_empty:
            deleted[busy].result(20)
        assert non_empty.value.args[0].name() == "NON_EMPTY_GROUP"
        with pytest.raises(KafkaException) as missing:
            deleted[ghost].result(20)
        assert missing.value.args[0].name() == "GROUP_ID_NOT_FOUND"

        assert member.heartbeat(idle, "m-idle", 1).error_code == 69  # GROUP_ID_NOT_FOUND
        assert member.heartbeat(busy, "m-busy", 3).member_epoch == 3
        member.heartbeat(busy, "m-busy", -1)
        admin.delete_consumer_groups([busy])[busy].result(20)
    finally:
        member.close()


def describe_share_group(client: RawClient, group: str) -> Any:
    return client.send(77, 1, group_ids=(group,), include_authorized_operations=False).groups[0]


def test_confluent_share_consumers_split_the_partitions(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    kemu = kemu_inprocess_factory(
        brokers=3,
        overrides=[
            "group.share.min.heartbeat.interval.ms=500",
            "group.share.heartbeat.interval.ms=500",
        ],
    ).start()
    create_topic(admin_for(kemu), "split", 3)
    consumers = [
        ShareConsumer({"bootstrap.servers": kemu.bootstrap, "group.id": "split-group"})
        for _ in range(2)
    ]
    raw = RawClient(kemu.first_broker)
    try:
        for consumer in consumers:
            consumer.subscribe(["split"])
        deadline = time.monotonic() + 30
        settled = None
        while time.monotonic() < deadline and settled is None:
            for consumer in consumers:
                consumer.poll(0.2)
            group = describe_share_group(raw, "split-group")
            epochs = {m.member_epoch for m in group.members}
            if len(group.members) == 2 and epochs == {group.group_epoch}:
                settled = group
        assert settled is not None, "the two share consumers never settled"
        # Two joins (2, 3) and, if the share state was initialized after the second, one
        # more bump to assign it (Kafka 4.4's epochs).
        assert settled.group_epoch in (3, 4)
        assert (settled.group_state, settled.assignor_name) == ("Stable", "simple")
        loads = sorted(
            tuple(sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions))
            for m in settled.members
        )
        assert sorted(p for load in loads for p in load) == [0, 1, 2]
        assert sorted(len(load) for load in loads) == [1, 2]
        assert {m.client_id for m in settled.members} == {"rdkafka"}
    finally:
        for consumer in consumers:
            consumer.close()
    left = describe_share_group(raw, "split-group")
    raw.close()
    assert (left.group_state, left.members) == ("Empty", ())
    assert left.group_epoch == left.assignment_epoch == settled.group_epoch + 2


@pytest.mark.process  # SIGKILL: kemu as a real process
def test_share_group_survives_sigkill_with_a_data_dir(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    kemu = kemu_factory(brokers=3, data_dir=tmp_path / "data").start()
    admin = admin_for(kemu)
    create_topic(admin, "durable", 3)
    alter_group_config(admin, "durable-group", "share.auto.offset.reset", "earliest")
    member = RawClient(kemu.first_broker)
    joined = join_assigned(member, "durable-group", "survivor", ("durable",))
    member.close()
    assert (joined.error_code, joined.member_epoch) == (0, 3)

    kemu.restart()  # SIGKILL, then the same ports and data dir
    member = RawClient(kemu.first_broker)
    try:
        again = member.heartbeat("durable-group", "survivor", 3)
        assert (again.error_code, again.member_epoch) == (0, 3)
        described = describe_share_group(member, "durable-group")
        assert [m.member_id for m in described.members] == ["survivor"]
        assert described.group_state == "Stable"
    finally:
        member.close()
    assert group_config(admin_for(kemu), "durable-group")["share.auto.offset.reset"].value == (
        "earliest"
    )


def _java() -> str | None:
    return shutil.which("java")


@pytest.mark.java
@pytest.mark.skipif(_java() is None or not JAR.exists(), reason="needs java and `make java`")
def test_java_admin_share_group_api(kemu_inprocess_shared: InProcessKemu) -> None:
    admin = admin_for(kemu_inprocess_shared)
    topic = f"sg-java-{uuid.uuid4().hex[:8]}"
    create_topic(admin, topic, 3)
    busy, group = f"busy-{topic}", f"empty-{topic}"
    producer = Producer({"bootstrap.servers": kemu_inprocess_shared.bootstrap})
    for i in range(5):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    assert producer.flush(20) == 0
    member = RawClient(kemu_inprocess_shared.first_broker)
    try:
        join_assigned(member, busy, "java-m1", (topic,))
        lines = _run_probe(kemu_inprocess_shared, topic, busy, group)
    finally:
        member.close()
    checks = {line["check"]: line for line in lines}
    failed = {name: line.get("error") for name, line in checks.items() if not line["ok"]}
    assert failed == {}

    listed = checks["list_share_groups"]["groups"]
    assert listed[busy] == {"type": "Share", "protocol": "share", "state": "Stable"}

    described = checks["describe_share_groups"]
    assert (described["group"], described["state"]) == (busy, "Stable")
    assert described["group_epoch"] == described["assignment_epoch"] == 3
    (only,) = described["members"]
    assert (only["member_id"], only["client_id"], only["epoch"]) == ("java-m1", "raw-member", 3)
    assert only["partitions"] == [f"{topic}-0", f"{topic}-1", f"{topic}-2"]
    assert only["host"] == "/127.0.0.1"
    assert checks["describe_missing_share_group"]["outcome"] == "GroupIdNotFoundException"

    configs = checks["alter_group_configs"]
    assert configs["share.auto.offset.reset"] == {
        "value": "earliest",
        "source": "DYNAMIC_GROUP_CONFIG",
    }
    assert configs["share.record.lock.duration.ms"]["value"] == "20000"
    assert configs["share.isolation.level"]["value"] == "read_uncommitted"
    assert checks["alter_group_configs_invalid"]["outcome"] == "InvalidConfigurationException"

    assert checks["alter_offsets_non_empty"]["outcome"] == "GroupNotEmptyException"
    offsets = checks["list_offsets"]["offsets"]
    assert set(offsets) == {f"{topic}-0", f"{topic}-1"}
    # Lag = end offset - start offset - records already complete above it (none yet).
    assert (offsets[f"{topic}-0"]["start"], offsets[f"{topic}-0"]["lag"]) == (2, 3)
    assert (offsets[f"{topic}-1"]["start"], offsets[f"{topic}-1"]["lag"]) == (0, 0)
    assert checks["list_offsets_after_delete"]["offsets"] == {}
    assert checks["delete_share_groups"]["after"] == "GroupIdNotFoundException"


def _run_probe(kemu: InProcessKemu, topic: str, busy: str, group: str) -> list[dict[str, Any]]:
    classpath = os.pathsep.join([str(JAR), str(JAVA_DIR / "target" / "lib" / "*")])
    command = [
        "java",
        "-cp",
        classpath,
        "kemu.probe.ShareGroupAdminProbe",
        "--bootstrap",
        kemu.bootstrap,
        "--topic",
        topic,
        "--busy-group",
        busy,
        "--group",
        group,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        print(done.stderr[-4000:], file=sys.stderr)
    assert lines, f"probe printed nothing (exit {done.returncode})"
    return lines
