"""FindCoordinator through the real wire (``test_admin_handlers.Broker``): the messages of its
answers, as Kafka 4.4.0 words them.

Where they came from: differences from Kafka 4.4.0 that ``make conformance-diff`` found
(docs/conformance.md)."""

from __future__ import annotations

from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_admin_handlers import Broker

FIND_COORDINATOR = 10


def test_find_coordinator_success_messages_are_kafkas() -> None:
    broker = Broker()
    old = broker.send(broker.request(FIND_COORDINATOR, 2, key="g", key_type=0))
    assert (old.error_code, old.error_message) == (ErrorCode.none, "NONE")
    new = broker.send(broker.request(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=("g",)))
    [found] = new.coordinators
    assert (found.error_code, found.error_message) == (ErrorCode.none, "")


def test_find_coordinator_unknown_key_type_has_kafkas_invalid_request_message() -> None:
    broker = Broker()
    answer = broker.send(broker.request(FIND_COORDINATOR, 4, key_type=7, coordinator_keys=("x",)))
    [found] = answer.coordinators
    assert found.error_code is ErrorCode.invalid_request
    assert found.error_message.startswith("This most likely occurs because of a request being")
