"""Request counters the connections keep and ``/metrics`` exposes (``kemu/control/metrics.py``).

Plain ints and dicts, updated inline on the request path (a dict increment per request, a bisect
for the latency of the APIs that have a histogram); Prometheus families are built from them only
when scraped.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from kemu.cluster.context import Runtime
from kemu.cluster.services import Service

SERVICE = "request_stats"

# Request latency histograms (seconds), for these API keys: Produce, Fetch, ShareFetch,
# ShareAcknowledge.
LATENCY_APIS = frozenset({0, 1, 78, 79})
BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_BUCKETS_NS = tuple(int(b * 1e9) for b in BUCKETS_S)


@dataclass
class Latency:
    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS_S) + 1))
    total_ns: int = 0

    def observe(self, elapsed_ns: int) -> None:
        self.counts[bisect.bisect_left(_BUCKETS_NS, elapsed_ns)] += 1
        self.total_ns += elapsed_ns


@dataclass
class RequestStats:
    requests: dict[tuple[int, int], int] = field(default_factory=dict)  # (key, version) -> n
    errors: dict[tuple[int, int], int] = field(default_factory=dict)  # (key, error code) -> n
    latency: dict[int, Latency] = field(default_factory=dict)  # api key -> histogram
    bytes_in: int = 0
    bytes_out: int = 0
    connections_accepted: int = 0

    def answered(self, api_key: int, api_version: int, body: Any, elapsed_ns: int) -> None:
        """One request answered with ``body`` (a kio response, or None) after ``elapsed_ns``."""
        key = (api_key, api_version)
        requests = self.requests
        requests[key] = requests.get(key, 0) + 1
        if api_key in LATENCY_APIS:
            found = self.latency.get(api_key)
            if found is None:
                found = self.latency[api_key] = Latency()
            found.observe(elapsed_ns)
        if body is None or isinstance(body, bytes):
            return
        code = getattr(body, "error_code", 0)
        if code:
            self.error(api_key, int(code))
        if api_key == 0:  # Produce: the errors are per partition
            for topic in body.responses:
                for partition in topic.partition_responses:
                    if partition.error_code:
                        self.error(api_key, int(partition.error_code))

    def error(self, api_key: int, code: int) -> None:
        key = (api_key, code)
        self.errors[key] = self.errors.get(key, 0) + 1


REQUEST_STATS = Service(SERVICE, lambda _: RequestStats())


def request_stats(runtime: Runtime) -> RequestStats:
    return runtime.services.get(REQUEST_STATS)
