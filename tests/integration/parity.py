"""For tests that compare kemu with a real Kafka 4.4.0 (``bench/servers.py``'s KafkaServer):
kemu runs with Kafka's timers (``--timing kafka``) and the ones that server sets."""

from __future__ import annotations

import sys

from tests import REPO_ROOT

ROOT = REPO_ROOT


def kafka_timing_overrides(**extra: str) -> list[str]:
    """``--override`` values giving a kemu started with ``--timing kafka`` the timers the bench
    Kafka server sets (``bench.servers.ASSIGN_AT_ONCE``), then ``extra`` (the test's own
    server properties; dots in names as keyword arguments are passed with ``**{...}``)."""
    sys.path.insert(0, str(ROOT))
    from bench.servers import kafka_timing_overrides as overrides

    return overrides(**extra)
