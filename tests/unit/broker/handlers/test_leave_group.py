"""LeaveGroup through the real wire (``test_admin_handlers.Broker``), as Kafka 4.4.0 answers it.

Where it came from: a difference from Kafka 4.4.0 that ``make conformance-diff`` found
(docs/conformance.md)."""

from __future__ import annotations

from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_admin_handlers import Broker

LEAVE_GROUP = 13


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
