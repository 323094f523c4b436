"""``consumer.assignment.interval.ms`` and ``share.assignment.interval.ms`` (group configs) on kemu
beside a real Apache Kafka 4.4.0 (bench's jars; that side skipped without java or them).

- Consumer groups, with librdkafka consumers (``group.protocol=consumer``): with a group
  interval of 15 s, a second consumer joining soon after the first is given nothing while the
  group is Assigning (group epoch 3, target still epoch 2, where the newcomer has nothing); the
  first heartbeat after the interval computes the new target and the two end with two
  partitions each. A group left at the server's setting (0 in ``kemu serve`` and the bench
  Kafka) computes the target with the join: Reconciling at once, the newcomer at epoch 3.
- Share groups, with raw ShareGroupHeartbeats and ShareGroupDescribe after each: the first
  heartbeat after the share state is initialized bumps the group epoch; with a 15 s interval it
  and the next ones assign nothing (the group epoch one ahead of the target's, the member at
  the target's) until the interval is over; at the server's 0 the target always has the group
  epoch and the partitions come with that heartbeat.

Epochs are compared relative to each other: in some runs Kafka's group epoch was one higher
than kemu's for the same steps (the group's topic created just before; its coordinator seems to
learn of it after the first join), kemu's topics exist once created.

Both servers get the same requests and the same assertions.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from tests.integration.config_describe import call as call_body
from tests.integration.parity import kemu_or_kafka, nested

pytestmark = [pytest.mark.integration, pytest.mark.parity]

WAIT_S = 90.0  # a bound for failing, not a measurement
INTERVAL_MS = "15000"  # Kafka's group.*.max.assignment.interval.ms: the longest a group may ask
PARTITIONS = 4
INCREMENTAL_ALTER_CONFIGS, CONSUMER_DESCRIBE = 44, 69
SHARE_HEARTBEAT, SHARE_DESCRIBE = 76, 77
GROUP_RESOURCE = 32


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def bootstrap(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen.bootstrap


# --- raw requests ------------------------------------------------------------------------------


def call(address: str, api_key: int, version: int, **fields: Any) -> Any:
    """One request on a fresh connection; the decoded answer's body."""
    return call_body(
        address, api_key, version, wire.build(wire.request_schema(api_key, version), **fields)
    )


def set_group_config(bootstrap: str, group: str, name: str, value: str) -> None:
    config = nested(
        INCREMENTAL_ALTER_CONFIGS, 1, "AlterableConfig", name=name, config_operation=0, value=value
    )
    resource = nested(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        "AlterConfigsResource",
        resource_type=GROUP_RESOURCE,
        resource_name=group,
        configs=(config,),
    )
    answer = call(
        bootstrap, INCREMENTAL_ALTER_CONFIGS, 1, resources=(resource,), validate_only=False
    )
    assert answer.responses[0].error_code == ErrorCode.none, answer


def wait_for(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        found = condition()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def create_topic(bootstrap: str, name: str) -> None:
    """The topic, once the broker's metadata shows it (as a client would see it)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        future.result(timeout=60)

    def visible() -> bool:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        return topic is not None and topic.error is None and len(topic.partitions) == PARTITIONS

    wait_for(visible, f"{name} in the metadata")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --- consumer groups ---------------------------------------------------------------------------


def consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    made = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    made.subscribe([topic])
    return made


def polled(consumers: list[Consumer]) -> None:
    for each in consumers:
        each.poll(0.05)


def describe(bootstrap: str, api_key: int, group: str) -> Any:
    """ConsumerGroupDescribe v0 or ShareGroupDescribe v1 of one group."""
    version = 0 if api_key == CONSUMER_DESCRIBE else 1
    (described,) = call(
        bootstrap, api_key, version, group_ids=(group,), include_authorized_operations=False
    ).groups
    assert described.error_code == ErrorCode.none, described
    return described


def describe_consumers(bootstrap: str, group: str) -> Any:
    return describe(bootstrap, CONSUMER_DESCRIBE, group)


def partition_count(assignment: Any) -> int:
    return sum(len(topic.partitions) for topic in assignment.topic_partitions)


def two_consumers_after_the_second_joined(bootstrap: str, group: str) -> tuple[list[Consumer], Any]:
    """The first consumer holding every partition, then the second joined: both consumers and
    the group as described as soon as it lists two members."""
    topic = unique("interval-topic")
    create_topic(bootstrap, topic)
    first = consumer(bootstrap, group, topic)
    wait_for(lambda: polled([first]) or len(first.assignment()) == PARTITIONS, "the first member")
    second = consumer(bootstrap, group, topic)
    both = [first, second]
    described = wait_for(
        lambda: (
            polled(both)
            or (lambda d: d if len(d.members) == 2 else None)(describe_consumers(bootstrap, group))
        ),
        "the second member to join",
    )
    return both, described


def test_a_consumer_group_computes_at_most_one_target_per_interval(bootstrap: str) -> None:
    group = unique("interval-consumers")
    set_group_config(bootstrap, group, "consumer.assignment.interval.ms", INTERVAL_MS)
    consumers, described = two_consumers_after_the_second_joined(bootstrap, group)
    first, second = consumers
    try:
        members = {m.member_id: m for m in described.members}
        newcomer = members[second.memberid()]
        holder = members[first.memberid()]
        # The join's new group epoch has no target yet: the newcomer is at the last target's
        # epoch, where it has nothing, and the first member keeps everything.
        assert described.group_state == "Assigning"
        assert described.group_epoch == described.assignment_epoch + 1
        assert newcomer.member_epoch == described.assignment_epoch
        assert partition_count(newcomer.assignment) == 0
        assert partition_count(newcomer.target_assignment) == 0
        assert partition_count(holder.target_assignment) == PARTITIONS
        # The first heartbeat after the interval computes the target of the new epoch.
        wait_for(
            lambda: polled(consumers) or all(len(c.assignment()) == 2 for c in consumers),
            "two partitions each",
        )
        settled = describe_consumers(bootstrap, group)
        assert settled.group_epoch == settled.assignment_epoch == described.group_epoch
    finally:
        for each in consumers:
            each.close()


def test_a_consumer_group_at_the_servers_interval_computes_with_the_join(bootstrap: str) -> None:
    """kemu serve's group.consumer.assignment.interval.ms=0, which the bench Kafka sets too."""
    group = unique("no-interval-consumers")
    consumers, described = two_consumers_after_the_second_joined(bootstrap, group)
    try:
        assert described.group_epoch == described.assignment_epoch
        assert described.group_state in ("Reconciling", "Stable")
        newcomer = next(m for m in described.members if m.member_id == consumers[1].memberid())
        assert newcomer.member_epoch == described.group_epoch
        assert partition_count(newcomer.target_assignment) == 2
    finally:
        for each in consumers:
            each.close()


# --- share groups ------------------------------------------------------------------------------


def share_beat(bootstrap: str, group: str, member: str, epoch: int, topic: str | None) -> Any:
    answer = call(
        bootstrap,
        SHARE_HEARTBEAT,
        1,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        rack_id=None,
        subscribed_topic_names=(topic,) if topic is not None else None,
    )
    assert answer.error_code == ErrorCode.none, answer
    return answer


def describe_share(bootstrap: str, group: str) -> Any:
    return describe(bootstrap, SHARE_DESCRIBE, group)


def share_member_assigned_after_initialization(
    bootstrap: str, group: str, *, expect_delay: bool
) -> None:
    """A share member heartbeating until it holds the topic's partitions (the first heartbeat
    after its share state is initialized bumps the group epoch), the group described after
    every heartbeat: with the interval there is a heartbeat whose new epoch waits for its
    target; without, every heartbeat leaves the target at the group epoch."""
    topic = unique("interval-share")
    create_topic(bootstrap, topic)
    member = str(uuid.uuid4())
    joined = share_beat(bootstrap, group, member, 0, topic)
    assert joined.assignment is not None
    assert not joined.assignment.topic_partitions  # the share state is not initialized yet
    epoch = joined.member_epoch
    waited: list[tuple[int, int, int]] = []  # (member epoch, group epoch, assignment epoch)

    def beat() -> Any:
        nonlocal epoch
        answer = share_beat(bootstrap, group, member, epoch, None)
        epoch = answer.member_epoch
        described = describe_share(bootstrap, group)
        if described.group_epoch != described.assignment_epoch:
            (only,) = described.members
            assert answer.assignment is None and not only.assignment.topic_partitions
            waited.append((epoch, described.group_epoch, described.assignment_epoch))
        if answer.assignment is None or not answer.assignment.topic_partitions:
            return None
        return answer, described

    answer, described = wait_for(beat, "the share partitions")
    assert answer.member_epoch == described.group_epoch == described.assignment_epoch
    assert sum(len(t.partitions) for t in answer.assignment.topic_partitions) == PARTITIONS
    if expect_delay:
        assert waited, "no heartbeat waited for the interval"
        assert all(member_epoch == target for member_epoch, _, target in waited)
        assert all(group_epoch == target + 1 for _, group_epoch, target in waited)
    else:
        assert waited == []
    share_beat(bootstrap, group, member, -1, None)


def test_a_share_group_computes_at_most_one_target_per_interval(bootstrap: str) -> None:
    group = unique("interval-share-group")
    set_group_config(bootstrap, group, "share.assignment.interval.ms", INTERVAL_MS)
    share_member_assigned_after_initialization(bootstrap, group, expect_delay=True)


def test_a_share_group_at_the_servers_interval_assigns_once_initialized(bootstrap: str) -> None:
    share_member_assigned_after_initialization(
        bootstrap, unique("no-interval-share-group"), expect_delay=False
    )
