"""KIP-848 SubscribedTopicRegex in RE2J's syntax, on kemu beside a real Apache Kafka 4.4.0 (the
session's plain Kafka; that side skipped without java or bench's jars). Both servers get the
same hand-built ConsumerGroupHeartbeat v1 joins.

- Patterns RE2J refuses and Python's ``re`` takes (a backreference, a lookahead, a lookbehind,
  a possessive quantifier, ``\\Z``), and ``\\C`` and an unmatched ``)``: Kafka answers
  INVALID_REGULAR_EXPRESSION, "SubscribedTopicRegex `<pattern>` is not a valid regular
  expression: <RE2J's description>." (lookbehinds read as a bad named group, an unmatched ``)``
  RE2J 1.8's "regexp/syntax: internal error"). kemu answers the same (it took what Python took).
- Patterns RE2J takes and Python refuses (``\\pL``, ``\\z``, ``\\Q...\\E``, ``(?U)``): the join
  is answered. kemu answers the same (it refused them).
- ``x{,2}``, which Python reads as up to two x and RE2J as the text itself: with a topic
  ``...-xx`` there, the join's resolution (ConsumerGroupRegularExpression, type 16) names no
  topic. kemu writes the same (it matched the topic).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kemu.protocol.errors import ErrorCode
from tests.integration.groups import consumer_wire
from tests.integration.groups.consumer_wire import Broker
from tests.integration.groups.test_group_record_order_kafka import (
    REGULAR_EXPRESSION,
    group_records,
    regex_record,
)
from tests.integration.parity import kemu_or_kafka
from tests.integration.share.test_share_deleted_topic_state_kafka import wait_for
from tests.integration.txn.wire_parity import Server, coordinator_ready

pytestmark = [pytest.mark.integration, pytest.mark.parity]

REFUSED = [
    (r"rx-(a)\1", "invalid escape sequence"),
    ("rx-(?=a).*", "invalid or unsupported Perl syntax"),
    ("rx-(?<=a).*", "invalid named capture"),
    ("rx-a++", "invalid nested repetition operator"),
    (r"rx-.*\Z", "invalid escape sequence"),
    (r"rx-\C", "invalid escape sequence"),
    ("rx-)", "regexp/syntax: internal error"),
]
TAKEN = [r"rx-\pL+", r"rx-.*\z", r"\Qrx-\E.*", "(?U)rx-.+"]


@pytest.fixture(scope="module", params=["kemu", "kafka"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with kemu_or_kafka(request, tmp_path_factory) as chosen:
        yield chosen


def join(broker: Broker, group: str, regex: str) -> Any:
    """A ConsumerGroupHeartbeat v1 join subscribing with ``regex`` only: the answer."""
    return consumer_wire.heartbeat(
        broker.client,
        group,
        uuid.uuid4().hex,
        0,
        topic_partitions=(),
        regex=regex,
        assignor="uniform",
    )


def test_patterns_re2j_refuses_are_invalid(server: Server) -> None:
    broker = Broker(server)
    try:
        group = f"regex-refused-{uuid.uuid4().hex[:8]}"
        coordinator_ready(broker.client, 0, group)
        answers = {regex: join(broker, group, regex) for regex, _ in REFUSED}
    finally:
        broker.close()
    assert {regex: (a.error_code, a.error_message) for regex, a in answers.items()} == {
        regex: (
            ErrorCode.invalid_regular_expression,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {description}.",
        )
        for regex, description in REFUSED
    }


def test_patterns_python_refuses_are_taken(server: Server) -> None:
    broker = Broker(server)
    try:
        group = f"regex-taken-{uuid.uuid4().hex[:8]}"
        coordinator_ready(broker.client, 0, group)
        answers = {regex: join(broker, group, regex) for regex in TAKEN}
    finally:
        broker.close()
    assert {regex: a.error_code for regex, a in answers.items()} == dict.fromkeys(
        TAKEN, ErrorCode.none
    )


def test_a_bare_lower_bound_is_read_as_text(server: Server) -> None:
    suffix = uuid.uuid4().hex[:8]
    broker = Broker(server)
    try:
        group, regex, topic = f"regex-text-{suffix}", f"rd-{suffix}-x{{,2}}", f"rd-{suffix}-xx"
        broker.create_topic(topic, 1)
        coordinator_ready(broker.client, 0, group)
        assert join(broker, group, regex).error_code == ErrorCode.none
        written = wait_for(
            lambda: [
                regex_record(key, value)
                for record_type, key, value in group_records(server.bootstrap, group)
                if record_type == REGULAR_EXPRESSION
            ],
            "the regex resolved",
        )
    finally:
        broker.close()
    assert written == [(regex, ())]  # Python's x{,2} would have matched the topic
