"""Every KIP-848-style group type comes back from its ``__consumer_offsets`` records alone after
kemu is SIGKILLed: a KIP-848 consumer group, a share group and a streams group, each joined by
raw heartbeats, are described the same before the kill and after the restart (members, epochs,
assignments), and their members carry on with the epochs they were given; a regex
subscription keeps what its regex matched (its ConsumerGroupRegularExpression record).
(Classic groups: ``test_consumer_groups.py::test_a_running_member_carries_on_after_sigkill``.)
A data dir of a kemu that kept share groups in ``kemu-share-groups.json`` loads: the file's
group is there, written as records, and the file is gone."""

from __future__ import annotations

import datetime
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kemu.protocol.errors import ErrorCode
from kemu.testing.plugin import KemuProcess
from tests.integration.groups.test_group_record_order_kafka import (
    REGULAR_EXPRESSION,
    group_records,
    regex_record,
)
from tests.integration.groups.test_streams_assignor_kafka import (
    ASSIGN_AT_ONCE,
    Member,
    call,
    coordinator,
    create_topic,
)

pytestmark = [pytest.mark.integration, pytest.mark.process]

CONSUMER_HEARTBEAT, CONSUMER_DESCRIBE = 68, 69
SHARE_HEARTBEAT, SHARE_DESCRIBE = 76, 77
STREAMS_DESCRIBE = 89
METADATA = 3
WAIT_S = 60.0  # a bound for failing, not a measurement
OVERRIDES = [
    *(f"{name}={value}" for name, value in ASSIGN_AT_ONCE.items()),
    "group.share.session.timeout.ms=60000",
    "group.consumer.session.timeout.ms=60000",
    "group.streams.session.timeout.ms=60000",
]


def consumer_beat(address: str, member: str, epoch: int) -> Any:
    joining = epoch == 0
    return call(
        address, CONSUMER_HEARTBEAT, 1, group_id="kip848", member_id=member, member_epoch=epoch,
        instance_id=None, rack_id=None,
        rebalance_timeout=datetime.timedelta(milliseconds=30_000 if joining else -1),
        subscribed_topic_names=("orders",) if joining else None, subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=() if joining else None,
    )  # fmt: skip


def share_beat(address: str, group: str, member: str, epoch: int) -> Any:
    return call(
        address, SHARE_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=epoch,
        rack_id=None, subscribed_topic_names=("orders",) if epoch == 0 else None,
    )  # fmt: skip


def until_assigned(beat: Any) -> Any:
    """Heartbeat (each call given the last epoch) until the answer carries partitions."""
    deadline = time.monotonic() + WAIT_S
    epoch = 0
    while True:
        answer = beat(epoch)
        assert answer.error_code == ErrorCode.none, answer
        epoch = answer.member_epoch
        if answer.assignment is not None and answer.assignment.topic_partitions:
            return answer
        assert time.monotonic() < deadline, answer
        time.sleep(0.2)


def described(address: str, api_key: int, group: str) -> Any:
    version = 0 if api_key == STREAMS_DESCRIBE else 1
    answer = call(address, api_key, version, group_ids=(group,),
                  include_authorized_operations=False)  # fmt: skip
    (found,) = answer.groups
    assert found.error_code == ErrorCode.none, found
    return found


def test_every_group_type_comes_back_from_its_records_after_sigkill(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    server = kemu_factory(brokers=3, data_dir=tmp_path / "data", overrides=OVERRIDES).start()
    create_topic(server.bootstrap, "orders", 3)
    create_topic(server.bootstrap, "wa-in", 2)
    consumer_at = coordinator(server.bootstrap, "kip848")
    share_at = coordinator(server.bootstrap, "shares")
    streams_at = coordinator(server.bootstrap, "wa-app")
    consumer_member, share_member = str(uuid.uuid4()), str(uuid.uuid4())
    consumer = until_assigned(lambda epoch: consumer_beat(consumer_at, consumer_member, epoch))
    share = until_assigned(lambda epoch: share_beat(share_at, "shares", share_member, epoch))
    streams = Member(streams_at, "wa-app", "member-a", "process-a")
    deadline = time.monotonic() + WAIT_S
    while sum(len(p) for p in streams.owned.values()) < 2:  # changelog created, then tasks
        streams.beat()
        assert time.monotonic() < deadline, "no tasks"
        time.sleep(0.2)
    before = {
        "consumer": described(consumer_at, CONSUMER_DESCRIBE, "kip848"),
        "share": described(share_at, SHARE_DESCRIBE, "shares"),
        "streams": described(streams_at, STREAMS_DESCRIBE, "wa-app"),
    }

    server.kill()
    server.start()

    after = {
        "consumer": described(consumer_at, CONSUMER_DESCRIBE, "kip848"),
        "share": described(share_at, SHARE_DESCRIBE, "shares"),
        "streams": described(streams_at, STREAMS_DESCRIBE, "wa-app"),
    }
    assert after == before
    again = consumer_beat(consumer_at, consumer_member, consumer.member_epoch)
    assert (again.error_code, again.member_epoch) == (ErrorCode.none, consumer.member_epoch)
    again = share_beat(share_at, "shares", share_member, share.member_epoch)
    assert (again.error_code, again.member_epoch) == (ErrorCode.none, share.member_epoch)
    epoch = streams.epoch
    assert streams.beat().member_epoch == epoch


def test_a_data_dir_with_the_old_share_groups_file_loads(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    server = kemu_factory(brokers=1, data_dir=data_dir, overrides=OVERRIDES).start()
    create_topic(server.bootstrap, "orders", 3)
    metadata = call(server.bootstrap, METADATA, 12, topics=None, allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False)  # fmt: skip
    (topic,) = [t for t in metadata.topics if t.name == "orders"]
    topic_id = str(topic.topic_id)
    server.stop()
    assigned = [[topic_id, 0], [topic_id, 1], [topic_id, 2]]
    old = {  # as a kemu of before the records wrote it
        "legacy": {
            "group_epoch": 3,
            "assignment_epoch": 3,
            "assignment_timestamp_ms": 0,
            "members": {
                "old-member": {
                    "member_epoch": 3,
                    "previous_member_epoch": 2,
                    "rack_id": None,
                    "client_id": "old-client",
                    "client_host": "/127.0.0.1",
                    "subscribed_topic_names": ["orders"],
                    "assigned": assigned,
                }
            },
            "target": {"old-member": assigned},
            "subscribed_metadata": {"orders": [topic_id, 3]},
            "initialized": {topic_id: [0, 1, 2]},
        }
    }
    (data_dir / "kemu-share-groups.json").write_text(json.dumps(old))
    server.start()
    address = coordinator(server.bootstrap, "legacy")
    group = described(address, SHARE_DESCRIBE, "legacy")
    assert group.group_epoch == 3
    (member,) = group.members
    assert (member.member_id, member.member_epoch) == ("old-member", 3)
    assert member.client_id == "old-client"
    assert not (data_dir / "kemu-share-groups.json").exists()
    server.kill()  # from the records alone now
    server.start()
    answer = share_beat(address, "legacy", "old-member", 3)
    assert (answer.error_code, answer.member_epoch) == (ErrorCode.none, 3)


def regex_beat(address: str, member: str, epoch: int) -> Any:
    """A heartbeat of a member of group ``regexes`` subscribed with the regex ``rx-.*``."""
    joining = epoch == 0
    return call(
        address, CONSUMER_HEARTBEAT, 1, group_id="regexes", member_id=member, member_epoch=epoch,
        instance_id=None, rack_id=None,
        rebalance_timeout=datetime.timedelta(milliseconds=30_000 if joining else -1),
        subscribed_topic_names=None, subscribed_topic_regex="rx-.*" if joining else None,
        server_assignor=None, topic_partitions=() if joining else None,
    )  # fmt: skip


def test_a_regex_subscription_keeps_its_resolution_after_sigkill(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    """The regex's resolution is in the log (type 16, naming the topic it matched), the group
    loads with it after a SIGKILL, and the member carries on at its epoch with its partitions."""
    server = kemu_factory(brokers=1, data_dir=tmp_path / "data", overrides=OVERRIDES).start()
    create_topic(server.bootstrap, "rx-a", 2)
    create_topic(server.bootstrap, "orders", 1)
    address = coordinator(server.bootstrap, "regexes")
    member = str(uuid.uuid4())
    assigned = until_assigned(lambda epoch: regex_beat(address, member, epoch))
    before = described(address, CONSUMER_DESCRIBE, "regexes")
    resolutions = [
        regex_record(key, value)
        for record_type, key, value in group_records(server.bootstrap, "regexes")
        if record_type == REGULAR_EXPRESSION
    ]
    assert resolutions[-1] == ("rx-.*", ("rx-a",))

    server.kill()
    server.start()

    assert described(address, CONSUMER_DESCRIBE, "regexes") == before
    again = regex_beat(address, member, assigned.member_epoch)
    assert (again.error_code, again.member_epoch) == (ErrorCode.none, assigned.member_epoch)
    assert described(address, CONSUMER_DESCRIBE, "regexes").group_epoch == before.group_epoch


def static_beat(address: str, member: str, epoch: int) -> Any:
    """A heartbeat of a static member (instance id ``instance-a``) of group ``statics``."""
    joining = epoch == 0
    return call(
        address, CONSUMER_HEARTBEAT, 1, group_id="statics", member_id=member, member_epoch=epoch,
        instance_id="instance-a", rack_id=None,
        rebalance_timeout=datetime.timedelta(milliseconds=30_000 if joining else -1),
        subscribed_topic_names=("orders",) if joining else None, subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=() if joining else None,
    )  # fmt: skip


def test_a_static_member_that_left_temporarily_survives_sigkill(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    """A static member's temporary leave (epoch -2) is written as Kafka writes it (its current
    assignment at epoch -2): after a SIGKILL the member is still there with its partitions, and
    a new member id joining with its instance id gets them back at the same epoch."""
    server = kemu_factory(brokers=1, data_dir=tmp_path / "data", overrides=OVERRIDES).start()
    create_topic(server.bootstrap, "orders", 3)
    address = coordinator(server.bootstrap, "statics")
    first = until_assigned(lambda epoch: static_beat(address, "member-a", epoch))
    left = static_beat(address, "member-a", -2)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -2)

    server.kill()
    server.start()

    group = described(address, CONSUMER_DESCRIBE, "statics")
    (member,) = group.members
    assert (member.member_id, member.member_epoch) == ("member-a", -2)
    held = {p for t in member.assignment.topic_partitions for p in t.partitions}
    assert held == {0, 1, 2}
    rejoined = static_beat(address, "member-b", 0)
    assert rejoined.error_code == ErrorCode.none
    assert rejoined.member_epoch == first.member_epoch
    assert rejoined.assignment == first.assignment
    assert group.group_epoch == first.member_epoch
