"""Quota arithmetic (kemu/cluster/quota_enforcement.py) against Kafka 4.4's own quota managers.

``quota_golden.json`` holds scenarios and the answers Kafka's ClientQuotaManager,
ClientRequestQuotaManager and ControllerMutationQuotaManager gave (``python -m
conformance.quota_golden``): every throttle time, quota-window maximum and accepted or refused
mutation must be the same here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kemu.cluster.client_quotas import CLIENT_ID, USER, ClientQuotas, QuotaOp, make_entity
from kemu.cluster.quota_enforcement import (
    FETCH,
    MUTATION,
    PRODUCE,
    REQUEST,
    ClientThrottles,
    QuotaManager,
    WindowedRate,
)

GOLDEN = json.loads(Path(__file__).with_name("quota_golden.json").read_text())
KEYS = {"produce": PRODUCE, "fetch": FETCH, "request": REQUEST, "mutation": MUTATION}


def _name(token: str) -> str | None:
    return None if token == "*" else token


def replay(lines: list[str]) -> list[str]:
    store = ClientQuotas()
    answers: list[str] = []
    managers: dict[str, QuotaManager] = {}
    throttles = ClientThrottles(store)
    for line in lines:
        verb, *fields = line.split()
        if verb == "config":
            samples, window = int(fields[0]), int(fields[1])
            throttles = ClientThrottles(
                store, samples, window, mutation_samples=samples, mutation_window_seconds=window
            )
            managers = {"produce": throttles.produce, "fetch": throttles.fetch}
            managers["request"] = throttles.request
            continue
        if verb == "mutate":
            mode, user, client, at, answer_at, *permits = fields
            quota = throttles.mutation.quota_for(
                user, "" if client == "~" else client, strict=mode == "strict", now_ms=int(at)
            )
            accepted = ["a" if quota.record(int(p), int(at)) else "r" for p in permits]
            answers.append(",".join(accepted) + f"|{quota.throttle_time(int(answer_at))}")
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
    answers = [
        answer for scenario in GOLDEN["scenarios"].values() for answer in scenario["answers"]
    ]
    throttled = sum(answer.isdigit() and answer != "0" for answer in answers)
    assert throttled > 100
    mutations = [answer for answer in answers if "|" in answer]
    assert sum("r" in answer for answer in mutations) > 100  # strict refusals
    assert sum(not answer.endswith("|0") for answer in mutations) > 100  # throttled answers


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


def test_strict_mutations_refuse_topics_once_the_bucket_is_empty() -> None:
    """Kafka's documented arithmetic: a burst of samples x window x quota, refilled at the quota;
    a strict quota takes a topic while the bucket is not below zero (whatever its size), refuses
    the rest, and the throttle is the time to refill to zero."""
    store = ClientQuotas()
    store.alter(make_entity([(CLIENT_ID, "admin")]), [QuotaOp(MUTATION, 2.0, False)])
    mutation = ClientThrottles(store).mutation
    now = 1_700_000_000_000  # a bucket first measured at a wall-clock time is full: 22 tokens
    strict = mutation.quota_for("ANONYMOUS", "admin", strict=True, now_ms=now)
    assert [strict.record(10, now) for _ in range(4)] == [True, True, True, False]
    assert strict.throttle_time(now) == 4_000  # 30 taken from 22: -8 at 2 per second
    assert strict.throttle_time(now + 1_500) == 2_500
    again = mutation.quota_for("ANONYMOUS", "admin", strict=True, now_ms=now + 3_999)
    assert not again.record(1, now + 3_999)
    later = mutation.quota_for("ANONYMOUS", "admin", strict=True, now_ms=now + 4_000)
    assert later.record(1, now + 4_000)


def test_permissive_mutations_accept_everything_and_throttle() -> None:
    store = ClientQuotas()
    store.alter(make_entity([(USER, None)]), [QuotaOp(MUTATION, 5.0, False)])
    mutation = ClientThrottles(store).mutation
    permissive = mutation.quota_for("bob", "x", strict=False, now_ms=10_000_000)
    assert permissive.record(100, 10_000_000) and permissive.record(100, 10_000_000)
    assert permissive.throttle_time(10_000_000) == 29_000  # 55 - 200 = -145 at 5 per second


def test_no_mutation_quota_is_unbounded() -> None:
    store = ClientQuotas()
    store.alter(make_entity([(CLIENT_ID, "app")]), [QuotaOp(PRODUCE, 1.0, False)])
    mutation = ClientThrottles(store).mutation
    quota = mutation.quota_for("ANONYMOUS", "app", strict=True, now_ms=0)
    assert all(quota.record(10_000, 0) for _ in range(3))
    assert quota.throttle_time(0) == 0
    assert mutation.buckets == {}


def test_idle_sensors_expire_after_an_hour() -> None:
    """Kafka drops a quota sensor nothing was recorded on for over an hour (checked every 30 s):
    the rates and buckets of clients gone quiet are freed; a busy one stays."""
    store = ClientQuotas()
    store.alter(make_entity([(CLIENT_ID, None)]), [QuotaOp(PRODUCE, 1000.0, False)])
    store.alter(make_entity([(CLIENT_ID, None)]), [QuotaOp(MUTATION, 2.0, False)])
    throttles = ClientThrottles(store)
    start = 5_000_000
    for index in range(100):
        throttles.produce.record("ANONYMOUS", f"gone-{index}", 10, start)
        throttles.mutation.quota_for("ANONYMOUS", f"gone-{index}", strict=True, now_ms=start)
    assert len(throttles.produce.rates) == 100 and len(throttles.mutation.buckets) == 100
    now = start
    while now < start + 3_600_000:  # a busy client, every 10 minutes
        throttles.produce.record("ANONYMOUS", "busy", 10, now)
        throttles.mutation.quota_for("ANONYMOUS", "busy", strict=True, now_ms=now).record(1, now)
        now += 600_000
    throttles.produce.record("ANONYMOUS", "busy", 10, start + 3_600_000)  # exactly an hour: kept
    assert len(throttles.produce.rates) == 101
    throttles.produce.record("ANONYMOUS", "busy", 10, start + 3_630_001)  # a sweep 30 s later
    throttles.mutation.quota_for("ANONYMOUS", "busy", strict=True, now_ms=start + 3_630_001)
    assert list(throttles.produce.rates) == [("", "busy")]
    assert list(throttles.mutation.buckets) == [("", "busy")]


def test_an_expired_sensor_comes_back_empty_with_the_same_answers() -> None:
    """A client back after more than an hour is measured on a new sensor, and is throttled as
    the old sensor (its samples long forgotten) would have throttled it."""
    store = ClientQuotas()
    store.alter(make_entity([(CLIENT_ID, "app")]), [QuotaOp(PRODUCE, 1000.0, False)])
    kept = QuotaManager(PRODUCE, store, 11, 1000)
    kept.expiry.expire_ms = 10**12  # never expires
    expiring = QuotaManager(PRODUCE, store, 11, 1000)
    for manager in (kept, expiring):
        manager.record("ANONYMOUS", "app", 50_000, 1_000)
    old = expiring.rates[("", "app")]
    later = 1_000 + 3_600_001 + 30_000
    answers = [
        (
            kept.record("ANONYMOUS", "app", size, later + i),
            expiring.record("ANONYMOUS", "app", size, later + i),
        )
        for i, size in enumerate((20_000, 5, 30_000))
    ]
    assert expiring.rates[("", "app")] is not old
    assert all(a == b for a, b in answers) and answers[-1][0] > 0
