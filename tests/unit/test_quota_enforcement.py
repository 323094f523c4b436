"""Quota arithmetic (kemu/cluster/quota_enforcement.py) against Kafka 4.4's own quota managers.

``quota_golden.json`` holds scenarios and the answers Kafka's ClientQuotaManager and
ClientRequestQuotaManager gave (``python -m conformance.quota_golden``): every throttle time and
quota-window maximum must be the same here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kemu.cluster.client_quotas import CLIENT_ID, USER, ClientQuotas, QuotaOp, make_entity
from kemu.cluster.quota_enforcement import (
    FETCH,
    PRODUCE,
    REQUEST,
    ClientThrottles,
    QuotaManager,
    WindowedRate,
)

GOLDEN = json.loads(Path(__file__).with_name("quota_golden.json").read_text())
KEYS = {"produce": PRODUCE, "fetch": FETCH, "request": REQUEST}


def _name(token: str) -> str | None:
    return None if token == "*" else token


def replay(lines: list[str]) -> list[str]:
    store = ClientQuotas()
    answers: list[str] = []
    managers: dict[str, QuotaManager] = {}
    for line in lines:
        verb, *fields = line.split()
        if verb == "config":
            throttles = ClientThrottles(store, int(fields[0]), int(fields[1]))
            managers = {"produce": throttles.produce, "fetch": throttles.fetch}
            managers["request"] = throttles.request
            continue
        kind, user, client = fields[0], fields[1], fields[2]
        if verb in ("set", "remove"):
            pairs = [(USER, _name(user))] if user != "-" else []
            pairs += [(CLIENT_ID, _name(client))] if client != "-" else []
            value = float(fields[3]) if verb == "set" else 0.0
            store.alter(make_entity(pairs), [QuotaOp(KEYS[kind], value, verb == "remove")])
            continue
        client_id = "" if client == "~" else client
        manager = managers[kind]
        if verb == "record":
            answers.append(str(manager.record(user, client_id, float(fields[3]), int(fields[4]))))
        elif verb == "unrecord":
            manager.unrecord(user, client_id, float(fields[3]), int(fields[4]))
        elif verb == "max":
            found = manager.max_value_in_window(user, client_id)
            answers.append("none" if found is None else repr(float(found)))
    return answers


@pytest.mark.parametrize("name", sorted(GOLDEN["scenarios"]))
def test_same_throttle_times_as_kafka(name: str) -> None:
    scenario = GOLDEN["scenarios"][name]
    assert replay(scenario["lines"]) == scenario["answers"]


def test_golden_scenarios_throttle() -> None:
    """The scenarios do reach throttling (a golden file of zeros would prove nothing)."""
    throttled = sum(
        answer not in ("0", "none") and "." not in answer
        for scenario in GOLDEN["scenarios"].values()
        for answer in scenario["answers"]
    )
    assert throttled > 100


def test_throttle_time_is_excess_over_quota_times_window() -> None:
    """(observed - quota) / quota * window: 2x the quota over the 10 s minimum window gives 10 s."""
    store = ClientQuotas()
    store.alter(make_entity([(CLIENT_ID, "app")]), [QuotaOp(PRODUCE, 1000.0, False)])
    produce = ClientThrottles(store).produce
    assert produce.record("ANONYMOUS", "app", 10_000, 0) == 0  # 10,000 B over 10 s: at quota
    assert produce.record("ANONYMOUS", "app", 10_000, 0) == 10_000


def test_request_throttle_is_capped_at_one_window() -> None:
    store = ClientQuotas()
    store.alter(make_entity([(USER, None)]), [QuotaOp(REQUEST, 1.0, False)])
    request = ClientThrottles(store, window_seconds=2).request
    assert request.record("alice", "x", 1e6, 0) == 2000


def test_no_quota_records_nothing() -> None:
    store = ClientQuotas()
    produce = ClientThrottles(store).produce
    assert produce.record("ANONYMOUS", "app", 1e12, 0) == 0
    assert produce.rates == {}
    assert produce.max_value_in_window("ANONYMOUS", "app") is None


def test_precedence_user_client_over_user_over_client() -> None:
    store = ClientQuotas()
    store.alter(make_entity([(CLIENT_ID, "app")]), [QuotaOp(PRODUCE, 100.0, False)])
    store.alter(make_entity([(USER, "alice")]), [QuotaOp(PRODUCE, 200.0, False)])
    store.alter(
        make_entity([(USER, "alice"), (CLIENT_ID, "app")]), [QuotaOp(PRODUCE, 300.0, False)]
    )
    produce = ClientThrottles(store).produce
    assert produce.max_value_in_window("alice", "app") == 3000.0
    assert produce.max_value_in_window("alice", "other") == 2000.0
    assert produce.max_value_in_window("bob", "app") == 1000.0
    assert produce.max_value_in_window("bob", "other") is None
    # a user's quota is one sensor for all its client ids
    produce.record("alice", "one", 2000, 0)
    assert produce.record("alice", "two", 1, 0) > 0


def test_a_window_without_events_is_forgotten() -> None:
    """A sample with no event for samples * window is reset (the rate starts afresh)."""
    rate = WindowedRate(samples=11, window_ms=1000)
    rate.record(50_000, 0)
    assert rate.measure(0) == 5000.0  # spread over the 10 s minimum window
    assert rate.measure(11_000) == 0.0
