"""ConsumerGroupHeartbeat requests Kafka refuses before it looks at any group, on kemu beside a
real Apache Kafka 4.4.0 (the session's plain Kafka): the same hand-built requests, the same
assertions on the error code and message.

Kafka 4.4.0's ``GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid`` checks
the member id first (v0 lets the coordinator pick it on a join, so there only a heartbeat or a
-1 leave needs one), then the group id, the instance and rack ids, then the epoch: -2 is a
static member's leave and needs an instance id ("InstanceId can't be null."), below -2 is
"MemberEpoch is invalid.". kemu checked the group id first, let a -2 without an instance id
leave as a dynamic member, and put the epoch in the invalid-epoch message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kemu.protocol.errors import ErrorCode
from kemu.testing.wire_client import WireClient
from tests.integration.groups.consumer_wire import CONSUMER_HEARTBEAT, UNSET_REBALANCE_TIMEOUT
from tests.integration.parity import kemu_or_kafka
from tests.integration.txn.wire_parity import Server, coordinator_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

GROUP = "validation-group"

# (id, version, fields differing from a plain heartbeat, the message Kafka answers)
CASES: list[tuple[str, int, dict[str, Any], str]] = [
    ("member-before-group", 1, {"group_id": "", "member_id": ""}, "MemberId can't be empty."),
    ("group", 1, {"group_id": " "}, "GroupId can't be empty."),
    (
        "v0-join-picks-the-member-id",
        0,
        {"group_id": "", "member_id": "", "member_epoch": 0},
        "GroupId can't be empty.",
    ),
    ("v0-heartbeat-needs-a-member-id", 0, {"member_id": ""}, "MemberId can't be empty."),
    (
        "v0-leave-needs-a-member-id",
        0,
        {"member_id": "", "member_epoch": -1},
        "MemberId can't be empty.",
    ),
    ("instance", 1, {"instance_id": ""}, "InstanceId can't be empty."),
    ("rack", 1, {"rack_id": " "}, "RackId can't be empty."),
    ("static-leave-without-instance", 1, {"member_epoch": -2}, "InstanceId can't be null."),
    ("epoch-below-minus-two", 1, {"member_epoch": -3}, "MemberEpoch is invalid."),
]


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[WireClient]:
    """A wire client, once the group's coordinator is there."""
    wire = WireClient(server.bootstrap, client_id="heartbeat-validation")
    try:
        coordinator_ready(wire, 0, GROUP)
        yield wire
    finally:
        wire.close()


def heartbeat(client: WireClient, version: int, **changes: Any) -> tuple[ErrorCode, str | None]:
    """One ConsumerGroupHeartbeat: a plain one (epoch 5 of member ``m``) with ``changes``."""
    fields: dict[str, Any] = {
        "group_id": GROUP,
        "member_id": "m",
        "member_epoch": 5,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": UNSET_REBALANCE_TIMEOUT,
        "subscribed_topic_names": None,
        "server_assignor": None,
        "topic_partitions": None,
    }
    if version >= 1:
        fields["subscribed_topic_regex"] = None
    fields.update(changes)
    answer = client.call(1, CONSUMER_HEARTBEAT, version, **fields)
    return ErrorCode(answer.error_code), answer.error_message


@pytest.mark.parametrize(
    ("version", "changes", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_kafkas_message_for_an_invalid_heartbeat(
    client: WireClient, version: int, changes: dict[str, Any], message: str
) -> None:
    assert heartbeat(client, version, **changes) == (ErrorCode.invalid_request, message)


def test_the_plain_heartbeat_passes_validation(client: WireClient) -> None:
    """The heartbeat the cases change is valid (so the cases differ from it only by what they
    change): its group is unknown, or held by another broker than the one asked."""
    code, _ = heartbeat(client, 1)
    assert code in (ErrorCode.group_id_not_found, ErrorCode.not_coordinator)
