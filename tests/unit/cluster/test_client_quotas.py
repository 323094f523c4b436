"""Client quotas: AlterClientQuotas / DescribeClientQuotas through the wire codecs, Kafka's
validation messages and describe filters, and durability in the data dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kemu.cluster.client_quotas import MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED
from kemu.protocol.errors import ErrorCode
from tests.unit.broker.handlers.test_admin_handlers import Broker

DESCRIBE, ALTER = 48, 49
Ops = list[tuple[str, float, bool]]


def alter(
    broker: Broker,
    entries: list[tuple[list[tuple[str, str | None]], Ops]],
    validate_only: bool = False,
) -> list[tuple[ErrorCode, str | None]]:
    request = broker.request(
        ALTER,
        1,
        entries=tuple(
            broker.nested(
                ALTER,
                1,
                "EntryData",
                entity=tuple(
                    broker.nested(ALTER, 1, "EntityData", entity_type=t, entity_name=n)
                    for t, n in entity
                ),
                ops=tuple(
                    broker.nested(ALTER, 1, "OpData", key=k, value=v, remove=r) for k, v, r in ops
                ),
            )
            for entity, ops in entries
        ),
        validate_only=validate_only,
    )
    return [(e.error_code, e.error_message) for e in broker.send(request).entries]


def describe(
    broker: Broker, components: list[tuple[str, int, str | None]], strict: bool = False
) -> Any:
    request = broker.request(
        DESCRIBE,
        1,
        components=tuple(
            broker.nested(DESCRIBE, 1, "ComponentData", entity_type=t, match_type=m, match=s)
            for t, m, s in components
        ),
        strict=strict,
    )
    response = broker.send(request)
    if response.error_code != ErrorCode.none:
        return response.error_code, response.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries
    }


OK = (ErrorCode.none, None)


def test_quotas_are_set_described_removed_and_survive_a_restart(tmp_path: Path) -> None:
    broker = Broker(data_dir=tmp_path)
    assert (
        alter(
            broker,
            [
                ([("user", "alice")], [("producer_byte_rate", 1024, False)]),
                ([("user", "alice"), ("client-id", "c1")], [("request_percentage", 50, False)]),
                ([("user", None)], [("consumer_byte_rate", 2048, False)]),
                ([("ip", "10.0.0.1")], [("connection_creation_rate", 5, False)]),
            ],
        )
        == [OK] * 4
    )
    assert describe(broker, [("user", MATCH_EXACT, "alice")], strict=True) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0}
    }
    assert describe(broker, [("user", MATCH_EXACT, "alice")]) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0},
        (("client-id", "c1"), ("user", "alice")): {"request_percentage": 50.0},
    }
    assert describe(broker, [("user", MATCH_DEFAULT, None)]) == {
        (("user", None),): {"consumer_byte_rate": 2048.0}
    }
    assert set(describe(broker, [("user", MATCH_SPECIFIED, None)])) == {
        (("user", "alice"),),
        (("client-id", "c1"), ("user", "alice")),
    }
    assert set(describe(broker, [])) == {
        (("user", "alice"),),
        (("client-id", "c1"), ("user", "alice")),
        (("user", None),),
        (("ip", "10.0.0.1"),),
    }
    assert describe(broker, [], strict=True) == {}
    # removing the last key removes the entity
    assert alter(broker, [([("user", "alice")], [("producer_byte_rate", 0, True)])]) == [OK]
    restarted = Broker(data_dir=tmp_path)
    assert describe(restarted, [("user", MATCH_EXACT, "alice")], strict=True) == {}
    assert describe(restarted, [("client-id", MATCH_EXACT, "c1")]) == {
        (("client-id", "c1"), ("user", "alice")): {"request_percentage": 50.0}
    }


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ([], [("producer_byte_rate", 1, False)], "Invalid empty client quota entity"),
        (
            [("user", "a"), ("user", "b")],
            [("producer_byte_rate", 1, False)],
            "Invalid client quota entity, duplicate entity entry user",
        ),
        ([("group", "g")], [], "Unhandled client quota entity type: group"),
        (
            [("ip", "1.2.3.4"), ("user", "a")],
            [],
            "Invalid quota entity combination, IP entity shouldnot be combined with User or "
            "ClientId",
        ),
        (
            [("user", "a")],
            [("connection_creation_rate", 1, False)],
            "Invalid configuration key connection_creation_rate",
        ),
        (
            [("ip", "1.2.3.4")],
            [("producer_byte_rate", 1, False)],
            "Invalid configuration key producer_byte_rate",
        ),
        (
            [("user", "a")],
            [("producer_byte_rate", 0, False)],
            "Quota producer_byte_rate must be greater than 0",
        ),
        (
            [("user", "a")],
            [("producer_byte_rate", float("inf"), False)],
            "Quota producer_byte_rate must be a finite number",
        ),
        (
            [("user", "a")],
            [("producer_byte_rate", 2.0**64, False)],
            "Proposed value for producer_byte_rate is too large for a LONG.",
        ),
        (
            [("ip", "1.2.3.4")],
            [("connection_creation_rate", 2.0**31, False)],
            "Proposed value for connection_creation_rate is too large for an INT.",
        ),
    ],
)
def test_refusals_use_kafkas_messages(
    entity: list[tuple[str, str | None]], ops: Ops, message: str
) -> None:
    broker = Broker()
    ((code, text),) = alter(broker, [(entity, ops)])
    assert code == ErrorCode.invalid_request
    assert text == message
    assert describe(broker, []) == {}


def test_validate_only_and_independent_entries() -> None:
    broker = Broker()
    assert alter(broker, [([("user", "a")], [("producer_byte_rate", 9, False)])], True) == [OK]
    assert describe(broker, []) == {}
    outcomes = alter(
        broker,
        [
            ([("user", "a")], [("producer_byte_rate", 9, False), ("bogus", 1, False)]),
            ([("client-id", "c")], [("consumer_byte_rate", 9, False)]),
        ],
    )
    assert outcomes == [(ErrorCode.invalid_request, "Invalid configuration key bogus"), OK]
    assert describe(broker, []) == {(("client-id", "c"),): {"consumer_byte_rate": 9.0}}


@pytest.mark.parametrize(
    ("components", "message"),
    [
        (
            [("user", MATCH_EXACT, "a"), ("user", MATCH_DEFAULT, None)],
            "Entity type user cannot appear more than once in the filter.",
        ),
        ([("topic", MATCH_SPECIFIED, None)], "Unsupported entity type topic"),
        (
            [("user", MATCH_EXACT, None)],
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        ),
        (
            [("user", MATCH_DEFAULT, "a")],
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        ),
        (
            [("user", MATCH_SPECIFIED, "a")],
            "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
        ),
        ([("user", 7, None)], "Unknown match type 7"),
        (
            [("ip", MATCH_SPECIFIED, None), ("client-id", MATCH_SPECIFIED, None)],
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        ),
    ],
)
def test_bad_filters(components: list[tuple[str, int, str | None]], message: str) -> None:
    assert describe(Broker(), components) == (ErrorCode.invalid_request, message)
