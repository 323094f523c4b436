"""Client quotas seen by a real client: confluent-kafka (librdkafka) under a producer and a
consumer byte-rate quota set with AlterClientQuotas.

kemu runs with a short quota window (``quota.window.num=3``, ``quota.window.size.seconds=1``), so
the burst Kafka allows before throttling (the quota times ``samples - 1`` windows) is small next to
what is sent. librdkafka must report throttle times in its statistics, and the rate must stay
within 3x the quota (loose on purpose: the point is that it is bounded, not how closely). Against
Apache Kafka 4.4.0 the same script (``python -m bench.quota_figure``) gives figures of the same
kind (docs/conformance.md).
"""

from __future__ import annotations

import sys

import pytest

from tests import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))  # bench/ is not an installed package

from bench.quota_figure import (
    QUOTA_WINDOW,
    consume_under_quota,
    produce_under_quota,
    set_client_quota,
)

pytestmark = pytest.mark.integration

QUOTA = 20_000.0  # bytes/s
TOTAL = 100_000  # 5 s worth: well above the 2 s burst a 3 x 1 s window allows


def test_producer_and_consumer_byte_rates_are_throttled(kemu_inprocess_factory) -> None:  # type: ignore[no-untyped-def]
    kemu = kemu_inprocess_factory(brokers=1, overrides=list(QUOTA_WINDOW)).start()
    set_client_quota(
        kemu.bootstrap,
        "throttled-app",
        {"producer_byte_rate": QUOTA, "consumer_byte_rate": QUOTA},
    )
    produced = produce_under_quota(kemu.bootstrap, "quota-topic", "throttled-app", QUOTA, TOTAL)
    assert produced.payload_bytes == TOTAL
    assert produced.throttle_max_ms > 0
    assert produced.rate < 3 * QUOTA

    consumed = consume_under_quota(kemu.bootstrap, "quota-topic", "throttled-app", QUOTA, TOTAL)
    assert consumed.payload_bytes == TOTAL  # throttled fetches lose nothing
    assert consumed.throttle_max_ms > 0
    assert consumed.rate < 3 * QUOTA


def test_other_client_ids_are_not_throttled(kemu_inprocess_factory) -> None:  # type: ignore[no-untyped-def]
    kemu = kemu_inprocess_factory(brokers=1, overrides=list(QUOTA_WINDOW)).start()
    set_client_quota(kemu.bootstrap, "throttled-app", {"producer_byte_rate": QUOTA})
    produced = produce_under_quota(kemu.bootstrap, "free-topic", "free-app", QUOTA, TOTAL)
    assert produced.throttle_max_ms == 0
