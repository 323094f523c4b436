"""The KIP-848, KIP-932 and KIP-1071 heartbeats (ConsumerGroupHeartbeat, ShareGroupHeartbeat,
StreamsGroupHeartbeat) naming a group the coordinator does not hold as one of their type, on kemu
beside a real Apache Kafka 4.4.0 (the session's plain Kafka, on which streams groups are on by
default: ``streams.version`` 1 is a 4.4 format's default, ``group.coordinator.rebalance.protocols``
lists streams). The same hand-built requests, the same assertions.

Kafka 4.4.0 answers GROUP_ID_NOT_FOUND to all of them but a join (which creates the group): a
heartbeat (epoch > 0) looks the group up with its type's own lookup
(``getOrMaybeCreateConsumerGroup``, ``getOrMaybeCreateShareGroup``, ``getStreamsGroupOrThrow``),
whose text names the type ("Consumer group X not found."), a leave (-1; -2 a static member's)
with ``group()`` ("Group X not found."). A group of another type, here an empty classic group an
OffsetCommit made, is "Group X is not a consumer group." (share, streams) either way: only a
join takes an empty classic group over. Kemu answered UNKNOWN_MEMBER_ID to a consumer's
heartbeat or leave into a group it did not hold (or an empty classic group), and its streams
leave's text named a streams group.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kemu.protocol.errors import ErrorCode
from tests.integration.groups import consumer_wire
from tests.integration.groups.consumer_wire import Broker
from tests.integration.parity import COORDINATOR_STARTING, kemu_or_kafka
from tests.integration.txn.wire_parity import Server, coordinator_ready, until_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

SHARE_HEARTBEAT, STREAMS_HEARTBEAT = 76, 88
INSTANCE = "instance-a"

# (api, epoch) -> how the heartbeat's lookup names the group when there is none
NOT_FOUND = {
    ("consumer", 5): "Consumer group {} not found.",
    ("consumer", -1): "Group {} not found.",
    ("consumer", -2): "Group {} not found.",
    ("share", 5): "Share group {} not found.",
    ("share", -1): "Group {} not found.",
    ("streams", 5): "Streams group {} not found.",
    ("streams", -1): "Group {} not found.",
    ("streams", -2): "Group {} not found.",
}
CASES = sorted(NOT_FOUND)

Answer = tuple[ErrorCode, str | None]


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


def heartbeat(broker: Broker, api: str, group: str, epoch: int) -> Answer:
    """One heartbeat of ``api`` from a member id nobody holds (a static one for -2)."""
    member_id = uuid.uuid4().hex
    instance_id = INSTANCE if epoch == -2 else None
    calls: dict[str, Any] = {
        "consumer": lambda: consumer_wire.heartbeat_once(
            broker.client,
            group,
            member_id,
            epoch,
            instance_id=instance_id,
            rebalance_timeout=consumer_wire.UNSET_REBALANCE_TIMEOUT,
        ),
        "share": lambda: broker.client.call(
            1,
            SHARE_HEARTBEAT,
            1,
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            rack_id=None,
            subscribed_topic_names=None,
        ),
        "streams": lambda: broker.client.call(
            1,
            STREAMS_HEARTBEAT,
            0,
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            endpoint_information_epoch=0,
            instance_id=instance_id,
            active_tasks=None,
            standby_tasks=None,
            warmup_tasks=None,
            client_tags=None,
            task_offsets=None,
            task_end_offsets=None,
        ),
    }
    answer = until_ready(calls[api], lambda a: a.error_code not in COORDINATOR_STARTING)
    return ErrorCode(answer.error_code), answer.error_message


@dataclass
class Answers:
    """Each (api, epoch)'s answer for a group id nobody holds (``none``, the id
    ``none_id(api, epoch)``) and for the empty classic group ``classic_id`` (made by an
    OffsetCommit from outside any generation)."""

    suffix: str
    none: dict[tuple[str, int], Answer]
    classic: dict[tuple[str, int], Answer]

    def none_id(self, api: str, epoch: int) -> str:
        return f"none-{api}-{epoch}-{self.suffix}"

    @property
    def classic_id(self) -> str:
        return f"classic-{self.suffix}"


@pytest.fixture(scope="module")
def answers(server: Server) -> Answers:
    found = Answers(uuid.uuid4().hex[:8], {}, {})
    topic = f"unknown-{found.suffix}"
    broker = Broker(server)
    try:
        broker.create_topic(topic, 1)
        coordinator_ready(broker.client, 0, found.classic_id)
        committed = until_ready(
            lambda: broker.commit(found.classic_id, "", -1, frozenset({(topic, 0)})),
            lambda answer: not set(answer.values()) & COORDINATOR_STARTING,
        )
        assert committed == {(topic, 0): ErrorCode.none}
        for api, epoch in CASES:
            coordinator_ready(broker.client, 0, found.none_id(api, epoch))
            found.none[api, epoch] = heartbeat(broker, api, found.none_id(api, epoch), epoch)
            found.classic[api, epoch] = heartbeat(broker, api, found.classic_id, epoch)
        return found
    finally:
        broker.close()


@pytest.mark.parametrize(("api", "epoch"), CASES)
def test_a_group_that_does_not_exist(answers: Answers, api: str, epoch: int) -> None:
    """Kemu once answered UNKNOWN_MEMBER_ID to the consumer's, and named the streams group in
    its leaves' texts."""
    assert answers.none[api, epoch] == (
        ErrorCode.group_id_not_found,
        NOT_FOUND[api, epoch].format(answers.none_id(api, epoch)),
    )


@pytest.mark.parametrize(("api", "epoch"), CASES)
def test_an_empty_classic_group_is_taken_over_by_a_join_only(
    answers: Answers, api: str, epoch: int
) -> None:
    """Kemu once answered UNKNOWN_MEMBER_ID to the consumer's."""
    assert answers.classic[api, epoch] == (
        ErrorCode.group_id_not_found,
        f"Group {answers.classic_id} is not a {api} group.",
    )
