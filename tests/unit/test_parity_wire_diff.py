"""Differences from Kafka 4.4.0 that `make conformance-diff` found (docs/conformance.md), each
answered now as Kafka answers, through the handlers' wire encoding."""

from __future__ import annotations

import datetime

from test_admin_handlers import Broker

from kemu.protocol.errors import ErrorCode

FIND_COORDINATOR, LEAVE_GROUP, ELECT_LEADERS, DESCRIBE_CLUSTER = 10, 13, 43, 60


def test_leave_group_of_an_unknown_group_answers_none_with_unknown_members() -> None:
    broker = Broker()
    member = broker.nested(LEAVE_GROUP, 5, "MemberIdentity", member_id="m", group_instance_id="i")
    answer = broker.send(broker.request(LEAVE_GROUP, 5, group_id="nobody", members=(member,)))
    assert answer.error_code is ErrorCode.none
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in answer.members] == [
        ("m", "i", ErrorCode.unknown_member_id)
    ]
    old = broker.send(broker.request(LEAVE_GROUP, 2, group_id="nobody", member_id="m"))
    assert old.error_code is ErrorCode.unknown_member_id  # before v3 the member's error is on top


def test_describe_cluster_for_a_controller_names_the_broker_endpoint() -> None:
    broker = Broker()
    answer = broker.send(
        broker.request(
            DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False, endpoint_type=2
        )
    )
    assert answer.error_code is ErrorCode.mismatched_endpoint_type
    assert answer.endpoint_type == 1


def test_elect_leaders_not_needed_carries_kafkas_message() -> None:
    broker = Broker()
    broker.create("t")
    wanted = broker.nested(ELECT_LEADERS, 2, "TopicPartitions", topic="t", partitions=(0,))
    answer = broker.send(
        broker.request(
            ELECT_LEADERS,
            2,
            election_type=0,
            topic_partitions=(wanted,),
            timeout=datetime.timedelta(seconds=1),
        )
    )
    [result] = answer.replica_election_results[0].partition_result
    assert result.error_code is ErrorCode.election_not_needed
    assert result.error_message == "Leader election not needed for topic partition."


def test_find_coordinator_success_messages_are_kafkas() -> None:
    broker = Broker()
    old = broker.send(broker.request(FIND_COORDINATOR, 2, key="g", key_type=0))
    assert (old.error_code, old.error_message) == (ErrorCode.none, "NONE")
    new = broker.send(broker.request(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=("g",)))
    [found] = new.coordinators
    assert (found.error_code, found.error_message) == (ErrorCode.none, "")
